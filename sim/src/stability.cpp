// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/stability.hpp"

namespace conclave::sim {

std::optional<NodeId> agreed_leader(const Simulator& sim) {
    const elector::ElectorState* first = sim.state(NodeId{0});
    if (!first || !first->leader) {
        return std::nullopt;
    }
    const NodeId leader = *first->leader;
    for (std::uint16_t i = 1; i < sim.size(); ++i) {
        const elector::ElectorState* s = sim.state(NodeId{i});
        if (!s || s->leader != leader) {
            return std::nullopt;
        }
    }
    const elector::ElectorState* l = sim.state(leader);
    if (!l || l->role != elector::Role::Leader) {
        return std::nullopt;
    }
    return leader;
}

std::optional<NodeId> majority_leader(const Simulator& sim) {
    for (std::uint16_t i = 0; i < sim.size(); ++i) {
        const elector::ElectorState* s = sim.state(NodeId{i});
        if (!s || s->role != elector::Role::Leader) {
            continue;
        }
        std::size_t followers = 0;
        for (std::uint16_t j = 0; j < sim.size(); ++j) {
            const elector::ElectorState* f = sim.state(NodeId{j});
            if (f && f->leader == NodeId{i} && f->term == s->term) {
                ++followers;
            }
        }
        if (followers >= sim.history().majority()) {
            return NodeId{i};
        }
    }
    return std::nullopt;
}

LeadershipTracker::LeadershipTracker(std::size_t nodes, bool keep_timeline)
    : keep_timeline_(keep_timeline), led_term_(nodes, 0) {}

void LeadershipTracker::note(Millis at, std::string text) {
    if (keep_timeline_) {
        timeline_.push_back(TimelineEntry{at, std::move(text)});
    }
}

void LeadershipTracker::observe(const Simulator& sim, const StepRecord& step) {
    const elector::ElectorState& s = *step.state;
    if (s.term > summary_.highest_term) {
        summary_.highest_term = s.term;
    }
    if (s.role == elector::Role::Candidate || s.role == elector::Role::Leader) {
        TermRecord& t = terms_[s.term.value];
        if (s.role == elector::Role::Leader) {
            t.won = true;
        } else if (!t.candidates.contains(step.node)) {
            t.candidates.insert(step.node);
            if (t.candidates.size() == 2) {
                ++summary_.contested_terms;
            }
        }
    }
    if (s.role == elector::Role::Leader && led_term_[step.node.value] != s.term.value) {
        led_term_[step.node.value] = s.term.value;
        ++summary_.elections_won;
        std::string text =
            "n" + std::to_string(step.node.value) + " leads term " + std::to_string(s.term.value);
        if (last_leader_ && *last_leader_ != step.node) {
            ++summary_.leader_changes;
            const bool needless = sim.healthy(*last_leader_);
            if (needless) {
                ++summary_.needless_leader_changes;
            }
            text += needless ? "  (NEEDLESS change: n" : "  (change from n";
            text += std::to_string(last_leader_->value) + (needless ? " was healthy)" : ")");
        }
        last_leader_ = step.node;
        note(step.now, std::move(text));
    }
    const bool has = majority_leader(sim).has_value();
    if (!had_majority_leader_) {
        summary_.leaderless_time += step.now - last_at_;
    }
    had_majority_leader_ = has;
    last_at_ = step.now;
}

void LeadershipTracker::finish(Millis end) {
    if (!had_majority_leader_ && end > last_at_) {
        summary_.leaderless_time += end - last_at_;
    }
    last_at_ = end;
    summary_.split_votes = 0;
    for (const auto& [term, t] : terms_) {
        if (t.candidates.size() >= 2 && !t.won) {
            ++summary_.split_votes;
        }
    }
}

}  // namespace conclave::sim
