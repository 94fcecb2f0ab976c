// SPDX-License-Identifier: Apache-2.0
// The wait of linearizable reads for a quorum round (Node::read, node/src/metadata_keys.cpp): a
// leader answers only while its lease is valid or once a quorum acknowledged a heartbeat round
// sent after the read arrived (ReadIndex). 3 Nodes on loopback, each on its own io_context polled
// by the test's thread; a paused node is one whose io_context is not run (SIGSTOP in process).
// (a) A new leader, both followers paused the moment it won, answers a read only after they
// resume and acknowledge its round. (b) A leader paused past its lease while the others elected
// a new leader and overwrote a key still leads in its frozen view; a read reaching it then is
// not answered from its stale state. "check_quorum": false, so that only the lease and the read
// path decide. Canary: the planted PlantedReadBug::SkipReadIndex (an active leader answers at
// once, lease valid or not) must answer (b) stale. Every wait is bounded; nothing asserts a
// duration.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "conclave/drivers/log_driver.hpp"
#include "conclave/node/node.hpp"
#include "support/loopback.hpp"

namespace {

using conclave::admin::MetadataProposeResult;
using conclave::admin::MetadataProposeStatus;
using conclave::admin::MetadataQuery;
using conclave::admin::MetadataReadResult;
using conclave::node::Node;
using conclave::node::PlantedReadBug;

constexpr std::chrono::seconds kReadIndexBound{20};

struct ReadIndexCluster {
    boost::asio::io_context net;  // for free_ports only
    std::vector<std::unique_ptr<boost::asio::io_context>> ios;
    std::filesystem::path root = conclave::test::fresh_temp_dir("conclave-read-index-test");
    std::vector<std::unique_ptr<Node>> nodes{3};
    std::vector<bool> paused = std::vector<bool>(3, false);

    explicit ReadIndexCluster(PlantedReadBug planted) {
        const auto ports = conclave::test::free_ports(net, 6);
        // A long inactivity interval (2 s): followers paused for a few heartbeat periods still
        // follow their leader when they resume; a read waits at most 4 s.
        const std::string extra = R"(, "check_quorum": false, "timing": {"miss_count": 20},)"
                                  R"( "metadata": {"propose_timeout_ms": 4000})";
        for (std::size_t i = 0; i < 3; ++i) {
            ios.push_back(std::make_unique<boost::asio::io_context>());
            const auto text =
                conclave::test::loopback_cluster_config("reads", "r", 3, ports, root, extra);
            auto parsed = conclave::node::parse_cluster_config(text, "r" + std::to_string(i));
            REQUIRE(std::holds_alternative<conclave::node::ClusterConfig>(parsed));
            conclave::node::NodeOptions options;
            options.admin_http = false;
            options.seed = i + 11;
            options.logger = conclave::test::quiet_logger("read-index-test");
            options.planted_read_bug = planted;
            nodes[i] = std::make_unique<Node>(
                *ios[i], std::get<conclave::node::ClusterConfig>(parsed), options);
            REQUIRE_FALSE(nodes[i]->start());
        }
    }
    ~ReadIndexCluster() {
        nodes.clear();
        std::filesystem::remove_all(root);
    }

    /// Runs the nodes not paused until `done()`; false after the bound.
    bool run(const std::function<bool()>& done, std::chrono::milliseconds bound = kReadIndexBound) {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
            std::size_t events = 0;
            for (std::size_t i = 0; i < 3; ++i) {
                if (!paused[i]) {
                    ios[i]->restart();
                    events += ios[i]->poll();
                }
            }
            if (events == 0) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        return true;
    }

    /// An active leader (sync point committed, lease valid) among `candidates`.
    std::size_t active_leader(const std::vector<std::size_t>& candidates = {0, 1, 2}) {
        std::optional<std::size_t> found;
        REQUIRE(run([&] {
            for (const std::size_t i : candidates) {
                if (nodes[i]->current().valid_now() &&
                    nodes[i]->log_driver()->log().role() ==
                        conclave::replication::LogRole::LeaderActive) {
                    found = i;
                    return true;
                }
            }
            return false;
        }));
        return *found;
    }

    void put(std::size_t leader, const std::string& key, const std::string& value) {
        std::optional<MetadataProposeResult> result;
        nodes[leader]->propose(key, value, [&](const MetadataProposeResult& r) { result = r; });
        REQUIRE(run([&] { return result.has_value(); }));
        REQUIRE(result->ok());
    }

    /// Starts a linearizable read of `key` on node i; the result lands in `out`.
    void read(std::size_t i, const std::string& key, std::optional<MetadataReadResult>& out) {
        MetadataQuery query;
        query.key = key;
        nodes[i]->read(query, [&out](const MetadataReadResult& r) { out = r; });
    }
};

bool AnswersValue(const MetadataReadResult& r, const std::string& value) {
    return r.outcome.status == MetadataProposeStatus::Committed && r.entries.size() == 1 &&
           r.entries[0].value == value;
}

/// (a) A leader's first moments: the node that wins the election reads at once, and both
/// followers are paused from that moment (its first heartbeat round and sync point cannot be
/// acknowledged). The read is not answered while they are paused; once they resume, it is
/// answered, by a leader whose lease is valid.
void ReadWaitsForQuorumRound() {
    ReadIndexCluster c(PlantedReadBug::None);
    std::optional<std::size_t> leader;
    std::optional<MetadataReadResult> answer;
    bool lease_valid_at_answer = false;
    for (std::size_t i = 0; i < 3; ++i) {
        c.nodes[i]->subscribe([&, i](const conclave::node::Leadership& l) {
            if (!l.is_leader() || leader) {
                return;
            }
            leader = i;
            for (std::size_t k = 0; k < 3; ++k) {
                c.paused[k] = k != i;
            }
            CHECK_FALSE(l.lease_deadline);  // no round of this leadership acknowledged yet
            MetadataQuery query;
            query.key = "k";
            c.nodes[i]->read(query, [&, i](const MetadataReadResult& r) {
                answer = r;
                lease_valid_at_answer = c.nodes[i]->current().valid_now();
            });
        });
    }
    REQUIRE(c.run([&] { return leader.has_value(); }));
    // The leader alone for a while (several heartbeat periods): no quorum, so no answer.
    c.run([&] { return answer.has_value(); },
          c.nodes[*leader]->config().elector.heartbeat_period * 5);
    REQUIRE_FALSE(answer);
    REQUIRE(c.nodes[*leader]->current().is_leader());
    std::fill(c.paused.begin(), c.paused.end(), false);
    REQUIRE(c.run([&] { return answer.has_value(); }));
    INFO(conclave::admin::to_string(answer->outcome.status) << " " << answer->outcome.detail);
    CHECK(answer->outcome.status == MetadataProposeStatus::Committed);
    CHECK(answer->entries.empty());  // never written
    CHECK(lease_valid_at_answer);
}

/// (b) The leader is paused (its io_context not run) until the others elected a new leader that
/// overwrote the key. In its frozen view it still leads, with the old value, its lease ended. A
/// linearizable read that reaches it then must not be answered with the old value: it waits for
/// a quorum round, which the others refuse (the leader steps down, the read is refused). Returns
/// false when it answered with the old value (the planted canary).
bool PausedLeaderDoesNotAnswerStale(PlantedReadBug planted) {
    ReadIndexCluster c(planted);
    const std::size_t old = c.active_leader();
    c.put(old, "k", "v1");
    c.paused[old] = true;
    std::vector<std::size_t> others;
    for (std::size_t i = 0; i < 3; ++i) {
        if (i != old) {
            others.push_back(i);
        }
    }
    const std::size_t now = c.active_leader(others);
    c.put(now, "k", "v2");
    REQUIRE(c.nodes[old]->current().is_leader());  // its frozen view
    REQUIRE_FALSE(c.nodes[old]->current().valid_now());
    REQUIRE(c.nodes[old]->get("k").entries.at(0).value == "v1");  // its local state is stale
    std::optional<MetadataReadResult> answer;
    c.read(old, "k", answer);  // arrives before the resumed node runs anything
    c.paused[old] = false;
    REQUIRE(c.run([&] { return answer.has_value(); }));
    INFO(conclave::admin::to_string(answer->outcome.status) << " " << answer->outcome.detail);
    if (AnswersValue(*answer, "v1")) {
        return false;
    }
    CHECK(answer->outcome.status != MetadataProposeStatus::Committed);
    REQUIRE(c.run([&] { return !c.nodes[old]->current().is_leader(); }));
    return true;
}

}  // namespace

TEST_CASE("linearizable reads: a new leader answers only after a quorum round",
          "[metadata][read-index]") {
    ReadWaitsForQuorumRound();
}

TEST_CASE("linearizable reads: a leader paused past its lease does not answer from stale state",
          "[metadata][read-index]") {
    CHECK(PausedLeaderDoesNotAnswerStale(PlantedReadBug::None));
}

TEST_CASE("linearizable reads: a paused leader answers stale with the wait skipped (canary)",
          "[metadata][read-index]") {
    CHECK_FALSE(PausedLeaderDoesNotAnswerStale(PlantedReadBug::SkipReadIndex));
}
