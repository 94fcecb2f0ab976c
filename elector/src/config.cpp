// SPDX-License-Identifier: Apache-2.0
#include "conclave/elector/config.hpp"
#include "conclave/core/quorum.hpp"

#include "conclave/core/enum_names.hpp"

#include <algorithm>

namespace conclave::elector {
namespace {

Config with_cluster(Config c, std::size_t cluster_size, NodeId self) {
    c.cluster_size = cluster_size;
    c.self = self;
    return c;
}

std::string ms(Millis m) {
    return std::to_string(m.count()) + " ms";
}

/// The ranked backoff's slot bounds (Config::validate).
std::optional<std::string> rank_slot_error(const Config& c) {
    if (c.rank_slot_min < Config::kMinRankSlot || c.rank_slot_min > Config::kMaxRankSlot) {
        return "rank_slot_min: must be between " + ms(Config::kMinRankSlot) + " and " +
               ms(Config::kMaxRankSlot) + ", got " + ms(c.rank_slot_min);
    }
    if (c.rank_slot_max < c.rank_slot_min || c.rank_slot_max > Config::kMaxRankSlot) {
        return "rank_slot_max: must be between rank_slot_min (" + ms(c.rank_slot_min) + ") and " +
               ms(Config::kMaxRankSlot) + ", got " + ms(c.rank_slot_max);
    }
    if (c.rank_slot < c.rank_slot_min || c.rank_slot > c.rank_slot_max) {
        return "rank_slot: must be between rank_slot_min (" + ms(c.rank_slot_min) +
               ") and rank_slot_max (" + ms(c.rank_slot_max) + "), got " + ms(c.rank_slot);
    }
    if (c.rank_slot_rtt_multiple > Config::kMaxRankSlotRttMultiple) {
        return "rank_slot_rtt_multiple: must be at most " +
               std::to_string(Config::kMaxRankSlotRttMultiple) + ", got " +
               std::to_string(c.rank_slot_rtt_multiple);
    }
    return std::nullopt;
}

/// Node priorities and the hand-back's stability period (Config::validate).
std::optional<std::string> priority_error(const Config& c) {
    bool one_stands = false;
    for (std::size_t i = 0; i < c.cluster_size; ++i) {
        if (c.priorities[i] > Config::kMaxPriority) {
            return "priority: node " + std::to_string(i) + " has " +
                   std::to_string(c.priorities[i]) + ", at most " +
                   std::to_string(Config::kMaxPriority) + " is supported";
        }
        one_stands = one_stands || c.priorities[i] > 0;
    }
    if (!one_stands) {
        return "priority: every node has priority 0, so none could ever lead";
    }
    if (c.preferred_stability.count() < 0 || c.preferred_stability.count() > 3'600'000) {
        return "preferred_stability: must be between 0 (off) and one hour, got " +
               ms(c.preferred_stability);
    }
    return std::nullopt;
}

}  // namespace

Config Config::reference(std::size_t cluster_size, NodeId self) {
    return with_cluster(Config{}, cluster_size, self);  // the member defaults are the reference
}

Config Config::defaults(std::size_t cluster_size, NodeId self) {
    Config c;
    c.initial_wait = Millis{2000};
    c.max_random_wait = Millis{1000};
    c.scouting_result_timeout = Millis{1000};
    c.election_result_timeout = Millis{1000};
    c.heartbeat_period = Millis{500};
    // Six checks per inactivity interval, as in `fast` (12 made the first check that can drop a
    // silent leader come relatively later: bench/README.md).
    c.heartbeat_check_period = Millis{500};
    c.heartbeat_miss_count = 6;
    c.backoff = Backoff::Ranked;  // failover figures: bench/README.md
    c.rank_slot = Millis{100};
    c.rank_slot_min = Millis{100};
    c.rank_slot_max = Millis{2000};
    c.preferred_stability = Millis{10000};
    return with_cluster(c, cluster_size, self);
}

Config Config::fast(std::size_t cluster_size, NodeId self) {
    Config c;
    c.initial_wait = Millis{300};
    c.max_random_wait = Millis{300};
    c.scouting_result_timeout = Millis{200};
    c.election_result_timeout = Millis{200};
    c.heartbeat_period = Millis{100};
    c.heartbeat_check_period = Millis{50};
    c.heartbeat_miss_count = 3;
    c.backoff = Backoff::Ranked;  // failover figures: bench/README.md
    c.rank_slot = Millis{25};
    c.rank_slot_min = Millis{25};
    c.rank_slot_max = Millis{500};
    c.preferred_stability = Millis{2000};
    return with_cluster(c, cluster_size, self);
}

std::optional<Config> Config::profile(std::string_view name, std::size_t cluster_size,
                                      NodeId self) {
    if (name == "reference") {
        return reference(cluster_size, self);
    }
    if (name == "default") {
        return defaults(cluster_size, self);
    }
    if (name == "fast") {
        return fast(cluster_size, self);
    }
    return std::nullopt;
}

std::size_t Config::effective_quorum() const {
    return quorum != 0 ? quorum : majority(cluster_size);
}

Millis Config::promise_duration() const {
    return inactivity_interval() - std::min(heartbeat_check_period, inactivity_interval() / 2);
}

Millis Config::lease_duration() const {
    const auto e = promise_duration().count();
    return Millis{e * (1000 - lease_drift_permille) / (1000 + lease_drift_permille)};
}

std::uint32_t Config::heartbeat_check_misses() const {
    const auto period = heartbeat_check_period.count();
    const auto inactivity = inactivity_interval().count();
    return static_cast<std::uint32_t>((inactivity + period - 1) / period);
}

std::optional<std::string> Config::validate() const {
    if (cluster_size == 0 || cluster_size > kMaxClusterSize) {
        return "cluster_size: must be between 1 and " + std::to_string(kMaxClusterSize) + ", got " +
               std::to_string(cluster_size);
    }
    if (self.value >= cluster_size) {
        return "self: node index " + std::to_string(self.value) + " is not below cluster_size " +
               std::to_string(cluster_size);
    }
    if (quorum != 0 && (!is_majority(quorum, cluster_size) || quorum > cluster_size)) {
        return "quorum: must be a majority (" + std::to_string(majority(cluster_size)) + ".." +
               std::to_string(cluster_size) + ") or 0 for a majority, got " +
               std::to_string(quorum);
    }
    auto positive = [](Millis m) { return m.count() > 0; };
    if (initial_wait.count() < 0) {
        return "initial_wait: must not be negative, got " + ms(initial_wait);
    }
    if (max_random_wait.count() < 0) {
        return "max_random_wait: must not be negative, got " + ms(max_random_wait);
    }
    if (!positive(scouting_result_timeout)) {
        return "scouting_result_timeout: must be positive, got " + ms(scouting_result_timeout);
    }
    if (!positive(election_result_timeout)) {
        return "election_result_timeout: must be positive, got " + ms(election_result_timeout);
    }
    if (!positive(heartbeat_period)) {
        return "heartbeat_period: must be positive, got " + ms(heartbeat_period);
    }
    if (!positive(heartbeat_check_period)) {
        return "heartbeat_check_period: must be positive, got " + ms(heartbeat_check_period);
    }
    if (heartbeat_miss_count < 2) {
        return "heartbeat_miss_count: must be at least 2 (the inactivity interval must exceed the "
               "heartbeat period), got " +
               std::to_string(heartbeat_miss_count);
    }
    if (heartbeat_check_period > inactivity_interval()) {
        return "heartbeat_check_period: must not exceed the inactivity interval "
               "(heartbeat_period * heartbeat_miss_count = " +
               ms(inactivity_interval()) + "), got " + ms(heartbeat_check_period);
    }
    if (lease_drift_permille > kMaxLeaseDriftPermille) {
        return "lease_drift_permille: must be at most " + std::to_string(kMaxLeaseDriftPermille) +
               ", got " + std::to_string(lease_drift_permille);
    }
    if (auto error = rank_slot_error(*this)) {
        return error;
    }
    if (auto error = priority_error(*this)) {
        return error;
    }
    if (backoff != Backoff::Uniform && backoff != Backoff::Ranked) {
        return "backoff: must be uniform or ranked";
    }
    if (heartbeat_period.count() > 3'600'000 || max_random_wait.count() > 3'600'000 ||
        initial_wait.count() > 3'600'000 || scouting_result_timeout.count() > 3'600'000 ||
        election_result_timeout.count() > 3'600'000 || heartbeat_miss_count > 1000) {
        return "timing: values above one hour (or a miss count above 1000) are not supported";
    }
    return std::nullopt;
}

std::string_view to_string(Backoff b) {
    return enum_name(b);
}

}  // namespace conclave::elector
