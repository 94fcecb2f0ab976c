// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/lease.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>

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
    void valid(std::int64_t at_ms, std::int64_t remaining_ms, std::int64_t error_ms) {
        const std::int64_t end = at_ms + remaining_ms;
        last_valid_ms_ = at_ms;
        if (open_ && at_ms <= current_.end_ms) {
            current_.end_ms = end;  // renewed (or shrunk: the newest answer knows best)
            current_.end_error_ms = error_ms;
            return;
        }
        close(current_.end_ms, current_.end_error_ms);
        current_ = LeaseInterval{at_ms, end, error_ms, error_ms};
        open_ = true;
    }
    /// The tool's own signal: the node acts no more from `at_ms` on (exact).
    void ended(std::int64_t at_ms, std::int64_t error_ms) { close(at_ms, error_ms); }
    /// An answer without a valid lease, sent at `at_ms`. Before the end the last valid answer
    /// gave, the node ended its lease itself (a transfer, a step-down) at some moment after that
    /// answer: the end is taken here, at the latest, and may lie as far back as that answer.
    void ended_by_answer(std::int64_t at_ms, std::int64_t error_ms) {
        const bool early = open_ && at_ms < current_.end_ms;
        close(at_ms, early ? error_ms + (at_ms - last_valid_ms_) : error_ms);
    }
    std::vector<LeaseInterval> finish(std::int64_t end_ms) {
        close(end_ms, 0);
        for (LeaseInterval& i : held_) {
            i.end_ms = std::min(i.end_ms, end_ms);
        }
        std::erase_if(held_, [](const LeaseInterval& i) { return i.end_ms <= i.begin_ms; });
        return std::move(held_);
    }

  private:
    void close(std::int64_t at_ms, std::int64_t error_ms) {
        if (open_) {
            if (at_ms < current_.end_ms) {
                current_.end_ms = at_ms;
                current_.end_error_ms = error_ms;
            }
            held_.push_back(current_);
            open_ = false;
        }
    }
    std::vector<LeaseInterval> held_;
    LeaseInterval current_;
    bool open_ = false;
    std::int64_t last_valid_ms_ = 0;  // when the latest answer with a valid lease was sent
};

/// Keeps the longer overlap and the shorter approach of two intervals of nodes a and b.
void compare(NodeIndex a, const LeaseInterval& x, NodeIndex b, const LeaseInterval& y,
             LeaseSummary& s) {
    const bool x_first = x.begin_ms <= y.begin_ms;
    const LeaseInterval& later = x_first ? y : x;
    const LeaseInterval& ends_first = x.end_ms <= y.end_ms ? x : y;
    const std::int64_t error = later.begin_error_ms + ends_first.end_error_ms;
    if (ends_first.end_ms > later.begin_ms) {
        const LeaseOverlap o{a, b, later.begin_ms, ends_first.end_ms - later.begin_ms, error};
        if (!s.longest_overlap || o.length_ms > s.longest_overlap->length_ms) {
            s.longest_overlap = o;
        }
        return;
    }
    const LeaseOverlap o{x_first ? a : b, x_first ? b : a, ends_first.end_ms,
                         later.begin_ms - ends_first.end_ms, error};
    if (!s.closest || o.length_ms < s.closest->length_ms) {
        s.closest = o;
    }
}

/// Compares each interval of a with those of b that come next to it in time.
void compare_nodes(NodeIndex a, const std::vector<LeaseInterval>& x, NodeIndex b,
                   const std::vector<LeaseInterval>& y, LeaseSummary& s) {
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < x.size() && j < y.size()) {
        compare(a, x[i], b, y[j], s);
        (x[i].end_ms < y[j].end_ms ? i : j) += 1;
    }
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
    LeaseInterval covered = all.front();  // its end: how far the union reaches so far
    for (const LeaseInterval& i : all) {
        if (i.begin_ms - covered.end_ms > s.longest_without_ms) {
            s.longest_without_ms = i.begin_ms - covered.end_ms;
            s.longest_without_from_ms = covered.end_ms;
            s.longest_without_error_ms = covered.end_error_ms + i.begin_error_ms;
        }
        if (i.end_ms > covered.end_ms) {
            covered = i;
        }
    }
    if (end_ms - covered.end_ms > s.longest_without_ms) {
        s.longest_without_ms = end_ms - covered.end_ms;
        s.longest_without_from_ms = covered.end_ms;
        s.longest_without_error_ms = covered.end_error_ms;
    }
}

}  // namespace

LeaseSummary lease_summary(std::size_t node_count, const std::vector<Observation>& observations,
                           const std::vector<FaultEvent>& faults, std::int64_t end_ms) {
    LeaseSummary s;
    std::vector<NodeLeases> nodes(node_count);
    std::size_t next_fault = 0;
    auto faults_until = [&](std::int64_t t_ms) {
        for (; next_fault < faults.size() && faults[next_fault].at_ms <= t_ms; ++next_fault) {
            const FaultEvent& e = faults[next_fault];
            if (silences(e) && e.node < node_count) {
                nodes[e.node].ended(e.at_ms, 0);  // the tool's own signal: no polling error
            }
        }
    };
    for (const Observation& o : observations) {
        faults_until(o.at_ms);
        if (o.node >= node_count || o.role == ObservedRole::Unreachable) {
            continue;  // no answer: says nothing about the lease
        }
        const std::int64_t error = std::max<std::int64_t>(0, o.answered_ms - o.at_ms) + 1;
        if (o.role == ObservedRole::Leader && o.lease_remaining_ms) {
            s.reported = true;
            nodes[o.node].valid(o.at_ms, *o.lease_remaining_ms, error);
        } else {
            nodes[o.node].ended_by_answer(o.at_ms, error);
        }
    }
    faults_until(end_ms);
    std::vector<std::vector<LeaseInterval>> held;
    for (NodeLeases& n : nodes) {
        held.push_back(n.finish(end_ms));
    }
    const bool reported = s.reported;
    s = interval_summary(std::move(held), end_ms);
    s.reported = reported;
    return s;
}

LeaseSummary interval_summary(std::vector<std::vector<LeaseInterval>> held, std::int64_t end_ms) {
    LeaseSummary s;
    s.held = std::move(held);
    for (NodeIndex a = 0; a < s.held.size(); ++a) {
        s.reported = s.reported || !s.held[a].empty();
        for (NodeIndex b = a + 1; b < s.held.size(); ++b) {
            compare_nodes(a, s.held[a], b, s.held[b], s);
        }
    }
    longest_gap(s, end_ms);
    return s;
}

std::optional<Belief> parse_belief_line(std::string_view line, std::int64_t epoch_us) {
    const auto space = line.find(' ');
    std::int64_t us = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), us);
    if (ec != std::errc() || space == std::string_view::npos || end != line.data() + space) {
        return std::nullopt;
    }
    std::string_view state = line.substr(space + 1);
    state = state.substr(0, state.find(' '));
    Belief b;
    b.at_ms = (us - epoch_us) / 1000;
    if (state == "lead") {
        b.leads = true;
    } else if (state != "start" && state != "follow" && state != "lost") {
        throw std::runtime_error("belief line with an unknown state: " + std::string(line));
    }
    return b;
}

std::vector<LeaseInterval> belief_intervals(const std::vector<Belief>& events,
                                            std::int64_t end_ms) {
    std::vector<LeaseInterval> out;
    bool leads = false;
    std::int64_t since = 0;  // believes it leads since then (when `leads`)
    std::int64_t last = events.empty() ? 0 : events.front().at_ms;
    for (const Belief& e : events) {
        if (e.at_ms < last) {
            throw std::runtime_error("beliefs out of order at " + std::to_string(e.at_ms) + " ms");
        }
        last = e.at_ms;
        if (e.leads && !leads) {
            since = e.at_ms;
        } else if (!e.leads && leads) {
            out.push_back(LeaseInterval{since, e.at_ms, 0, 0});
        }
        leads = e.leads;
    }
    if (leads && since < end_ms) {
        out.push_back(LeaseInterval{since, end_ms, 0, 0});
    }
    return out;
}

}  // namespace conclave::bounce
