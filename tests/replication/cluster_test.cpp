// SPDX-License-Identifier: Apache-2.0
// Randomised runs of a 3-node (and 5-node) cluster of log cores in the shared runtime: leader
// changes at any time (stale leaders left unaware), message loss / reorder / duplication, group
// commit at random points, stale timer instances, crashes that lose non-durable entries. Checked
// after every step (see cluster.cpp).
#include <catch2/catch.hpp>

#include "cluster.hpp"

using namespace conclave;
using namespace conclave::replication;
using namespace conclave::replication::testing;

namespace {

// Unoptimised sanitizer builds are ~30x slower: they run a fifth of the seeds.
#ifdef NDEBUG
constexpr std::uint64_t kSeedDivisor = 1;
#else
constexpr std::uint64_t kSeedDivisor = 5;
#endif

LogConfig SimConfig() {
    LogConfig c;
    c.max_batch_entries = 3;  // small batches and windows: exercise flow control
    c.max_inflight_batches = 2;
    c.propose_timeout_ticks = 4;
    return c;
}

struct HandlerGuard {
    HandlerGuard() : old(set_invariant_failure_handler(&ThrowViolation)) {}
    ~HandlerGuard() { set_invariant_failure_handler(old); }
    InvariantFailureHandler old;
};

// Runs `seeds` clusters for `steps` steps each; returns the first failure ("" when none).
std::string RunSeeds(std::size_t size, LogConfig config, std::uint64_t seeds, std::uint64_t steps,
                     ClusterStats* total, runtime::RuntimeBug bug = runtime::RuntimeBug::None) {
    HandlerGuard guard;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
        Cluster cluster(seed, size, config, bug);
        for (std::uint64_t s = 0; s < steps; ++s) {
            if (!cluster.Step()) {
                return "seed " + std::to_string(seed) + ": " + cluster.failure();
            }
        }
        if (!cluster.HealAndConverge()) {
            return "seed " + std::to_string(seed) + " (heal): " + cluster.failure();
        }
        if (total != nullptr) {
            total->acked += cluster.stats().acked;
            total->elections += cluster.stats().elections;
            total->crashes += cluster.stats().crashes;
            total->unknown_outcome += cluster.stats().unknown_outcome;
            total->flushes += cluster.stats().flushes;
            total->stale_fired += cluster.stats().stale_fired;
        }
    }
    return {};
}

}  // namespace

TEST_CASE("3-node cluster: acknowledged entries survive leader changes, loss and crashes") {
    ClusterStats total;
    const std::string failure = RunSeeds(3, SimConfig(), 150 / kSeedDivisor, 1500, &total);
    INFO(failure);
    REQUIRE(failure.empty());
    // The runs did exercise what they claim to.
    CHECK(total.acked > 1000 / kSeedDivisor);
    CHECK(total.elections > 1000 / kSeedDivisor);
    CHECK(total.crashes > 500 / kSeedDivisor);
    CHECK(total.unknown_outcome > 0);
    CHECK(total.flushes > 1000 / kSeedDivisor);
    CHECK(total.stale_fired > 100 / kSeedDivisor);
}

TEST_CASE("5-node cluster: the same checks") {
    const std::string failure = RunSeeds(5, SimConfig(), 40 / kSeedDivisor, 1500, nullptr);
    INFO(failure);
    REQUIRE(failure.empty());
}

TEST_CASE("the checks catch a planted bug: a leader that skips sync") {
    LogConfig config = SimConfig();
    config.planted_bug = PlantedLogBug::SkipSync;
    const std::string failure = RunSeeds(3, config, 100, 1500, nullptr);
    INFO(failure);
    REQUIRE(!failure.empty());
}

TEST_CASE("the checks catch a planted bug: commit without a quorum") {
    LogConfig config = SimConfig();
    config.planted_bug = PlantedLogBug::CommitWithoutQuorum;
    const std::string failure = RunSeeds(3, config, 100, 1500, nullptr);
    INFO(failure);
    REQUIRE(!failure.empty());
}

// The runtime the cores run in (runtime/log_runtime.hpp) is under test too: one that tells a core
// its entries are durable before the fsync (RuntimeBug::AckBeforeFsync) loses acknowledged
// entries at a crash.
TEST_CASE("the checks catch a planted runtime bug: acknowledge before the fsync") {
    const std::string failure =
        RunSeeds(3, SimConfig(), 100, 1500, nullptr, runtime::RuntimeBug::AckBeforeFsync);
    INFO(failure);
    REQUIRE(!failure.empty());
}
