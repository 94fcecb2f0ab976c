// Node's embedding API called from threads other than the io thread while Node::run() drives the
// node on its own thread (issue 19). Meant for TSan: a data race between the callers and the io
// thread fails it. One real loopback node (a 1-node cluster elects itself); every wait bounded.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "conclave/node/node.hpp"
#include "support/loopback.hpp"

namespace {

using conclave::node::ClusterConfig;
using conclave::node::Leadership;
using conclave::node::Node;
constexpr auto kWait = std::chrono::seconds(20);

}  // namespace

TEST_CASE("Node: the embedding API may be called from other threads while run() runs",
          "[node][embedding][threads]") {
    const auto dir = conclave::test::fresh_temp_dir("conclave-node-threads-test");
    std::string text;
    {
        boost::asio::io_context probe;
        text = conclave::test::loopback_cluster_config("threads", "n", 1,
                                                       conclave::test::free_ports(probe, 2), dir);
    }
    auto parsed = conclave::node::parse_cluster_config(text, "n0");
    REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
    conclave::node::NodeOptions options;
    options.logger = conclave::test::quiet_logger("node-threads-test");
    Node node(std::get<ClusterConfig>(parsed), options);
    REQUIRE_FALSE(node.start());

    std::promise<void> leads;
    std::atomic<bool> leads_set{false};
    node.subscribe([&](const Leadership& l) {  // before run(): called at once, here
        if (l.is_leader() && !leads_set.exchange(true)) {
            leads.set_value();
        }
    });
    std::thread io_thread([&] { node.run(); });
    REQUIRE(leads.get_future().wait_for(kWait) == std::future_status::ready);

    constexpr int kThreads = 4;
    constexpr int kRounds = 20;
    std::atomic<int> subscribed{0};
    std::atomic<int> proposals_done{0};
    std::atomic<int> leader_seen{0};
    std::atomic<int> refusals{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kThreads; ++t) {
        callers.emplace_back([&, t] {
            node.subscribe([&](const Leadership&) { subscribed += 1; });
            for (int i = 0; i < kRounds; ++i) {
                if (node.current().is_leader()) {
                    leader_seen += 1;
                }
                node.propose(
                    "thread/" + std::to_string(t), std::to_string(i),
                    [&](const conclave::node::MetadataProposeResult&) { proposals_done += 1; });
                if (node.transfer_leadership("nobody").has_value()) {
                    refusals += 1;
                }
            }
        });
    }
    for (auto& caller : callers) {
        caller.join();
    }
    CHECK(leader_seen == kThreads * kRounds);
    CHECK(refusals == kThreads * kRounds);  // answered by the io thread: unknown id
    CHECK(node.step_down() == std::optional<std::string>("no peer is up to take over"));

    std::promise<void> stopped;
    std::thread stopper([&] { node.stop([&] { stopped.set_value(); }); });
    stopper.join();
    REQUIRE(stopped.get_future().wait_for(kWait) == std::future_status::ready);
    io_thread.join();
    // Every posted call ran on the io thread: each subscriber got at least the current snapshot,
    // and every proposal got exactly one answer (committed, or refused by the stop).
    CHECK(subscribed >= kThreads);
    CHECK(proposals_done == kThreads * kRounds);
    CHECK(node.stopped());
    std::filesystem::remove_all(dir);
}
