// SPDX-License-Identifier: Apache-2.0
#include "conclave/elector/backoff.hpp"

#include <algorithm>

#include "conclave/elector/elector.hpp"

namespace conclave::elector {

std::size_t candidacy_rank(std::size_t cluster_size, NodeId self, Term term,
                           std::optional<NodeId> lost_leader) {
    if (cluster_size == 0) {
        return 0;
    }
    const std::uint64_t n = cluster_size;
    const std::uint64_t first = (term.value % n + 1) % n;
    std::size_t rank = 0;
    for (std::uint64_t k = 0; k < n; ++k) {
        const auto node = static_cast<std::uint16_t>((first + k) % n);
        if (node == self.value) {
            return rank;
        }
        if (!lost_leader || lost_leader->value != node) {
            ++rank;
        }
    }
    return rank;  // self not in the cluster: last (Config::validate prevents it)
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
                      std::uint64_t draw) {
    const auto rank = candidacy_rank(config.cluster_size, config.self, term, lost_leader);
    const auto slot = static_cast<std::uint64_t>(config.rank_slot.count());
    const std::uint64_t jitter = draw % (slot / 8 + 1);
    return Millis{static_cast<Millis::rep>(rank * slot + jitter)};
}

}  // namespace conclave::elector
