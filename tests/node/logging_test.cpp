// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "conclave/node/logging.hpp"

using namespace conclave::node;
using nlohmann::json;

namespace {

std::vector<std::string> Lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

}  // namespace

TEST_CASE("JSON lines: one object per record with ts, level, msg and fields", "[logging]") {
    std::ostringstream out;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
    auto logger = make_logger("n1", LogSettings{LogFormat::Json, "info"}, {sink});
    log_event(*logger, spdlog::level::info, "leadership changed",
              {{"role", "leader"}, {"term", 7}, {"leader", "n1"}, {"msg", "clash"}});
    logger->warn("plain \"quoted\" text");
    logger->debug("below the level");
    log_event(*logger, spdlog::level::debug, "also below");

    const auto lines = Lines(out.str());
    REQUIRE(lines.size() == 2);
    const json first = json::parse(lines[0]);
    CHECK(first["level"] == "info");
    CHECK(first["logger"] == "n1");
    CHECK(first["msg"] == "leadership changed");
    CHECK(first["role"] == "leader");
    CHECK(first["term"] == 7);
    CHECK(first["msg_"] == "clash");  // reserved names are renamed
    const std::string ts = first["ts"];
    CHECK(ts.size() == 24);  // 2026-11-23T10:00:00.123Z
    CHECK(ts[10] == 'T');
    CHECK(ts.back() == 'Z');
    CHECK(lines[0].rfind("{\"ts\":", 0) == 0);
    const json second = json::parse(lines[1]);
    CHECK(second["level"] == "warn");
    CHECK(second["msg"] == "plain \"quoted\" text");
}

TEST_CASE("text lines carry the fields as key=value", "[logging]") {
    std::ostringstream out;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
    auto logger = make_logger("n2", LogSettings{LogFormat::Text, "debug"}, {sink});
    log_event(*logger, spdlog::level::debug, "leadership changed",
              {{"term", 3}, {"leader", nullptr}, {"reason", "LEADER_CEDED"}, {"note", "a b"}});
    const auto lines = Lines(out.str());
    REQUIRE(lines.size() == 1);
    const std::string& line = lines[0];
    CHECK(line.find(" debug [n2] leadership changed ") != std::string::npos);
    CHECK(line.find("leader=null") != std::string::npos);
    CHECK(line.find("reason=LEADER_CEDED") != std::string::npos);
    CHECK(line.find("term=3") != std::string::npos);
    CHECK(line.find("note=\"a b\"") != std::string::npos);
}

TEST_CASE("log levels", "[logging]") {
    CHECK(parse_log_level("warn") == spdlog::level::warn);
    CHECK(parse_log_level("error") == spdlog::level::err);
    CHECK(parse_log_level("off") == spdlog::level::off);
    CHECK_FALSE(parse_log_level("loud"));
}
