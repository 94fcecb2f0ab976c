// SPDX-License-Identifier: Apache-2.0
// Membership changes through the Node API and HTTP, on a real 3-node loopback cluster
// in one process (node_cluster.hpp): remove a follower (writes commit without it), add it back as
// a learner (it catches up, never votes) and promote it; remove the leader (it steps down, another
// leads); R7's promote lag; POST/GET /members (auth, redirect, errors), /status and the metrics.
// Every wait is bounded by a deadline.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "conclave/drivers/log_driver.hpp"
#include "conclave/node/join.hpp"
#include "conclave/node/node.hpp"
#include "conclave/node/node_table.hpp"
#include "node_cluster.hpp"

namespace {

using namespace conclave::test::node_cluster;
using conclave::admin::MemberRole;
using conclave::admin::MembershipResult;
using conclave::admin::MembersView;
using conclave::admin::MetadataProposeStatus;

std::string id_of(std::size_t i) {
    return "n" + std::to_string(i + 1);
}

std::vector<std::string> ids_with(const MembersView& view, MemberRole role) {
    std::vector<std::string> out;
    for (const auto& m : view.members) {
        if (m.role == role) {
            out.push_back(m.id);
        }
    }
    return out;
}

/// A cluster whose admin API needs a bearer token (POST /members is authenticated).
struct MemberCluster : Cluster {
    static constexpr const char* kToken =
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    std::string metadata;  // the "metadata" section of every node's config, joiners' too

    explicit MemberCluster(
        const std::string& metadata_section = R"({"fsync": "batched", "propose_timeout_ms": 3000})")
        : Cluster(metadata_section,
                  R"(, "admin": {"token_file": ")" + token_path().string() + R"("})", "membership"),
          metadata(metadata_section) {
        std::filesystem::create_directories(root);
        std::ofstream(token_path()) << kToken;
        std::filesystem::permissions(
            token_path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    }
    static std::filesystem::path token_path() {
        return std::filesystem::temp_directory_path() /
               ("conclave-membership-test-" + std::to_string(::getpid())) / "token";
    }

    MembershipResult change(std::size_t at, conclave::admin::MembershipOp op, std::size_t target) {
        std::optional<MembershipResult> result;
        const auto done = [&](const MembershipResult& r) { result = r; };
        switch (op) {
            case conclave::admin::MembershipOp::AddLearner:
                nodes[at]->add_learner(id_of(target), done);
                break;
            case conclave::admin::MembershipOp::Promote:
                nodes[at]->promote(id_of(target), done);
                break;
            case conclave::admin::MembershipOp::Remove:
                nodes[at]->remove_member(id_of(target), done);
                break;
        }
        REQUIRE(run_cluster_until(io, [&] { return result.has_value(); }));
        return *result;
    }

    /// The config of a new node `id` that knows only itself (it joins with --join).
    ClusterConfig joiner_config(const std::string& id) {
        const std::vector<std::uint16_t> ports = conclave::test::free_ports(io, 2);
        const std::string text = R"({"cluster": "meta", "profile": "fast", "nodes": [{"id": ")" +
                                 id + R"(", "peer": "127.0.0.1:)" + std::to_string(ports.at(0)) +
                                 R"(", "http": "127.0.0.1:)" + std::to_string(ports.at(1)) +
                                 R"("}], "data_dir": ")" + root.string() +
                                 R"(/{id}", "metadata": )" + metadata + "}";
        auto parsed = conclave::node::parse_cluster_config(text, id);
        REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
        return std::get<ClusterConfig>(parsed);
    }

    /// join_cluster (conclaved --join) through node `seed`'s peer address. It blocks on its own
    /// io_context, so it runs on a thread while the cluster runs on this one. The error, if any.
    std::optional<std::string> join(const ClusterConfig& config, std::size_t seed) {
        auto quiet = std::make_shared<spdlog::logger>(
            "join-test", std::make_shared<spdlog::sinks::null_sink_mt>());
        std::atomic<bool> joined{false};
        std::optional<std::string> join_error;
        std::thread joiner([&] {
            join_error = conclave::node::join_cluster(
                config, nodes[seed]->config().self_entry().peer, *quiet, std::chrono::seconds(10));
            joined = true;
        });
        const bool finished = run_cluster_until(io, [&] { return joined.load(); });
        joiner.join();
        REQUIRE(finished);
        if (join_error) {
            UNSCOPED_INFO("join: " << *join_error);
        }
        return join_error;
    }

    /// Makes `op` (Promote or Remove) on `target` happen: asks the leader (`at`, or whichever
    /// node leads now: the leadership may move under load) until it is done. Asks again while a
    /// change is refused for now (R7: right after a leadership change the leader learns a
    /// learner's progress from its next ack) or its outcome is unknown (timed out, leadership
    /// lost); done too once the leader's configuration shows it (an attempt whose outcome was
    /// unknown made it).
    bool settle(std::size_t at, conclave::admin::MembershipOp op, std::size_t target) {
        return run_cluster_until(io, [&] {
            const std::size_t now = leader_now(at);
            const MembersView view = nodes[now]->members();
            const auto has = [&](MemberRole role) {
                const auto ids = ids_with(view, role);
                return std::find(ids.begin(), ids.end(), id_of(target)) != ids.end();
            };
            const bool shown = op == conclave::admin::MembershipOp::Remove
                                   ? !has(MemberRole::Voter) && !has(MemberRole::Learner)
                                   : has(MemberRole::Voter);
            return shown || change(now, op, target).ok();
        });
    }
    bool promote(std::size_t at, std::size_t learner) {
        return settle(at, conclave::admin::MembershipOp::Promote, learner);
    }

    /// The node whose elector leads now, else `at`.
    std::size_t leader_now(std::size_t at) const {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (nodes[i] && nodes[i]->current().role == conclave::elector::Role::Leader) {
                return i;
            }
        }
        return at;
    }

    /// Starts the three nodes; returns the ACTIVE leader's index.
    std::size_t start_and_elect() {
        start_all();
        return active_leader();
    }

    /// The leader (`at`, or whichever node leads now: the leadership may move under load)
    /// sees learner `learner` connected and no entry behind (GET /members).
    bool caught_up(std::size_t at, std::size_t learner) {
        return run_cluster_until(io, [&] {
            for (const auto& m : nodes[leader_now(at)]->members().members) {
                if (m.id == id_of(learner)) {
                    return m.role == MemberRole::Learner && m.catch_up && m.catch_up->connected &&
                           m.catch_up->lag_entries == 0;
                }
            }
            return false;
        });
    }

    /// Every running node has configuration `version` active.
    bool all_at(std::uint64_t version) {
        return run_cluster_until(io, [&] {
            for (auto& n : nodes) {
                if (n && n->status().membership->version != version) {
                    return false;
                }
            }
            return true;
        });
    }
};

using Op = conclave::admin::MembershipOp;

/// The value of a series (name and labels) in Prometheus text (NaN when absent).
double metric(const std::string& text, const std::string& name) {
    const auto at = text.find("\n" + name + " ");
    if (at == std::string::npos) {
        return std::nan("");
    }
    return std::stod(text.substr(at + name.size() + 2));
}

}  // namespace

TEST_CASE(
    "membership: remove a follower, writes commit without it, re-add it as a learner, "
    "promote it",
    "[node][membership]") {
    // A small R7 bound: a learner more than 2 entries behind the leader's last is not promoted.
    MemberCluster c(
        R"({"fsync": "batched", "propose_timeout_ms": 3000, "promote_lag_entries": 2})");
    const std::size_t leader = c.start_and_elect();
    const std::size_t gone = (leader + 1) % 3;
    const std::size_t other = (leader + 2) % 3;
    CHECK(c.nodes[leader]->status().membership->version == 0);
    CHECK_FALSE(c.nodes[leader]->members().from_entry);
    CHECK(c.nodes[leader]->members().members.size() == 3);

    // Remove: from the implicit configuration (version 0) to version 1.
    const MembershipResult removed = c.change(leader, Op::Remove, gone);
    REQUIRE(removed.ok());
    CHECK(removed.version == 1);
    const MembersView v1 = c.nodes[leader]->members();
    CHECK(v1.version == 1);
    CHECK(v1.from_entry);
    CHECK(ids_with(v1, MemberRole::Voter).size() == 2);
    CHECK(ids_with(v1, MemberRole::Learner).empty());
    REQUIRE(c.all_at(1));
    CHECK(c.nodes[gone]->status().membership->role == "removed");
    CHECK(c.nodes[other]->status().membership->role == "voter");
    CHECK(c.nodes[gone]->current().role != conclave::elector::Role::Leader);
    CHECK(c.nodes[leader]->metrics_text().find(
              "conclave_membership_changes_total{op=\"remove\"} 1") != std::string::npos);
    CHECK(c.nodes[gone]->metrics_text().find("conclave_membership_version 1") != std::string::npos);

    // Writes commit with the removed node stopped: 2 of 2 voters.
    c.stop(gone);
    for (int k = 0; k < 5; ++k) {
        c.commit("after-remove-" + std::to_string(k), "1");
    }

    // Re-add it as a learner while it is down: promotion is refused (R7: it holds nothing).
    const MembershipResult added = c.change(leader, Op::AddLearner, gone);
    REQUIRE(added.ok());
    CHECK(added.version == 2);
    const MembershipResult early = c.change(leader, Op::Promote, gone);
    CHECK(early.status == MetadataProposeStatus::Refused);
    CHECK(early.detail.find("is not caught up (R7)") != std::string::npos);
    CHECK(early.detail.find("metadata.promote_lag_entries (2)") != std::string::npos);
    CHECK(c.nodes[leader]->metrics_text().find(
              "conclave_config_refusals_total{reason=\"promote_lag\"} 1") != std::string::npos);

    // It comes back and catches up as a learner: it never stands nor votes.
    c.start(gone);
    REQUIRE(c.all_at(2));
    CHECK(c.nodes[gone]->status().membership->role == "learner");
    REQUIRE(c.caught_up(leader, gone));
    // Its elector took the configuration (not a voter: it never stands, R7).
    CHECK(c.nodes[gone]->log_driver()->counters().membership_changes >= 1);
    CHECK(c.nodes[gone]->log_driver()->counters().voter_set_refused == 0);
    CHECK(c.nodes[gone]->current().role == conclave::elector::Role::Follower);
    // An election between the two voters (a transfer): candidates ask only the voters of their
    // configuration, so the learner grants nothing; the voters alone elect the new leader.
    const double granted = metric(c.nodes[gone]->metrics_text(), "conclave_votes_granted_total");
    REQUIRE_FALSE(c.nodes[leader]->transfer_leadership(id_of(other)));
    REQUIRE(run_cluster_until(c.io, [&] {
        const auto log = c.nodes[other]->status().log;
        return log && log->leader_status == "active";
    }));
    CHECK(metric(c.nodes[gone]->metrics_text(), "conclave_votes_granted_total") == granted);
    // The learner follows the new leader once its first heartbeat arrives.
    CHECK(run_cluster_until(c.io, [&] { return c.nodes[gone]->current().leader == id_of(other); }));

    // The new leader knows the learner's progress once it acknowledged an append of its term.
    REQUIRE(c.caught_up(other, gone));
    const MembershipResult promoted = c.change(other, Op::Promote, gone);
    REQUIRE(promoted.ok());
    CHECK(promoted.version == 3);
    REQUIRE(c.all_at(3));
    CHECK(ids_with(c.nodes[other]->members(), MemberRole::Voter).size() == 3);
    CHECK(c.nodes[gone]->status().membership->role == "voter");
    c.commit("after-promote", "1");
    c.stop_all();
}

TEST_CASE("membership: removing the leader makes it step down, another node leads",
          "[node][membership]") {
    MemberCluster c;
    const std::size_t old_leader = c.start_and_elect();
    const MembershipResult removed = c.change(old_leader, Op::Remove, old_leader);
    // Counted under the configuration that still holds it: committed, then it steps down.
    REQUIRE(removed.ok());
    CHECK(removed.version == 1);
    REQUIRE(run_cluster_until(c.io, [&] {
        const std::size_t now = c.active_leader();
        return now != old_leader;
    }));
    const std::size_t leader = c.active_leader();
    CHECK(leader != old_leader);
    REQUIRE(c.all_at(1));
    CHECK(c.nodes[old_leader]->status().membership->role == "removed");
    CHECK(c.nodes[old_leader]->current().role != conclave::elector::Role::Leader);
    c.commit("after", "1");
    // The removed node refuses: it is not the leader (and knows who is).
    const MembershipResult refused = c.change(old_leader, Op::AddLearner, old_leader);
    CHECK(refused.status == MetadataProposeStatus::NotLeader);
    c.stop_all();
}

TEST_CASE("membership: one change at a time, invalid ops, unknown ids", "[node][membership]") {
    MemberCluster c;
    const std::size_t leader = c.start_and_elect();
    const std::size_t a = (leader + 1) % 3;  // removed first
    const std::size_t b = (leader + 2) % 3;  // stays a voter
    // Two changes in one turn of the io_context: the second finds the first pending (R2).
    std::optional<MembershipResult> first;
    std::optional<MembershipResult> second;
    c.nodes[leader]->remove_member(id_of(a), [&](const MembershipResult& r) { first = r; });
    c.nodes[leader]->remove_member(id_of(b), [&](const MembershipResult& r) { second = r; });
    REQUIRE(second);
    CHECK(second->status == MetadataProposeStatus::Refused);
    CHECK(second->detail.find("pending") != std::string::npos);
    REQUIRE(run_cluster_until(c.io, [&] { return first.has_value(); }));
    CHECK(first->ok());
    CHECK(c.nodes[leader]->metrics_text().find(
              "conclave_config_refusals_total{reason=\"pending\"} 1") != std::string::npos);

    // Ops that do not fit the member.
    CHECK(c.change(leader, Op::Promote, b).status == MetadataProposeStatus::Refused);
    CHECK(c.change(leader, Op::AddLearner, b).status == MetadataProposeStatus::Refused);
    CHECK(c.change(leader, Op::Remove, a).status == MetadataProposeStatus::Refused);
    // Not in the node table.
    std::optional<MembershipResult> unknown;
    c.nodes[leader]->add_learner("n9", [&](const MembershipResult& r) { unknown = r; });
    REQUIRE(unknown);
    CHECK(unknown->status == MetadataProposeStatus::InvalidEntry);
    CHECK(unknown->detail.find("unknown node id \"n9\"") != std::string::npos);
    // The way to add it is one an operator can take (POST /members takes no addresses).
    CHECK(unknown->detail.find("conclaved --join") != std::string::npos);
    CHECK(unknown->detail.find("POST /members") == std::string::npos);
    // A follower answers NotLeader with the leader.
    const MembershipResult follower = c.change(b, Op::AddLearner, a);
    CHECK(follower.status == MetadataProposeStatus::NotLeader);
    CHECK(follower.leader == id_of(leader));
    c.stop_all();
}

TEST_CASE("membership: POST and GET /members, /status", "[node][membership][http]") {
    MemberCluster c;
    const std::size_t leader = c.start_and_elect();
    const std::size_t follower = (leader + 1) % 3;
    const std::size_t target = (leader + 2) % 3;
    const std::string token = MemberCluster::kToken;
    const auto post = [&](std::size_t at, const std::string& body, const std::string& auth) {
        return request(c.io, c.http_port(at), http::verb::post, "/members", body, auth);
    };
    const std::string remove_target = R"({"op": "remove", "id": ")" + id_of(target) + R"("})";

    CHECK(post(leader, remove_target, "").status == 401);
    CHECK(post(leader, remove_target, "wrong-token-wrong-token-wrong-token!").status == 401);
    {
        const HttpResult r = post(follower, remove_target, token);
        CHECK(r.status == 307);
        CHECK(r.location == "http://127.0.0.1:" + std::to_string(c.http_port(leader)) + "/members");
        CHECK(r.body.at("leader") == id_of(leader));
    }
    for (const std::string& bad :
         {std::string("not json"), std::string("[1]"), std::string(R"({"op": "remove"})"),
          std::string(R"({"op": "join", "id": "n1"})"), std::string(R"({"op": 1, "id": "n1"})"),
          std::string(R"({"op": "remove", "id": "n1", "extra": 1})"),
          std::string(R"({"op": "remove", "id": "n9"})")}) {
        INFO(bad);
        const HttpResult r = post(leader, bad, token);
        CHECK(r.status == 400);
        CHECK(r.body.at("error") == "bad_request");
    }
    CHECK(post(leader, R"({"op": "remove", "id": "n9"})", token)
              .body.at("detail")
              .get<std::string>()
              .find("unknown node id") != std::string::npos);
    {
        const HttpResult r =
            post(leader, R"({"op": "promote", "id": ")" + id_of(target) + R"("})", token);
        CHECK(r.status == 409);
        CHECK(r.body.at("error") == "refused");
    }
    {
        const HttpResult r = post(leader, remove_target, token);
        REQUIRE(r.status == 200);
        CHECK(r.body.at("version") == 1);
    }
    {
        // Reads of data need the token by default (admin.open_reads false); /healthz does not.
        CHECK(request(c.io, c.http_port(leader), http::verb::get, "/members").status == 401);
        CHECK(request(c.io, c.http_port(leader), http::verb::get, "/healthz").status == 200);
        const HttpResult r =
            request(c.io, c.http_port(leader), http::verb::get, "/members", "", token);
        REQUIRE(r.status == 200);
        CHECK(r.body.at("version") == 1);
        CHECK(r.body.at("from_entry") == true);
        CHECK(r.body.at("pending_change") == false);
        REQUIRE(r.body.at("members").size() == 2);
        for (const auto& m : r.body.at("members")) {
            CHECK(m.at("role") == "voter");
            CHECK(m.at("peer").is_string());
            CHECK(m.at("http").is_string());
            CHECK(m.at("catch_up").at("acknowledged_len").is_number());
            CHECK(m.at("catch_up").at("lag_entries").is_number());
            CHECK(m.at("catch_up").at("connected") == true);
        }
    }
    REQUIRE(c.all_at(1));
    {
        const HttpResult r =
            request(c.io, c.http_port(follower), http::verb::get, "/members", "", token);
        REQUIRE(r.status == 200);
        CHECK(r.body.at("version") == 1);
        CHECK_FALSE(r.body.contains("pending_change"));
        CHECK_FALSE(r.body.at("members").at(0).contains("catch_up"));
        CHECK(request(c.io, c.http_port(follower), http::verb::get, "/members?x=1", "", token)
                  .status == 400);
    }
    {
        const HttpResult r =
            request(c.io, c.http_port(target), http::verb::get, "/status", "", token);
        REQUIRE(r.status == 200);
        CHECK(r.body.at("membership") ==
              json({{"version", 1}, {"from_entry", true}, {"role", "removed"}}));
    }
    {
        // The change just made again: not a member any more.
        const HttpResult r = post(leader, remove_target, token);
        CHECK(r.status == 409);
        CHECK(r.body.at("detail").get<std::string>().find("is not a member") != std::string::npos);
    }
    c.stop_all();
}

TEST_CASE("membership §8: a new node joins through a seed, is promoted, replaces a voter",
          "[node][membership][join]") {
    MemberCluster c;
    const std::size_t leader = c.start_and_elect();
    const std::size_t replaced = (leader + 1) % 3;
    const std::size_t seed = (leader + 2) % 3;  // a follower: the join is redirected
    c.commit("before", "1");

    // n4's config knows only itself; it joins through the seed's peer address.
    const ClusterConfig config = c.joiner_config("n4");
    const auto join = [&] { return c.join(config, seed); };
    REQUIRE_FALSE(join());
    // The answer was lost (here: the stored table): asking again changes nothing and answers.
    const auto table_file = config.data_dir / conclave::node::kNodeTableFile;
    REQUIRE(std::filesystem::exists(table_file));
    std::filesystem::remove(table_file);
    REQUIRE_FALSE(join());
    REQUIRE(std::filesystem::exists(table_file));
    const MembersView v1 = c.nodes[leader]->members();
    CHECK(v1.version == 1);
    CHECK(ids_with(v1, MemberRole::Learner) == std::vector<std::string>{"n4"});
    REQUIRE(c.all_at(1));
    for (auto& n : c.nodes) {
        CHECK(n->config().nodes.size() == 4);  // every member's table grew
        CHECK(n->metrics_text().find("conclave_peer_up{peer=\"n4\"}") != std::string::npos);
    }

    // n4 starts from the stored table (R9), as a learner, and catches up.
    c.start(3, config);
    CHECK(c.nodes[3]->config().nodes.size() == 4);
    REQUIRE(c.caught_up(leader, 3));
    REQUIRE(c.promote(leader, 3));

    // The replaced node is removed: 3 voters again, n4 among them; writes commit.
    REQUIRE(c.settle(leader, conclave::admin::MembershipOp::Remove, replaced));
    c.stop(replaced);
    REQUIRE(c.all_at(3));
    const MembersView v3 = c.nodes[leader]->members();
    CHECK(ids_with(v3, MemberRole::Voter).size() == 3);
    CHECK(c.nodes[3]->status().membership->role == "voter");
    c.commit("after", "2");
    REQUIRE(run_cluster_until(c.io, [&] {
        return !c.nodes[3]->committed_after(conclave::replication::kNoLsn, 100).empty() &&
               c.nodes[3]->commit_lsn() == c.nodes[leader]->commit_lsn();
    }));
    // An original member restarts from its stored table (R9), not its config file's 3 nodes.
    c.stop(seed);
    c.start(seed);
    CHECK(c.nodes[seed]->config().nodes.size() == 4);
    REQUIRE(c.all_at(3));
    c.commit("restarted", "3");
    // The removed node's connections are closed for good (R8, once it knows).
    REQUIRE(run_cluster_until(c.io, [&] {
        const auto peers = c.nodes[leader]->status().peers;
        return peers.size() == 2 && std::none_of(peers.begin(), peers.end(), [&](const auto& p) {
                   return p.id == id_of(replaced);
               });
    }));
}

// With compaction: a learner joining a compacted log catches up from the
// snapshot; a member that was down while the node table grew and the log compacted past the
// configuration that grew it learns the new node from the snapshot it installs (it restarts
// with its config file's three nodes and no stored table).
TEST_CASE("membership §8: a joiner and a member that was away catch up from snapshots",
          "[node][membership][join]") {
    MemberCluster c(R"({"fsync": "batched", "propose_timeout_ms": 3000, "compact_threshold": 20,
                        "compact_retain": 5})");
    const std::size_t leader = c.start_and_elect();
    const std::size_t away = (leader + 1) % 3;
    const std::size_t seed = (leader + 2) % 3;
    c.stop(away);
    // Writes over 4 keys: the log compacts every 20 entries.
    const auto write = [&](int from, int to) {
        for (int k = from; k < to; ++k) {
            INFO(k);
            c.commit("key" + std::to_string(k % 4), std::to_string(k));
        }
    };
    const auto map_of = [&](std::size_t i) {
        std::map<std::string, std::string> map;
        for (const Entry& e : c.seen[i]) {
            map[e.key] = e.value;
        }
        return map;
    };
    write(0, 60);
    const auto& log = c.nodes[leader]->log_driver()->log();
    REQUIRE(log.counters().compactions > 0);
    REQUIRE(log.snapshot().len > 0);

    // n4 joins while n-away is down (the leader and the seed commit the change), starts, and
    // catches up: what was compacted reaches it as a snapshot.
    const ClusterConfig config = c.joiner_config("n4");
    REQUIRE_FALSE(c.join(config, seed));
    c.start(3, config);
    REQUIRE(c.caught_up(leader, 3));
    CHECK(c.nodes[3]->log_driver()->log().counters().snapshots_installed >= 1);
    CHECK(c.nodes[3]->status().membership->role == "learner");
    REQUIRE(run_cluster_until(c.io, [&] { return map_of(3) == map_of(leader); }));

    // More writes fold the configuration that added n4 into the snapshot.
    write(60, 120);
    REQUIRE(c.nodes[leader]->log_driver()->log().snapshot().len > 0);
    c.start(away);
    CHECK(c.nodes[away]->config().nodes.size() == 3);  // its config file's table
    REQUIRE(run_cluster_until(
        c.io, [&] { return c.nodes[away]->log_driver()->log().commit_lsn() == log.commit_lsn(); }));
    CHECK(c.nodes[away]->log_driver()->log().counters().snapshots_installed >= 1);
    REQUIRE(c.all_at(1));
    CHECK(c.nodes[away]->config().nodes.size() == 4);  // grown from the snapshot's configuration
    CHECK(
        std::filesystem::exists(c.nodes[away]->config().data_dir / conclave::node::kNodeTableFile));
    // It connects to n4 (it dials the node of the highest index), and n4 to it.
    const auto connected = [&](std::size_t from, const std::string& to) {
        const auto peers = c.nodes[from]->status().peers;
        return std::any_of(peers.begin(), peers.end(),
                           [&](const auto& p) { return p.id == to && p.up; });
    };
    REQUIRE(run_cluster_until(c.io,
                              [&] { return connected(away, "n4") && connected(3, id_of(away)); }));
    REQUIRE(run_cluster_until(c.io, [&] { return map_of(away) == map_of(leader); }));
    c.stop_all();
}

// A removed node comes back after a node joined since it left (docs/membership.md §8): its table
// is older than the cluster's, and the leader, which joined after the removal, knows it only by
// index (placeholder addresses; it never dials it: the lower index of a pair dials). Added back
// over POST /members it would never hear from that leader. It restarts with --join instead:
// its members.json marks it removed, so the join is not skipped; the leader adds it back at the
// addresses it asks with, and answers with the current table.
TEST_CASE(
    "membership §8: a removed node rejoins after the table grew, under a leader that joined "
    "later",
    "[node][membership][join]") {
    MemberCluster c;
    const std::size_t leader = c.start_and_elect();
    const std::size_t removed = (leader + 1) % 3;
    const std::size_t seed = (leader + 2) % 3;
    REQUIRE(c.settle(leader, Op::Remove, removed));
    REQUIRE(run_cluster_until(
        c.io, [&] { return c.nodes[removed]->status().membership->role == "removed"; }));
    const auto data_dir = c.nodes[removed]->config().data_dir;
    const auto marked = conclave::node::load_node_table(data_dir);
    REQUIRE(marked);
    CHECK(marked->removed.at(removed));  // members.json says so: --join will not be skipped
    c.stop(removed);

    // n4 joins, is promoted and becomes the leader.
    const ClusterConfig n4 = c.joiner_config("n4");
    REQUIRE_FALSE(c.join(n4, seed));
    c.start(3, n4);
    REQUIRE(c.caught_up(leader, 3));
    REQUIRE(c.promote(leader, 3));
    REQUIRE(c.all_at(3));  // n4 knows it votes: a named successor that does not never stands
    REQUIRE_FALSE(c.nodes[leader]->transfer_leadership("n4"));
    REQUIRE(run_cluster_until(c.io, [&] {
        return c.nodes[3]->status().log && c.nodes[3]->status().log->leader_status == "active";
    }));
    CHECK(conclave::node::is_placeholder(c.nodes[3]->config().nodes.at(removed)));
    // Adding it back by id alone is refused here (it could never hear from this leader).
    const MembershipResult by_id = c.change(3, Op::AddLearner, removed);
    CHECK(by_id.status == conclave::admin::MetadataProposeStatus::Refused);
    CHECK_THAT(by_id.detail, Catch::Contains("conclaved --join"));

    // The removed node rejoins through the seed (redirected to n4), with its old data directory.
    auto parsed = conclave::node::parse_cluster_config(c.config_text, id_of(removed));
    REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
    const ClusterConfig back = std::get<ClusterConfig>(parsed);
    REQUIRE_FALSE(c.join(back, seed));
    c.start(removed);
    CHECK(c.nodes[removed]->config().nodes.size() == 4);  // the table the answer brought
    REQUIRE(c.caught_up(3, removed));
    for (const std::size_t i : {leader, seed, std::size_t{3}}) {
        CHECK(c.nodes[i]->config().nodes.at(removed) == back.self_entry());  // addresses learnt
    }
    REQUIRE(c.promote(3, removed));
    REQUIRE(c.all_at(5));  // remove, add n4, promote n4, add back, promote
    CHECK(ids_with(c.nodes[3]->members(), MemberRole::Voter).size() == 4);
    c.commit("back", "1");
    REQUIRE(run_cluster_until(
        c.io, [&] { return c.nodes[removed]->commit_lsn() == c.nodes[3]->commit_lsn(); }));
    c.stop_all();
}
