// SPDX-License-Identifier: Apache-2.0
// Node's embedding API called from threads other than the io thread while Node::run() drives the
// node on its own thread. Meant for TSan: a data race between the callers and the io
// thread fails it. One real loopback node (a 1-node cluster elects itself); every wait bounded.
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
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

/// One blocking GET on loopback (from a test thread); the response's bytes.
std::string HttpGet(std::uint16_t port, const std::string& target) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    const std::string request =
        "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    boost::asio::write(s, boost::asio::buffer(request));
    std::string response;
    boost::system::error_code ec;
    boost::asio::read(s, boost::asio::dynamic_buffer(response), ec);
    return response;
}

}  // namespace

TEST_CASE("Node: the embedding API may be called from other threads while run() runs",
          "[node][embedding][threads]") {
    const auto dir = conclave::test::fresh_temp_dir("conclave-node-threads-test");
    std::string text;
    std::uint16_t http_port = 0;
    {
        boost::asio::io_context probe;
        const std::vector<std::uint16_t> ports = conclave::test::free_ports(probe, 2);
        http_port = ports.at(1);
        text = conclave::test::loopback_cluster_config("threads", "n", 1, ports, dir);
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
    std::atomic<int> membership_refused{0};  // n0 is a voter already; "nobody" is no node id
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
                    [&](const conclave::admin::MetadataProposeResult&) { proposals_done += 1; });
                node.add_learner(i % 2 == 0 ? "n0" : "nobody",
                                 [&](const conclave::admin::MembershipResult& r) {
                                     using conclave::admin::MetadataProposeStatus;
                                     // NotActive: the log's sync may still be under way.
                                     if (r.status == MetadataProposeStatus::Refused ||
                                         r.status == MetadataProposeStatus::InvalidEntry ||
                                         r.status == MetadataProposeStatus::NotActive) {
                                         membership_refused += 1;
                                     }
                                 });
                if (node.transfer_leadership("nobody").has_value()) {
                    refusals += 1;
                }
            }
        });
    }
    for (auto& caller : callers) {
        caller.join();
    }
    // GET /metadata pages are built on the node's reader thread and answered on the io thread
    //: several readers at once, while the io thread runs.
    std::atomic<int> pages_ok{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 2; ++t) {
        readers.emplace_back([&] {
            for (int i = 0; i < 3; ++i) {
                const std::string body = HttpGet(http_port, "/metadata?max=50");
                pages_ok += body.find("\"next_from\"") != std::string::npos ? 1 : 0;
            }
        });
    }
    for (auto& reader : readers) {
        reader.join();
    }
    CHECK(pages_ok == 6);
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
    CHECK(membership_refused == kThreads * kRounds);  // membership changes: posted too
    CHECK(node.stopped());
    std::filesystem::remove_all(dir);
}
