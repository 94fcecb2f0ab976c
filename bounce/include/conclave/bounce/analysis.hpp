// SPDX-License-Identifier: Apache-2.0
// Turns a run's observations and faults into the numbers of the summary table.
//
// Definitions (also in bounce/README.md):
// - The effective leader at an instant is, among the nodes whose latest answer says "leader",
//   the one with the highest term (a deposed leader that has not heard the news yet is ignored).
//   A node that did not answer its latest poll claims nothing.
// - A leader change is a new (leader, term) pair after the first leader of the run.
// - A change is needless when the previous leader was alive and had a quorum of alive nodes
//   reachable through the proxy (both directions passing) throughout, from the last time it was
//   seen leading until the change: nothing forced it out. (A leader that was killed and restarted
//   before its successor showed up was forced out.)
// - Leaderless time counts from the first leader on; a failover is a leaderless gap between two
//   leaderships.
// - Safety: no term may have two leaders, counting both leader claims and followers' "leader"
//   field for their term.
// - Leaderless while a quorum runs: the part of the leaderless time during which at least a
//   majority of the nodes were running (not killed, stopped, paused or removed): time in which the
//   cluster could have had a leader and had none.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "conclave/bounce/faults.hpp"
#include "conclave/bounce/observation.hpp"

namespace conclave::bounce {

struct LeaderEpoch {
    std::int64_t begin_ms = 0;
    std::int64_t end_ms = 0;
    std::optional<NodeIndex> leader;  // nullopt: leaderless
    std::uint64_t term = 0;
};

struct LeaderChange {
    std::int64_t at_ms = 0;
    NodeIndex from = 0;
    std::uint64_t from_term = 0;
    NodeIndex to = 0;
    std::uint64_t to_term = 0;
    bool needless = false;
};

struct SafetyViolation {
    std::uint64_t term = 0;
    std::vector<NodeIndex> leaders;  // sorted, at least two
    std::int64_t first_seen_ms = 0;  // when the second one was first seen
};

/// Leaderless time while a quorum of the nodes ran, from the first leader on.
struct QuorumLeaderless {
    std::int64_t total_ms = 0;
    std::size_t gaps = 0;  // stretches, each both leaderless and with a quorum running
    std::int64_t longest_ms = 0;
    std::int64_t longest_from_ms = 0;
};

struct Summary {
    std::int64_t duration_ms = 0;
    std::size_t leader_changes = 0;
    std::size_t needless_leader_changes = 0;
    std::uint64_t highest_term = 0;
    std::int64_t leaderless_ms = 0;
    std::vector<std::int64_t> failover_ms;  // in order of occurrence
    std::vector<SafetyViolation> violations;
    std::optional<NodeIndex> first_leader;
    std::optional<NodeIndex> final_leader;  // effective leader at the end of the run
    std::vector<LeaderChange> changes;
    std::vector<LeaderEpoch> epochs;
    std::size_t kills = 0;         // SIGKILLs the run sent
    std::size_t leader_kills = 0;  // of them, to the effective leader of that instant
    QuorumLeaderless quorum_leaderless;

    bool safe() const { return violations.empty(); }
    std::optional<std::int64_t> failover_min_ms() const;
    std::optional<std::int64_t> failover_median_ms() const;
    std::optional<std::int64_t> failover_max_ms() const;
};

/// The smallest, the median (the upper one of an even count, as the summary's failover median)
/// and the largest of `values`; nullopt when there are none.
struct Spread {
    std::int64_t min = 0;
    std::int64_t median = 0;
    std::int64_t max = 0;
};
std::optional<Spread> spread(std::vector<std::int64_t> values);

/// `observations` and `faults` sorted by time; `end_ms` is the end of the run.
Summary analyze(std::size_t node_count, const std::vector<Observation>& observations,
                const std::vector<FaultEvent>& faults, std::int64_t end_ms);

/// The leaderless epochs (after the first one with a leader) intersected with the stretches in
/// which at least a majority of the nodes were running by `faults` (sorted by time).
QuorumLeaderless leaderless_while_quorum_runs(std::size_t node_count,
                                              const std::vector<LeaderEpoch>& epochs,
                                              const std::vector<FaultEvent>& faults);

/// Tracks the latest answer of each node and the effective leader (used live and by analyze()).
struct LeaderTracker {
    explicit LeaderTracker(std::size_t node_count);
    void observe(const Observation& o);
    struct Leader {
        NodeIndex node = 0;
        std::uint64_t term = 0;
        bool operator==(const Leader&) const = default;
    };
    std::optional<Leader> effective() const;

    std::vector<Observation> latest;  // role Unreachable until the first answer
};

}  // namespace conclave::bounce
