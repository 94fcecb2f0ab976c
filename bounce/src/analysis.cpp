// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/analysis.hpp"
#include "conclave/core/quorum.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "conclave/core/check.hpp"

namespace conclave::bounce {

LeaderTracker::LeaderTracker(std::size_t node_count) : latest(node_count) {
    for (NodeIndex i = 0; i < node_count; ++i) {
        latest[i].node = i;
    }
}

void LeaderTracker::observe(const Observation& o) {
    CONCLAVE_CHECK(o.node < latest.size(), "an observation names one of the nodes");
    latest[o.node] = o;
}

std::optional<LeaderTracker::Leader> LeaderTracker::effective() const {
    std::optional<Leader> best;
    for (const Observation& o : latest) {
        if (o.role != ObservedRole::Leader) {
            continue;
        }
        if (!best || o.term > best->term) {
            best = Leader{o.node, o.term};
        }
    }
    return best;
}

namespace {

std::optional<std::int64_t> nth(std::vector<std::int64_t> v, bool median, bool max) {
    if (v.empty()) {
        return std::nullopt;
    }
    std::sort(v.begin(), v.end());
    if (max) {
        return v.back();
    }
    if (median) {
        return v[v.size() / 2];
    }
    return v.front();
}

}  // namespace

std::optional<Spread> spread(std::vector<std::int64_t> values) {
    if (values.empty()) {
        return std::nullopt;
    }
    return Spread{*nth(values, false, false), *nth(values, true, false), *nth(values, false, true)};
}

std::optional<std::int64_t> Summary::failover_min_ms() const {
    return nth(failover_ms, false, false);
}
std::optional<std::int64_t> Summary::failover_median_ms() const {
    return nth(failover_ms, true, false);
}
std::optional<std::int64_t> Summary::failover_max_ms() const {
    return nth(failover_ms, false, true);
}

namespace {

/// analyze()'s state while it walks through the observations and faults in time order.
class Analyzer {
  public:
    Analyzer(std::size_t node_count, const std::vector<FaultEvent>& faults, std::int64_t end_ms)
        : node_count_(node_count), faults_(faults), tracker_(node_count), silenced_(node_count) {
        s_.duration_ms = end_ms;
    }

    void observe(const Observation& o) {
        CONCLAVE_CHECK(o.node < node_count_, "an observation names one of the nodes");
        apply_faults_until(o.at_ms);
        s_.highest_term = std::max(s_.highest_term, o.term);
        if (o.role == ObservedRole::Leader) {
            note_leader(o, o.node);
        } else if (o.role == ObservedRole::Follower && o.leader && o.term > 0) {
            note_leader(o, *o.leader);
        }
        if (silenced_[o.node]) {
            return;  // an answer sent before the signal, arriving after it
        }
        if (o.role == ObservedRole::Leader && last_leader_ && o.node == last_leader_->node &&
            o.term == last_leader_->term) {
            last_leader_seen_ms_ = o.at_ms;
        }
        tracker_.observe(o);
        step(o.at_ms);
    }

    Summary finish(std::int64_t end_ms) {
        apply_faults_until(end_ms);
        close_epoch(std::max(end_ms, epoch_begin_ms_));
        if (current_) {
            s_.final_leader = current_->node;
        }
        s_.quorum_leaderless = leaderless_while_quorum_runs(node_count_, s_.epochs, faults_);
        return std::move(s_);
    }

  private:
    // Safety: every node seen as leader of each term, by its own claim or a follower's view.
    void note_leader(const Observation& o, NodeIndex who) {
        auto& set = leaders_by_term_[o.term];
        set.insert(who);
        if (set.size() >= 2 && !reported_.contains(o.term)) {
            reported_.insert(o.term);
            s_.violations.push_back(SafetyViolation{o.term, {set.begin(), set.end()}, o.at_ms});
        } else if (set.size() >= 2) {
            for (SafetyViolation& v : s_.violations) {
                if (v.term == o.term) {
                    v.leaders.assign(set.begin(), set.end());
                }
            }
        }
    }

    void close_epoch(std::int64_t at_ms) {
        LeaderEpoch e;
        e.begin_ms = epoch_begin_ms_;
        e.end_ms = at_ms;
        if (current_) {
            e.leader = current_->node;
            e.term = current_->term;
        }
        if (e.end_ms > e.begin_ms || e.leader) {
            s_.epochs.push_back(e);
        }
        if (!current_ && any_leader_yet_) {
            s_.leaderless_ms += at_ms - epoch_begin_ms_;
        }
    }

    // The effective leader may have changed at `at_ms`: close the epoch and record the change.
    void step(std::int64_t at_ms) {
        const auto now = tracker_.effective();
        if (now == current_) {
            return;
        }
        close_epoch(at_ms);
        // A gap no poll could see (two answers at the same instant) is not a failover.
        if (!current_ && any_leader_yet_ && now && last_leader_ && at_ms > epoch_begin_ms_) {
            s_.failover_ms.push_back(at_ms - epoch_begin_ms_);
        }
        current_ = now;
        epoch_begin_ms_ = at_ms;
        if (!now) {
            return;
        }
        if (!any_leader_yet_) {
            any_leader_yet_ = true;
            s_.first_leader = now->node;
        } else if (last_leader_ && !(*last_leader_ == *now)) {
            record_change(at_ms, *now);
        }
        if (!(last_leader_ == now)) {
            last_leader_seen_ms_ = at_ms;
        }
        last_leader_ = now;
    }

    void record_change(std::int64_t at_ms, const LeaderTracker::Leader& now) {
        LeaderChange c;
        c.at_ms = at_ms;
        c.from = last_leader_->node;
        c.from_term = last_leader_->term;
        c.to = now.node;
        c.to_term = now.term;
        c.needless = healthy_throughout(node_count_, faults_, c.from, last_leader_seen_ms_, at_ms);
        s_.changes.push_back(c);
        s_.leader_changes += 1;
        s_.needless_leader_changes += c.needless ? 1 : 0;
    }

    // A killed, stopped, paused or disk-full node claims nothing from the signal on, until it is
    // started or resumed: its last answer (or one in flight) must not keep it as a live leader,
    // and the failover it causes is measured from the signal.
    void apply_faults_until(std::int64_t t_ms) {
        for (; next_fault_ < faults_.size() && faults_[next_fault_].at_ms <= t_ms; ++next_fault_) {
            const FaultEvent& e = faults_[next_fault_];
            if (e.kind == FaultKind::Kill) {
                s_.kills += 1;
                s_.leader_kills += current_ && current_->node == e.node ? 1U : 0U;
            }
            // A removed node still answers until it is stopped: its claims stand (a removed
            // leader steps down by itself), so a removal silences nothing.
            if (e.kind == FaultKind::SetLink || e.kind == FaultKind::Remove ||
                e.node >= node_count_) {
                continue;
            }
            // A node whose disk filled is out of service (it hands over and exits): its change
            // of leader is forced, not needless.
            const bool silence = e.kind == FaultKind::Kill || e.kind == FaultKind::Stop ||
                                 e.kind == FaultKind::Pause || e.kind == FaultKind::DiskFull;
            silenced_[e.node] = silence;
            if (silence) {
                tracker_.observe(
                    Observation{e.at_ms, e.node, ObservedRole::Unreachable, 0, {}, {}, e.at_ms});
                step(e.at_ms);
            }
        }
    }

    std::size_t node_count_;
    const std::vector<FaultEvent>& faults_;
    Summary s_;
    LeaderTracker tracker_;
    std::map<std::uint64_t, std::set<NodeIndex>> leaders_by_term_;
    std::set<std::uint64_t> reported_;
    std::optional<LeaderTracker::Leader> current_;
    std::optional<LeaderTracker::Leader> last_leader_;  // most recent non-empty epoch
    std::int64_t last_leader_seen_ms_ = 0;  // last answer of last_leader_ claiming its leadership
    std::int64_t epoch_begin_ms_ = 0;
    bool any_leader_yet_ = false;
    std::vector<bool> silenced_;
    std::size_t next_fault_ = 0;
};

/// [begin, end) stretches in which at least a quorum of the nodes ran; the last one is open.
std::vector<std::pair<std::int64_t, std::int64_t>> quorum_running(
    std::size_t node_count, const std::vector<FaultEvent>& faults) {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    FaultState state(node_count);
    bool up = true;
    std::int64_t since = 0;
    for (const FaultEvent& e : faults) {
        if (e.kind != FaultKind::SetLink && e.node >= node_count) {
            continue;
        }
        state.apply(e);
        std::size_t running = 0;
        for (NodeIndex i = 0; i < node_count; ++i) {
            running += state.alive(i) ? 1U : 0U;
        }
        const bool now = is_majority(running, node_count);
        if (up && !now) {
            out.emplace_back(since, e.at_ms);
        } else if (!up && now) {
            since = e.at_ms;
        }
        up = now;
    }
    if (up) {
        out.emplace_back(since, std::numeric_limits<std::int64_t>::max());
    }
    return out;
}

}  // namespace

QuorumLeaderless leaderless_while_quorum_runs(std::size_t node_count,
                                              const std::vector<LeaderEpoch>& epochs,
                                              const std::vector<FaultEvent>& faults) {
    const auto running = quorum_running(node_count, faults);
    std::vector<std::pair<std::int64_t, std::int64_t>> gaps;  // merged when they touch
    bool led = false;
    for (const LeaderEpoch& e : epochs) {
        led = led || e.leader.has_value();
        if (!led || e.leader) {
            continue;
        }
        for (const auto& [begin, end] : running) {
            const std::int64_t from = std::max(begin, e.begin_ms);
            const std::int64_t to = std::min(end, e.end_ms);
            if (to <= from) {
                continue;
            }
            if (!gaps.empty() && gaps.back().second == from) {
                gaps.back().second = to;
            } else {
                gaps.emplace_back(from, to);
            }
        }
    }
    QuorumLeaderless q;
    q.gaps = gaps.size();
    for (const auto& [from, to] : gaps) {
        q.total_ms += to - from;
        if (to - from > q.longest_ms) {
            q.longest_ms = to - from;
            q.longest_from_ms = from;
        }
    }
    return q;
}

Summary analyze(std::size_t node_count, const std::vector<Observation>& observations,
                const std::vector<FaultEvent>& faults, std::int64_t end_ms) {
    Analyzer a(node_count, faults, end_ms);
    for (const Observation& o : observations) {
        a.observe(o);
    }
    return a.finish(end_ms);
}

}  // namespace conclave::bounce
