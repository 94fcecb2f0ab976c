// SPDX-License-Identifier: Apache-2.0
// Shared pieces of conclave-bench: clocks, statistics, an HTTP client, /proc readers.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/core.h>
#include <algorithm>
#include <boost/beast/http/verb.hpp>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "bench.hpp"

namespace conclave::bench {

namespace asio = boost::asio;
namespace http = boost::beast::http;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void sleep_ms(double ms) {
    if (ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    }
}

Summary summarize(std::vector<double> values) {
    Summary s;
    s.count = values.size();
    if (values.empty()) {
        return s;
    }
    std::sort(values.begin(), values.end());
    // Nearest-rank percentiles: p95 of 20 values is the 19th.
    auto rank = [&](double p) {
        const auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
        return values[std::clamp<std::size_t>(k, 1, values.size()) - 1];
    };
    s.min = values.front();
    s.max = values.back();
    s.median = rank(0.5);
    s.p95 = rank(0.95);
    s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.count);
    return s;
}

std::string format_summary(const Summary& s) {
    if (s.count == 0) {
        return "no samples";
    }
    return fmt::format("min {:8.1f}  median {:8.1f}  p95 {:8.1f}  max {:8.1f}  (n={})", s.min,
                       s.median, s.p95, s.max, s.count);
}

// ---- HttpClient ------------------------------------------------------------------------------

HttpClient::HttpClient(asio::ip::tcp::endpoint endpoint)
    : endpoint_{endpoint.address().to_string(), endpoint.port()} {
    settings_.user_agent = "conclave-bench";
    settings_.body_limit = 1U << 20;
    settings_.detect_https = false;
}

std::optional<std::string> HttpClient::get(const std::string& target,
                                           std::chrono::milliseconds timeout) {
    return request(http::verb::get, target, "", timeout);
}

std::optional<std::string> HttpClient::request(http::verb verb, const std::string& target,
                                               const std::string& body,
                                               std::chrono::milliseconds timeout) {
    settings_.timeout = timeout;
    try {
        client::Response response = client::request(settings_, endpoint_, {verb, target, body, {}});
        if (response.status != 200) {
            error_ = "HTTP " + std::to_string(response.status);
            return std::nullopt;
        }
        error_.clear();
        return std::move(response.body);
    } catch (const client::Error& e) {
        error_ = e.what();
        return std::nullopt;
    }
}

double metric_sum(const std::string& text, const std::string& name) {
    double sum = 0;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(name, 0) != 0 || line.size() <= name.size()) {
            continue;
        }
        const char next = line[name.size()];
        if (next != ' ' && next != '{') {
            continue;  // another metric whose name starts with `name`
        }
        const auto space = line.rfind(' ');
        try {
            sum += std::stod(line.substr(space + 1));
        } catch (const std::exception&) {
            throw std::runtime_error("/metrics: bad sample line for " + name + ": " + line);
        }
    }
    return sum;
}

// ---- /proc -----------------------------------------------------------------------------------

std::optional<double> cpu_seconds(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text)) {
        return std::nullopt;
    }
    // The command name (field 2) is in parentheses and may contain spaces: skip past the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    std::vector<std::string> rest;
    while (fields >> field) {
        rest.push_back(field);
    }
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    if (rest.size() < 13) {
        return std::nullopt;
    }
    const double ticks = std::stod(rest[11]) + std::stod(rest[12]);
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::optional<std::uint64_t> rss_kib(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmRSS:", 0) == 0) {
            std::istringstream fields(line.substr(6));
            std::uint64_t kib = 0;
            if (fields >> kib) {
                return kib;
            }
        }
    }
    return std::nullopt;
}

double persist_cost_ms(const std::filesystem::path& dir, int count) {
    std::filesystem::create_directories(dir);
    const std::string temp = (dir / "probe.tmp").string();
    const std::string final_path = (dir / "probe").string();
    const std::string text = R"({"term":12345,"voted_for":1,"lsn":{"term":12345,"counter":7}})";
    std::vector<double> costs;
    for (int i = 0; i < count; ++i) {
        const auto start = Clock::now();
        const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ::write(fd, text.data(), text.size()) < 0 || ::fsync(fd) != 0) {
            throw std::runtime_error("persist probe: cannot write and fsync " + temp);
        }
        ::close(fd);
        if (::rename(temp.c_str(), final_path.c_str()) != 0) {
            throw std::runtime_error("persist probe: cannot rename " + temp);
        }
        const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            ::fsync(dfd);
            ::close(dfd);
        }
        costs.push_back(ms_since(start));
    }
    std::error_code ec;
    std::filesystem::remove(final_path, ec);
    std::filesystem::remove(dir, ec);  // only if empty: never a directory the caller filled
    return summarize(costs).median;
}

}  // namespace conclave::bench
