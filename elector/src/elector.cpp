// SPDX-License-Identifier: Apache-2.0
// The elector core. "Departure N" refers to the numbered departures from BlazingMQ in
// docs/design.md.
#include "conclave/elector/elector.hpp"
#include "conclave/core/quorum.hpp"

#include "conclave/elector/backoff.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace conclave::elector {
namespace {

// The tiers of the elector's own checks after every input (Finish): the membership and lease
// invariants are always on; the role and timer invariants (CheckRoleInvariants,
// CheckTimerInvariants) cost about 5 % of the simulator's throughput in a release build, so
// they run after every input only in debug builds (no NDEBUG: the asan flavour) or when built
// with -DCONCLAVE_FULL_CHECKS (HACKING.md, "Invariant checks after every input").
#if !defined(NDEBUG) || defined(CONCLAVE_FULL_CHECKS)
constexpr bool kFullElectorChecks = true;
#else
constexpr bool kFullElectorChecks = false;
#endif

constexpr std::uint8_t timer_bit(TimerId t) {
    return static_cast<std::uint8_t>(1U << static_cast<unsigned>(t));
}

// The largest term a message body carries besides its envelope (0 when none).
std::uint64_t LargestBodyTerm(const MessageBody& body) {
    if (const auto* r = std::get_if<ElectionResponse>(&body)) {
        return r->voter_term.value;
    }
    if (const auto* h = std::get_if<LeaderHeartbeat>(&body)) {
        return h->lsn.term.value;
    }
    return 0;
}

// A heartbeat whose LSN is of a term above its envelope's: no node sends one (a leader's LSN is
// of its term or older; Elector.tla's TypeOK), and noting it would lift a follower's LSN above
// its term.
bool HeartbeatLsnAhead(const Message& m) {
    const auto* h = std::get_if<LeaderHeartbeat>(&m.body);
    return h != nullptr && h->lsn.term > m.term;
}

}  // namespace

// ---- The term rules, once per message kind -----------------------------------------------------
// Which roles hear a kind, and what a lower, equal or higher envelope term means for it; receive()
// applies them before it calls the kind's handler. A message body without an entry here fails to
// compile. This table is the current protocol exactly (tla/Elector.tla mirrors it handler by
// handler); it changes only together with the spec.

namespace {

constexpr std::uint8_t role_bit(Role r) {
    return static_cast<std::uint8_t>(1U << static_cast<unsigned>(r));
}
constexpr std::uint8_t kAnyRole =
    role_bit(Role::Follower) | role_bit(Role::Candidate) | role_bit(Role::Leader);

/// A term below the node's: dropped, answered by the kind's stale reply, or given to the handler
/// (term-free kinds).
enum class OnStale : std::uint8_t { Ignore, Reply, Handle };
enum class OnEqual : std::uint8_t { Ignore, Handle };
/// A term above the node's: dropped, given to the handler (which decides whether to adopt it), or
/// adopted (durably, without a vote) before the handler runs.
enum class OnNewer : std::uint8_t { Ignore, Handle, Adopt };

struct TermRule {
    std::uint8_t roles;  // role_bit()s of the roles that hear the kind (Stopped never does)
    OnStale stale;
    OnEqual equal;
    OnNewer newer;
    constexpr bool heard_by(Role r) const { return (roles & role_bit(r)) != 0; }
};

}  // namespace

// PreVote: the envelope term is the term the sender proposes, not one it is in; every node
// answers, whatever the term (the handler says yes only to a newer one).
template <>
struct Elector::Rules<ScoutingRequest> {
    static constexpr TermRule term{kAnyRole, OnStale::Handle, OnEqual::Handle, OnNewer::Handle};
    static constexpr auto handle = &Elector::HandleScoutingRequest;
};
// Echoes the round's proposed term (own term + 1): only a scouting follower hears it, and never
// adopts it.
template <>
struct Elector::Rules<ScoutingResponse> {
    static constexpr TermRule term{role_bit(Role::Follower), OnStale::Ignore, OnEqual::Ignore,
                                   OnNewer::Handle};
    static constexpr auto handle = &Elector::HandleScoutingResponse;
};
// Stale: refused with our term. Newer: the handler adopts it only together with a granted vote.
template <>
struct Elector::Rules<ElectionProposal> {
    static constexpr TermRule term{kAnyRole, OnStale::Reply, OnEqual::Handle, OnNewer::Handle};
    static constexpr auto reply = &Elector::RefuseStaleProposal;
    static constexpr auto handle = &Elector::HandleElectionProposal;
};
// Echoes the proposal's term: only answers to the current election count (the voter's own newer
// term travels in the body, see the handler).
template <>
struct Elector::Rules<ElectionResponse> {
    static constexpr TermRule term{role_bit(Role::Candidate) | role_bit(Role::Leader),
                                   OnStale::Ignore, OnEqual::Handle, OnNewer::Ignore};
    static constexpr auto handle = &Elector::HandleElectionResponse;
};
// Stale: answered (InvalidHeartbeat, or a leader's own heartbeat). Newer: adopted, then followed.
template <>
struct Elector::Rules<LeaderHeartbeat> {
    static constexpr TermRule term{kAnyRole, OnStale::Reply, OnEqual::Handle, OnNewer::Adopt};
    static constexpr auto reply = &Elector::ReplyToStaleHeartbeat;
    static constexpr auto handle = &Elector::HandleLeaderHeartbeat;
};
template <>
struct Elector::Rules<HeartbeatAck> {
    static constexpr TermRule term{role_bit(Role::Leader), OnStale::Ignore, OnEqual::Handle,
                                   OnNewer::Ignore};
    static constexpr auto handle = &Elector::HandleHeartbeatAck;
};
// Only a leader hears it, and only a newer term means anything: adopted, then the leader steps
// down.
template <>
struct Elector::Rules<HeartbeatResponse> {
    static constexpr TermRule term{role_bit(Role::Leader), OnStale::Ignore, OnEqual::Ignore,
                                   OnNewer::Adopt};
    static constexpr auto handle = &Elector::HandleHeartbeatResponse;
};
template <>
struct Elector::Rules<LeadershipCession> {
    static constexpr TermRule term{role_bit(Role::Follower), OnStale::Ignore, OnEqual::Handle,
                                   OnNewer::Ignore};
    static constexpr auto handle = &Elector::HandleLeadershipCession;
};

Elector::Elector(Config config, DurableState restored, RandomSource random)
    : config_(config), quorum_(0), random_(std::move(random)) {
    if (auto error = config_.validate()) {
        throw std::invalid_argument("invalid elector config: " + *error);
    }
    if (!random_) {
        throw std::invalid_argument("invalid elector config: a random source is required");
    }
    if (restored.voted_for && restored.voted_for->value >= config_.cluster_size) {
        throw std::invalid_argument(
            "invalid durable state: voted_for is not a node of the cluster");
    }
#ifndef CONCLAVE_PLANTED_BUGS
    if (config_.planted_bug != PlantedBug::None) {
        throw std::invalid_argument(
            "invalid elector config: planted bugs exist only in conclave_elector_planted (the "
            "simulator's and the tests' build of this core)");
    }
#endif
    quorum_ = config_.effective_quorum();
    promise_duration_ = config_.promise_duration();
    lease_duration_ = config_.lease_duration();
    CONCLAVE_CHECK(quorum_ >= 1 && quorum_ <= config_.cluster_size, "quorum <= cluster size");
    CONCLAVE_CHECK(config_.self.value < config_.cluster_size, "node index in range");
    // The default configuration (until set_voters): every member votes, version 0.
    state_.voters = NodeSet::first(config_.cluster_size);
    RecomputeQuorum();
    state_.term = restored.term;
    state_.voted_for = restored.voted_for;
    persisted_ = restored;
    snapshot_ = LeadershipSnapshot{Role::Stopped,   state_.term, std::nullopt, 0,
                                   Reason::Stopped, Millis{0},   std::nullopt};
}

// ---- Inputs ------------------------------------------------------------------------------------

Actions Elector::start(Millis now) {
    now_ = now;
    if (state_.role != Role::Stopped) {
        return Finish();
    }
    state_.role = Role::Follower;
    state_.leader.reset();
    state_.tentative_leader.reset();
    state_.missed_checks = 0;
    state_.round = ScoutingRound{};
    // Ranked: nodes started together look for a leader as long, then scout one slot apart.
    const Millis ranked_start =
        config_.backoff == Backoff::Ranked
            ? ranked_backoff(config_, state_.term, std::nullopt, random_(), UsePriorities())
            : Millis{0};
    if (CanStand()) {  // a learner, removed node or priority-0 node never stands (R7, R8)
        Arm(TimerId::InitialWait, config_.initial_wait + ranked_start);
    }
    // A promise given before a crash is forgotten with it: kept for P from the start instead
    // (a node that never left term 0 never heard a leader, so it promised nobody).
    if (state_.term.value > 0 && state_.voters.size() > 1) {
        lease_.start_promise_until = now_ + promise_duration_;
    }
    NotifyIfChanged(Reason::Started);
    return Finish();
}

Actions Elector::stop(Millis now) {
    now_ = now;
    if (state_.role == Role::Stopped) {
        return Finish();
    }
    if (state_.role == Role::Leader) {
        SendToAll(state_.lsn.term, LeadershipCession{});
    }
    CancelAllTimers();
    // Keep only what survives a restart; peers_up is connection state the driver re-reports.
    const ElectorState kept = state_;
    state_ = ElectorState{};
    state_.term = kept.term;
    state_.voted_for = kept.voted_for;
    state_.last_round_id = kept.last_round_id;
    state_.lsn = kept.lsn;
    state_.peers_up = kept.peers_up;
    state_.voters = kept.voters;
    state_.config_version = kept.config_version;
    EndLease();
    NotifyIfChanged(Reason::Stopped);
    return Finish();
}

Actions Elector::receive(Millis now, const Message& message) {
    now_ = now;
    if (state_.role == Role::Stopped) {
        return Finish();
    }
    LeaseExpires();
    // The codec refuses terms >= 2^63 and a heartbeat's LSN term above its envelope's; a core fed
    // directly (simulator, tests) refuses them too, so that no message can bring a term within
    // reach of wrapping, or a follower's LSN above its term.
    if (!IsPeer(message.from) || message.term.value >= kTermLimit ||
        LargestBodyTerm(message.body) >= kTermLimit || HeartbeatLsnAhead(message)) {
        ++counters_.messages_dropped;
        ++(IsPeer(message.from) ? counters_.dropped_term_out_of_range
                                : counters_.dropped_not_a_peer);
        return Finish();
    }
    std::visit(
        [&](const auto& body) {
            using Body = std::decay_t<decltype(body)>;
            using R = Rules<Body>;
            // The kind's term rules (Rules<Body>, above) decide, for every kind in this one
            // place, which roles hear it and what a lower, equal and higher term means; only
            // then the handler, which decides by role.
            if (!R::term.heard_by(state_.role)) {
                return;
            }
            TermOrder order = TermOrder::Equal;
            if (message.term < state_.term) {
                if constexpr (R::term.stale == OnStale::Reply) {
                    (this->*R::reply)(message, body);
                    return;
                } else if constexpr (R::term.stale == OnStale::Ignore) {
                    return;
                }
                order = TermOrder::Stale;
            } else if (message.term > state_.term) {
                if constexpr (R::term.newer == OnNewer::Ignore) {
                    return;
                } else if constexpr (R::term.newer == OnNewer::Adopt) {
                    AdoptTerm(message.term, std::nullopt);
                }
                order = TermOrder::Newer;
            } else if constexpr (R::term.equal == OnEqual::Ignore) {
                return;
            }
            (this->*R::handle)(message, body, order);
        },
        message.body);
    return Finish();
}

Actions Elector::timer_fired(Millis now, TimerId timer) {
    now_ = now;
    if (state_.role == Role::Stopped) {
        return Finish();
    }
    const bool armed = state_.timer_armed(timer);
    state_.armed_timers &= static_cast<std::uint8_t>(~timer_bit(timer));  // consumed
    LeaseExpires();  // the handlers below are by role: a leader that stepped down ignores its own
    if (!armed) {
        return Finish();
    }
    switch (timer) {
        case TimerId::InitialWait:
            InitialWaitFired();
            break;
        case TimerId::RandomWait:
            RandomWaitFired();
            break;
        case TimerId::ScoutingResult:
            ScoutingResultFired();
            break;
        case TimerId::ElectionResult:
            ElectionResultFired();
            break;
        case TimerId::HeartbeatBroadcast:
            HeartbeatBroadcastFired();
            break;
        case TimerId::HeartbeatCheck:
            HeartbeatCheckFired();
            break;
        case TimerId::CheckQuorum:
            CheckQuorumFired();
            break;
    }
    return Finish();
}

Actions Elector::peer_up(Millis now, NodeId peer) {
    now_ = now;
    LeaseExpires();
    if (IsPeer(peer)) {
        PeerUp(peer);
    }
    return Finish();
}

Actions Elector::peer_down(Millis now, NodeId peer, LinkLoss loss) {
    now_ = now;
    LeaseExpires();
    if (IsPeer(peer)) {
        PeerDown(peer, loss);
    }
    return Finish();
}

Actions Elector::transfer_leadership(Millis now, NodeId target) {
    now_ = now;
    LeaseExpires();
    if (!transfer_error(target)) {
        TransferLeadership(target);
    }
    return Finish();
}

std::optional<std::string> Elector::transfer_error(NodeId target) const {
    if (state_.role != Role::Leader) {
        return "this node is not the leader";
    }
    if (target.value >= config_.cluster_size) {
        return "node " + to_string(target) + " is not a member of the cluster";
    }
    if (target == config_.self) {
        return "this node is already the leader";
    }
    if (!IsVoter(target)) {
        return "node " + to_string(target) + " is not a voter (configuration version " +
               std::to_string(state_.config_version) + ")";
    }
    if (!state_.peers_up.contains(target)) {
        return "node " + to_string(target) + " is not connected";
    }
    if (config_.priority(target) == 0 && UsePriorities()) {
        return "node " + to_string(target) + " has priority 0 (it never leads)";
    }
    return std::nullopt;
}

Actions Elector::set_voters(Millis now, NodeSet voters, std::uint64_t version) {
    now_ = now;
    LeaseExpires();
    if (voters_error(voters, version)) {
        ++counters_.voter_set_refused;
        return Finish();
    }
    if (version != state_.config_version || voters != state_.voters) {
        ++counters_.voter_set_changes;
        SetVoters(voters, version);
    }
    return Finish();
}

std::optional<std::string> Elector::priority_error(NodeId node, std::uint32_t priority) const {
    if (node.value >= config_.cluster_size) {
        return "node " + to_string(node) + " is not a member of the cluster";
    }
    Config changed = config_;
    changed.priorities[node.value] = priority;
    return changed.validate();
}

Actions Elector::set_priority(Millis now, NodeId node, std::uint32_t priority) {
    now_ = now;
    LeaseExpires();
    if (!priority_error(node, priority)) {
        SetPriority(node, priority);
    }
    return Finish();
}

std::optional<std::string> Elector::grow_table(std::size_t cluster_size) {
    if (cluster_size < config_.cluster_size || cluster_size > kMaxClusterSize) {
        return "the node table only grows, up to " + std::to_string(kMaxClusterSize) +
               " nodes: " + std::to_string(config_.cluster_size) + " -> " +
               std::to_string(cluster_size);
    }
    if (cluster_size == config_.cluster_size) {
        return std::nullopt;
    }
    // Before the growth "every node votes" meant the whole table; the voters stay those nodes,
    // so the configured quorum gives way to a majority of them (RecomputeQuorum).
    config_.cluster_size = cluster_size;
    RecomputeQuorum();
    CONCLAVE_CHECK(quorum_ >= 1 && quorum_ <= state_.voters.size(), "quorum within the voters");
    return std::nullopt;
}

std::optional<std::string> Elector::voters_error(NodeSet voters, std::uint64_t version) const {
    if (voters.empty()) {
        return "a configuration needs at least one voter";
    }
    if ((voters.bits & ~NodeSet::first(config_.cluster_size).bits) != 0) {
        return "a voter is not a member of the cluster";
    }
    if (version >= kConfigVersionLimit) {
        return "configuration version " + std::to_string(version) + " is not below 2^63";
    }
    if (version < state_.config_version) {
        return "configuration version " + std::to_string(version) + " is older than the active " +
               std::to_string(state_.config_version);
    }
    if (version == state_.config_version && voters != state_.voters) {
        return "configuration version " + std::to_string(version) +
               " is active with other voters (one configuration per version)";
    }
    return std::nullopt;
}

std::optional<Lsn> Elector::issue_lsn() {
    if (state_.role != Role::Leader) {
        return std::nullopt;
    }
    const Lsn before = state_.lsn;
    ++state_.lsn.counter;
    CONCLAVE_CHECK(state_.lsn > before, "LSNs increase");
    return state_.lsn;
}

// ---- Message handlers --------------------------------------------------------------------------
// receive() has applied the kind's term rules (Elector::Rules, top of this file) before any of
// these runs: each sees only the roles and terms its rule lets through, and `order` says whether
// the envelope term was lower, equal or higher than the node's (when higher and the rule adopts,
// the node is already in the sender's term).

// Any state: answer whether we would vote for the sender in the proposed term. Sticky leader: a
// leader (it knows itself) and a follower within its promise to its leader (the leader lease:
// now < last heard + E, docs/design.md) say no, and the answer changes no state, with one
// exception. Corroboration: a follower whose promise has run out but whose heartbeat check has
// not fired yet takes a request for a newer term as the evidence that check would bring. It drops
// the leader as that check would, says yes, and waits a scouting timeout more before scouting
// itself, so that the asker wins uncontested.
void Elector::HandleScoutingRequest(const Message& m, const ScoutingRequest& body,
                                    TermOrder order) {
    const Term term_before = state_.term;
    const std::optional<NodeId> vote_before = state_.voted_for;
    const bool was_leader = state_.role == Role::Leader;
    CONCLAVE_CHECK(state_.role != Role::Stopped, "a stopped node hears nothing");
    // Membership (R5, ConfigFence): a candidate of an older configuration gets no support, nor
    // does one of ours from a non-voter; a request the fence refuses corroborates nothing either.
    const Refusal fence = ConfigFence(body.config_version);
    if (CatchesUpTerm(m, fence)) {
        AdoptTerm(Term{m.term.value - 1}, std::nullopt);
        StepDown(Reason::NewerTermSeen);
    }
    if (fence == Refusal::None && CorroboratesSilence(order)) {
        ++counters_.silences_corroborated;
        StepDown(Reason::LeaderNoHeartbeat, config_.scouting_result_timeout);
    }
    // Sticky leader: a leader knows itself; a follower keeps its promise (PromiseHolds).
    const bool knows_leader =
        state_.role == Role::Leader ||
        ((PromiseHolds() || StartPromiseHolds()) && !planted(PlantedBug::SkipStickyLeader));
    const bool will_vote = fence == Refusal::None && !knows_leader && order == TermOrder::Newer;
    if (will_vote) {
        ++counters_.prevotes_granted;
    } else {
        ++counters_.prevotes_refused;
    }
    Send(m.from, m.term, ScoutingResponse{body.round, will_vote, fence, state_.config_version});
    // A PreVote answer grants no vote: a term caught up carries none, and within the term the
    // vote is left alone; a leader stays one.
    CONCLAVE_CHECK(state_.term >= term_before, "terms only grow");
    CONCLAVE_CHECK(state_.term == term_before || !state_.voted_for,
                   "a term caught up from a scouting request carries no vote");
    CONCLAVE_CHECK(state_.term != term_before || state_.voted_for == vote_before,
                   "a scouting request changes no vote");
    CONCLAVE_CHECK(was_leader == (state_.role == Role::Leader),
                   "a scouting request neither makes nor deposes a leader");
}

// Follower in a scouting round: count the reply if it belongs to the current round (departure 2).
// The envelope term echoes the round's proposed term (own term + 1), hence always "newer".
void Elector::HandleScoutingResponse(const Message& m, const ScoutingResponse& body, TermOrder) {
    const ScoutingRound& round = state_.round;
    const Term term_before = state_.term;
    CONCLAVE_CHECK(state_.role == Role::Follower, "only a follower scouts");
    CONCLAVE_CHECK(round.id == 0 || round.term == state_.term.next(),
                   "a scouting round asks about the next term");
    CountScoutingResponse(m, body);
    // The round's outcome: still counting (supporting itself), given up, or standing (a
    // candidate, or a leader at once, of the next term, voting for itself).
    CONCLAVE_CHECK(state_.round.id == 0 || state_.round.yes.contains(config_.self),
                   "a scouting round supports its own node");
    CONCLAVE_CHECK(state_.term == term_before || state_.term == term_before.next(),
                   "a scouting reply raises the term by one at most");
    CONCLAVE_CHECK(state_.term == term_before || state_.voted_for == config_.self,
                   "a scouting reply raises the term only by standing");
}

void Elector::CountScoutingResponse(const Message& m, const ScoutingResponse& body) {
    const ScoutingRound& round = state_.round;
    if (round.id == 0 || m.term != round.term) {
        return;
    }
    if (body.round != round.id && !planted(PlantedBug::CountStaleScoutingReplies)) {
        return;
    }
    if (!IsVoter(m.from)) {
        return;  // the round counts the voters of this node's configuration only
    }
    if (body.will_vote) {
        state_.round.yes.insert(m.from);
        state_.round.no.erase(m.from);
    } else if (!round.yes.contains(m.from)) {
        state_.round.no.insert(m.from);
    }
    if (state_.round.yes.size() >= quorum_) {
        BecomeCandidate(/*transfer=*/false);
    } else if (state_.round.no.size() > state_.voters.size() - quorum_) {
        // A quorum of yes is no longer possible: back off now rather than wait for the timer.
        EndScoutingRound();
        Arm(TimerId::RandomWait, RandomBackoff());
    }
}

// A proposal for a term below ours: refused explicitly (departure 4), with our term.
void Elector::RefuseStaleProposal(const Message& m, const ElectionProposal&) {
    ++counters_.votes_refused_by_reason[static_cast<std::size_t>(Refusal::StaleTerm)];
    Send(m.from, m.term,
         ElectionResponse{false, Refusal::StaleTerm, state_.term, state_.config_version});
}

// Vote or refuse explicitly (departure 4). With scouting on, a leader, and a follower within its
// promise to its leader (PromiseHolds), refuse (sticky leader) unless the proposal comes from
// the leader's chosen successor (the leader ended its lease before it named it). A newer
// term is adopted only together with the vote (so a sticky refusal leaves the term alone).
void Elector::HandleElectionProposal(const Message& m, const ElectionProposal& body,
                                     TermOrder order) {
    const Term t = state_.term;
    const std::optional<NodeId> vote_before = state_.voted_for;
    const bool was_leader = state_.role == Role::Leader;
    CONCLAVE_CHECK(order != TermOrder::Stale, "a stale proposal is refused before the handler");
    CONCLAVE_CHECK(state_.role != Role::Stopped, "a stopped node hears nothing");
    AnswerElectionProposal(m, body, order);
    CONCLAVE_CHECK(state_.term >= t, "terms only grow");
    CONCLAVE_CHECK(state_.term == t || state_.voted_for == m.from,
                   "a newer term is adopted only together with the vote for its candidate");
    CONCLAVE_CHECK(
        state_.term != t || state_.voted_for == vote_before || planted(PlantedBug::DoubleVote),
        "one vote per term: a proposal in the current term changes no vote");
    CONCLAVE_CHECK(state_.role != Role::Leader || was_leader, "a proposal makes no leader");
    CONCLAVE_CHECK(state_.role != Role::Leader || state_.term == t,
                   "a leader that adopts a newer term steps down");
}

void Elector::AnswerElectionProposal(const Message& m, const ElectionProposal& body,
                                     TermOrder order) {
    const Term t = state_.term;
    auto refuse = [&](Refusal why) {
        ++counters_.votes_refused_by_reason[static_cast<std::size_t>(why)];
        Send(m.from, m.term, ElectionResponse{false, why, t, state_.config_version});
    };
    auto grant = [&] {
        ++counters_.votes_granted;
        Send(m.from, m.term, ElectionResponse{true, Refusal::None, m.term, state_.config_version});
    };
    // Membership (R5), before any vote: nobody votes for a candidate of an older configuration,
    // and a non-voter votes only for one of a newer configuration (ConfigFence). The term is left
    // alone (like a sticky refusal).
    if (const Refusal fence = ConfigFence(body.config_version); fence != Refusal::None) {
        return refuse(fence);
    }
    const bool sticky =
        config_.scouting && !body.transfer && !planted(PlantedBug::SkipStickyLeader);
    if (sticky && state_.role == Role::Leader) {
        return refuse(Refusal::IAmLeader);
    }
    if (sticky && (PromiseHolds() || StartPromiseHolds())) {
        return refuse(Refusal::HasLeader);
    }
    if (order == TermOrder::Equal) {
        if (state_.voted_for == m.from) {
            return grant();  // a duplicate of the proposal we already voted for
        }
        if (planted(PlantedBug::DoubleVote) && state_.role == Role::Follower) {
            state_.voted_for = m.from;
            Persist();
            state_.tentative_leader = m.from;
            return grant();
        }
        return refuse(state_.voted_for ? Refusal::AlreadyVoted : Refusal::StaleTerm);
    }
    // A newer term: vote for the sender in its term. The vote is durable before the reply leaves.
    const Reason reason =
        state_.role == Role::Leader ? Reason::LeaderPreempted : Reason::ElectionPreempted;
    AdoptTerm(m.term, m.from);
    FollowCandidate(reason, m.from);
    grant();
}

// Candidate counts votes and refusals of its current election; a leader counts late votes and
// unsolicited support as supporters. A refusal may carry the voter's newer term (`voter_term`,
// a term in the body rather than the envelope): the candidate adopts it and steps down.
void Elector::HandleElectionResponse(const Message& m, const ElectionResponse& body,
                                     TermOrder order) {
    const Term term_before = state_.term;
    const bool was_leader = state_.role == Role::Leader;
    CONCLAVE_CHECK(order == TermOrder::Equal, "only answers to the current election count");
    CONCLAVE_CHECK(state_.role == Role::Candidate || was_leader,
                   "only a candidate or a leader counts votes");
    CountElectionResponse(m, body);
    CONCLAVE_CHECK(!was_leader || state_.role == Role::Leader,
                   "a leader counting late votes stays the leader");
    CONCLAVE_CHECK(state_.role != Role::Leader || state_.supporters.contains(config_.self),
                   "a leader supports itself");
    CONCLAVE_CHECK(state_.term == term_before || state_.role == Role::Follower,
                   "a candidate that adopts a voter's newer term steps down");
    CONCLAVE_CHECK(state_.term == term_before || !state_.voted_for,
                   "a voter's newer term is adopted without a vote");
}

void Elector::CountElectionResponse(const Message& m, const ElectionResponse& body) {
    // Only the voters of this node's configuration count (a newer term is adopted from anyone).
    const bool voter = IsVoter(m.from);
    if (state_.role == Role::Leader) {
        if (body.granted && voter) {
            state_.supporters.insert(m.from);
            state_.heard_since_check.insert(m.from);
        }
        return;
    }
    if (body.granted) {
        if (!voter) {
            return;
        }
        state_.supporters.insert(m.from);
        if (state_.supporters.size() >= quorum_) {
            BecomeLeader();
        }
        return;
    }
    if (body.voter_term > state_.term) {
        AdoptTerm(body.voter_term, std::nullopt);
        StepDown(Reason::ElectionPreempted);
        return;
    }
    if (!voter) {
        return;
    }
    state_.refusals.insert(m.from);
    if (state_.refusals.size() > state_.voters.size() - quorum_) {
        StepDown(Reason::ElectionRefused);
    }
}

// A heartbeat of a term below ours: a stale leader. A leader answers with its own heartbeat (let
// it follow us), anybody else with the article's InvalidHeartbeat (here is my higher term).
void Elector::ReplyToStaleHeartbeat(const Message& m, const LeaderHeartbeat&) {
    if (state_.role == Role::Leader) {
        Send(m.from, state_.term, LatestHeartbeat());
    } else {
        Send(m.from, state_.term, HeartbeatResponse{});
    }
}

void Elector::HandleLeaderHeartbeat(const Message& m, const LeaderHeartbeat& body,
                                    TermOrder order) {
    const Term term_before = state_.term;
    const Lsn lsn_before = state_.lsn;
    CONCLAVE_CHECK(order != TermOrder::Stale, "a stale heartbeat is answered before the handler");
    CONCLAVE_CHECK(order != TermOrder::Newer || !state_.voted_for,
                   "a newer heartbeat's term was adopted without a vote");
    FollowHeartbeat(m, body, order);
    CONCLAVE_CHECK(state_.term == term_before, "a heartbeat's term was adopted before its handler");
    CONCLAVE_CHECK(state_.lsn >= lsn_before, "a node's LSN never goes back within its term");
    CONCLAVE_CHECK(state_.lsn.term <= state_.term, "a node's LSN is of its term or older");
    CONCLAVE_CHECK(state_.role != Role::Candidate, "a candidate that hears a leader follows it");
    CONCLAVE_CHECK(state_.role != Role::Leader || order == TermOrder::Equal,
                   "a leader that hears a newer leader follows it");
}

void Elector::FollowHeartbeat(const Message& m, const LeaderHeartbeat& body, TermOrder order) {
    const Term t = state_.term;  // the sender's: a newer term was adopted before this handler
    const NodeId src = m.from;
    const bool same_term = order == TermOrder::Equal;
    // Membership (R5): a leader of an older configuration won a legitimate election; it is
    // followed (its sync brings the newer configuration) and counted.
    if (body.config_version < state_.config_version) {
        ++counters_.stale_config_heartbeats;
    }
    if (same_term && state_.role == Role::Leader) {
        // Two leaders in one term: impossible by construction; detected and reported anyway.
        ++counters_.two_leader_alarms;
        out_.push_back(RaiseAlarm{AlarmKind::TwoLeadersInTerm, src, t});
        Send(src, t, LatestHeartbeat());
        return;
    }
    if (same_term && state_.role == Role::Follower && state_.leader && *state_.leader != src) {
        ++counters_.two_leader_alarms;
        out_.push_back(RaiseAlarm{AlarmKind::TwoLeadersInTerm, src, t});
        return;
    }
    // Recorded only once this node is a follower: a leader that steps down below cedes the term
    // it led, which BecomeFollower reads from the leader's own LSN.
    auto note_lsn = [&] {
        if (body.lsn > state_.lsn) {
            state_.lsn = body.lsn;
        }
    };
    if (same_term && state_.role == Role::Follower && state_.leader == src) {
        note_lsn();
        state_.missed_checks = 0;       // the common case: our leader is alive
        lease_.heard_leader_at = now_;  // the promise runs from here for P (promise_duration)
        Send(src, t, HeartbeatAck{body.round});
        return;
    }
    // A leader we do not follow yet, in our term or a newer one.
    const bool was_tentative = state_.role == Role::Follower && state_.tentative_leader == src;
    Reason reason = Reason::LeaderDiscovered;
    if (state_.role == Role::Candidate) {
        reason = Reason::ElectionPreempted;
    } else if (state_.role == Role::Leader) {
        reason = Reason::LeaderPreempted;
    }
    FollowLeader(reason, src);
    note_lsn();
    if (was_tentative && same_term) {
        Send(src, state_.term, HeartbeatAck{body.round});  // we already voted for it
    } else {
        // Unsolicited support so that the leader counts this node (reference behaviour).
        Send(src, state_.term,
             ElectionResponse{true, Refusal::None, state_.term, state_.config_version});
    }
}

void Elector::HandleHeartbeatAck(const Message& m, const HeartbeatAck& body, TermOrder order) {
    const Term term_before = state_.term;
    CONCLAVE_CHECK(state_.role == Role::Leader, "only a leader counts acks");
    CONCLAVE_CHECK(order == TermOrder::Equal, "only acks of the leader's term count");
    if (IsVoter(m.from)) {  // a learner's ack counts toward no quorum (R7)
        state_.supporters.insert(m.from);
        state_.heard_since_check.insert(m.from);
        RenewPromise(m.from, body.round);
        NoteAcknowledged(m.from, body.round);
    }
    CONCLAVE_CHECK(state_.role == Role::Leader, "an ack never deposes a leader");
    CONCLAVE_CHECK(state_.term == term_before, "an ack changes no term");
    CONCLAVE_CHECK(!IsVoter(m.from) || state_.supporters.contains(m.from),
                   "a voter that acknowledges supports the leader");
}

// InvalidHeartbeat: a follower tells the leader that it has moved to a higher term, which the
// leader has adopted (its rule) before this runs.
void Elector::HandleHeartbeatResponse(const Message&, const HeartbeatResponse&, TermOrder order) {
    CONCLAVE_CHECK(state_.role == Role::Leader, "only a leader hears InvalidHeartbeat");
    CONCLAVE_CHECK(order == TermOrder::Newer, "only a newer term deposes the leader");
    CONCLAVE_CHECK(!state_.voted_for, "the newer term was adopted without a vote");
    StepDown(Reason::LeaderPreempted);
    CONCLAVE_CHECK(state_.role == Role::Follower, "a deposed leader follows");
    CONCLAVE_CHECK(!state_.leader, "a deposed leader knows no leader yet");
}

void Elector::HandleLeadershipCession(const Message& m, const LeadershipCession& body,
                                      TermOrder order) {
    const Term term_before = state_.term;
    CONCLAVE_CHECK(state_.role == Role::Follower, "only a follower hears a cession");
    CONCLAVE_CHECK(order == TermOrder::Equal, "only a cession of the node's term counts");
    if (state_.leader == m.from || state_.tentative_leader == m.from) {
        if (body.successor == config_.self && CanStand()) {
            BecomeCandidate(/*transfer=*/true);
        } else {
            // When a successor is named, give it time to win before competing with it.
            const Millis extra = body.successor ? config_.election_result_timeout : Millis{0};
            StepDown(Reason::LeaderCeded, extra);
        }
    }
    // (A successor whose term space is exhausted stays a follower: TermSpaceExhausted.)
    CONCLAVE_CHECK(state_.term == term_before || state_.voted_for == config_.self,
                   "a cession raises the term only for the successor's own election");
    CONCLAVE_CHECK(state_.term == term_before || state_.role != Role::Follower,
                   "a successor that raised the term stands");
}

// ---- Timer handlers ----------------------------------------------------------------------------

void Elector::InitialWaitFired() {
    RandomWaitFired();
}

void Elector::RandomWaitFired() {
    if (state_.role == Role::Follower && !state_.leader && !state_.tentative_leader && CanStand()) {
        StartScouting();
    }
}

void Elector::ScoutingResultFired() {
    if (state_.round.id != 0) {
        EndScoutingRound();
        Arm(TimerId::RandomWait, RandomBackoff());
    }
}

void Elector::ElectionResultFired() {
    if (state_.role == Role::Candidate) {
        StepDown(Reason::QuorumNotAchieved);
    }
}

void Elector::HeartbeatBroadcastFired() {
    if (state_.role != Role::Leader) {
        return;
    }
    ForgetSilentPeers();
    SendToAll(state_.term, StartHeartbeatRound());
    Arm(TimerId::HeartbeatBroadcast, config_.heartbeat_period);
}

// Rule of HandleScoutingRequest (corroboration): the follower's promise has run out, its check
// has not fired yet.
bool Elector::CorroboratesSilence(TermOrder order) const {
    return order == TermOrder::Newer && state_.role == Role::Follower && state_.leader &&
           !PromiseHolds();
}

void Elector::HeartbeatCheckFired() {
    if (state_.role != Role::Follower || (!state_.leader && !state_.tentative_leader)) {
        return;
    }
    ++state_.missed_checks;
    if (state_.missed_checks < config_.heartbeat_check_misses()) {
        Arm(TimerId::HeartbeatCheck, config_.heartbeat_check_period);
        return;
    }
    if (PromiseHolds()) {  // the promise lasts P on this clock, whatever the checks counted
        Arm(TimerId::HeartbeatCheck, *lease_.heard_leader_at + promise_duration_ - now_);
        return;
    }
    StepDown(Reason::LeaderNoHeartbeat);
}

// Check-quorum (departure 3): a leader that has not heard from a quorum (itself included) within
// the inactivity interval steps down, even if every TCP connection is still open.
void Elector::CheckQuorumFired() {
    if (state_.role != Role::Leader) {
        return;
    }
    NodeSet heard = state_.heard_since_check;
    heard.insert(config_.self);
    heard.bits &= state_.voters.bits;  // voters only (heard_since_check holds no other)
    if (heard.size() < quorum_) {
        StepDown(Reason::CheckQuorumFailed);
        return;
    }
    state_.heard_since_check.clear();
    Arm(TimerId::CheckQuorum, config_.inactivity_interval());
}

// ---- Connection events and commands ------------------------------------------------------------

void Elector::PeerUp(NodeId peer) {
    state_.peers_up.insert(peer);
    if (state_.role == Role::Leader) {
        Send(peer, state_.term, LatestHeartbeat());
    }
}

// Only proof ends a follower's promise (docs/design.md, "The leader lease", assumption 3): a link
// to its leader that this node closed itself (a duplicate hello, a timeout, a full queue) is a
// silent leader, whose promise and heartbeat checks run out on this node's clock. A link to a
// candidate carries no promise. A leader drops the peer from its lease on every closure: the
// follower may take it for proof (a closure by this side reaches it as a FIN or an RST).
void Elector::PeerDown(NodeId peer, LinkLoss loss) {
    state_.peers_up.erase(peer);
    const bool proof = proves_peer_gone(loss) || planted(PlantedBug::PromiseEndsOnLocalClose);
    handback_.healthy_since[peer.value].reset();  // a flapping link starts its stability anew
    if (state_.role == Role::Follower &&
        ((state_.leader == peer && proof) || state_.tentative_leader == peer)) {
        StepDown(Reason::LeaderUnavailable);
    } else if (state_.role == Role::Leader) {
        state_.supporters.erase(peer);
        // The follower's promise ended with the link (exception b, docs/design.md), or will once
        // it learns that this side closed it.
        if (!planted(PlantedBug::LeaseKeptOnPeerDown)) {
            lease_.promise_until[peer.value].reset();
            lease_.down_at[peer.value] = now_;
            RecomputeLease();
        }
        if (state_.supporters.size() < quorum_) {
            StepDown(Reason::QuorumNotAchieved);
        } else {
            LeaseExpires();
        }
    }
}

// Departure 5: the leader names a successor in its cession; the successor proposes at once with
// the transfer flag, which lets followers of the old leader vote for it. Safety still rests on
// terms and one vote per term. The old leader waits an election timeout before competing. Its
// lease ends before the cession leaves (the followers' promises no longer protect it).
void Elector::TransferLeadership(NodeId target) {
    EndLease();
    BecomeFollower(Reason::LeadershipTransferred, std::nullopt, std::nullopt, target,
                   config_.election_result_timeout);
}

// Membership (docs/membership.md): the active configuration changed. Tallies keep only the new
// voters; a leader or candidate that is no longer a voter steps down (R8; a removed leader, once
// its removal commits, §5.9); a candidate abandons an election asked under the previous
// configuration, a scouting follower its round; a non-voter arms no wait (R7), a promoted
// follower without a leader starts waiting.
void Elector::SetVoters(NodeSet voters, std::uint64_t version) {
    const bool new_version = version != state_.config_version;
    state_.voters = voters;
    state_.config_version = version;
    RecomputeQuorum();
    state_.supporters.bits &= voters.bits;
    state_.refusals.bits &= voters.bits;
    state_.heard_since_check.bits &= voters.bits;
    state_.round.yes.bits &= voters.bits;
    state_.round.no.bits &= voters.bits;
    if (state_.role == Role::Stopped) {
        return;
    }
    if (state_.role == Role::Leader) {
        RecomputeLease();  // over the new voters: it may shrink
        LeaseExpires();
        if (state_.role != Role::Leader) {
            return;
        }
    }
    const bool voter = IsVoter(config_.self);
    const bool stands = CanStand();
    if ((state_.role == Role::Leader && !voter) ||
        (state_.role == Role::Candidate && (!voter || new_version))) {
        StepDown(Reason::VotersChanged);
        return;
    }
    if (state_.role != Role::Follower) {
        return;
    }
    if (state_.round.id != 0) {
        EndScoutingRound();
    }
    if (!stands) {
        Cancel(TimerId::InitialWait);
        Cancel(TimerId::RandomWait);
        return;
    }
    const bool waiting = state_.timer_armed(TimerId::InitialWait) ||
                         state_.timer_armed(TimerId::RandomWait) ||
                         state_.timer_armed(TimerId::HeartbeatCheck);
    if (!waiting && !state_.leader && !state_.tentative_leader) {
        Arm(TimerId::RandomWait, RandomBackoff());
    }
}

// Priorities (docs/design.md): an operator's change. Only this node's own standing changes what
// it does now; the others' priorities change its next ranked waits and hand-backs.
void Elector::SetPriority(NodeId node, std::uint32_t priority) {
    config_.priorities[node.value] = priority;
    if (node != config_.self || state_.role == Role::Stopped || CanStand()) {
        return;
    }
    if (state_.role != Role::Follower) {
        StepDown(Reason::VotersChanged);  // a follower that cannot stand arms no wait
        return;
    }
    if (state_.round.id != 0) {
        EndScoutingRound();
    }
    Cancel(TimerId::InitialWait);
    Cancel(TimerId::RandomWait);
}

// ---- Shared transitions ------------------------------------------------------------------------

// A node at the last term below 2^63 cannot propose a next one: its messages would be refused
// by every decoder. Only a forged term can get a cluster there (docs/design.md, "Hostile input");
// the node stays a follower rather than abort or wrap.
bool Elector::TermSpaceExhausted() {
    if (state_.term.value < kTermLimit - 1) {
        return false;
    }
    ++counters_.term_space_exhausted;
    return true;
}

void Elector::StartScouting() {
    if (TermSpaceExhausted()) {
        return;
    }
    if (StartPromiseHolds()) {  // it may have promised a leader before it restarted
        Arm(TimerId::RandomWait, *lease_.start_promise_until - now_);
        return;
    }
    if (!config_.scouting) {
        BecomeCandidate(/*transfer=*/false);
        return;
    }
    ++counters_.scouting_rounds_started;
    state_.round = ScoutingRound{++state_.last_round_id, state_.term.next(), {}, {}};
    state_.round.yes.insert(config_.self);
    if (state_.round.yes.size() >= quorum_) {
        BecomeCandidate(/*transfer=*/false);
        return;
    }
    SendToVoters(state_.round.term, ScoutingRequest{state_.round.id, state_.config_version});
    Arm(TimerId::ScoutingResult, config_.scouting_result_timeout);
}

void Elector::BecomeCandidate(bool transfer) {
    CONCLAVE_CHECK(CanStand(), "only a voter of priority > 0 stands (membership R7, R8)");
    if (TermSpaceExhausted()) {
        return;
    }
    ++counters_.elections_started;
    CancelAllTimers();
    state_.role = Role::Candidate;
    state_.leader.reset();
    state_.tentative_leader.reset();
    state_.round = ScoutingRound{};
    state_.refusals.clear();
    state_.heard_since_check.clear();
    state_.supporters.clear();
    state_.supporters.insert(config_.self);
    EndLease();
    AdoptTerm(state_.term.next(), config_.self);
    NotifyIfChanged(Reason::ElectionStarted);
    if (state_.supporters.size() >= quorum_) {
        BecomeLeader();
        return;
    }
    SendToVoters(state_.term, ElectionProposal{transfer, state_.config_version});
    Arm(TimerId::ElectionResult, config_.election_result_timeout);
}

void Elector::BecomeLeader() {
    CONCLAVE_CHECK(state_.supporters.contains(config_.self), "a leader supports itself");
    CONCLAVE_CHECK(IsVoter(config_.self) && (state_.supporters.bits & ~state_.voters.bits) == 0,
                   "a leader is a voter elected by voters (membership R5)");
    ++counters_.elections_won;
    CancelAllTimers();
    state_.role = Role::Leader;
    state_.leader = config_.self;
    state_.tentative_leader.reset();
    state_.refusals.clear();
    state_.heard_since_check.clear();
    state_.lsn = Lsn{state_.term, 0};
    EndLease();  // none until a quorum acknowledges a heartbeat round
    handback_ = HandBackTimes{};
    handback_.leading_since = now_;
    SendToAll(state_.term, StartHeartbeatRound());
    Arm(TimerId::HeartbeatBroadcast, config_.heartbeat_period);
    if (config_.check_quorum) {
        Arm(TimerId::CheckQuorum, config_.inactivity_interval());
    }
    NotifyIfChanged(Reason::ElectionWon);
}

void Elector::BecomeFollower(Reason reason, std::optional<NodeId> leader,
                             std::optional<NodeId> tentative, std::optional<NodeId> successor,
                             Millis extra_wait) {
    // A follower losing its leader waits by rank (ranked backoff); a failed candidate or leader,
    // uniformly, so that liveness never depends on the ranking.
    std::optional<NodeId> lost_leader;
    if (state_.role == Role::Follower) {
        lost_leader = state_.leader ? state_.leader : state_.tentative_leader;
    }
    if (state_.role == Role::Leader) {
        SendToAll(state_.lsn.term, LeadershipCession{successor});
    }
    CancelAllTimers();
    state_.role = Role::Follower;
    state_.leader = leader;
    state_.tentative_leader = tentative;
    state_.supporters.clear();
    state_.refusals.clear();
    state_.heard_since_check.clear();
    state_.missed_checks = 0;
    state_.round = ScoutingRound{};
    EndLease();
    if (leader) {
        lease_.heard_leader_at = now_;  // its heartbeat was just heard: the promise starts
    }
    if (leader || tentative) {
        Arm(TimerId::HeartbeatCheck, config_.heartbeat_check_period);
    } else if (CanStand()) {  // a learner, removed or priority-0 node never stands (R7, R8)
        const bool ranked = config_.backoff == Backoff::Ranked && lost_leader;
        Arm(TimerId::RandomWait,
            extra_wait + (ranked ? ranked_backoff(config_, state_.term, lost_leader, random_(),
                                                  UsePriorities(), state_.peers_up)
                                 : RandomBackoff()));
    }
    NotifyIfChanged(reason);
}

void Elector::StepDown(Reason reason, Millis extra_wait) {
    BecomeFollower(reason, std::nullopt, std::nullopt, std::nullopt, extra_wait);
}

void Elector::FollowLeader(Reason reason, NodeId leader) {
    BecomeFollower(reason, leader, std::nullopt);
}

void Elector::FollowCandidate(Reason reason, NodeId candidate) {
    BecomeFollower(reason, std::nullopt, candidate);
}

void Elector::AdoptTerm(Term term, std::optional<NodeId> vote) {
    CONCLAVE_CHECK(term > state_.term, "terms only grow");
    state_.term = term;
    state_.voted_for = vote;
    Persist();
}

// ---- The leader lease (docs/design.md) ---------------------------------------------------------

void Elector::LeaseExpires() {
    if (state_.role == Role::Leader && lease_.had_lease &&
        (!lease_.lease_end || now_ >= *lease_.lease_end)) {
        StepDown(Reason::LeaseExpired);
    }
}

bool Elector::StartPromiseHolds() const {
    return lease_.start_promise_until && now_ < *lease_.start_promise_until;
}

bool Elector::PromiseHolds() const {
    return state_.role == Role::Follower && state_.leader && lease_.heard_leader_at &&
           now_ < *lease_.heard_leader_at + promise_duration_;
}

Millis Elector::LeaseDuration() const {
    return planted(PlantedBug::LeaseIgnoresDrift) ? promise_duration_ : lease_duration_;
}

LeaderHeartbeat Elector::StartHeartbeatRound() {
    const std::uint64_t round = lease_.next_round++;
    lease_.sent[round % LeaseTimes::kRoundsKept] = LeaseTimes::SentRound{round, now_};
    RaisePromise(config_.self, now_ + LeaseDuration());  // the leader counts itself
    return LeaderHeartbeat{state_.lsn, state_.config_version, round};
}

LeaderHeartbeat Elector::LatestHeartbeat() const {
    const std::uint64_t round = lease_.next_round == 0 ? 0 : lease_.next_round - 1;
    return LeaderHeartbeat{state_.lsn, state_.config_version, round};
}

// promise_until[peer] = s_k + lease duration for the newest round k it acknowledged; an ack of a
// round not sent in this leadership, or no longer remembered, renews nothing.
void Elector::RenewPromise(NodeId peer, std::uint64_t round) {
    const LeaseTimes::SentRound& sent = lease_.sent[round % LeaseTimes::kRoundsKept];
    if (round >= lease_.next_round || sent.round != round) {
        return;
    }
    const std::optional<Millis>& down = lease_.down_at[peer.value];
    if (down && sent.sent_at <= *down) {
        return;  // the promise of that round ended when the link went down
    }
    const Millis promised = sent.sent_at + LeaseDuration();
    const std::optional<Millis>& until = lease_.promise_until[peer.value];
    RaisePromise(peer, until && *until >= promised ? *until : promised);
}

// Sets `who`'s promise to `until`. When lease_end is known (over the same quorum) and the promise
// neither falls nor crosses it from at or below (it stays at or below lease_end, or was above it
// already, or `who` does not vote), the quorum-th largest promise is unchanged: the nth_element of
// RecomputeLease is skipped, with the same result.
void Elector::RaisePromise(NodeId who, Millis until) {
    std::optional<Millis>& promise = lease_.promise_until[who.value];
    const std::optional<Millis> before = promise;
    promise = until;
    const std::optional<Millis>& end = lease_.lease_end;
    const bool unchanged = end && lease_quorum_ == quorum_ &&
                           (!IsVoter(who) || ((!before || *before <= until) &&
                                              (until <= *end || (before && *before > *end))));
    if (!unchanged) {
        RecomputeLease();
        return;
    }
    lease_.had_lease = lease_.had_lease || now_ < *end;
}

// lease_end: the quorum-th largest promise over the voters (the leader's own among them).
void Elector::RecomputeLease() {
    std::array<Millis, kMaxClusterSize> until{};
    std::size_t n = 0;
    for (std::uint16_t i = 0; i < config_.cluster_size; ++i) {
        if (IsVoter(NodeId{i}) && lease_.promise_until[i]) {
            until[n++] = *lease_.promise_until[i];
        }
    }
    const std::size_t q = std::max<std::size_t>(quorum_, 1);
    lease_quorum_ = quorum_;
    // The lease rests on the followers' promise, which is the sticky-leader rule: with scouting
    // off (a setting that only demonstrates what scouting prevents) nobody promises.
    if (n < q || !config_.scouting) {
        lease_.lease_end.reset();
        return;
    }
    lease_.lease_end =
        quorum_th_largest(until.begin(), until.begin() + static_cast<std::ptrdiff_t>(n), q);
    // A quorum's acks that arrive after the promises they renew ran out give no lease.
    lease_.had_lease = lease_.had_lease || now_ < *lease_.lease_end;
}

void Elector::EndLease() {
    const std::optional<Millis> start_promise = lease_.start_promise_until;
    lease_ = LeaseTimes{};
    lease_.start_promise_until = start_promise;
}

void Elector::CheckLeaseInvariants() const {
    if (state_.role != Role::Leader) {
        CONCLAVE_CHECK(!lease_.lease_end && !lease_.had_lease && lease_.next_round == 0,
                       "a non-leader has no lease");
    } else if (lease_.lease_end) {
        CONCLAVE_CHECK(
            planted(PlantedBug::LeaseIgnoresDrift) || *lease_.lease_end <= now_ + lease_duration_,
            "a lease ends at most P(1-rho)/(1+rho) from now");
    }
    CONCLAVE_CHECK(!lease_.heard_leader_at || (state_.role == Role::Follower && state_.leader),
                   "only a follower of a leader promises");
}

// ---- The preferred leader's hand-back (docs/design.md, "Priorities") --------------------------

// A peer is healthy from its first acknowledgement in this leadership, or after its link came
// back up, until its link goes down or it leaves two heartbeat rounds unacknowledged.
void Elector::NoteAcknowledged(NodeId peer, std::uint64_t round) {
    std::optional<Millis>& since = handback_.healthy_since[peer.value];
    std::uint64_t& acked = handback_.acked_round[peer.value];
    if (round + 1 > acked) {
        acked = round + 1;
    }
    if (!since) {
        since = now_;
    }
}

void Elector::ForgetSilentPeers() {
    for (std::uint16_t i = 0; i < config_.cluster_size; ++i) {
        if (handback_.acked_round[i] + 1 < lease_.next_round) {
            handback_.healthy_since[i].reset();
        }
    }
}

std::optional<NodeId> Elector::handback_target() const {
    const Millis stability = config_.preferred_stability;
    if (state_.role != Role::Leader || stability.count() == 0 || !handback_.leading_since ||
        now_ < *handback_.leading_since + stability) {
        return std::nullopt;
    }
    std::optional<NodeId> best;
    std::uint32_t best_priority = config_.priority(config_.self);
    for (std::uint16_t i = 0; i < config_.cluster_size; ++i) {
        const NodeId n{i};
        const std::optional<Millis>& since = handback_.healthy_since[i];
        const std::uint32_t p = config_.priority(n);
        if (p > best_priority && since && now_ >= *since + stability && !transfer_error(n)) {
            best = n;
            best_priority = p;
        }
    }
    return best;
}

void Elector::EndScoutingRound() {
    state_.round = ScoutingRound{};
    Cancel(TimerId::ScoutingResult);
}

// ---- Primitive outputs -------------------------------------------------------------------------

void Elector::Send(NodeId to, Term term, MessageBody body) {
    CONCLAVE_CHECK(IsPeer(to), "node index in range: messages go to peers");
    out_.push_back(SendTo{to, Message{config_.self, term, std::move(body)}});
}

void Elector::SendToVoters(Term term, MessageBody body) {
    if (AllMembersVote()) {
        SendToAll(term, std::move(body));
        return;
    }
    for (std::uint16_t i = 0; i < config_.cluster_size; ++i) {
        const NodeId n{i};
        if (IsVoter(n) && n != config_.self) {
            Send(n, term, body);
        }
    }
}

void Elector::SendToAll(Term term, MessageBody body) {
    if (config_.cluster_size > 1) {
        out_.push_back(elector::Broadcast{Message{config_.self, term, std::move(body)}});
    }
}

void Elector::Arm(TimerId timer, Millis delay) {
    state_.armed_timers |= timer_bit(timer);
    out_.push_back(ArmTimer{timer, delay});
}

void Elector::Cancel(TimerId timer) {
    if (state_.timer_armed(timer)) {
        state_.armed_timers &= static_cast<std::uint8_t>(~timer_bit(timer));
        out_.push_back(CancelTimer{timer});
    }
}

void Elector::CancelAllTimers() {
    for (std::size_t i = 0; i < kTimerCount; ++i) {
        Cancel(static_cast<TimerId>(i));
    }
}

void Elector::Persist() {
    // Coalesce with an immediately preceding persist: only the latest durable state matters, and
    // nothing was sent in between.
    if (!out_.empty() && std::holds_alternative<PersistState>(out_.back())) {
        out_.pop_back();
    }
    persisted_ = state_.durable();
    out_.push_back(PersistState{persisted_});
}

void Elector::NotifyIfChanged(Reason reason) {
    const std::uint64_t token = state_.leader ? state_.term.value : 0;
    if (snapshot_.role == state_.role && snapshot_.leader == state_.leader &&
        snapshot_.fencing_token == token) {
        return;
    }
    if (snapshot_.leader != state_.leader && state_.leader) {
        ++counters_.leader_changes;
    }
    snapshot_ = LeadershipSnapshot{state_.role, state_.term, state_.leader,   token,
                                   reason,      now_,        lease_.lease_end};
    out_.push_back(NotifyLeadership{snapshot_});
}

Millis Elector::RandomBackoff() {
    const auto span = static_cast<std::uint64_t>(config_.max_random_wait.count()) + 1;
    return Millis{static_cast<Millis::rep>(random_() % span)};
}

bool Elector::planted([[maybe_unused]] PlantedBug bug) const {
#ifdef CONCLAVE_PLANTED_BUGS
    return config_.planted_bug == bug;
#else
    return false;
#endif
}

bool Elector::AllMembersVote() const {
    return state_.voters == NodeSet::first(config_.cluster_size);
}

void Elector::RecomputeQuorum() {
    const bool all = AllMembersVote();
    quorum_ = all ? config_.effective_quorum() : majority(state_.voters.size());
    if (planted(PlantedBug::MinorityQuorum)) {
        quorum_ = majority(all ? config_.cluster_size : state_.voters.size()) - 1;
    }
}

// R5. A candidate of an older configuration is refused. A node that is not a voter of its own
// configuration refuses a candidate of that configuration or an older one (the asker should not
// have asked it), but supports and votes for a candidate of a NEWER configuration: that one asks
// only its own voters, so this node is a learner promoted (or a voter re-added) without knowing it
// yet, and its vote is legitimate (it votes once per term). Refusing it deadlocks: the voters
// that know the newest committed configuration may be too few to elect anyone until the
// promoted node learns of its promotion, which it can only learn from a leader
// (docs/membership.md, R5; the simulator's membership runs found 196 of 1,000 runs leaderless).
Refusal Elector::ConfigFence(std::uint64_t version) const {
    if (version < state_.config_version && !planted(PlantedBug::IgnoreConfigVersion)) {
        return Refusal::StaleConfig;
    }
    if (!IsVoter(config_.self) && version <= state_.config_version) {
        return Refusal::NotAVoter;
    }
    return Refusal::None;
}

// Membership liveness. A scouting request carries the asker's term + 1, and the asker holds its
// term durably. The nodes that know the newest committed configuration may be the only ones that
// can win (the others are refused StaleConfig) and yet be behind in term: their rounds then
// propose a term the others already hold, which no one supports, and scouting never raises a
// term, so nobody would ever win (the simulator's membership runs: 10 of 1,000 leaderless). A
// leaderless follower that refuses a stale candidate therefore takes the asker's term (no vote
// in it), so its next round proposes a term the others can support. A node that leads or follows
// a leader is left alone, and no term is taken that some node does not hold already.
bool Elector::CatchesUpTerm(const Message& m, Refusal fence) const {
    return fence == Refusal::StaleConfig && state_.role == Role::Follower &&
           !state_.leader.has_value() && m.term.value - 1 > state_.term.value;
}

void Elector::CheckMembershipInvariants() const {
    const std::uint64_t voters = state_.voters.bits;
    CONCLAVE_CHECK(voters != 0 && (voters & ~NodeSet::first(config_.cluster_size).bits) == 0,
                   "the voters are members of the cluster");
    CONCLAVE_CHECK(
        planted(PlantedBug::MinorityQuorum) ||
            (is_majority(quorum_, state_.voters.size()) && quorum_ <= state_.voters.size()),
        "the quorum is a majority of the voters");
    CONCLAVE_CHECK(((state_.supporters.bits | state_.refusals.bits | state_.heard_since_check.bits |
                     state_.round.yes.bits | state_.round.no.bits) &
                    ~voters) == 0,
                   "only voters are counted");
    if (!CanStand() && state_.role != Role::Stopped) {
        CONCLAVE_CHECK(state_.role == Role::Follower && state_.round.id == 0 &&
                           !state_.timer_armed(TimerId::InitialWait) &&
                           !state_.timer_armed(TimerId::RandomWait),
                       "a non-voter or a node of priority 0 never stands nor waits to (membership "
                       "R7, R8; priorities)");
    }
}

bool Elector::CanStand() const {
    return IsVoter(config_.self) &&
           (config_.priority(config_.self) > 0 || planted(PlantedBug::IgnorePriority));
}

bool Elector::UsePriorities() const {
    return !planted(PlantedBug::IgnorePriority);
}

bool Elector::IsPeer(NodeId n) const {
    return n.value < config_.cluster_size && n != config_.self;
}

// The state invariants below hold after every input (checked where kFullElectorChecks: O(1), a
// few comparisons). Where tla/Elector.tla states the same property, its name is given.
void Elector::CheckRoleInvariants() const {
    const ElectorState& s = state_;
    // TypeOK (role-specific shape).
    CONCLAVE_CHECK(s.lsn.term <= s.term, "a node's LSN is of its term or older");
    // The planted DoubleVote sets a tentative leader outside these rules (the simulator and the
    // explorer must catch the double vote itself).
    const bool double_vote = planted(PlantedBug::DoubleVote);
    CONCLAVE_CHECK(double_vote || !s.tentative_leader || (s.role == Role::Follower && !s.leader),
                   "only a follower without a leader has a tentative leader");
    CONCLAVE_CHECK(s.round.id <= s.last_round_id, "the scouting round is the latest one");
    CONCLAVE_CHECK(
        s.round.id == 0 || (s.role == Role::Follower && s.round.term.value == s.term.value + 1 &&
                            s.round.yes.contains(config_.self)),
        "only a follower scouts, for its term + 1, supporting itself");
    switch (s.role) {
        case Role::Stopped:
            CONCLAVE_CHECK(s.armed_timers == 0 && !s.leader && s.round.id == 0,
                           "a stopped node has no timer, leader or round");
            break;
        case Role::Follower:
            CONCLAVE_CHECK(s.leader != config_.self, "a follower does not lead");
            break;
        case Role::Candidate:
            CONCLAVE_CHECK(
                !s.leader && s.voted_for == config_.self && s.supporters.contains(config_.self),
                "a candidate voted for itself and knows no leader");
            break;
        case Role::Leader:
            CONCLAVE_CHECK(s.leader == config_.self && s.voted_for == config_.self &&
                               s.lsn.term == s.term && s.supporters.contains(config_.self),
                           "a leader leads its term, voted for itself and supports itself");
            break;
    }
    // Told(n) in Elector.tla: the application's last snapshot is a function of the state.
    CONCLAVE_CHECK(snapshot_.role == s.role && snapshot_.leader == s.leader &&
                       snapshot_.fencing_token == (s.leader ? s.term.value : 0),
                   "the application was told the current role, leader and fencing token");
    CONCLAVE_CHECK(persisted_ == s.durable(),
                   "the durable state (term, vote) was persisted in the input that changed it");
}

void Elector::CheckTimerInvariants() const {
    const ElectorState& s = state_;
    if (s.role == Role::Stopped) {
        return;  // no timer (CheckRoleInvariants)
    }
    const bool leader = s.role == Role::Leader;
    CONCLAVE_CHECK(
        s.timer_armed(TimerId::HeartbeatBroadcast) == leader &&
            s.timer_armed(TimerId::CheckQuorum) == (leader && config_.check_quorum),
        "a leader, and only a leader, has its heartbeat (and check-quorum) timers armed");
    CONCLAVE_CHECK(s.timer_armed(TimerId::ElectionResult) == (s.role == Role::Candidate),
                   "a candidate, and only a candidate, waits for its election's result");
    CONCLAVE_CHECK(s.timer_armed(TimerId::ScoutingResult) == (s.round.id != 0),
                   "a scouting round, and only one, waits for its result");
    if (s.role == Role::Follower) {
        CONCLAVE_CHECK(planted(PlantedBug::DoubleVote) || !(s.leader || s.tentative_leader) ||
                           s.timer_armed(TimerId::HeartbeatCheck),
                       "a follower of a (tentative) leader checks its heartbeats");
    } else {
        CONCLAVE_CHECK(!s.timer_armed(TimerId::HeartbeatCheck) &&
                           !s.timer_armed(TimerId::InitialWait) &&
                           !s.timer_armed(TimerId::RandomWait),
                       "only a follower waits for a leader or to scout");
    }
}

Actions Elector::Finish() {
    if constexpr (kFullElectorChecks) {
        CheckRoleInvariants();
        CheckTimerInvariants();
    }
    CheckMembershipInvariants();
    CheckLeaseInvariants();
    snapshot_.lease_end = lease_.lease_end;  // renewals change no leadership: no notification
    Actions result;
    result.swap(out_);
    return result;
}

}  // namespace conclave::elector
