// SPDX-License-Identifier: Apache-2.0
// The replicated log in the simulator (SimOptions::log / RunOptions::log): replay, the workload,
// liveness at the end of a run, the trace, and proof that the log checks bite (planted bugs).
// The seeded batches with the log are in seeds_test.cpp ([log], [log-five-nodes]).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "conclave/core/enum_names.hpp"
#include "conclave/sim/run.hpp"
#include "conclave/sim/simulator.hpp"
#include "conclave/sim/stability.hpp"

using namespace conclave;
using namespace conclave::sim;
using replication::PlantedLogBug;

namespace {

RunOptions log_run(std::uint64_t seed) {
    RunOptions o;
    o.seed = seed;
    o.log = true;
    return o;
}

/// Runs seeds 1..max_seeds until one violates; returns the violation and its seed.
std::optional<std::pair<Violation, std::uint64_t>> first_log_violation(RunOptions o,
                                                                       std::uint64_t max_seeds) {
    for (std::uint64_t seed = 1; seed <= max_seeds; ++seed) {
        o.seed = seed;
        const RunResult r = run_seed(o);
        if (r.violation) {
            return std::pair{*r.violation, seed};
        }
    }
    return std::nullopt;
}

FaultMix mix(std::string_view list) {
    std::string error;
    return *FaultMix::parse(list, &error);
}

}  // namespace

TEST_CASE("log: a seed replays bit for bit; the log takes part in the fingerprint", "[log]") {
    const RunResult first = run_seed(log_run(77));
    const RunResult second = run_seed(log_run(77));
    REQUIRE_FALSE(first.violation);
    CHECK(first.fingerprint == second.fingerprint);
    CHECK(first.stats.events == second.stats.events);
    CHECK(first.stats.log_steps == second.stats.log_steps);
    CHECK(first.log_committed == second.log_committed);
    CHECK(first.log_acked == second.log_acked);
    CHECK(run_seed(log_run(78)).fingerprint != first.fingerprint);
    RunOptions without = log_run(77);
    without.log = false;
    const RunResult plain = run_seed(without);
    CHECK(plain.fingerprint != first.fingerprint);
    CHECK(plain.stats.log_steps == 0);
    CHECK(plain.log_committed == 0);
}

TEST_CASE("log: the replay command carries the log switches", "[log]") {
    RunOptions o = log_run(5);
    CHECK(replay_command("conclave-sim", o) ==
          "conclave-sim --seed 5 --nodes 3 --faults all --episodes 4 --duration 6000 --log");
    o.log_bug = PlantedLogBug::CommitWithoutQuorum;
    o.log_history.check_durable_quorum = false;
    CHECK(replay_command("conclave-sim", o) ==
          "conclave-sim --seed 5 --nodes 3 --faults all --episodes 4 --duration 6000 --log "
          "--log-bug commit-without-quorum --no-durable-check");
    CHECK(parse_enum<PlantedLogBug>("skip-sync") == PlantedLogBug::SkipSync);
    CHECK(parse_enum<PlantedLogBug>("commit-without-quorum") == PlantedLogBug::CommitWithoutQuorum);
    CHECK_FALSE(parse_enum<PlantedLogBug>("skip_sync"));
}

TEST_CASE("log: without faults, client proposals commit and every log converges", "[log]") {
    RunOptions o = log_run(3);
    o.faults = FaultMix{};
    const RunResult r = run_seed(o);
    REQUIRE_FALSE(r.violation);
    CHECK(r.log_acked > 100);
    CHECK(r.log_committed > r.log_acked);  // plus the sync points
    CHECK(r.stats.proposals_refused > 0);  // requests that reached followers
    CHECK(r.stats.proposals_unknown == 0);
    CHECK(r.stats.log_flushes > 0);
    CHECK(r.stats.log_messages_dropped == 0);
    REQUIRE(r.log_converged_after);
    CHECK(*r.log_converged_after <= r.log_bound);
}

TEST_CASE("log: a client request to the leader commits; to a follower it is refused", "[log]") {
    SimOptions so;
    so.seed = 11;
    so.log = true;
    so.log_options.propose_interval_max_ms = 0;  // no workload: only the requests below
    Simulator sim(so);
    sim.start_all();
    REQUIRE(sim.run_until(Millis{3000}));
    const auto leader = agreed_leader(sim);
    REQUIRE(leader);
    const NodeId follower{static_cast<std::uint16_t>((leader->value + 1) % 3)};
    CHECK_FALSE(sim.propose_now(follower));
    CHECK(sim.stats().proposals_refused == 1);
    const auto lsn = sim.propose_now(*leader);
    REQUIRE(lsn);
    CHECK(lsn->term == sim.state(*leader)->term);
    CHECK_FALSE(sim.log_history().acknowledged(*lsn));
    REQUIRE(sim.run_until(sim.now() + Millis{100}));
    CHECK(sim.log_history().acknowledged(*lsn));
    CHECK(sim.stats().proposals_acked == 1);
    REQUIRE(sim.run_until(sim.now() + Millis{200}));  // followers learn the commit point
    CHECK_FALSE(sim.log_history().converged(sim.logs()).has_value());
    // Sync points of the terms so far, then the one entry.
    CHECK(sim.log_history().history().back().lsn == *lsn);
}

TEST_CASE("log: the trace has one line per log step", "[log]") {
    std::ostringstream trace;
    RunOptions o = log_run(9);
    o.faults = FaultMix{};
    o.fault_window = Millis{1000};
    o.tail = Millis{1000};
    o.trace = &trace;
    const RunResult r = run_seed(o);
    REQUIRE_FALSE(r.violation);
    std::istringstream lines(trace.str());
    std::string line;
    std::uint64_t log_lines = 0;
    std::uint64_t meta_lines = 0;
    while (std::getline(lines, line)) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j["kind"] == "log-meta") {
            // A deferred commit point, where its write completed (durable from here on).
            ++meta_lines;
            CHECK(j.contains("commit"));
            CHECK(j.contains("term"));
        }
        if (j["kind"] == "log") {
            ++log_lines;
            CHECK(j.contains("input"));
            CHECK(j.contains("role"));
            CHECK(j.contains("commit"));
            CHECK(j["actions"].is_array());
        }
    }
    CHECK(log_lines == r.stats.log_steps);
    CHECK(meta_lines == r.stats.meta_writes_deferred);
    CHECK(meta_lines > 0);
    // Tracing does not change the run.
    o.trace = nullptr;
    CHECK(run_seed(o).fingerprint == r.fingerprint);
}

TEST_CASE("log: bad log options are refused, naming the field", "[log]") {
    SimOptions so;
    so.log = true;
    so.log_options.config.max_batch_entries = 0;
    REQUIRE_THROWS_WITH(Simulator(so), Catch::Contains("max_batch_entries"));
    so = SimOptions{};
    so.log = true;
    so.log_options.client_latency_max_ms = 0;
    REQUIRE_THROWS_WITH(Simulator(so), Catch::Contains("client_latency_max_ms"));
}

TEST_CASE("simulator catches a log that commits without a quorum", "[planted][log]") {
    RunOptions o = log_run(1);
    o.log_bug = PlantedLogBug::CommitWithoutQuorum;
    SECTION("at once: the committed entry is durable on one node only") {
        const RunResult r = run_seed(o);
        REQUIRE(r.violation);
        CHECK(r.violation->kind == ViolationKind::LogNotDurable);
    }
    SECTION("through its consequences: a committed entry is replaced after a failover") {
        o.log_history.check_durable_quorum = false;
        o.faults = mix("crash,partition,asym,cut");
        o.episodes = 8;
        const auto v = first_log_violation(o, 30);
        REQUIRE(v);
        INFO("seed " << v->second << ": " << v->first.detail);
        CHECK((v->first.kind == ViolationKind::LogDivergence ||
               v->first.kind == ViolationKind::LogAckLost ||
               v->first.kind == ViolationKind::LogLeaderIncomplete ||
               v->first.kind == ViolationKind::LogCoreCheck ||
               v->first.kind == ViolationKind::LogAlarm));
    }
}

TEST_CASE("simulator catches a log that compacts past its commit point", "[planted][log]") {
    // The snapshot folds durable but uncommitted entries: the history check (a snapshot must be
    // the committed state up to it) finds it, before the core's own check_invariants would;
    // when the folded entries are committed elsewhere already, the history holds them and only
    // the core's check (the snapshot covers entries it has not committed) remains.
    RunOptions o = log_run(1);
    o.log_compact = 8;
    o.log_bug = PlantedLogBug::CompactUncommitted;
    std::uint64_t by_history = 0;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        o.seed = seed;
        const RunResult r = run_seed(o);
        REQUIRE(r.violation);
        INFO("seed " << seed << ": " << r.violation->detail);
        CHECK((r.violation->kind == ViolationKind::LogDivergence ||
               r.violation->kind == ViolationKind::LogCoreCheck));
        CHECK_THAT(r.violation->detail, Catch::Contains("snapshot"));
        by_history += r.violation->kind == ViolationKind::LogDivergence ? 1U : 0U;
    }
    CHECK(by_history > 0);
    CHECK(parse_enum<PlantedLogBug>("compact-uncommitted") == PlantedLogBug::CompactUncommitted);
    o.log_bug = PlantedLogBug::None;
    CHECK(replay_command("conclave-sim", o).find("--log-compact 8") != std::string::npos);
}

TEST_CASE("simulator catches a leader that serves without syncing", "[planted][log]") {
    RunOptions o = log_run(1);
    o.log_bug = PlantedLogBug::SkipSync;
    o.faults = mix("crash,partition,asym,cut");
    o.episodes = 8;
    const auto v = first_log_violation(o, 40);
    REQUIRE(v);
    INFO("seed " << v->second << ": " << v->first.detail);
    // A stale leader's sync point makes a follower truncate committed entries (the core's own
    // check fires), or the stale leader's log diverges from the committed history.
    CHECK((v->first.kind == ViolationKind::LogCoreCheck ||
           v->first.kind == ViolationKind::LogAlarm ||
           v->first.kind == ViolationKind::LogDivergence ||
           v->first.kind == ViolationKind::LogLeaderIncomplete ||
           v->first.kind == ViolationKind::LogNotDurable));
}

// `conclaved --repair`: a crashed node's log loses its last entries (a corrupt tail cut
// by the repair) and carries the repaired marker. The correct log never counts such a node
// towards a sync or commit quorum until it has caught up from a leader of a newer term; the
// planted CountRepaired treats it as an ordinary node, which lets a new leader adopt a log that
// lacks acknowledged entries. 5 nodes: a commit there may rest on an acknowledgement whose copy a
// repair then destroyed, which the leader must stop counting once it is told of the crash
// (ReplicatedLog::peer_down; replication/README.md, "Acknowledged on a majority").
TEST_CASE("simulator catches a repaired node counted towards a quorum", "[planted][log][repair]") {
    RunOptions o = log_run(1);
    o.nodes = 5;
    o.faults = mix("crash,partition,repair");
    o.episodes = 16;
    o.log_bug = PlantedLogBug::CountRepaired;
    const auto v = first_log_violation(o, 80);
    REQUIRE(v);
    INFO("seed " << v->second << ": " << v->first.detail);
    // A committed (acknowledged) entry replaced at its index, or a follower told to truncate one.
    CHECK((v->first.kind == ViolationKind::LogAckLost ||
           v->first.kind == ViolationKind::LogDivergence ||
           v->first.kind == ViolationKind::LogLeaderIncomplete ||
           v->first.kind == ViolationKind::LogCoreCheck ||
           v->first.kind == ViolationKind::LogAlarm));
    CHECK(parse_enum<PlantedLogBug>("count-repaired") == PlantedLogBug::CountRepaired);
    // The same seeds with the correct log: no violation, and the repairs did happen.
    o.log_bug = PlantedLogBug::None;
    std::uint64_t repairs = 0;
#ifdef SIM_TEST_LIGHT
    const std::uint64_t first_seed = v->second > 4 ? v->second - 4 : 1;  // unoptimised builds
#else
    const std::uint64_t first_seed = 1;
#endif
    for (std::uint64_t seed = first_seed; seed <= v->second; ++seed) {
        o.seed = seed;
        const RunResult r = run_seed(o);
        INFO("seed " << seed << ": " << (r.violation ? r.violation->detail : std::string()));
        CHECK_FALSE(r.violation);
        repairs += r.stats.log_repairs;
    }
    CHECK(repairs > 0);
    CHECK(replay_command("conclave-sim", o).find("--faults partition,crash,repair") !=
          std::string::npos);
}
