// SPDX-License-Identifier: Apache-2.0
// Safety invariants over the whole history of a run, shared by the simulator and the explorer.
//
// Checked after every step of every node:
//   - at most one leader per term, ever (TwoLeadersInTerm);
//   - a node's term never decreases, including across crash and restart (TermDecreased);
//   - at most one vote per node per term (DoubleVote): a vote is a PersistState naming a
//     candidate, or a granted ElectionResponse sent while handling an ElectionProposal (granted
//     responses sent on discovering a leader are support, not votes);
//   - a node that leads term t received votes for t from a majority (LeaderWithoutQuorum) of
//     the voters the simulator gave it (membership; every node without set_voters);
//   - Leader Sequence Numbers issued by leaders strictly increase, per node and per term
//     (LsnNotIncreasing);
//   - a core never raises its own two-leaders alarm (Alarm);
//   - a node of priority 0 never leads (PriorityZeroLeads).
// The majority used is the true one (N/2+1), not the core's configured quorum, so that a core
// with a wrong quorum is caught.
#pragma once

#include <boost/describe/enum.hpp>
#include <boost/describe/enumerators.hpp>
#include <boost/mp11/algorithm.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conclave/elector/actions.hpp"
#include "conclave/elector/elector.hpp"

namespace conclave::sim {

BOOST_DEFINE_FIXED_ENUM_CLASS(
    ViolationKind, std::uint8_t, TwoLeadersInTerm, TermDecreased, DoubleVote, LeaderWithoutQuorum,
    LsnNotIncreasing, CoreAlarm, Liveness,
    // The replicated log (SimOptions::log; see log_invariants.hpp).
    LogDivergence,        // committed prefixes are not prefixes of one history
    LogAckLost,           // an acknowledged entry is not where (or what) it was acknowledged
    LogLeaderIncomplete,  // an ACTIVE leader lacks an entry committed in its term or before
    LogNotDurable,        // a committed entry is durable in the storage of less than a majority
    LogAnswerNotDurable,  // a writer heard "committed" before its node's stored commit point
                          // covered the entry
    LogCoreCheck,         // check_invariants() or a CONCLAVE_CHECK of the log core failed
    LogDriver,            // promise not durable, storage differs from the core, bad outcome
    LogLiveness,          // the healed cluster did not commit a fresh proposal or converge
    NotDurable,           // the runtime sent a term or a vote before it was durable (runtime/)
    LogAlarm,  // a log core detected (and dropped) a message no correct peer sends: a lying peer
    LogTruncated,  // a node restarted on less than it held durably, without the repaired marker
    // Membership through the log: an elector refused a configuration its log made
    // active, other than one older than the elector's own (sim/README.md, "Membership through
    // the log").
    MembershipRefused,
    // Node-table growth (docs/membership.md §8): a live node's elector and log core hold tables
    // of different sizes between two events, or a message crossed a link between a node and one
    // outside its table (the real mesh has no such connection).
    NodeTable,
    // The leader lease (docs/design.md): two nodes lead with a valid lease at the same time.
    LeaseExclusive,
    // Priorities (docs/design.md): a node of priority 0 leads.
    PriorityZeroLeads)
std::string_view to_string(ViolationKind k);

struct Violation {
    ViolationKind kind{};
    std::string detail;
};

/// One input given to one node's core; the names are the trace's `action` values and the TLA+
/// action names.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    StepAction, std::uint8_t, Start, Stop, Crash, Restart, HandleScoutingRequest,
    HandleScoutingResponse, HandleElectionProposal, HandleElectionResponse, HandleLeaderHeartbeat,
    HandleHeartbeatAck, HandleHeartbeatResponse, HandleLeadershipCession, InitialWaitFired,
    RandomWaitFired, ScoutingResultFired, ElectionResultFired, HeartbeatBroadcastFired,
    HeartbeatCheckFired, CheckQuorumFired, PeerUp, PeerDown, TransferLeadership, IssueLsn,
    SetVoters  // membership: the active configuration changed (Elector::set_voters)
)
std::string_view to_string(StepAction a);
/// The step that receiving `body` is (its handler, kHandlerSteps[body.index()]).
StepAction action_for(const elector::MessageBody& body);
/// The step that a firing of `timer` is.
StepAction action_for(elector::TimerId timer);

/// The handler step of each message kind: the StepAction named "Handle" + the body's kName,
/// found at compile time (a body without one fails to compile).
template <class Body>
constexpr StepAction handler_step() {
    constexpr std::string_view prefix = "Handle";
    std::optional<StepAction> step;
    boost::mp11::mp_for_each<boost::describe::describe_enumerators<StepAction>>([&](auto d) {
        const std::string_view name = d.name;
        if (name.starts_with(prefix) && name.substr(prefix.size()) == Body::kName) {
            step = d.value;
        }
    });
    return step.value();
}

template <class Variant, std::size_t... I>
constexpr std::array<StepAction, sizeof...(I)> handler_steps(std::index_sequence<I...>) {
    return {handler_step<std::variant_alternative_t<I, Variant>>()...};
}
/// Handler steps of MessageBody's alternatives, by index.
inline constexpr std::array<StepAction, elector::kMessageKindCount> kHandlerSteps =
    handler_steps<elector::MessageBody>(std::make_index_sequence<elector::kMessageKindCount>{});

struct HistoryOptions {
    /// Off only in the test that shows what losing durable state leads to beyond a term decrease.
    bool check_term_monotonic = true;
    /// The nodes of priority 0 (Config::priorities): none of them ever leads (PriorityZeroLeads).
    NodeSet never_lead;
    bool operator==(const HistoryOptions&) const = default;  // History's own == compares it too
};

/// History variables (leader of each term, votes of each node in each term, highest term of each
/// node, last LSNs) and the checks over them. Plain data: the explorer copies and hashes it as part
/// of its state, like the history variables of a TLA+ spec.
class History {
  public:
    History(std::size_t nodes, HistoryOptions options = {});

    /// Records the step `action` that `node` just took (its state after it and the actions it
    /// returned) and checks every invariant. Returns the first violation, if any.
    std::optional<Violation> after_step(NodeId node, StepAction action,
                                        const elector::ElectorState& after,
                                        const elector::Actions& actions);
    /// `node`'s durable state was lost entirely (a wipe): its next incarnation starts at term 0,
    /// so its term is checked for monotony from there on. Its votes stay recorded: a new
    /// incarnation voting again in a term its predecessor voted in is still a double vote.
    void forget_term(NodeId node) { highest_term_[node.value] = 0; }
    /// The highest term any node has reached (a wiped node's predecessors included, until
    /// forget_term: the caller keeps what it needs).
    std::uint64_t max_term() const;
    /// Records an LSN issued by `node` (whose state is `after`).
    std::optional<Violation> after_issue(NodeId node, Lsn issued,
                                         const elector::ElectorState& after);

    std::size_t majority() const { return majority_; }
    /// Node that led `term`, if any.
    std::optional<NodeId> leader_of(Term term) const;
    /// Hash of the history variables the explorer needs (leaders, votes, highest terms).
    std::uint64_t hash() const;
    bool operator==(const History&) const = default;

  private:
    std::optional<Violation> record_vote(NodeId voter, Term term, NodeId candidate);
    /// Votes for `candidate` in `term` cast by `voters`.
    std::size_t votes_for(NodeId candidate, Term term, NodeSet voters) const;

    std::size_t nodes_;
    std::size_t majority_;
    HistoryOptions options_;
    // Keyed by term, sparse: a term is any value below 2^63 (a lying member can make a node adopt
    // one), so nothing here may be sized by a term.
    std::map<std::uint64_t, std::uint8_t> leader_of_term_;  // term -> leader + 1
    std::map<std::pair<std::uint64_t, std::size_t>, std::uint8_t>
        vote_;                                                     // (term, voter) -> candidate + 1
    std::vector<std::uint64_t> highest_term_;                      // [node]
    std::vector<Lsn> last_lsn_of_node_;                            // [node]
    std::map<std::uint64_t, std::uint64_t> last_counter_of_term_;  // term -> last counter
};

}  // namespace conclave::sim
