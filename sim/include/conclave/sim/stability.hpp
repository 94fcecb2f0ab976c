// SPDX-License-Identifier: Apache-2.0
// Leadership tracking over a run: who leads, leader changes, needless leader changes, leaderless
// time, and the agreement predicates used by the liveness check.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conclave/sim/simulator.hpp"

namespace conclave::sim {

/// The leader every node agrees on: all nodes alive, each following L, and L leading. nullopt if
/// there is no such node.
std::optional<NodeId> agreed_leader(const Simulator& sim);
/// A leader followed by a majority (itself included), if any.
std::optional<NodeId> majority_leader(const Simulator& sim);

struct TimelineEntry {
    Millis at{};
    std::string text;
};

struct LeadershipSummary {
    std::uint64_t elections_won = 0;   // leaderships (node, term) observed
    std::uint64_t leader_changes = 0;  // a node other than the previous leader won
    /// Leader changes while the previous leader was healthy (alive, not paused, connected to a
    /// majority): the ones a sticky leader prevents.
    std::uint64_t needless_leader_changes = 0;
    Term highest_term{};
    Millis leaderless_time{};  // time with no leader followed by a majority
    /// Terms in which two or more nodes stood as candidates (counted when the second one does).
    std::uint64_t contested_terms = 0;
    /// Contested terms that nobody won: split votes (counted by finish()).
    std::uint64_t split_votes = 0;
};

/// Feed it every step (Simulator::on_step) and, optionally, fault notes.
class LeadershipTracker {
  public:
    explicit LeadershipTracker(std::size_t nodes, bool keep_timeline = false);

    void observe(const Simulator& sim, const StepRecord& step);
    void note(Millis at, std::string text);
    /// Closes the leaderless-time accounting at `end`.
    void finish(Millis end);

    const LeadershipSummary& summary() const { return summary_; }
    const std::vector<TimelineEntry>& timeline() const { return timeline_; }

  private:
    bool keep_timeline_;
    LeadershipSummary summary_;
    std::vector<TimelineEntry> timeline_;
    std::vector<std::uint64_t> led_term_;  // [node] last term observed leading (0: none)
    struct TermRecord {
        NodeSet candidates;
        bool won = false;
    };
    std::map<std::uint64_t, TermRecord> terms_;  // terms in which someone stood
    std::optional<NodeId> last_leader_;
    bool had_majority_leader_ = false;
    Millis last_at_{};
};

}  // namespace conclave::sim
