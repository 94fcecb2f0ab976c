#include "conclave/elector/backoff.hpp"

namespace conclave {

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

Millis ranked_backoff(const Config& config, Term term, std::optional<NodeId> lost_leader,
                      std::uint64_t draw) {
    const auto rank = candidacy_rank(config.cluster_size, config.self, term, lost_leader);
    const auto slot = static_cast<std::uint64_t>(config.rank_slot.count());
    const std::uint64_t jitter = draw % (slot / 8 + 1);
    return Millis{static_cast<Millis::rep>(rank * slot + jitter)};
}

}  // namespace conclave
