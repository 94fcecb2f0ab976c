// SPDX-License-Identifier: Apache-2.0
// Ranked candidacy: when to start scouting after losing the leader or at start.
//
// Every node computes the same order from what all of them know: the nodes by index, rotated by
// the current term (so that no node is always first), with the lost leader left out. Rank r waits
// r x rank_slot plus a jitter of at most rank_slot / 8 drawn from the injected random source, so
// rank 0 scouts at once and rank 1 follows one slot later if rank 0 is dead or cut off.
// Pure functions: no clock, no state of their own; time is abstracted in the TLA+ spec, whose
// actions do not change (the ranking only changes *when* a node tries, ElectionScouting keeps
// it safe, and a failed round falls back to the uniform backoff).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "conclave/core/types.hpp"
#include "conclave/elector/config.hpp"

namespace conclave::elector {

/// Position of `self` in the candidacy order for `term`: nodes (term + 1) mod N, (term + 2) mod
/// N, ..., skipping `lost_leader`. 0 for the first. `self` is never skipped.
std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader);

/// The slot for a measured peer round trip: config.rank_slot_rtt_multiple x `round_trip`
/// (rounded up to a millisecond), clamped to [rank_slot_min, rank_slot_max]; config.rank_slot
/// when the multiple is 0 (a fixed slot).
Millis adaptive_rank_slot(const Config& config, std::chrono::microseconds round_trip);

/// rank x config.rank_slot + (draw mod (rank_slot / 8 + 1)).
Millis ranked_backoff(const Config& config, Term term, std::optional<NodeId> lost_leader,
                      std::uint64_t draw);

}  // namespace conclave::elector
