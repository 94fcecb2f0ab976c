// SPDX-License-Identifier: Apache-2.0
// Ranked candidacy: when to start scouting after losing the leader or at start.
//
// Every node computes the same order from what all of them know: the nodes by priority, highest
// first, those of equal priority by index rotated by the current term (so that no node is always
// first), with the lost leader and the nodes of priority 0 left out. Rank r waits
// r x rank_slot plus a jitter of at most rank_slot / 8 drawn from the injected random source, so
// rank 0 scouts at once and rank 1 follows one slot later if rank 0 is dead or cut off.
// Pure functions: no clock, no state of their own; time is abstracted in the TLA+ spec, whose
// actions do not change (the ranking only changes *when* a node tries, ElectionScouting keeps
// it safe, and a failed round falls back to the uniform backoff).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "conclave/core/types.hpp"
#include "conclave/elector/config.hpp"

namespace conclave::elector {

using Priorities = std::array<std::uint32_t, kMaxClusterSize>;

/// Position of `self` in the candidacy order for `term`, 0 for the first: the nodes of a higher
/// priority than self's come first, then those of an equal one in the rotation (term + 1) mod N,
/// (term + 2) mod N, ...; `lost_leader` and the nodes of priority 0 (they never stand) are left
/// out. `self` is never left out. Without `priorities`, every node has priority 1.
std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader);
std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader, const Priorities& priorities);

/// The slot for a measured peer round trip: config.rank_slot_rtt_multiple x `round_trip`
/// (rounded up to a millisecond), clamped to [rank_slot_min, rank_slot_max]; config.rank_slot
/// when the multiple is 0 (a fixed slot).
Millis adaptive_rank_slot(const Config& config, std::chrono::microseconds round_trip);

/// min(rank x config.rank_slot, election_result_timeout) + (draw mod (rank_slot / 8 + 1)), the
/// rank over config.priorities (every node priority 1 when `use_priorities` is false). The cap
/// is the liveness rule of priorities: whatever the nodes ranked ahead, dead or alive, a node
/// scouts at most one election timeout (and the jitter) after losing its leader.
Millis ranked_backoff(const Config& config, Term term, std::optional<NodeId> lost_leader,
                      std::uint64_t draw, bool use_priorities = true);

}  // namespace conclave::elector
