// SPDX-License-Identifier: Apache-2.0
// Storage faults of the log as simulator faults: bit flips in a stopped node's durable
// log (recovery refuses to start it; only the operator's repair brings it back) and slow storage
// (the asynchronous group commit with fsyncs slower than the elector's heartbeat tolerance).
// Each check is shown to bite: a planted silent repair and a planted early acknowledgement.
#include <catch2/catch.hpp>

#include <vector>

#include "conclave/sim/run.hpp"
#include "conclave/sim/simulator.hpp"

using namespace conclave;
using namespace conclave::sim;

namespace {

std::string violation_text(const Simulator& sim) {
    return sim.violation()
               ? std::string(to_string(sim.violation()->kind)) + ": " + sim.violation()->detail
               : std::string("no violation");
}

/// The live node with the longest log other than the leader (the leader would be replaced).
NodeId longest_follower(const Simulator& sim) {
    NodeId best{0};
    std::size_t best_len = 0;
    for (std::uint16_t i = 0; i < sim.size(); ++i) {
        const NodeId n{i};
        const auto* log = sim.log(n);
        if (log != nullptr && sim.state(n)->role != elector::Role::Leader &&
            log->end_len() >= best_len) {
            best = n;
            best_len = log->end_len();
        }
    }
    return best;
}

SimOptions flip_options(std::uint64_t seed) {
    SimOptions so;
    so.seed = seed;
    so.log = true;
    return so;
}

}  // namespace

TEST_CASE("bit flip: recovery refuses to start the node until the operator repairs it",
          "[storage-faults][bit-flip]") {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        INFO("seed " << seed);
        Simulator sim(flip_options(seed));
        sim.start_all();
        REQUIRE(sim.run_until(Millis{3000}));
        const NodeId victim = longest_follower(sim);
        REQUIRE(sim.log(victim)->end_len() >= 2);
        sim.apply(FaultAction{FaultKind::BitFlip, victim, {}, 0, 0});
        CHECK(sim.stats().bit_flips == 1);
        CHECK_FALSE(sim.alive(victim));
        REQUIRE(sim.run_until(Millis{3500}));
        // Every start is refused (a corrupt log is never silently repaired) ...
        sim.apply(FaultAction{FaultKind::Restart, victim, {}, 0, 0});
        sim.apply(FaultAction{FaultKind::HealAll, {}, {}, 0, 0});  // (repairs: see below)
        CHECK(sim.alive(victim));
        CHECK(sim.stats().starts_refused == 1);
        CHECK(sim.stats().flip_repairs == 1);  // ... HealAll is the operator's repair
        // The repaired node carries the marker until it holds a leader's log again; the two
        // others kept committing meanwhile, and nothing acknowledged is lost.
        const std::size_t acked = sim.log_history().acked();
        REQUIRE(sim.run_until(Millis{8000}));
        INFO(violation_text(sim));
        CHECK_FALSE(sim.violation());
        CHECK(sim.log_history().acked() > acked);
        sim.set_workload(false);
        REQUIRE(sim.run_until(Millis{10000}));
        const std::optional<Violation> diverged = sim.log_history().converged(sim.logs());
        INFO((diverged ? diverged->detail : std::string("converged")));
        CHECK_FALSE(diverged);
    }
}

TEST_CASE("bit flip: the operator's Repair fault restarts the node; a second flip waits",
          "[storage-faults][bit-flip]") {
    Simulator sim(flip_options(11));
    sim.start_all();
    REQUIRE(sim.run_until(Millis{3000}));
    const NodeId victim = longest_follower(sim);
    const NodeId other{static_cast<std::uint16_t>((victim.value + 1) % 3)};
    sim.apply(FaultAction{FaultKind::BitFlip, victim, {}, 0, 0});
    // Damage stays a minority: a second node's flip is not applied while the first is out.
    sim.apply(FaultAction{FaultKind::BitFlip, other, {}, 0, 0});
    CHECK(sim.stats().bit_flips == 1);
    CHECK(sim.stats().bit_flips_skipped == 1);
    CHECK(sim.alive(other));
    sim.apply(FaultAction{FaultKind::Restart, victim, {}, 0, 0});
    CHECK_FALSE(sim.alive(victim));
    sim.apply(FaultAction{FaultKind::Repair, victim, {}, 0, 0});
    CHECK(sim.alive(victim));
    REQUIRE(sim.log(victim) != nullptr);
    CHECK(sim.log(victim)->repaired().has_value());
    REQUIRE(sim.run_until(Millis{9000}));
    INFO(violation_text(sim));
    CHECK_FALSE(sim.violation());
}

// The canary: a recovery that truncates at the flip and starts the node as a voter, without the
// marker. Caught at the restart (log-truncated); the same seeds pass with the refusal.
TEST_CASE("bit flip: a planted silent repair is caught", "[storage-faults][bit-flip][planted]") {
    SimOptions so = flip_options(1);
    so.storage_bug = StorageBug::SilentRepair;
    Simulator sim(so);
    sim.start_all();
    REQUIRE(sim.run_until(Millis{3000}));
    const NodeId victim = longest_follower(sim);
    sim.apply(FaultAction{FaultKind::BitFlip, victim, {}, 0, 0});
    sim.apply(FaultAction{FaultKind::Restart, victim, {}, 0, 0});
    CHECK(sim.stats().silent_repairs == 1);
    REQUIRE(sim.violation());
    CHECK(sim.violation()->kind == ViolationKind::LogTruncated);

    // Random schedules (--storage-faults draws a flip in one seed of two).
    RunOptions o;
    o.log = true;
    o.storage_faults = true;
    o.storage_bug = StorageBug::SilentRepair;
    std::uint64_t caught = 0;
    std::uint64_t repaired = 0;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        o.seed = seed;
        const RunResult r = run_seed(o);
        repaired += r.stats.silent_repairs;
        if (r.violation) {
            INFO("seed " << seed << ": " << r.violation->detail);
            CHECK(r.violation->kind == ViolationKind::LogTruncated);
            ++caught;
        }
    }
    CHECK(repaired > 0);
    CHECK(caught >= 5);
    // The same seeds, recovery refusing: clean.
    o.storage_bug = StorageBug::None;
    std::vector<std::uint64_t> failing;
    for (o.seed = 1; o.seed <= 20; ++o.seed) {
        if (run_seed(o).violation) {
            failing.push_back(o.seed);
        }
    }
    CHECK(failing.empty());
}

// Slow storage: every fsync takes up to 600 ms, twice the fast profile's heartbeat tolerance
// (3 x 100 ms). Acknowledgements wait for their fsync (the invariants: committed entries durable
// on a majority, acknowledged entries never lost); the elector, whose state writes do not wait
// for the log, keeps its leader.
TEST_CASE("slow storage: acknowledgements wait for the fsync, the leader stays",
          "[storage-faults][latency]") {
    SimOptions so;
    so.seed = 5;
    so.log = true;
    so.log_options.storage_latency_max_ms = 600;
    so.log_options.slow_sync_one_in = 1;
    Simulator sim(so);
    std::uint64_t leader_steps = 0;
    sim.start_all();
    REQUIRE(sim.run_until(Millis{2000}));
    std::optional<NodeId> leader;
    for (std::uint16_t i = 0; i < 3; ++i) {
        if (sim.state(NodeId{i})->role == elector::Role::Leader) {
            leader = NodeId{i};
        }
    }
    REQUIRE(leader);
    const Term term = sim.state(*leader)->term;
    const std::size_t acked = sim.log_history().acked();
    sim.on_step = [&](const Simulator& s, const StepRecord& step) {
        if (step.state->role == elector::Role::Leader) {
            ++leader_steps;
            CHECK(step.node == *leader);
            CHECK(step.state->term == term);
        }
        (void)s;
    };
    REQUIRE(sim.run_until(Millis{12000}));
    INFO(violation_text(sim));
    CHECK_FALSE(sim.violation());
    CHECK(leader_steps > 0);
    CHECK(sim.state(*leader)->role == elector::Role::Leader);
    CHECK(sim.state(*leader)->term == term);
    CHECK(sim.stats().slow_syncs > 20);
    CHECK(sim.log_history().acked() > acked + 20);
}

// RuntimeBug::AckBeforeFsync in the asynchronous group commit (slow storage): the core hears that
// entries appended while a sync ran are durable when that sync ends. Caught by the log checks.
TEST_CASE("slow storage: a runtime that acknowledges before the fsync is still caught",
          "[storage-faults][latency][planted]") {
    RunOptions o;
    o.log = true;
    o.storage_faults = true;
    o.runtime_bug = runtime::RuntimeBug::AckBeforeFsync;
    std::optional<Violation> caught;
    std::uint64_t seed = 1;
    for (; seed <= 10 && !caught; ++seed) {
        o.seed = seed;
        caught = run_seed(o).violation;
    }
    REQUIRE(caught);
    INFO("seed " << seed - 1 << ": " << caught->detail);
    CHECK((caught->kind == ViolationKind::LogNotDurable ||
           caught->kind == ViolationKind::LogAckLost));
}
