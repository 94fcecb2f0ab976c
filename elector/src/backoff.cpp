// SPDX-License-Identifier: Apache-2.0
#include "conclave/elector/backoff.hpp"

#include <algorithm>

#include "conclave/elector/elector.hpp"

namespace conclave::elector {

std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader) {
    return candidacy_rank(cluster_size, self, term, lost_leader, Config::default_priorities());
}

std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader, const Priorities& priorities) {
    if (cluster_size == 0 || self.value >= cluster_size) {
        return 0;  // self not in the cluster (Config::validate prevents it)
    }
    const std::uint64_t n = cluster_size;
    const std::uint64_t first = (term.value % n + 1) % n;
    // Position of a node in the term's rotation: ties of priority are broken by it.
    auto position = [&](std::uint64_t node) { return (node + n - first) % n; };
    const std::uint32_t mine = priorities[self.value];
    std::size_t rank = 0;
    for (std::uint64_t node = 0; node < n; ++node) {
        if (node == self.value || (lost_leader && lost_leader->value == node)) {
            continue;
        }
        const std::uint32_t theirs = priorities[node];
        if (theirs == 0) {
            continue;  // never stands
        }
        if (theirs > mine || (theirs == mine && position(node) < position(self.value))) {
            ++rank;
        }
    }
    return rank;
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
                      std::uint64_t draw, bool use_priorities) {
    const auto rank =
        candidacy_rank(config.cluster_size, config.self, term, lost_leader,
                       use_priorities ? config.priorities : Config::default_priorities());
    const auto slot = static_cast<std::uint64_t>(config.rank_slot.count());
    const std::uint64_t jitter = draw % (slot / 8 + 1);
    // Liveness: the ranks ahead may all be dead; the wait is capped at one election timeout.
    const auto cap = static_cast<std::uint64_t>(config.election_result_timeout.count());
    return Millis{static_cast<Millis::rep>(std::min(rank * slot, cap) + jitter)};
}

}  // namespace conclave::elector
