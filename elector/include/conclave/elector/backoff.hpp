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
/// The two parts of that rank: the standing nodes of a higher priority (`above`), and those of
/// self's priority ahead of it in the rotation (`level`).
struct CandidacyRank {
    std::size_t above = 0;
    std::size_t level = 0;
};
/// With `connected`, `above` counts only the nodes in it (the wait skips the ones known down).
CandidacyRank candidacy_ranks(std::size_t cluster_size, NodeId self, Term term,
                              std::optional<NodeId> lost_leader, const Priorities& priorities,
                              std::optional<NodeSet> connected = std::nullopt);

/// The slot for a measured peer round trip: config.rank_slot_rtt_multiple x `round_trip`
/// (rounded up to a millisecond), clamped to [rank_slot_min, rank_slot_max]; config.rank_slot
/// when the multiple is 0 (a fixed slot).
Millis adaptive_rank_slot(const Config& config, std::chrono::microseconds round_trip);

/// above x min(rank_slot, election_result_timeout / max(S, 2)) + level x rank_slot + (draw mod
/// (rank_slot / 8 + 1)), with S the number of nodes of priority > 0 and the rank over
/// config.priorities (`above` counting only the `connected` nodes when given; every node of
/// priority 1, so `above` is 0, when `use_priorities` is false). The shrunken slot is the liveness
/// rule of priorities: whether the nodes of higher priority are dead or alive, waiting for them
/// delays a node by less than one election timeout, in their order; with equal priorities the
/// wait is the rotation's rank x slot, as without priorities.
Millis ranked_backoff(const Config& config, Term term, std::optional<NodeId> lost_leader,
                      std::uint64_t draw, bool use_priorities = true,
                      std::optional<NodeSet> connected = std::nullopt);

}  // namespace conclave::elector
