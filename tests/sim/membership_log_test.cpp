// SPDX-License-Identifier: Apache-2.0
// Membership through the real log core: configuration entries proposed with
// propose_config on the ACTIVE leader, the log's NotifyMembership handed to each node's elector
// (Simulator's LogEnv::membership -> set_voters), under faults, with the elector's and the log's
// invariants checked after every step (sim/include/conclave/sim/membership.hpp,
// run_log_membership_seed). The planted IgnoreConfigVersion (no version fence) must be caught.
#include <catch2/catch.hpp>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "conclave/codec/membership_codec.hpp"
#include "conclave/sim/membership.hpp"

using namespace conclave;
using namespace conclave::sim;

namespace {

#ifdef SIM_TEST_LIGHT
constexpr std::uint64_t kLogSeeds = 12;  // sanitizer builds check memory safety, not volume
// The planted bug's seeds: a window holding seed 77, the one of seeds 1-150 that catches it (the
// trajectories depend on the elector's and the log core's rules, the lease's promise among them,
// and on the run's shape: re-measure after changing them).
constexpr std::uint64_t kPlantedFirstSeed = 71;
#else
constexpr std::uint64_t kLogSeeds = 150;  // ~2-3 s per test case in release
constexpr std::uint64_t kPlantedFirstSeed = 1;
#endif

/// log_membership_options with the commit point written at once (--no-defer-meta), for the planted
/// bug's test: its seed windows above were measured on those trajectories, where the bug is caught
/// more often. With the deferred commit point (the simulator's default, and the other tests') the
/// planted bug is caught in 4 of seeds 1-1000 (first: seed 226, none in 1-150).
MembershipRunOptions log_membership_options_at_once(std::uint64_t seed) {
    MembershipRunOptions o = log_membership_options(seed);
    o.defer_meta = false;
    return o;
}

}  // namespace

TEST_CASE("membership through the log: changes commit and reach every elector, no faults",
          "[membership-log-quick]") {
    MembershipRunOptions o = log_membership_options(5);
    o.episodes = 0;
    const MembershipRunResult r = run_log_membership_seed(o);
    INFO((r.violation ? r.violation->detail : std::string()) << " " << r.end_state);
    REQUIRE_FALSE(r.violation);
    CHECK(r.committed_version == o.changes);  // C0, then every change committed
    CHECK(r.config_proposals == o.changes + 1);
    // Each change reaches every member's elector (a removed node hears of its removal, R8).
    CHECK(r.stats.config_notices >= 4 * o.changes);
    CHECK(r.stats.config_notices_stale == 0);
    CHECK(r.leader_at_end.has_value());
    CHECK(r.fresh_committed);
    // The same seed replays bit for bit.
    const MembershipRunResult again = run_log_membership_seed(o);
    CHECK(again.stats.events == r.stats.events);
    CHECK(again.stats.log_steps == r.stats.log_steps);
    CHECK(again.end_state == r.end_state);
    // The last node joined (it was in nobody's table), every other table grew to it, and it was
    // promoted.
    CHECK(r.joined_at.has_value());
    CHECK(r.stats.joins == 1);
    CHECK(r.stats.table_growths == 3);
    CHECK(r.joiner_promotions >= 1);
}

TEST_CASE("membership through the log: a node joins with a new id, no faults",
          "[membership-log-quick]") {
    MembershipRunOptions o = log_membership_options(8);
    o.episodes = 0;
    o.changes = 3;  // C0; add the new node as a learner (the table grows); promote it
    const MembershipRunResult r = run_log_membership_seed(o);
    INFO((r.violation ? r.violation->detail : std::string()) << " " << r.end_state);
    REQUIRE_FALSE(r.violation);
    CHECK(r.committed_version == 3);
    REQUIRE(r.joined_at.has_value());
    CHECK(r.stats.table_growths == 3);  // nodes 0-2 (node 3 starts with the whole table)
    CHECK(r.joiner_promotions == 1);
    CHECK(r.leader_at_end.has_value());
    CHECK(r.fresh_committed);
    // Without the joiner nothing grows and nobody joins.
    o.joiner = false;
    const MembershipRunResult plain = run_log_membership_seed(o);
    REQUIRE_FALSE(plain.violation);
    CHECK_FALSE(plain.joined_at.has_value());
    CHECK(plain.stats.table_growths == 0);
    CHECK(plain.stats.messages_outside_table == 0);
}

// The node-table check bites: a driver that grows the log's table but not the elector's.
TEST_CASE("membership through the log: an elector whose table does not grow is caught",
          "[membership-log-quick]") {
    MembershipRunOptions o = log_membership_options(8);
    o.episodes = 0;
    o.skip_elector_growth = true;
    const MembershipRunResult r = run_log_membership_seed(o);
    REQUIRE(r.violation);
    CHECK(r.violation->kind == ViolationKind::NodeTable);
    CHECK_THAT(r.violation->detail, Catch::Contains("its elector's 3, its log core's 4"));
}

// The simulator by hand: the node outside the initial table is not started, messages to it are
// dropped as outside the table, and join() refuses it until a table names it.
TEST_CASE("membership through the log: a node outside every table is not reached",
          "[membership-log-quick]") {
    SimOptions so;
    so.nodes = 4;
    so.initial_table = 3;
    so.seed = 3;
    so.elector = elector::Config::fast(4, NodeId{0});
    so.log = true;
    so.log_options.config.decode_configuration = &codec::decode_configuration;
    Simulator sim(so);
    sim.start_all();
    REQUIRE(sim.run_until(Millis{1000}));
    CHECK_FALSE(sim.alive(NodeId{3}));
    CHECK(sim.table_size(NodeId{3}) == 0);
    for (std::uint16_t n = 0; n < 3; ++n) {
        CHECK(sim.table_size(NodeId{n}) == 3);
        CHECK_FALSE(sim.connected(NodeId{n}, NodeId{3}));
    }
    CHECK(sim.stats().messages_outside_table == 0);  // nobody knows node 3: nobody sends to it
    CHECK_FALSE(sim.join(NodeId{3}, 3, NodeSet::first(3), 1));  // a table without it
    // Joined by hand (no configuration names it yet): its messages to the others are dropped,
    // as no mesh of theirs has it.
    REQUIRE(sim.join(NodeId{3}, 4, NodeSet::first(3), 1));
    CHECK(sim.alive(NodeId{3}));
    CHECK_FALSE(sim.join(NodeId{3}, 4, NodeSet::first(3), 1));  // once
    REQUIRE(sim.run_until(Millis{2000}));
    CHECK_FALSE(sim.connected(NodeId{0}, NodeId{3}));
    CHECK(sim.state(NodeId{3})->config_version == 1);
    CHECK_FALSE(sim.state(NodeId{3})->voters.contains(NodeId{3}));
    // Crashed and restarted with no configuration in its log: its stored table and joining
    // configuration again (R9), not "every node votes".
    sim.apply(FaultAction{FaultKind::Crash, NodeId{3}, {}, 0, 0});
    CHECK_FALSE(sim.alive(NodeId{3}));
    sim.apply(FaultAction{FaultKind::Restart, NodeId{3}, {}, 0, 0});
    REQUIRE(sim.alive(NodeId{3}));
    CHECK(sim.stats().joiner_restarts_stored == 1);
    CHECK(sim.table_size(NodeId{3}) == 4);
    CHECK(sim.state(NodeId{3})->config_version == 1);
    CHECK(sim.state(NodeId{3})->voters == NodeSet::first(3));
    REQUIRE(sim.run_until(Millis{2500}));
}

TEST_CASE("membership through the log: the trace stays one JSON object per line",
          "[membership-log-quick]") {
    std::ostringstream trace;
    MembershipRunOptions o = log_membership_options(3);
    o.fault_window = Millis{1500};
    o.tail = Millis{500};
    o.trace = &trace;
    const MembershipRunResult r = run_log_membership_seed(o);
    REQUIRE_FALSE(r.violation);
    std::size_t set_voters = 0;
    std::size_t lines = 0;
    std::istringstream in(trace.str());
    for (std::string line; std::getline(in, line); ++lines) {
        const auto j = nlohmann::json::parse(line);  // throws if not JSON
        REQUIRE(j.contains("kind"));
        set_voters += j["kind"] == "step" && j["action"] == "SetVoters" ? 1U : 0U;
    }
    CHECK(lines > 100);
    CHECK(set_voters > 0);
}

TEST_CASE("membership through the log: voter-set changes under faults keep the invariants",
          "[.][membership-log]") {
    // Runs with a leader at the end, runs with the fresh entry committed, StaleConfig refusals,
    // committed versions (summed).
    std::uint64_t led = 0, fresh = 0, fenced = 0, versions = 0, behind_join = 0;
    for (std::uint64_t seed = 1; seed <= kLogSeeds; ++seed) {
        const MembershipRunResult r = run_log_membership_seed(log_membership_options(seed));
        INFO("seed " << seed << ": " << (r.violation ? r.violation->detail : std::string()) << " "
                     << r.end_state);
        REQUIRE_FALSE(r.violation);
        CHECK(r.stats.config_notices_stale == 0);
        led += r.leader_at_end ? 1U : 0U;
        fresh += r.fresh_committed ? 1U : 0U;
        fenced += r.stale_config_refusals;
        versions += r.committed_version;
        behind_join += r.stats.config_notices_behind_join;
    }
    // A joiner's log catching up from C0 may make a configuration older than the one it joined
    // with active on the way; its elector refuses it (counted apart from a log that went back).
    WARN("configurations older than the joiner's, refused by its elector: " << behind_join);
    // Liveness: 2 s after the last fault (and with no change requested after the faults) every
    // run has a leader followed by a majority of its voters, and a fresh entry commits.
    CHECK(led == kLogSeeds);
    CHECK(fresh == kLogSeeds);
    // The runs do change configurations (most reach the 18th), and the fence does refuse.
    CHECK(versions >= kLogSeeds * 12);
    CHECK(fenced > 0);
}

TEST_CASE("membership through the log: without the version fence, a check fails",
          "[.][membership-log]") {
    std::uint64_t found = 0;
    std::uint64_t first = 0;
    for (std::uint64_t seed = kPlantedFirstSeed; seed < kPlantedFirstSeed + kLogSeeds; ++seed) {
        MembershipRunOptions o = log_membership_options_at_once(seed);
        o.planted_bug = elector::PlantedBug::IgnoreConfigVersion;
        const MembershipRunResult r = run_log_membership_seed(o);
        if (r.violation) {
            found += 1;
            first = first == 0 ? seed : first;
        }
    }
    WARN("IgnoreConfigVersion through the log: caught in "
         << found << " of seeds " << kPlantedFirstSeed << "-" << kPlantedFirstSeed + kLogSeeds - 1
         << " (first: seed " << first << ")");
    CHECK(found > 0);
}

// Node-table growth (docs/membership.md §8): in every run the last node starts outside every
// table, joins once the configuration adding it (with the whole table) commits, and then takes
// part in the cycle. A window of other seeds than the test above.
TEST_CASE("membership through the log: the node table grows, a node joins, the checks hold",
          "[.][membership-log]") {
    std::uint64_t joined = 0, promoted = 0, growths = 0, live = 0, outside = 0, restarts = 0,
                  restarts_stored = 0;
    constexpr std::uint64_t kFirst = 1001;
    for (std::uint64_t seed = kFirst; seed < kFirst + kLogSeeds; ++seed) {
        const MembershipRunResult r = run_log_membership_seed(log_membership_options(seed));
        INFO("seed " << seed << ": " << (r.violation ? r.violation->detail : std::string()) << " "
                     << r.end_state);
        REQUIRE_FALSE(r.violation);
        CHECK(r.stats.config_notices_stale == 0);
        joined += r.joined_at ? 1U : 0U;
        promoted += r.joiner_promotions > 0 ? 1U : 0U;
        growths += r.stats.table_growths;
        live += r.leader_at_end && r.fresh_committed ? 1U : 0U;
        outside += r.stats.messages_outside_table;
        restarts += r.stats.joiner_restarts;
        restarts_stored += r.stats.joiner_restarts_stored;
    }
    WARN("node-table growth: joined in "
         << joined << ", promoted in " << promoted << " of " << kLogSeeds << " seeds; " << growths
         << " table growths, " << outside << " messages dropped outside the tables; "
         << "the new node restarted " << restarts << " times (" << restarts_stored
         << " with no configuration in its log)");
    CHECK(joined == kLogSeeds);
    CHECK(growths >= 3 * kLogSeeds);        // each of the three first nodes, at least once
    CHECK(promoted >= kLogSeeds * 9 / 10);  // the new node became a voter in most runs
    CHECK(live == kLogSeeds);
    CHECK(restarts > 0);         // R9 for the new node: it crashes and restarts from its own state
    CHECK(restarts_stored > 0);  // ... some before its log held a configuration
}

// docs/membership.md §7.4: under the committed rule, skipping R3 (a PASSIVE leader appends a
// change once its sync point is appended, before it commits) breaks nothing. TLC found no
// violation; neither does the simulator, with the bug exercised in nearly every run.
TEST_CASE("membership through the log: SkipOwnTermCommit is exercised and harmless",
          "[.][membership-log]") {
    std::uint64_t passive = 0;
    for (std::uint64_t seed = 1; seed <= kLogSeeds / 3; ++seed) {
        MembershipRunOptions o = log_membership_options(seed);
        o.log_bug = replication::PlantedLogBug::SkipOwnTermCommit;
        const MembershipRunResult r = run_log_membership_seed(o);
        INFO("seed " << seed << ": " << (r.violation ? r.violation->detail : std::string()));
        REQUIRE_FALSE(r.violation);
        passive += r.stats.config_proposals_passive;
    }
    CHECK(passive >= kLogSeeds / 3);  // the bug's path was taken (~2 per run)
}

// The durability check counts the voters of the configuration in effect: it must bite. A leader
// that commits with one acknowledgement fewer than a quorum is caught at once.
TEST_CASE("membership through the log: the voter-set durability check bites",
          "[membership-log-quick]") {
    MembershipRunOptions o = log_membership_options(1);
    o.log_bug = replication::PlantedLogBug::CommitWithoutQuorum;
    // Without the joiner: with it, the three first nodes' leader (quorum 2) commits its sync
    // point alone before C0, caught on the plain majority path (another test's business).
    o.joiner = false;
    const MembershipRunResult r = run_log_membership_seed(o);
    REQUIRE(r.violation);
    CHECK(r.violation->kind == ViolationKind::LogNotDurable);
    CHECK_THAT(r.violation->detail, Catch::Contains("voters of its configuration"));
}

namespace {

std::string config_json(std::uint64_t version, std::initializer_list<int> voters) {
    replication::Configuration c;
    c.version = version;
    for (int v : voters) {
        c.voters.push_back(replication::Member{std::to_string(v), "p", "h"});
    }
    return codec::encode_configuration(c);
}

// 3 nodes with the log and membership on; returns the ACTIVE leader once C0 committed.
std::optional<NodeId> bootstrapped(Simulator& sim) {
    sim.start_all();
    for (int i = 0; i < 200 && sim.run_until(sim.now() + Millis{10}); ++i) {
        for (std::uint16_t n = 0; n < sim.size(); ++n) {
            const replication::ReplicatedLog* log = sim.log(NodeId{n});
            if (log && log->can_propose() && log->active_config().from_entry) {
                return NodeId{n};
            }
            if (log && log->can_propose()) {
                sim.propose_config_now(NodeId{n}, config_json(0, {0, 1, 2}));
            }
        }
    }
    return std::nullopt;
}

SimOptions membership_log_sim() {
    SimOptions so;
    so.nodes = 3;
    so.seed = 11;
    so.elector = elector::Config::fast(3, NodeId{0});
    so.log = true;
    so.log_options.config.decode_configuration = &codec::decode_configuration;
    return so;
}

}  // namespace

// membership-refused bites: a driver that gave an elector a configuration its log never made
// active (version 1 with other voters) is caught when the log's own version 1 arrives.
TEST_CASE("membership through the log: an elector refusing its log's configuration is caught",
          "[membership-log-quick]") {
    for (const bool wrong : {false, true}) {
        Simulator sim(membership_log_sim());
        const std::optional<NodeId> leader = bootstrapped(sim);
        REQUIRE(leader);
        const NodeId follower{static_cast<std::uint16_t>((leader->value + 1) % 3)};
        const NodeId removed{static_cast<std::uint16_t>((leader->value + 2) % 3)};
        if (wrong) {  // the canary: version 1 = {leader, removed} given by hand
            NodeSet other;
            other.insert(*leader);
            other.insert(removed);
            REQUIRE(sim.set_voters(follower, other, 1));
        }
        REQUIRE(sim.propose_config_now(
            *leader, config_json(1, {static_cast<int>(leader->value), follower.value})));
        sim.run_until(sim.now() + Millis{500});
        if (wrong) {
            REQUIRE(sim.violation());
            CHECK(sim.violation()->kind == ViolationKind::MembershipRefused);
        } else {
            INFO((sim.violation() ? sim.violation()->detail : std::string()));
            REQUIRE_FALSE(sim.violation());
            CHECK(sim.state(follower)->config_version == 1);
            CHECK(sim.stats().config_notices >= 4);
        }
    }
}
