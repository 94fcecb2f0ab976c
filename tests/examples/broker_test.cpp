// SPDX-License-Identifier: Apache-2.0
// The broker example: 3 brokers (3 Nodes on one io_context, loopback, fast profile) share a store
// guarded by a FencingGate. Only the leader assigns; a deposed leader's late writes are rejected.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "broker.hpp"
#include "support/loopback.hpp"

namespace {

using conclave::examples::AssignmentStore;
using conclave::examples::Broker;
using conclave::node::ClusterConfig;
using conclave::node::Node;
using conclave::test::run_until;

}  // namespace

TEST_CASE("a deposed leader's late writes are fenced off", "[examples][broker]") {
    boost::asio::io_context io;
    const auto ports = conclave::test::free_ports(io, 6);
    const auto root = conclave::test::fresh_temp_dir("conclave-broker-test");
    const std::string text =
        conclave::test::loopback_cluster_config("brokers", "b", 3, ports, root);
    auto quiet = conclave::test::quiet_logger("broker-test");
    AssignmentStore store;
    std::vector<std::unique_ptr<Node>> nodes;
    std::vector<std::unique_ptr<Broker>> brokers;
    for (std::size_t i = 0; i < 3; ++i) {
        auto parsed = conclave::node::parse_cluster_config(text, "b" + std::to_string(i));
        REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
        conclave::node::NodeOptions options;
        options.admin_http = false;
        options.seed = i + 1;
        options.logger = quiet;
        nodes.push_back(std::make_unique<Node>(io, std::get<ClusterConfig>(parsed), options));
        brokers.push_back(
            std::make_unique<Broker>(*nodes.back(), store, 8, std::chrono::milliseconds(20)));
    }
    for (auto& n : nodes) {
        REQUIRE_FALSE(n->start());
    }

    auto assigning = [&]() -> int {
        for (int i = 0; i < 3; ++i) {
            if (brokers[static_cast<std::size_t>(i)]->assigning()) {
                return i;
            }
        }
        return -1;
    };
    REQUIRE(run_until(io, [&] { return assigning() >= 0 && store.accepted_writes() > 0; }));
    const auto old_index = static_cast<std::size_t>(assigning());
    const std::uint64_t old_token = brokers[old_index]->last_token();
    CHECK(store.highest_token() == old_token);
    CHECK(store.assignments().size() == 8);

    // Depose the leader (hand leadership to another broker) and let the new one write.
    const std::size_t successor = (old_index + 1) % 3;
    REQUIRE_FALSE(nodes[old_index]->transfer_leadership("b" + std::to_string(successor)));
    REQUIRE(run_until(
        io, [&] { return brokers[successor]->assigning() && store.highest_token() > old_token; }));
    CHECK_FALSE(brokers[old_index]->assigning());
    // The others learn of the new leader from its heartbeats.
    CHECK(run_until(io, [&] {
        for (auto& n : nodes) {
            if (n->current().leader != "b" + std::to_string(successor)) {
                return false;
            }
        }
        return true;
    }));

    // A late write from the deposed leader (still carrying its old token) is rejected.
    const auto rejected_before = store.rejected_writes();
    CHECK(brokers[old_index]->assign_all(old_token) == 0);
    CHECK(store.rejected_writes() == rejected_before + 8);
    // The current leader's writes still go through.
    CHECK(brokers[successor]->assign_all(brokers[successor]->last_token()) == 8);

    int stopped = 0;
    for (auto& n : nodes) {
        n->stop([&] { ++stopped; });
    }
    CHECK(run_until(io, [&] { return stopped == 3; }));
    brokers.clear();
    nodes.clear();
    std::filesystem::remove_all(root);
}
