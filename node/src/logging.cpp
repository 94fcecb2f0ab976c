// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/logging.hpp"

#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <array>
#include <chrono>
#include <ctime>

namespace conclave::node {
namespace {

using nlohmann::json;

/// A payload starting with this byte carries a JSON object (msg + fields) from log_event().
constexpr char kStructuredMarker = '\x1e';

std::string Timestamp(spdlog::log_clock::time_point time) {
    const auto since_epoch = time.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
    const std::time_t t = static_cast<std::time_t>(seconds.count());
    std::tm utc{};
    gmtime_r(&t, &utc);
    std::array<char, 32> date{};
    const std::size_t n = std::strftime(date.data(), date.size(), "%Y-%m-%dT%H:%M:%S", &utc);
    std::array<char, 8> fraction{};
    std::snprintf(fraction.data(), fraction.size(), ".%03dZ", static_cast<int>(millis));
    return std::string(date.data(), n) + fraction.data();
}

std::string_view LevelName(spdlog::level::level_enum level) {
    switch (level) {
        case spdlog::level::trace:
            return "trace";
        case spdlog::level::debug:
            return "debug";
        case spdlog::level::info:
            return "info";
        case spdlog::level::warn:
            return "warn";
        case spdlog::level::err:
            return "error";
        case spdlog::level::critical:
            return "critical";
        default:
            return "off";
    }
}

std::string Dump(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool Bare(const std::string& s) {
    if (s.empty()) {
        return false;
    }
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == ':' ||
                        c == '/';
        if (!ok) {
            return false;
        }
    }
    return true;
}

/// Renders one record (text or JSON line) from spdlog's message.
class ConclaveFormatter final : public spdlog::formatter {
  public:
    explicit ConclaveFormatter(LogFormat format) : format_(format) {}

    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
        const std::string_view payload(msg.payload.data(), msg.payload.size());
        json record = json::object();
        if (!payload.empty() && payload.front() == kStructuredMarker) {
            record = json::parse(payload.substr(1), nullptr, /*allow_exceptions=*/false);
            if (!record.is_object()) {
                record = {{"msg", std::string(payload.substr(1))}};
            }
        } else {
            record = {{"msg", std::string(payload)}};
        }
        const std::string logger(msg.logger_name.data(), msg.logger_name.size());
        std::string line;
        if (format_ == LogFormat::Json) {
            // Fixed keys first, in a fixed order, then the fields (sorted).
            line = "{\"ts\":" + Dump(Timestamp(msg.time)) +
                   ",\"level\":" + Dump(std::string(LevelName(msg.level))) +
                   ",\"logger\":" + Dump(logger) + ",\"msg\":" + Dump(record.value("msg", ""));
            for (const auto& [key, value] : record.items()) {
                if (key != "msg") {
                    line += "," + Dump(key) + ":" + Dump(value);
                }
            }
            line += "}\n";
        } else {
            std::string level(LevelName(msg.level));
            level.resize(std::max<std::size_t>(level.size(), 5), ' ');
            line = Timestamp(msg.time) + " " + level + " [" + logger + "] " +
                   record.value("msg", std::string{});
            for (const auto& [key, value] : record.items()) {
                if (key == "msg") {
                    continue;
                }
                line += " " + key + "=";
                if (value.is_string() && Bare(value.get_ref<const std::string&>())) {
                    line += value.get_ref<const std::string&>();
                } else {
                    line += Dump(value);
                }
            }
            line += "\n";
        }
        dest.append(line.data(), line.data() + line.size());
    }

    std::unique_ptr<spdlog::formatter> clone() const override {
        return std::make_unique<ConclaveFormatter>(format_);
    }

  private:
    LogFormat format_;
};

}  // namespace

std::optional<spdlog::level::level_enum> parse_log_level(std::string_view name) {
    if (name == "trace") {
        return spdlog::level::trace;
    }
    if (name == "debug") {
        return spdlog::level::debug;
    }
    if (name == "info") {
        return spdlog::level::info;
    }
    if (name == "warn") {
        return spdlog::level::warn;
    }
    if (name == "error") {
        return spdlog::level::err;
    }
    if (name == "critical") {
        return spdlog::level::critical;
    }
    if (name == "off") {
        return spdlog::level::off;
    }
    return std::nullopt;
}

std::shared_ptr<spdlog::logger> make_logger(const std::string& name, const LogSettings& settings,
                                            std::vector<spdlog::sink_ptr> sinks) {
    if (sinks.empty()) {
        sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
    }
    auto logger = std::make_shared<spdlog::logger>(name, sinks.begin(), sinks.end());
    logger->set_formatter(std::make_unique<ConclaveFormatter>(settings.format));
    logger->set_level(parse_log_level(settings.level).value_or(spdlog::level::info));
    logger->flush_on(spdlog::level::trace);
    return logger;
}

void log_event(spdlog::logger& logger, spdlog::level::level_enum level, std::string_view msg,
               const nlohmann::json& fields) {
    if (!logger.should_log(level)) {
        return;
    }
    json record = json::object();
    if (fields.is_object()) {
        for (const auto& [key, value] : fields.items()) {
            const bool reserved = key == "ts" || key == "level" || key == "logger" || key == "msg";
            record[reserved ? key + "_" : key] = value;
        }
    } else if (!fields.is_null()) {
        record["value"] = fields;
    }
    record["msg"] = std::string(msg);
    const std::string payload = kStructuredMarker + Dump(record);
    logger.log(level, spdlog::string_view_t(payload.data(), payload.size()));
}

}  // namespace conclave::node
