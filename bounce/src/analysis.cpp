// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/analysis.hpp"

#include <algorithm>
#include <cassert>
#include <map>
#include <set>

namespace conclave::bounce {

LeaderTracker::LeaderTracker(std::size_t node_count) : latest(node_count) {
    for (NodeIndex i = 0; i < node_count; ++i) {
        latest[i].node = i;
    }
}

void LeaderTracker::observe(const Observation& o) {
    assert(o.node < latest.size());
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

std::optional<std::int64_t> Summary::failover_min_ms() const {
    return nth(failover_ms, false, false);
}
std::optional<std::int64_t> Summary::failover_median_ms() const {
    return nth(failover_ms, true, false);
}
std::optional<std::int64_t> Summary::failover_max_ms() const {
    return nth(failover_ms, false, true);
}

Summary analyze(std::size_t node_count, const std::vector<Observation>& observations,
                const std::vector<FaultEvent>& faults, std::int64_t end_ms) {
    Summary s;
    s.duration_ms = end_ms;
    LeaderTracker tracker(node_count);

    // Safety: every node seen as leader of each term, by its own claim or a follower's view.
    std::map<std::uint64_t, std::set<NodeIndex>> leaders_by_term;
    std::set<std::uint64_t> reported;

    std::optional<LeaderTracker::Leader> current;
    std::optional<LeaderTracker::Leader> last_leader;  // most recent non-empty epoch
    std::int64_t last_leader_seen_ms = 0;  // last answer of last_leader claiming its leadership
    std::int64_t epoch_begin_ms = 0;
    bool any_leader_yet = false;

    auto close_epoch = [&](std::int64_t at_ms) {
        LeaderEpoch e;
        e.begin_ms = epoch_begin_ms;
        e.end_ms = at_ms;
        if (current) {
            e.leader = current->node;
            e.term = current->term;
        }
        if (e.end_ms > e.begin_ms || e.leader) {
            s.epochs.push_back(e);
        }
        if (!current && any_leader_yet) {
            s.leaderless_ms += at_ms - epoch_begin_ms;
        }
    };

    // The effective leader may have changed at `at_ms`: close the epoch and record the change.
    auto step = [&](std::int64_t at_ms) {
        const auto now = tracker.effective();
        if (now == current) {
            return;
        }
        close_epoch(at_ms);
        // A gap no poll could see (two answers at the same instant) is not a failover.
        if (!current && any_leader_yet && now && last_leader && at_ms > epoch_begin_ms) {
            s.failover_ms.push_back(at_ms - epoch_begin_ms);
        }
        current = now;
        epoch_begin_ms = at_ms;
        if (!now) {
            return;
        }
        if (!any_leader_yet) {
            any_leader_yet = true;
            s.first_leader = now->node;
        } else if (last_leader && !(*last_leader == *now)) {
            LeaderChange c;
            c.at_ms = at_ms;
            c.from = last_leader->node;
            c.from_term = last_leader->term;
            c.to = now->node;
            c.to_term = now->term;
            c.needless = healthy_throughout(node_count, faults, c.from, last_leader_seen_ms, at_ms);
            s.changes.push_back(c);
            s.leader_changes += 1;
            s.needless_leader_changes += c.needless ? 1 : 0;
        }
        if (!(last_leader == now)) {
            last_leader_seen_ms = at_ms;
        }
        last_leader = now;
    };

    // A killed, stopped, paused or disk-full node claims nothing from the signal on, until it is
    // started or resumed: its last answer (or one in flight) must not keep it as a live leader, and
    // the failover it causes is measured from the signal.
    std::vector<bool> silenced(node_count, false);
    std::size_t next_fault = 0;
    auto apply_faults_until = [&](std::int64_t t_ms) {
        for (; next_fault < faults.size() && faults[next_fault].at_ms <= t_ms; ++next_fault) {
            const FaultEvent& e = faults[next_fault];
            // A removed node still answers until it is stopped: its claims stand (a removed
            // leader steps down by itself), so a removal silences nothing.
            if (e.kind == FaultKind::SetLink || e.kind == FaultKind::Remove ||
                e.node >= node_count) {
                continue;
            }
            // A node whose disk filled is out of service (it hands over and exits): its change
            // of leader is forced, not needless.
            const bool silence = e.kind == FaultKind::Kill || e.kind == FaultKind::Stop ||
                                 e.kind == FaultKind::Pause || e.kind == FaultKind::DiskFull;
            silenced[e.node] = silence;
            if (silence) {
                tracker.observe(
                    Observation{e.at_ms, e.node, ObservedRole::Unreachable, 0, {}, {}, e.at_ms});
                step(e.at_ms);
            }
        }
    };

    for (const Observation& o : observations) {
        assert(o.node < node_count);
        apply_faults_until(o.at_ms);
        s.highest_term = std::max(s.highest_term, o.term);
        auto note_leader = [&](NodeIndex who) {
            auto& set = leaders_by_term[o.term];
            set.insert(who);
            if (set.size() >= 2 && !reported.contains(o.term)) {
                reported.insert(o.term);
                s.violations.push_back(SafetyViolation{o.term, {set.begin(), set.end()}, o.at_ms});
            } else if (set.size() >= 2) {
                for (SafetyViolation& v : s.violations) {
                    if (v.term == o.term) {
                        v.leaders.assign(set.begin(), set.end());
                    }
                }
            }
        };
        if (o.role == ObservedRole::Leader) {
            note_leader(o.node);
        } else if (o.role == ObservedRole::Follower && o.leader && o.term > 0) {
            note_leader(*o.leader);
        }
        if (silenced[o.node]) {
            continue;  // an answer sent before the signal, arriving after it
        }

        if (o.role == ObservedRole::Leader && last_leader && o.node == last_leader->node &&
            o.term == last_leader->term) {
            last_leader_seen_ms = o.at_ms;
        }
        tracker.observe(o);
        step(o.at_ms);
    }
    apply_faults_until(end_ms);
    close_epoch(std::max(end_ms, epoch_begin_ms));
    if (current) {
        s.final_leader = current->node;
    }
    return s;
}

}  // namespace conclave::bounce
