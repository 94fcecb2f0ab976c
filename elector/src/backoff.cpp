// SPDX-License-Identifier: Apache-2.0
#include "conclave/elector/backoff.hpp"

#include <algorithm>

#include "conclave/elector/elector.hpp"

namespace conclave::elector {

std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader) {
    return candidacy_rank(cluster_size, self, term, lost_leader, Config::default_priorities());
}

CandidacyRank candidacy_ranks(std::size_t cluster_size, NodeId self, Term term,
                              std::optional<NodeId> lost_leader, const Priorities& priorities,
                              std::optional<NodeSet> connected) {
    CandidacyRank rank;
    if (cluster_size == 0 || self.value >= cluster_size) {
        return rank;  // self not in the cluster (Config::validate prevents it)
    }
    const std::uint64_t n = cluster_size;
    const std::uint64_t first = (term.value % n + 1) % n;
    // Position of a node in the term's rotation: ties of priority are broken by it.
    auto position = [&](std::uint64_t node) { return (node + n - first) % n; };
    const std::uint32_t mine = priorities[self.value];
    for (std::uint64_t node = 0; node < n; ++node) {
        const std::uint32_t theirs = priorities[node];
        if (node == self.value || (lost_leader && lost_leader->value == node) || theirs == 0) {
            continue;  // self, the lost leader, and a node that never stands
        }
        if (theirs > mine) {
            if (!connected || connected->contains(NodeId{static_cast<std::uint16_t>(node)})) {
                ++rank.above;
            }
        } else if (theirs == mine && position(node) < position(self.value)) {
            ++rank.level;
        }
    }
    return rank;
}

std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader, const Priorities& priorities) {
    const CandidacyRank rank = candidacy_ranks(cluster_size, self, term, lost_leader, priorities);
    return rank.above + rank.level;
}

Millis adaptive_rank_slot(const Config& config, std::chrono::microseconds round_trip) {
    if (config.rank_slot_rtt_multiple == 0) {
        return config.rank_slot;
    }
    // Clamp before multiplying: a hostile or absurd measurement cannot overflow.
    const std::int64_t ceiling_us = std::int64_t{config.rank_slot_max.count()} * 1000;
    const std::int64_t rtt_us = std::clamp<std::int64_t>(round_trip.count(), 0, ceiling_us);
    const std::int64_t slot_us = rtt_us * std::int64_t{config.rank_slot_rtt_multiple};
    const Millis slot{static_cast<Millis::rep>((slot_us + 999) / 1000)};
    return std::clamp(slot, config.rank_slot_min, config.rank_slot_max);
}

// An input of the Elector, defined here with the rest of the ranked backoff (elector.cpp holds
// the transitions): it changes only the duration of the next ranked wait, never a decision.
void Elector::observe_round_trip(std::chrono::microseconds round_trip) {
    config_.rank_slot = adaptive_rank_slot(config_, round_trip);
}

Millis ranked_backoff(const Config& config, Term term, std::optional<NodeId> lost_leader,
                      std::uint64_t draw, bool use_priorities, std::optional<NodeSet> connected) {
    const CandidacyRank rank = candidacy_ranks(
        config.cluster_size, config.self, term, lost_leader,
        use_priorities ? config.priorities : Config::default_priorities(), connected);
    const auto slot = static_cast<std::uint64_t>(config.rank_slot.count());
    const std::uint64_t jitter = draw % (slot / 8 + 1);
    // Liveness of priorities: a node of higher priority is waited for only while connected,
    // and a connected one may still be dead or cut off (a blackhole). Waiting for them takes at
    // most one election timeout: their slot shrinks so that all of them fit in it, in order.
    std::uint64_t standing = 0;
    for (std::size_t i = 0; i < config.cluster_size; ++i) {
        standing += config.priorities[i] > 0 ? 1U : 0U;
    }
    const auto timeout = static_cast<std::uint64_t>(config.election_result_timeout.count());
    const std::uint64_t above_slot = std::min(slot, timeout / std::max<std::uint64_t>(standing, 2));
    const std::uint64_t wait = rank.above * above_slot + rank.level * slot + jitter;
    return Millis{static_cast<Millis::rep>(wait)};
}

}  // namespace conclave::elector
