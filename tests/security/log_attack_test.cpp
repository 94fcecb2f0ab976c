// SPDX-License-Identifier: Apache-2.0
// Metadata-log attacks (finding 3: a forged AppendAck with term 2^64-1 killed the
// metadata log forever; finding 4: an Append contradicting a committed entry aborted a follower)
// against a running 3-node cluster on loopback, asserting that no acknowledged entry is lost.
//
// The cluster is configured with 4 nodes and runs 3 (a quorum of 3): the attacker joins as the
// 4th, a member that lies (SECURITY.md: out of scope for safety, but it must not crash a node or
// erase what was acknowledged). Before the attacks, entries are committed (acknowledged to the
// client); after each, every acknowledged entry is still served by every node, the counter that
// names the attack moved, and /healthz is 200 except on a follower shown a contradiction of its
// committed entries: that one raises the rollback alarm (it cannot tell a liar from a restored
// leader) and keeps what it has.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "conclave/admin/prometheus_text.hpp"
#include "conclave/codec/json.hpp"
#include "conclave/codec/log_codec.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/node/node.hpp"
#include "support/active_leader.hpp"
#include "support/loopback.hpp"

namespace {

namespace asio = boost::asio;
using conclave::Lsn;
using conclave::NodeId;
using conclave::Term;
using conclave::admin::MetadataProposeResult;
using conclave::node::ClusterConfig;
using conclave::node::Node;
using conclave::replication::Entry;

constexpr std::chrono::seconds kAttackBound{15};
constexpr std::size_t kRealNodes = 3;
constexpr std::size_t kEntries = 10;

bool RunFor(asio::io_context& io, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + kAttackBound;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        io.run_one_for(std::chrono::milliseconds(20));
    }
    return true;
}

struct AttackedCluster {
    asio::io_context io;
    std::filesystem::path root;
    std::string config_text;
    std::vector<std::unique_ptr<Node>> nodes;
    std::unique_ptr<conclave::net::Mesh> attacker;  // "n4"

    AttackedCluster() {
        root = std::filesystem::temp_directory_path() /
               ("conclave-log-attack-" + std::to_string(::getpid()));
        std::filesystem::remove_all(root);
        // All eight ports at once: one at a time, the kernel may hand out one twice.
        const std::vector<std::uint16_t> ports = conclave::test::free_ports(io, 8);
        std::string nodes_json;
        for (std::size_t i = 1; i <= 4; ++i) {
            nodes_json += std::string(i > 1 ? "," : "") + R"({"id": "n)" + std::to_string(i) +
                          R"(", "peer": "127.0.0.1:)" + std::to_string(ports.at(2 * i - 2)) +
                          R"(", "http": "127.0.0.1:)" + std::to_string(ports.at(2 * i - 1)) +
                          R"("})";
        }
        config_text = R"({"cluster": "attacked", "profile": "fast", "insecure": true, "nodes": [)" +
                      nodes_json + R"(], "data_dir": ")" + root.string() + R"(/{id}"})";
        for (std::size_t i = 0; i < kRealNodes; ++i) {
            nodes.push_back(
                std::make_unique<Node>(io, Config("n" + std::to_string(i + 1)), Options(100 + i)));
            REQUIRE_FALSE(nodes.back()->start());
        }
    }
    ~AttackedCluster() {
        if (attacker) {
            attacker->stop();
        }
        attacker.reset();
        nodes.clear();
        std::filesystem::remove_all(root);
    }

    ClusterConfig Config(const std::string& id) const {
        auto parsed = conclave::node::parse_cluster_config(config_text, id);
        REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
        return std::get<ClusterConfig>(parsed);
    }
    static conclave::node::NodeOptions Options(std::uint64_t seed) {
        conclave::node::NodeOptions options;
        options.logger = std::make_shared<spdlog::logger>(
            "log-attack-test", std::make_shared<spdlog::sinks::null_sink_mt>());
        options.seed = seed;
        return options;
    }

    /// The 4th member, speaking the protocol with the real mesh code; it ignores what it gets.
    void StartAttacker() {
        const ClusterConfig c = Config("n4");
        conclave::net::Membership membership;
        membership.cluster = c.cluster;
        for (const auto& entry : c.nodes) {
            membership.nodes.push_back({entry.id, entry.peer.host, entry.peer.port});
        }
        conclave::net::MeshOptions options;
        options.seed = 4;
        options.durable_term = [] { return std::uint64_t{1}; };  // a member's hello names one
        options.logger = std::make_shared<spdlog::logger>(
            "attacker", std::make_shared<spdlog::sinks::null_sink_mt>());
        attacker = std::make_unique<conclave::net::Mesh>(io, membership, NodeId{3}, options);
        const auto ignore = [](NodeId, std::span<const std::uint8_t>) {
            return std::optional<conclave::net::FrameRejection>{};
        };
        attacker->set_frame_handler(conclave::net::Channel::Elector, ignore);
        attacker->set_frame_handler(conclave::net::Channel::Replication, ignore);
        attacker->start();
    }

    conclave::test::RunClusterUntil Runner() {
        return [this](const std::function<bool()>& done) { return RunFor(io, done); };
    }

    std::size_t ActiveLeader() {
        const auto leader = conclave::test::wait_for_active_leader(nodes, Runner());
        REQUIRE(leader);
        return *leader;
    }

    double Metric(std::size_t i, const std::string& name, const conclave::admin::Labels& labels) {
        auto parsed = conclave::admin::parse_prometheus_text(nodes[i]->metrics_text());
        REQUIRE(std::holds_alternative<conclave::admin::PrometheusExposition>(parsed));
        const auto value =
            std::get<conclave::admin::PrometheusExposition>(parsed).value(name, labels);
        REQUIRE(value.has_value());
        return *value;
    }

    /// Every acknowledged entry, in order, among the committed entries of every real node; each
    /// node healthy but `alarmed`, whose /healthz names the rollback alarm.
    void CheckAcknowledged(const std::vector<Entry>& acknowledged,
                           std::size_t alarmed = kRealNodes) {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            INFO("node n" << i + 1);
            REQUIRE(RunFor(io, [&] {
                std::vector<Entry> committed;
                for (const Entry& e : nodes[i]->committed_after(Lsn{}, 100000)) {
                    if (!conclave::replication::is_sync_point(e)) {
                        committed.push_back(e);
                    }
                }
                std::size_t found = 0;
                for (const Entry& e : committed) {
                    found += found < acknowledged.size() && e == acknowledged[found] ? 1U : 0U;
                }
                return found == acknowledged.size();
            }));
            if (i == alarmed) {
                // A contradiction of its committed entries is indistinguishable from a leader
                // restored from an older copy: the node refuses it and says so on /healthz.
                CHECK(nodes[i]->health().detail.find("ROLLBACK") != std::string::npos);
                continue;
            }
            // Healthy once it hears the leader of the moment (a vote may be under way).
            CHECK(RunFor(io, [&] { return nodes[i]->health().healthy; }));
            INFO(nodes[i]->health().detail);
            CHECK(nodes[i]->health().healthy);
        }
    }
};

void SendLog(conclave::net::Mesh& from, std::size_t to,
             const conclave::replication::LogMessage& m) {
    const auto bytes = conclave::codec::encode_log_cbor(m);
    CHECK(from.send(NodeId{static_cast<std::uint16_t>(to)}, conclave::net::Channel::Replication,
                    bytes));
}

}  // namespace

TEST_CASE("findings 3 and 4: forged log frames from a member lose no acknowledged entry") {
    AttackedCluster c;

    // Entries acknowledged to the client before any attack. Each goes to the active leader of
    // the moment (on a busy machine the leadership may move before or between the attacks).
    std::vector<Entry> acknowledged;
    const auto commit = [&](const std::string& key) {
        // The checks look for the acknowledged LSN of each key: a key whose first write's
        // outcome is unknown (the leadership moved) may be committed twice.
        const auto write = conclave::test::write_to_active_leader(
            c.nodes, c.Runner(), key, "\"" + key + "\"", /*twice_is_fine=*/true);
        INFO(key << ": " << (write.result ? write.result->detail : std::string("no answer")));
        REQUIRE(write.ok());
        acknowledged.push_back(Entry{write.result->lsn, key, "\"" + key + "\""});
    };
    for (std::size_t k = 0; k < kEntries; ++k) {
        commit("before" + std::to_string(k));
    }
    c.CheckAcknowledged(acknowledged);
    const std::size_t leader = c.ActiveLeader();
    const std::size_t follower = (leader + 1) % kRealNodes;

    c.StartAttacker();
    const auto up = [&](std::size_t i) {
        return c.attacker->is_up(NodeId{static_cast<std::uint16_t>(i)});
    };
    REQUIRE(RunFor(c.io, [&] { return up(leader) && up(follower); }));

    // Finding 3: an AppendAck with term 2^64-1 to the leader. The decoder refuses it (the
    // connection is closed and counted); nothing is persisted, the log keeps committing.
    const std::string undecodable = "conclave_bad_frames_total";
    const double refused_before = c.Metric(leader, undecodable, {{"kind", "undecodable"}});
    conclave::replication::LogMessage ack;
    ack.from = NodeId{3};
    ack.term = Term{~std::uint64_t{0}};
    ack.body = conclave::replication::AppendAck{true, Lsn{}, acknowledged.back().lsn,
                                                acknowledged.back().lsn};
    SendLog(*c.attacker, leader, ack);
    REQUIRE(RunFor(c.io, [&] {
        return c.Metric(leader, undecodable, {{"kind", "undecodable"}}) > refused_before;
    }));
    commit("after-ack");  // POST /metadata answered 503 forever before the fix
    c.CheckAcknowledged(acknowledged);

    // Finding 4: an Append, in a higher term, whose entry contradicts a committed one. The
    // follower drops it with an alarm (it aborted before the fix); its log is unchanged. A log
    // message above the follower's vote record is dropped before the log sees it, so the liar
    // first makes the follower take its term with a heartbeat, as a leader of that term would.
    REQUIRE(RunFor(c.io, [&] { return up(follower); }));
    const std::string violations = "conclave_metadata_protocol_violations_total";
    const conclave::admin::Labels contradicts = {{"kind", "contradicts_committed"}};
    CHECK(c.Metric(follower, violations, contradicts) == 0);
    const Term forged_term{static_cast<std::uint64_t>(c.Metric(follower, "conclave_term", {})) + 1};
    conclave::elector::Message heartbeat;
    heartbeat.from = NodeId{3};
    heartbeat.term = forged_term;
    heartbeat.body = conclave::elector::LeaderHeartbeat{acknowledged.back().lsn, 0, 1};
    CHECK(c.attacker->send(NodeId{static_cast<std::uint16_t>(follower)},
                           conclave::net::Channel::Elector,
                           conclave::codec::encode_cbor(heartbeat)));
    REQUIRE(RunFor(c.io, [&] {
        return c.Metric(follower, "conclave_term", {}) >= static_cast<double>(forged_term.value);
    }));
    Entry forged = acknowledged.at(kEntries / 2);
    forged.value = "\"forged\"";
    conclave::replication::LogMessage append;
    append.from = NodeId{3};
    append.term =
        Term{std::max(forged.lsn.term.value + 1,
                      static_cast<std::uint64_t>(c.Metric(follower, "conclave_term", {})))};
    append.body = conclave::replication::Append{
        acknowledged.at(kEntries / 2 - 1).lsn, {forged}, acknowledged.back().lsn};
    SendLog(*c.attacker, follower, append);
    REQUIRE(RunFor(c.io, [&] { return c.Metric(follower, violations, contradicts) == 1; }));
    c.CheckAcknowledged(acknowledged, follower);
}
