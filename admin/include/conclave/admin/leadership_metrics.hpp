// SPDX-License-Identifier: Apache-2.0
// The elector's metrics for /metrics, fed from the core's ElectorCounters and leadership
// snapshots. The mesh/driver counters (messages in/out by type, bad frames by kind) are mirrored
// the same way by the Node once net/ is wired in: a collector copies monotonic counters with
// Counter::set_total().
//
// Families (all prefixed conclave_):
//   scouting_rounds_started_total, elections_started_total, elections_won_total,
//   prevotes_total{result="granted|refused"}, votes_granted_total,
//   votes_refused_total{reason="stale-term|already-voted|has-leader|i-am-leader|stale-config|
//   not-a-voter"},
//   leader_changes_total, two_leader_alarms_total,
//   leaderless_seconds_total (time with no known leader, counted while running),
//   leaderless_periods_seconds (histogram: length of each period without a known leader, i.e. the
//     time a failover took as this node saw it, scouting and any failed elections included),
//   election_duration_seconds{outcome="won|lost|no-quorum"} (histogram: each election this node
//     started, from becoming candidate to the end of its candidacy: "won" = became leader,
//     "no-quorum" = the election timed out without a quorum (reason quorum-not-achieved), "lost" =
//     preempted by a higher term or a leader, or refused by enough nodes; a candidacy ended by
//     stop() is not observed),
//   term, fencing_token, leader_known (0/1), role{role="follower|candidate|leader|stopped"} (0/1).
//
// Single-threaded, like the registry.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "conclave/admin/metrics.hpp"
#include "conclave/elector/actions.hpp"
#include "conclave/elector/elector.hpp"

namespace conclave::admin {

class LeadershipMetrics {
  public:
    /// Registers the families in `registry` (which must outlive this object).
    explicit LeadershipMetrics(MetricsRegistry& registry);

    /// Mirrors the core's counters (call before rendering, e.g. from a registry collector).
    void update_counters(const elector::ElectorCounters& counters);

    /// Call on every leadership snapshot, with the driver's clock.
    void on_leadership(const elector::LeadershipSnapshot& snapshot, Millis now);

    /// Brings the time-based values up to `now` (call before rendering).
    void refresh(Millis now);

    /// Histogram buckets for leaderless periods, in seconds.
    static const std::vector<double>& leaderless_buckets();
    /// Histogram buckets for election durations, in seconds.
    static const std::vector<double>& election_buckets();

  private:
    Counter& scouting_rounds_started_;
    Counter& elections_started_;
    Counter& elections_won_;
    Counter& prevotes_granted_;
    Counter& prevotes_refused_;
    Counter& silences_corroborated_;
    Counter& votes_granted_;
    std::array<Counter*, elector::kVoteRefusalCount>
        votes_refused_{};  // by Refusal; [0] (None) unused
    Counter& leader_changes_;
    Counter& two_leader_alarms_;
    Counter& leaderless_seconds_;
    Histogram& leaderless_periods_;
    Histogram& elections_won_duration_;
    Histogram& elections_lost_duration_;
    Histogram& elections_no_quorum_duration_;
    Gauge& term_;
    Gauge& fencing_token_;
    Gauge& leader_known_;
    std::array<Gauge*, 4> role_{};  // by Role

    /// When this node became candidate, while it is one.
    std::optional<Millis> candidate_since_;
    /// Start of the current period without a known leader (while running), if any.
    std::optional<Millis> leaderless_since_;
    /// Up to when leaderless time has been added to leaderless_seconds_.
    Millis accounted_until_{0};
    bool running_ = false;
};

}  // namespace conclave::admin
