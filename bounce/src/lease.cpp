// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/lease.hpp"

#include <algorithm>

namespace conclave::bounce {

namespace {

/// A process event after which the node cannot act on a lease it holds.
bool silences(const FaultEvent& e) {
    return e.kind == FaultKind::Kill || e.kind == FaultKind::Stop || e.kind == FaultKind::Pause ||
           e.kind == FaultKind::DiskFull;
}

/// One node's lease intervals: each valid answer opens or renews one (the newest answer says
/// when it ends); an answer without a valid lease, or a signal that stops the process, ends it.
class NodeLeases {
  public:
    void valid(std::int64_t at_ms, std::int64_t remaining_ms) {
        const std::int64_t end = at_ms + remaining_ms;
        if (open_ && at_ms <= current_.end_ms) {
            current_.end_ms = end;  // renewed (or shrunk: the newest answer knows best)
            return;
        }
        close(current_.end_ms);
        current_ = LeaseInterval{at_ms, end};
        open_ = true;
    }
    void ended(std::int64_t at_ms) { close(at_ms); }
    std::vector<LeaseInterval> finish(std::int64_t end_ms) {
        close(end_ms);
        for (LeaseInterval& i : held_) {
            i.end_ms = std::min(i.end_ms, end_ms);
        }
        std::erase_if(held_, [](const LeaseInterval& i) { return i.end_ms <= i.begin_ms; });
        return std::move(held_);
    }

  private:
    void close(std::int64_t at_ms) {
        if (open_) {
            current_.end_ms = std::min(current_.end_ms, at_ms);
            held_.push_back(current_);
            open_ = false;
        }
    }
    std::vector<LeaseInterval> held_;
    LeaseInterval current_;
    bool open_ = false;
};

/// The longest common stretch of two sorted lists of disjoint intervals.
std::optional<LeaseOverlap> longest_common(NodeIndex a, const std::vector<LeaseInterval>& x,
                                           NodeIndex b, const std::vector<LeaseInterval>& y) {
    std::optional<LeaseOverlap> best;
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < x.size() && j < y.size()) {
        const std::int64_t begin = std::max(x[i].begin_ms, y[j].begin_ms);
        const std::int64_t end = std::min(x[i].end_ms, y[j].end_ms);
        if (end > begin && (!best || end - begin > best->length_ms)) {
            best = LeaseOverlap{a, b, begin, end - begin};
        }
        (x[i].end_ms < y[j].end_ms ? i : j) += 1;
    }
    return best;
}

/// The longest stretch of [first lease, end_ms) that no interval covers.
void longest_gap(LeaseSummary& s, std::int64_t end_ms) {
    std::vector<LeaseInterval> all;
    for (const auto& node : s.held) {
        all.insert(all.end(), node.begin(), node.end());
    }
    if (all.empty()) {
        return;
    }
    std::sort(all.begin(), all.end(), [](const LeaseInterval& p, const LeaseInterval& q) {
        return p.begin_ms < q.begin_ms;
    });
    std::int64_t covered = all.front().end_ms;
    for (const LeaseInterval& i : all) {
        if (i.begin_ms - covered > s.longest_without_ms) {
            s.longest_without_ms = i.begin_ms - covered;
            s.longest_without_from_ms = covered;
        }
        covered = std::max(covered, i.end_ms);
    }
    if (end_ms - covered > s.longest_without_ms) {
        s.longest_without_ms = end_ms - covered;
        s.longest_without_from_ms = covered;
    }
}

}  // namespace

LeaseSummary lease_summary(std::size_t node_count, const std::vector<Observation>& observations,
                           const std::vector<FaultEvent>& faults, std::int64_t end_ms) {
    LeaseSummary s;
    std::vector<NodeLeases> nodes(node_count);
    std::int64_t longest_round_trip = 0;
    std::size_t next_fault = 0;
    auto faults_until = [&](std::int64_t t_ms) {
        for (; next_fault < faults.size() && faults[next_fault].at_ms <= t_ms; ++next_fault) {
            const FaultEvent& e = faults[next_fault];
            if (silences(e) && e.node < node_count) {
                nodes[e.node].ended(e.at_ms);
            }
        }
    };
    for (const Observation& o : observations) {
        faults_until(o.at_ms);
        if (o.node >= node_count || o.role == ObservedRole::Unreachable) {
            continue;  // no answer: says nothing about the lease
        }
        longest_round_trip = std::max(longest_round_trip, o.answered_ms - o.at_ms);
        if (o.role == ObservedRole::Leader && o.lease_remaining_ms) {
            s.reported = true;
            nodes[o.node].valid(o.at_ms, *o.lease_remaining_ms);
        } else {
            nodes[o.node].ended(o.at_ms);
        }
    }
    faults_until(end_ms);
    for (NodeLeases& n : nodes) {
        s.held.push_back(n.finish(end_ms));
    }
    for (NodeIndex a = 0; a < node_count; ++a) {
        for (NodeIndex b = a + 1; b < node_count; ++b) {
            auto o = longest_common(a, s.held[a], b, s.held[b]);
            if (o && (!s.longest_overlap || o->length_ms > s.longest_overlap->length_ms)) {
                s.longest_overlap = o;
            }
        }
    }
    longest_gap(s, end_ms);
    s.polling_error_ms = 2 * (longest_round_trip + 1);
    return s;
}

}  // namespace conclave::bounce
