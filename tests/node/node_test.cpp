// SPDX-License-Identifier: Apache-2.0
// Node's embedding API on one real loopback node (a 1-node cluster elects itself): level-triggered
// subscriptions, several subscribers, refusals, graceful stop. Bounded by run_one_for deadlines.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "conclave/node/logging.hpp"
#include "conclave/node/node.hpp"
#include "support/loopback.hpp"

namespace {

using conclave::elector::Role;
using conclave::node::ClusterConfig;
using conclave::node::Leadership;
using conclave::node::Node;
using conclave::test::run_until;

}  // namespace

TEST_CASE("Node: subscriptions are level-triggered and ordered", "[node][embedding]") {
    boost::asio::io_context io;
    const auto dir = conclave::test::fresh_temp_dir("conclave-node-test");
    const std::string text = conclave::test::loopback_cluster_config(
        "solo", "n", 1, conclave::test::free_ports(io, 2), dir);
    auto parsed = conclave::node::parse_cluster_config(text, "n0");
    REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
    conclave::node::NodeOptions options;
    options.logger = conclave::test::quiet_logger("node-test");
    Node node(io, std::get<ClusterConfig>(parsed), options);

    std::vector<Leadership> seen_a;
    node.subscribe([&](const Leadership& l) { seen_a.push_back(l); });
    REQUIRE(seen_a.size() == 1);  // delivered at once: stopped, no leader
    CHECK(seen_a[0].role == Role::Stopped);
    CHECK_FALSE(seen_a[0].leader);

    REQUIRE_FALSE(node.start());
    REQUIRE(run_until(io, [&] { return node.current().is_leader(); }));
    CHECK(node.current().leader == "n0");
    CHECK(node.current().fencing_token == node.current().term);
    CHECK(seen_a.back() == node.current());

    std::vector<Leadership> seen_b;
    node.subscribe([&](const Leadership& l) { seen_b.push_back(l); });
    REQUIRE(seen_b.size() == 1);
    CHECK(seen_b[0].is_leader());

    CHECK(node.step_down() == std::optional<std::string>("no peer is up to take over"));
    CHECK(node.transfer_leadership("nobody").has_value());
    CHECK(node.status().role == Role::Leader);
    CHECK(node.health().healthy);
    CHECK(node.metrics_text().find("conclave_term " + std::to_string(node.current().term)) !=
          std::string::npos);

    bool stopped = false;
    node.stop([&] { stopped = true; });
    REQUIRE(run_until(io, [&] { return stopped; }));
    CHECK(node.stopped());
    CHECK(seen_a.back().role == Role::Stopped);
    CHECK(seen_b.back().role == Role::Stopped);
    CHECK_FALSE(node.health().healthy);
    std::filesystem::remove_all(dir);
}

TEST_CASE("Node: with the JSON format every line (net/ included) is JSON, each change once",
          "[node][logging]") {
    boost::asio::io_context io;
    const auto dir = conclave::test::fresh_temp_dir("conclave-node-json-test");
    const std::string text = conclave::test::loopback_cluster_config(
        "json", "n", 3, conclave::test::free_ports(io, 6), dir);
    // Anything still logged through spdlog's default logger would land in `stray`.
    std::ostringstream stray;
    struct RestoreDefault {
        std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
        ~RestoreDefault() { spdlog::set_default_logger(previous); }
    } restore_default;
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "default", std::make_shared<spdlog::sinks::ostream_sink_mt>(stray)));

    std::ostringstream out;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    std::vector<std::unique_ptr<Node>> nodes;
    for (std::size_t i = 0; i < 3; ++i) {
        const std::string id = "n" + std::to_string(i);
        auto parsed = conclave::node::parse_cluster_config(text, id);
        REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
        conclave::node::NodeOptions options;
        options.admin_http = false;
        options.seed = i + 1;
        options.logger =
            conclave::node::make_logger(id, {conclave::node::LogFormat::Json, "debug"}, {sink});
        nodes.push_back(std::make_unique<Node>(io, std::get<ClusterConfig>(parsed), options));
    }
    for (auto& n : nodes) {
        REQUIRE_FALSE(n->start());
    }
    REQUIRE(run_until(io, [&] {
        for (auto& n : nodes) {
            if (!n->current().leader) {
                return false;
            }
        }
        return true;
    }));
    int stopped = 0;
    for (auto& n : nodes) {
        n->stop([&] { ++stopped; });
    }
    REQUIRE(run_until(io, [&] { return stopped == 3; }));
    nodes.clear();
    std::filesystem::remove_all(dir);

    CHECK(stray.str().empty());
    std::istringstream lines(out.str());
    std::string line;
    int net_lines = 0;
    int changes = 0;
    int lines_seen = 0;
    while (std::getline(lines, line)) {
        ++lines_seen;
        const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        INFO(line);
        REQUIRE(record.is_object());
        CHECK(record.contains("ts"));
        CHECK(record.contains("level"));
        CHECK(record.contains("logger"));
        const std::string msg = record.value("msg", "");
        net_lines += msg.find("net: ") != std::string::npos ? 1 : 0;
        CHECK(msg.find("leadership: role") == std::string::npos);  // the driver's own line
        if (msg == "leadership changed") {
            ++changes;
            CHECK(record.contains("role"));
            CHECK(record.contains("term"));
            CHECK(record.contains("leader"));
            CHECK(record.contains("fencing_token"));
            CHECK(record.contains("reason"));
        }
    }
    CHECK(lines_seen > 0);
    CHECK(net_lines >= 3);  // at least each mesh's "listening on"
    CHECK(changes >= 6);    // each node: started, a leader known, stopped
}
