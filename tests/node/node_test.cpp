// Node's embedding API on one real loopback node (a 1-node cluster elects itself): level-triggered
// subscriptions, several subscribers, refusals, graceful stop. Bounded by run_one_for deadlines.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "conclave/node/node.hpp"

namespace {

using conclave::Role;
using conclave::node::ClusterConfig;
using conclave::node::Leadership;
using conclave::node::Node;

std::uint16_t free_port(boost::asio::io_context& io) {
    boost::asio::ip::tcp::acceptor a(
        io, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
    return a.local_endpoint().port();
}

bool run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        io.run_one_for(std::chrono::milliseconds(20));
    }
    return true;
}

}  // namespace

TEST_CASE("Node: subscriptions are level-triggered and ordered", "[node][embedding]") {
    boost::asio::io_context io;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("conclave-node-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    const std::string text = R"({"cluster": "solo", "profile": "fast", "nodes": [{"id": "n1",
        "peer": "127.0.0.1:)" +
                             std::to_string(free_port(io)) + R"(", "http": "127.0.0.1:)" +
                             std::to_string(free_port(io)) + R"("}], "data_dir": ")" +
                             dir.string() + R"("})";
    auto parsed = conclave::node::parse_cluster_config(text, "n1");
    REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
    conclave::node::NodeOptions options;
    options.logger = std::make_shared<spdlog::logger>(
        "node-test", std::make_shared<spdlog::sinks::null_sink_mt>());
    Node node(io, std::get<ClusterConfig>(parsed), options);

    std::vector<Leadership> seen_a;
    node.subscribe([&](const Leadership& l) { seen_a.push_back(l); });
    REQUIRE(seen_a.size() == 1);  // delivered at once: stopped, no leader
    CHECK(seen_a[0].role == Role::Stopped);
    CHECK_FALSE(seen_a[0].leader);

    REQUIRE_FALSE(node.start());
    REQUIRE(run_until(io, [&] { return node.current().is_leader(); }));
    CHECK(node.current().leader == "n1");
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
