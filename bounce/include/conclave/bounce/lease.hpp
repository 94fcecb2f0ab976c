// SPDX-License-Identifier: Apache-2.0
// The leader lease as the poller sees it (docs/design.md "The leader lease"; /status "lease"):
// when two nodes held a valid lease at once, and how long no node held one.
//
// Each answer with a valid lease says the node held it from the moment it answered until that
// moment + remaining_ms, unless a later answer of the same node shows no valid lease (it ended
// before that answer) or the node was killed, stopped, paused or its disk filled (a process that
// cannot run cannot act on its lease). The moment a node answered is not known exactly: it lies
// between the poll's send time (at_ms) and its arrival (answered_ms), on the poller's clock, the
// same monotonic clock as the daemons' on one host. at_ms is used, so an interval end set by an
// answer is off by at most that poll's round trip + 1 ms (remaining_ms is rounded down; an end set
// by a signal the tool sent is exact): an overlap or a gap between two ends is off by at most the
// sum of their two errors (`error_ms`). A lease ended by an answer before the end its last valid
// answer gave was given up by the node (a transfer, a step-down) at an instant between the two
// answers: its end error also covers the time back to that last valid answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "conclave/bounce/faults.hpp"
#include "conclave/bounce/observation.hpp"

namespace conclave::bounce {

struct LeaseInterval {
    std::int64_t begin_ms = 0;
    std::int64_t end_ms = 0;
    std::int64_t begin_error_ms = 0;  // how far the true begin may lie from begin_ms
    std::int64_t end_error_ms = 0;
};

/// Two nodes' leases: an overlap (both valid over [begin_ms, begin_ms + length_ms)), or the
/// closest approach (a's ended length_ms before b's began, at begin_ms).
struct LeaseOverlap {
    NodeIndex a = 0;
    NodeIndex b = 0;
    std::int64_t begin_ms = 0;
    std::int64_t length_ms = 0;
    std::int64_t error_ms = 0;  // the bound on length_ms's error
};

struct LeaseSummary {
    /// Some answer carried a valid lease (daemons without the lease report nothing).
    bool reported = false;
    /// The longest time two nodes both held a valid lease (expected: none).
    std::optional<LeaseOverlap> longest_overlap;
    /// Without an overlap: the shortest time between one node's lease and another's.
    std::optional<LeaseOverlap> closest;
    /// The longest time no node held a valid lease, from the first lease to the end of the run.
    std::int64_t longest_without_ms = 0;
    std::int64_t longest_without_from_ms = 0;
    std::int64_t longest_without_error_ms = 0;
    /// Per node: the times it held a valid lease, in order, disjoint.
    std::vector<std::vector<LeaseInterval>> held;
};

/// `observations` and `faults` sorted by time; `end_ms` is the end of the run.
LeaseSummary lease_summary(std::size_t node_count, const std::vector<Observation>& observations,
                           const std::vector<FaultEvent>& faults, std::int64_t end_ms);

/// The overlaps and gaps of given intervals (per node, in order, disjoint), up to `end_ms`.
LeaseSummary interval_summary(std::vector<std::vector<LeaseInterval>> held, std::int64_t end_ms);

// ---- Self-reported beliefs ---------------------------------------------------------------------
// A process that says when it believes it leads (bench's lock-recipe: one line per change,
// "<CLOCK_MONOTONIC microseconds> start|lead|follow|lost [detail]") believes from its "lead" line
// until its next line, its death (the tool's own SIGKILL) or the end of the run. A paused process
// says nothing: it believes on, until it notices after it runs again.

struct Belief {
    std::int64_t at_ms = 0;  // on the tool's clock (ms since its epoch)
    bool leads = false;      // "lead"; false for start, follow, lost and the tool's SIGKILL
};

/// One line; `epoch_us` is the tool's epoch on the same monotonic clock. Nullopt for a line that
/// is not a belief (blank, or a line some library printed); throws std::runtime_error for a
/// timestamped line with an unknown state.
std::optional<Belief> parse_belief_line(std::string_view line, std::int64_t epoch_us);

/// The intervals in which a process believed it led. `events` sorted by time (throws
/// std::runtime_error otherwise); a belief still held at `end_ms` ends there.
std::vector<LeaseInterval> belief_intervals(const std::vector<Belief>& events, std::int64_t end_ms);

}  // namespace conclave::bounce
