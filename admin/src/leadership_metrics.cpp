// SPDX-License-Identifier: Apache-2.0
#include "conclave/admin/leadership_metrics.hpp"
#include "conclave/core/check.hpp"

#include <string>

#include "conclave/elector/messages.hpp"

namespace conclave::admin {
namespace {

constexpr const char* kElectionDurationName = "conclave_election_duration_seconds";
constexpr const char* kElectionDurationHelp =
    "Duration of each election this node started, from becoming candidate to the end of the "
    "candidacy, by outcome.";

double Seconds(Millis m) {
    return static_cast<double>(m.count()) / 1000.0;
}

}  // namespace

const std::vector<double>& LeadershipMetrics::leaderless_buckets() {
    static const std::vector<double> kBuckets = {0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                                 5,    10,  20,   30,  60, 120};
    return kBuckets;
}

const std::vector<double>& LeadershipMetrics::election_buckets() {
    static const std::vector<double> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                 0.5,   1,    2.5,   5,    10};
    return kBuckets;
}

LeadershipMetrics::LeadershipMetrics(MetricsRegistry& r)
    : scouting_rounds_started_(r.counter("conclave_scouting_rounds_started_total",
                                         "Scouting (pre-vote) rounds started by this node.")),
      elections_started_(
          r.counter("conclave_elections_started_total", "Elections started by this node.")),
      elections_won_(r.counter("conclave_elections_won_total", "Elections won by this node.")),
      prevotes_granted_(r.counter("conclave_prevotes_total",
                                  "Scouting (pre-vote) requests answered by this node, by result.",
                                  {{"result", "granted"}})),
      prevotes_refused_(r.counter("conclave_prevotes_total",
                                  "Scouting (pre-vote) requests answered by this node, by result.",
                                  {{"result", "refused"}})),
      silences_corroborated_(r.counter(
          "conclave_leader_silences_corroborated_total",
          "Leaders dropped one heartbeat check early because a peer scouted for a newer term.")),
      votes_granted_(r.counter("conclave_votes_granted_total", "Votes granted by this node.")),
      leader_changes_(
          r.counter("conclave_leader_changes_total",
                    "Leadership snapshots whose leader differs from the previous one.")),
      two_leader_alarms_(r.counter("conclave_two_leader_alarms_total",
                                   "Times this node saw two leaders in one term (must stay 0).")),
      leaderless_seconds_(r.counter("conclave_leaderless_seconds_total",
                                    "Time this node ran without knowing a leader.")),
      leaderless_periods_(r.histogram(
          "conclave_leaderless_periods_seconds",
          "Length of each period without a known leader (election duration as seen here).",
          leaderless_buckets())),
      elections_won_duration_(r.histogram(kElectionDurationName, kElectionDurationHelp,
                                          election_buckets(), {{"outcome", "won"}})),
      elections_lost_duration_(r.histogram(kElectionDurationName, kElectionDurationHelp,
                                           election_buckets(), {{"outcome", "lost"}})),
      elections_no_quorum_duration_(r.histogram(kElectionDurationName, kElectionDurationHelp,
                                                election_buckets(), {{"outcome", "no-quorum"}})),
      term_(r.gauge("conclave_term", "Current term.")),
      fencing_token_(r.gauge("conclave_fencing_token", "Fencing token of the known leadership.")),
      leader_known_(r.gauge("conclave_leader_known", "1 when this node knows a leader.")) {
    for (elector::Refusal refusal : {elector::Refusal::StaleTerm, elector::Refusal::AlreadyVoted,
                                     elector::Refusal::HasLeader, elector::Refusal::IAmLeader,
                                     elector::Refusal::StaleConfig, elector::Refusal::NotAVoter}) {
        votes_refused_[static_cast<std::size_t>(refusal)] =
            &r.counter("conclave_votes_refused_total", "Votes refused by this node, by reason.",
                       {{"reason", std::string(to_string(refusal))}});
    }
    for (elector::Role role : {elector::Role::Stopped, elector::Role::Follower,
                               elector::Role::Candidate, elector::Role::Leader}) {
        role_[static_cast<std::size_t>(role)] =
            &r.gauge("conclave_role", "1 for the role this node is in.",
                     {{"role", std::string(to_string(role))}});
    }
    role_[static_cast<std::size_t>(elector::Role::Stopped)]->set(1);
}

void LeadershipMetrics::update_counters(const elector::ElectorCounters& c) {
    const auto mirror = [](Counter& counter, std::uint64_t total) {
        counter.set_total(static_cast<double>(total));
    };
    mirror(scouting_rounds_started_, c.scouting_rounds_started);
    mirror(elections_started_, c.elections_started);
    mirror(elections_won_, c.elections_won);
    mirror(prevotes_granted_, c.prevotes_granted);
    mirror(prevotes_refused_, c.prevotes_refused);
    mirror(silences_corroborated_, c.silences_corroborated);
    mirror(votes_granted_, c.votes_granted);
    for (std::size_t i = 1; i < votes_refused_.size(); ++i) {
        CONCLAVE_CHECK(votes_refused_[i] != nullptr, "every refusal reason has its counter");
        mirror(*votes_refused_[i], c.votes_refused_by_reason[i]);
    }
    mirror(leader_changes_, c.leader_changes);
    mirror(two_leader_alarms_, c.two_leader_alarms);
}

void LeadershipMetrics::on_leadership(const elector::LeadershipSnapshot& s, Millis now) {
    refresh(now);
    term_.set(static_cast<double>(s.term.value));
    fencing_token_.set(static_cast<double>(s.fencing_token));
    leader_known_.set(s.leader ? 1 : 0);
    for (Gauge* gauge : role_) {
        gauge->set(0);
    }
    role_[static_cast<std::size_t>(s.role)]->set(1);

    // A candidacy starts with a Candidate snapshot; the core never goes from candidate to
    // candidate without another snapshot in between (a failed election returns to follower).
    if (s.role == elector::Role::Candidate) {
        if (!candidate_since_) {
            candidate_since_ = now;
        }
    } else if (candidate_since_) {
        const double seconds = Seconds(now - *candidate_since_);
        candidate_since_.reset();
        if (s.role == elector::Role::Leader) {
            elections_won_duration_.observe(seconds);
        } else if (s.role == elector::Role::Follower &&
                   s.reason == elector::Reason::QuorumNotAchieved) {
            elections_no_quorum_duration_.observe(seconds);
        } else if (s.role == elector::Role::Follower) {
            elections_lost_duration_.observe(seconds);
        }  // Stopped: the candidacy was interrupted, not decided.
    }

    running_ = s.role != elector::Role::Stopped;
    if (!running_) {
        leaderless_since_.reset();  // stopping is not a failover
    } else if (!s.leader && !leaderless_since_) {
        leaderless_since_ = now;
        accounted_until_ = now;
    } else if (s.leader && leaderless_since_) {
        leaderless_periods_.observe(Seconds(now - *leaderless_since_));
        leaderless_since_.reset();
    }
}

void LeadershipMetrics::refresh(Millis now) {
    if (leaderless_since_ && now > accounted_until_) {
        leaderless_seconds_.inc(Seconds(now - accounted_until_));
        accounted_until_ = now;
    }
}

}  // namespace conclave::admin
