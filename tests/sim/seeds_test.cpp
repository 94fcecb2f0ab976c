// SPDX-License-Identifier: Apache-2.0
// Seeded random schedules of realistic length (about 1,400 events and 4-8 fault episodes each)
// with zero violations, safety and liveness. 2,200 seeds in the release build, split into
// batches that ctest runs in parallel; plus 230 seeds with the replicated log (30 of them with
// storage faults) (about 6,000
// events each: the log, its client workload and its checks after every step).
#include <catch2/catch.hpp>

#include "conclave/sim/run.hpp"

using namespace conclave;
using namespace conclave::sim;

namespace {

#ifdef SIM_TEST_LIGHT
constexpr std::uint64_t kScale = 20;  // sanitizer builds: memory safety, not volume
#else
constexpr std::uint64_t kScale = 1;
#endif

void run_batch(RunOptions options, std::uint64_t first, std::uint64_t count) {
    count = std::max<std::uint64_t>(1, count / kScale);
    std::uint64_t events = 0;
    std::uint64_t crashes = 0;
    std::uint64_t dropped = 0;
    std::uint64_t acked = 0;
    std::uint64_t refused = 0;
    std::uint64_t unknown = 0;
    std::uint64_t compactions = 0;
    std::uint64_t installed = 0;
    std::uint64_t storage_faults = 0;
    std::uint64_t torn_tails = 0;
    std::uint64_t bit_flips = 0;
    std::uint64_t starts_refused = 0;
    std::uint64_t slow_syncs = 0;
    for (std::uint64_t seed = first; seed < first + count; ++seed) {
        options.seed = seed;
        const RunResult r = run_seed(options);
        events += r.stats.events;
        crashes += r.stats.crashes;
        dropped += r.stats.messages_dropped + r.stats.log_messages_dropped;
        acked += r.log_acked;
        refused += r.stats.proposals_refused;
        unknown += r.stats.proposals_unknown;
        compactions += r.log_compactions;
        installed += r.log_snapshots_installed;
        storage_faults += r.stats.storage_faults;
        torn_tails += r.stats.torn_tails;
        bit_flips += r.stats.bit_flips;
        starts_refused += r.stats.starts_refused;
        slow_syncs += r.stats.slow_syncs;
        if (r.violation) {
            FAIL("seed " << seed << ": " << to_string(r.violation->kind) << ": "
                         << r.violation->detail << "\nreplay: "
                         << replay_command("build/release/sim/conclave-sim", options)
                         << " --trace seed-" << seed << ".ndjson");
        }
        REQUIRE(r.converged_after);
        REQUIRE(*r.converged_after <= r.liveness_bound);
        if (options.log) {
            // A fresh proposal committed and every log converged on the history, within bound.
            REQUIRE(r.log_converged_after);
            REQUIRE(*r.log_converged_after <= r.log_bound);
            REQUIRE(r.log_committed >= r.log_acked);
        }
    }
    if (options.storage_faults) {
        // The storage faults happened: nodes left service, crashes kept part of a tail.
        CHECK(storage_faults >= count);
        CHECK(torn_tails > 0);
        // Slow fsyncs, and bit flips whose restarts recovery refused.
        CHECK(slow_syncs >= count);
        if (count >= 5) {
            CHECK(bit_flips > 0);
            CHECK(starts_refused > 0);
        }
    }
    if (options.log) {
        // The workload bites: proposals acknowledged, refused by non-leaders, and cut short by
        // faults (outcome unknown) across the batch.
        CHECK(acked / count > 100);
        CHECK(refused > 0);
        if (count >= 10) {
            CHECK(unknown > 0);
        }
        if (options.log_compact != 0) {  // compaction happens, and snapshots are sent and installed
            CHECK(compactions / count > 10);
            if (count >= 10) {
                CHECK(installed > 0);
            }
        }
    }
    // The schedules are realistic: hundreds of events per seed, faults that actually bite.
    CHECK(events / count > 500);
    if (count >= 5) {  // a single seed (sanitizer builds) may draw no crash or loss episode
        if (options.faults.crash) {
            CHECK(crashes > 0);
        }
        CHECK(dropped > 0);
    }
}

}  // namespace

TEST_CASE("800 seeds, every fault, scouting on", "[.][all-scouting]") {
    run_batch(RunOptions{}, 1, 800);
}

TEST_CASE("600 seeds, every fault, scouting off", "[.][all-no-scouting]") {
    RunOptions o;
    o.scouting = false;
    run_batch(o, 10'001, 600);
}

TEST_CASE("400 seeds, five nodes, every fault", "[.][five-nodes]") {
    RunOptions o;
    o.nodes = 5;
    run_batch(o, 20'001, 400);
}

TEST_CASE("400 seeds, crashes, pauses and partitions, 8 episodes", "[.][crash-pause-heavy]") {
    RunOptions o;
    std::string error;
    o.faults = *FaultMix::parse("crash,pause,partition,asym,cut", &error);
    o.episodes = 8;
    run_batch(o, 30'001, 400);
}

TEST_CASE("log: 120 seeds every fault, 50 crash/pause/partition-heavy, 30 storage faults",
          "[.][log-seeds]") {
    RunOptions o;
    o.log = true;
    run_batch(o, 40'001, 120);
    // Storage faults (ENOSPC, EIO, a torn unsynced tail at a crash, slow fsyncs, bit flips):
    // the node leaves service (a flipped one until repaired), no acknowledged entry is lost, no
    // node restarts on a silently truncated log, one leader per term.
    RunOptions faulty = o;
    faulty.storage_faults = true;
    run_batch(faulty, 45'001, 30);
    std::string error;
    o.faults = *FaultMix::parse("crash,pause,partition,asym,cut", &error);
    o.episodes = 8;
    run_batch(o, 41'001, 50);
}

TEST_CASE("log: 60 seeds with compaction every 8 entries, 20 crash/partition-heavy",
          "[.][log-compact]") {
    RunOptions o;
    o.log = true;
    o.log_compact = 8;
    run_batch(o, 43'001, 60);
    std::string error;
    o.faults = *FaultMix::parse("crash,pause,partition,asym,cut", &error);
    o.episodes = 8;
    run_batch(o, 44'001, 20);
}

TEST_CASE("log: 30 seeds, five nodes, every fault", "[.][log-five-nodes]") {
    RunOptions o;
    o.log = true;
    o.nodes = 5;
    run_batch(o, 42'001, 30);
}
