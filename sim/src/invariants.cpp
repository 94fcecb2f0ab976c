// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/invariants.hpp"
#include "conclave/core/quorum.hpp"

#include "conclave/core/enum_names.hpp"

#include <algorithm>

#include "conclave/core/check.hpp"
#include "conclave/sim/rng.hpp"

namespace conclave::sim {
namespace {

std::string node_name(NodeId n) {
    return "n" + std::to_string(n.value);
}

}  // namespace

std::string_view to_string(ViolationKind k) {
    return enum_name(k);
}

std::string_view to_string(StepAction a) {
    return enumerator_name(a);
}

StepAction action_for(const elector::MessageBody& body) {
    return kHandlerSteps[body.index()];
}

StepAction action_for(elector::TimerId timer) {
    switch (timer) {
        case elector::TimerId::InitialWait:
            return StepAction::InitialWaitFired;
        case elector::TimerId::RandomWait:
            return StepAction::RandomWaitFired;
        case elector::TimerId::ScoutingResult:
            return StepAction::ScoutingResultFired;
        case elector::TimerId::ElectionResult:
            return StepAction::ElectionResultFired;
        case elector::TimerId::HeartbeatBroadcast:
            return StepAction::HeartbeatBroadcastFired;
        case elector::TimerId::HeartbeatCheck:
            return StepAction::HeartbeatCheckFired;
        case elector::TimerId::CheckQuorum:
            return StepAction::CheckQuorumFired;
    }
    return StepAction::Start;  // unreachable: every TimerId is listed (-Wswitch)
}

History::History(std::size_t nodes, HistoryOptions options)
    : nodes_(nodes),
      majority_(conclave::majority(nodes)),
      options_(options),
      highest_term_(nodes, 0),
      last_lsn_of_node_(nodes) {
    CONCLAVE_CHECK(nodes > 0 && nodes < 255, "the history has 1 to 254 nodes");
}

std::uint64_t History::max_term() const {
    return highest_term_.empty() ? 0
                                 : *std::max_element(highest_term_.begin(), highest_term_.end());
}

std::optional<NodeId> History::leader_of(Term term) const {
    const auto it = leader_of_term_.find(term.value);
    if (it == leader_of_term_.end()) {
        return std::nullopt;
    }
    return NodeId{static_cast<std::uint16_t>(it->second - 1)};
}

std::size_t History::votes_for(NodeId candidate, Term term, NodeSet voters) const {
    std::size_t count = 0;
    for (std::size_t voter = 0; voter < nodes_; ++voter) {
        if (!voters.contains(NodeId{static_cast<std::uint16_t>(voter)})) {
            continue;
        }
        const auto it = vote_.find({term.value, voter});
        if (it != vote_.end() && it->second == candidate.value + 1) {
            ++count;
        }
    }
    return count;
}

std::optional<Violation> History::record_vote(NodeId voter, Term term, NodeId candidate) {
    std::uint8_t& vote = vote_[{term.value, voter.value}];
    const auto wanted = static_cast<std::uint8_t>(candidate.value + 1);
    if (vote != 0 && vote != wanted) {
        return Violation{ViolationKind::DoubleVote,
                         node_name(voter) + " voted for " + node_name(candidate) + " in term " +
                             std::to_string(term.value) + " after voting for n" +
                             std::to_string(vote - 1)};
    }
    vote = wanted;
    return std::nullopt;
}

std::optional<Violation> History::after_step(NodeId node, StepAction action,
                                             const elector::ElectorState& after,
                                             const elector::Actions& actions) {
    CONCLAVE_CHECK(node.value < nodes_, "a step names one of the nodes");
    std::uint64_t& highest = highest_term_[node.value];
    if (after.term.value < highest && options_.check_term_monotonic) {
        return Violation{ViolationKind::TermDecreased, node_name(node) + " went from term " +
                                                           std::to_string(highest) + " to term " +
                                                           std::to_string(after.term.value) +
                                                           " in " + std::string(to_string(action))};
    }
    if (after.term.value > highest) {
        highest = after.term.value;
    }
    for (const elector::Action& a : actions) {
        if (const auto* persist = std::get_if<elector::PersistState>(&a)) {
            if (persist->state.voted_for) {
                if (auto v = record_vote(node, persist->state.term, *persist->state.voted_for)) {
                    return v;
                }
            }
        } else if (const auto* send = std::get_if<elector::SendTo>(&a)) {
            const auto* response = std::get_if<elector::ElectionResponse>(&send->message.body);
            if (response && response->granted && action == StepAction::HandleElectionProposal) {
                if (auto v = record_vote(node, send->message.term, send->to)) {
                    return v;
                }
            }
        } else if (const auto* alarm = std::get_if<elector::RaiseAlarm>(&a)) {
            return Violation{ViolationKind::CoreAlarm, node_name(node) +
                                                           " raised the two-leaders alarm about " +
                                                           node_name(alarm->peer) + " in term " +
                                                           std::to_string(alarm->term.value)};
        }
    }
    if (after.role == elector::Role::Leader && options_.never_lead.contains(node)) {
        return Violation{
            ViolationKind::PriorityZeroLeads,
            node_name(node) + " has priority 0 and leads term " + std::to_string(after.term.value)};
    }
    if (after.role == elector::Role::Leader) {
        const Term t = after.term;
        std::uint8_t& leader = leader_of_term_[t.value];
        const auto me = static_cast<std::uint8_t>(node.value + 1);
        if (leader != 0 && leader != me) {
            return Violation{ViolationKind::TwoLeadersInTerm,
                             node_name(node) + " and n" + std::to_string(leader - 1) +
                                 " both led term " + std::to_string(t.value)};
        }
        if (leader == 0) {
            leader = me;
            // Membership: votes of the voters the driver gave the node (set_voters), a majority
            // of them; with the default configuration (every node votes), the true majority.
            const NodeSet all = NodeSet::first(nodes_);
            const bool everyone = after.voters == all;
            const std::size_t needed =
                everyone ? majority_ : conclave::majority(after.voters.size());
            const std::size_t votes = votes_for(node, t, everyone ? all : after.voters);
            if (votes < needed) {
                return Violation{ViolationKind::LeaderWithoutQuorum,
                                 node_name(node) + " leads term " + std::to_string(t.value) +
                                     " with " + std::to_string(votes) + " vote(s), majority is " +
                                     std::to_string(needed)};
            }
        }
    }
    return std::nullopt;
}

std::optional<Violation> History::after_issue(NodeId node, Lsn issued,
                                              const elector::ElectorState& after) {
    auto fail = [&](const std::string& why) {
        return Violation{ViolationKind::LsnNotIncreasing,
                         node_name(node) + " issued LSN " + to_string(issued) + ": " + why};
    };
    if (after.role != elector::Role::Leader || issued.term != after.term) {
        return fail("not a leader in that term");
    }
    Lsn& last_of_node = last_lsn_of_node_[node.value];
    if (!(issued > last_of_node)) {
        return fail("not above its previous LSN " + to_string(last_of_node));
    }
    last_of_node = issued;
    std::uint64_t& last_counter = last_counter_of_term_[issued.term.value];
    if (issued.counter <= last_counter) {
        return fail("counter not above " + std::to_string(last_counter) +
                    " already issued in this term");
    }
    last_counter = issued.counter;
    return std::nullopt;
}

std::uint64_t History::hash() const {
    std::uint64_t h = 0x5151;
    for (const auto& [term, leader] : leader_of_term_) {
        h = hash_mix(h, (term << 8) | leader);
    }
    for (const auto& [key, candidate] : vote_) {
        const std::uint64_t i = key.first * nodes_ + key.second;
        h = hash_mix(h, (i << 8) | candidate | (1ULL << 40));
    }
    for (std::uint64_t t : highest_term_) {
        h = hash_mix(h, t);
    }
    return h;
}

}  // namespace conclave::sim
