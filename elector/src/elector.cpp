// The elector core. "Departure N" refers to the numbered departures from BlazingMQ in
// docs/design.md.
#include "conclave/elector/elector.hpp"

#include "conclave/elector/backoff.hpp"

#include <stdexcept>

namespace conclave {
namespace {

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

}  // namespace

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
    quorum_ = config_.effective_quorum();
    CONCLAVE_CHECK(quorum_ >= 1 && quorum_ <= config_.cluster_size, "quorum <= cluster size");
    CONCLAVE_CHECK(config_.self.value < config_.cluster_size, "node index in range");
    if (config_.planted_bug == PlantedBug::MinorityQuorum) {
        quorum_ = config_.cluster_size / 2;
    }
    state_.term = restored.term;
    state_.voted_for = restored.voted_for;
    snapshot_ =
        LeadershipSnapshot{Role::Stopped, state_.term, std::nullopt, 0, Reason::Stopped, Millis{0}};
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
    const Millis ranked_start = config_.backoff == Backoff::Ranked
                                    ? ranked_backoff(config_, state_.term, std::nullopt, random_())
                                    : Millis{0};
    Arm(TimerId::InitialWait, config_.initial_wait + ranked_start);
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
    NotifyIfChanged(Reason::Stopped);
    return Finish();
}

Actions Elector::receive(Millis now, const Message& message) {
    now_ = now;
    if (state_.role == Role::Stopped) {
        return Finish();
    }
    // The codec refuses terms >= 2^63; a core fed directly (simulator, tests) refuses them too,
    // so that no message can bring a term within reach of wrapping.
    if (!IsPeer(message.from) || message.term.value >= kTermLimit ||
        LargestBodyTerm(message.body) >= kTermLimit) {
        ++counters_.messages_dropped;
        ++(IsPeer(message.from) ? counters_.dropped_term_out_of_range
                                : counters_.dropped_not_a_peer);
        return Finish();
    }
    std::visit(
        [&](const auto& body) {
            using T = std::decay_t<decltype(body)>;
            if constexpr (std::is_same_v<T, ScoutingRequest>) {
                HandleScoutingRequest(message, body);
            } else if constexpr (std::is_same_v<T, ScoutingResponse>) {
                HandleScoutingResponse(message, body);
            } else if constexpr (std::is_same_v<T, ElectionProposal>) {
                HandleElectionProposal(message, body);
            } else if constexpr (std::is_same_v<T, ElectionResponse>) {
                HandleElectionResponse(message, body);
            } else if constexpr (std::is_same_v<T, LeaderHeartbeat>) {
                HandleLeaderHeartbeat(message, body);
            } else if constexpr (std::is_same_v<T, HeartbeatAck>) {
                HandleHeartbeatAck(message, body);
            } else if constexpr (std::is_same_v<T, HeartbeatResponse>) {
                HandleHeartbeatResponse(message, body);
            } else {
                static_assert(std::is_same_v<T, LeadershipCession>);
                HandleLeadershipCession(message, body);
            }
        },
        message.body);
    return Finish();
}

Actions Elector::timer_fired(Millis now, TimerId timer) {
    now_ = now;
    if (state_.role == Role::Stopped || !state_.timer_armed(timer)) {
        return Finish();
    }
    state_.armed_timers &= static_cast<std::uint8_t>(~timer_bit(timer));
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
    if (IsPeer(peer)) {
        PeerUp(peer);
    }
    return Finish();
}

Actions Elector::peer_down(Millis now, NodeId peer) {
    now_ = now;
    if (IsPeer(peer)) {
        PeerDown(peer);
    }
    return Finish();
}

Actions Elector::transfer_leadership(Millis now, NodeId target) {
    now_ = now;
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
    if (!state_.peers_up.contains(target)) {
        return "node " + to_string(target) + " is not connected";
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

// Any state: answer whether we would vote for the sender in the proposed term. Changes no state.
// Sticky leader: a node that knows a leader (a leader knows itself) says no.
void Elector::HandleScoutingRequest(const Message& m, const ScoutingRequest& body) {
    const bool knows_leader =
        state_.leader.has_value() &&
        !(config_.planted_bug == PlantedBug::SkipStickyLeader && state_.role == Role::Follower);
    const bool will_vote = !knows_leader && m.term > state_.term;
    if (will_vote) {
        ++counters_.prevotes_granted;
    } else {
        ++counters_.prevotes_refused;
    }
    Send(m.from, m.term, ScoutingResponse{body.round, will_vote});
}

// Follower in a scouting round: count the reply if it belongs to the current round (departure 2).
void Elector::HandleScoutingResponse(const Message& m, const ScoutingResponse& body) {
    const ScoutingRound& round = state_.round;
    if (state_.role != Role::Follower || round.id == 0 || m.term != round.term) {
        return;
    }
    if (body.round != round.id && config_.planted_bug != PlantedBug::CountStaleScoutingReplies) {
        return;
    }
    if (body.will_vote) {
        state_.round.yes.insert(m.from);
        state_.round.no.erase(m.from);
    } else if (!round.yes.contains(m.from)) {
        state_.round.no.insert(m.from);
    }
    if (state_.round.yes.size() >= quorum_) {
        BecomeCandidate(/*transfer=*/false);
    } else if (state_.round.no.size() > config_.cluster_size - quorum_) {
        // A quorum of yes is no longer possible: back off now rather than wait for the timer.
        EndScoutingRound();
        Arm(TimerId::RandomWait, RandomBackoff());
    }
}

// Vote or refuse explicitly (departure 4). With scouting on, a node that knows a live leader
// refuses (sticky leader) unless the proposal comes from the leader's chosen successor.
void Elector::HandleElectionProposal(const Message& m, const ElectionProposal& body) {
    const Term t = state_.term;
    auto refuse = [&](Refusal why) {
        ++counters_.votes_refused_by_reason[static_cast<std::size_t>(why)];
        Send(m.from, m.term, ElectionResponse{false, why, t});
    };
    auto grant = [&] {
        ++counters_.votes_granted;
        Send(m.from, m.term, ElectionResponse{true, Refusal::None, m.term});
    };
    if (m.term < t) {
        return refuse(Refusal::StaleTerm);
    }
    const bool sticky =
        config_.scouting && !body.transfer && config_.planted_bug != PlantedBug::SkipStickyLeader;
    if (sticky && state_.role == Role::Leader) {
        return refuse(Refusal::IAmLeader);
    }
    if (sticky && state_.role == Role::Follower && state_.leader) {
        return refuse(Refusal::HasLeader);
    }
    if (m.term == t) {
        if (state_.voted_for == m.from) {
            return grant();  // a duplicate of the proposal we already voted for
        }
        if (config_.planted_bug == PlantedBug::DoubleVote && state_.role == Role::Follower) {
            state_.voted_for = m.from;
            Persist();
            state_.tentative_leader = m.from;
            return grant();
        }
        return refuse(state_.voted_for ? Refusal::AlreadyVoted : Refusal::StaleTerm);
    }
    // m.term > t: vote for the sender in its term. The vote is durable before the reply leaves.
    const Reason reason =
        state_.role == Role::Leader ? Reason::LeaderPreempted : Reason::ElectionPreempted;
    AdoptTerm(m.term, m.from);
    BecomeFollower(reason, std::nullopt, m.from);
    grant();
}

// Candidate counts votes and refusals of its current election; a leader counts late votes and
// unsolicited support as supporters.
void Elector::HandleElectionResponse(const Message& m, const ElectionResponse& body) {
    if (m.term != state_.term) {
        return;  // a reply to another election
    }
    if (state_.role == Role::Leader) {
        if (body.granted) {
            state_.supporters.insert(m.from);
            state_.heard_since_check.insert(m.from);
        }
        return;
    }
    if (state_.role != Role::Candidate) {
        return;
    }
    if (body.granted) {
        state_.supporters.insert(m.from);
        if (state_.supporters.size() >= quorum_) {
            BecomeLeader();
        }
        return;
    }
    if (body.voter_term > state_.term) {
        AdoptTerm(body.voter_term, std::nullopt);
        BecomeFollower(Reason::ElectionPreempted, std::nullopt, std::nullopt);
        return;
    }
    state_.refusals.insert(m.from);
    if (state_.refusals.size() > config_.cluster_size - quorum_) {
        BecomeFollower(Reason::ElectionRefused, std::nullopt, std::nullopt);
    }
}

void Elector::HandleLeaderHeartbeat(const Message& m, const LeaderHeartbeat& body) {
    const Term t = state_.term;
    const NodeId src = m.from;
    if (m.term < t) {
        if (state_.role == Role::Leader) {
            Send(src, t, LeaderHeartbeat{state_.lsn});  // a stale leader: let it follow us
        } else {
            Send(src, t, HeartbeatResponse{});  // InvalidHeartbeat: here is my higher term
        }
        return;
    }
    if (m.term == t && state_.role == Role::Leader) {
        // Two leaders in one term: impossible by construction; detected and reported anyway.
        ++counters_.two_leader_alarms;
        out_.push_back(RaiseAlarm{AlarmKind::TwoLeadersInTerm, src, t});
        Send(src, t, LeaderHeartbeat{state_.lsn});
        return;
    }
    if (m.term == t && state_.role == Role::Follower && state_.leader && *state_.leader != src) {
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
    if (m.term == t && state_.role == Role::Follower && state_.leader == src) {
        note_lsn();
        state_.missed_checks = 0;  // the common case: our leader is alive
        Send(src, t, HeartbeatAck{});
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
    if (m.term > t) {
        AdoptTerm(m.term, std::nullopt);
    }
    BecomeFollower(reason, src, std::nullopt);
    note_lsn();
    if (was_tentative && state_.term == t) {
        Send(src, state_.term, HeartbeatAck{});  // we already voted for it
    } else {
        // Unsolicited support so that the leader counts this node (reference behaviour).
        Send(src, state_.term, ElectionResponse{true, Refusal::None, state_.term});
    }
}

void Elector::HandleHeartbeatAck(const Message& m, const HeartbeatAck&) {
    if (state_.role == Role::Leader && m.term == state_.term) {
        state_.supporters.insert(m.from);
        state_.heard_since_check.insert(m.from);
    }
}

// InvalidHeartbeat: a follower tells the leader that it has moved to a higher term.
void Elector::HandleHeartbeatResponse(const Message& m, const HeartbeatResponse&) {
    if (state_.role != Role::Leader || m.term <= state_.term) {
        return;
    }
    AdoptTerm(m.term, std::nullopt);
    BecomeFollower(Reason::LeaderPreempted, std::nullopt, std::nullopt);
}

void Elector::HandleLeadershipCession(const Message& m, const LeadershipCession& body) {
    if (state_.role != Role::Follower || m.term != state_.term) {
        return;
    }
    if (state_.leader != m.from && state_.tentative_leader != m.from) {
        return;
    }
    if (body.successor == config_.self) {
        BecomeCandidate(/*transfer=*/true);
        return;
    }
    // When a successor is named, give it time to win before competing with it.
    const Millis extra = body.successor ? config_.election_result_timeout : Millis{0};
    BecomeFollower(Reason::LeaderCeded, std::nullopt, std::nullopt, std::nullopt, extra);
}

// ---- Timer handlers ----------------------------------------------------------------------------

void Elector::InitialWaitFired() {
    RandomWaitFired();
}

void Elector::RandomWaitFired() {
    if (state_.role == Role::Follower && !state_.leader && !state_.tentative_leader) {
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
        BecomeFollower(Reason::QuorumNotAchieved, std::nullopt, std::nullopt);
    }
}

void Elector::HeartbeatBroadcastFired() {
    if (state_.role != Role::Leader) {
        return;
    }
    SendToAll(state_.term, LeaderHeartbeat{state_.lsn});
    Arm(TimerId::HeartbeatBroadcast, config_.heartbeat_period);
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
    BecomeFollower(Reason::LeaderNoHeartbeat, std::nullopt, std::nullopt);
}

// Check-quorum (departure 3): a leader that has not heard from a quorum (itself included) within
// the inactivity interval steps down, even if every TCP connection is still open.
void Elector::CheckQuorumFired() {
    if (state_.role != Role::Leader) {
        return;
    }
    NodeSet heard = state_.heard_since_check;
    heard.insert(config_.self);
    if (heard.size() < quorum_) {
        BecomeFollower(Reason::CheckQuorumFailed, std::nullopt, std::nullopt);
        return;
    }
    state_.heard_since_check.clear();
    Arm(TimerId::CheckQuorum, config_.inactivity_interval());
}

// ---- Connection events and commands ------------------------------------------------------------

void Elector::PeerUp(NodeId peer) {
    state_.peers_up.insert(peer);
    if (state_.role == Role::Leader) {
        Send(peer, state_.term, LeaderHeartbeat{state_.lsn});
    }
}

void Elector::PeerDown(NodeId peer) {
    state_.peers_up.erase(peer);
    if (state_.role == Role::Follower &&
        (state_.leader == peer || state_.tentative_leader == peer)) {
        BecomeFollower(Reason::LeaderUnavailable, std::nullopt, std::nullopt);
    } else if (state_.role == Role::Leader) {
        state_.supporters.erase(peer);
        if (state_.supporters.size() < quorum_) {
            BecomeFollower(Reason::QuorumNotAchieved, std::nullopt, std::nullopt);
        }
    }
}

// Departure 5: the leader names a successor in its cession; the successor proposes at once with
// the transfer flag, which lets followers of the old leader vote for it. Safety still rests on
// terms and one vote per term. The old leader waits an election timeout before competing.
void Elector::TransferLeadership(NodeId target) {
    BecomeFollower(Reason::LeadershipTransferred, std::nullopt, std::nullopt, target,
                   config_.election_result_timeout);
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
    SendToAll(state_.round.term, ScoutingRequest{state_.round.id});
    Arm(TimerId::ScoutingResult, config_.scouting_result_timeout);
}

void Elector::BecomeCandidate(bool transfer) {
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
    AdoptTerm(state_.term.next(), config_.self);
    NotifyIfChanged(Reason::ElectionStarted);
    if (state_.supporters.size() >= quorum_) {
        BecomeLeader();
        return;
    }
    SendToAll(state_.term, ElectionProposal{transfer});
    Arm(TimerId::ElectionResult, config_.election_result_timeout);
}

void Elector::BecomeLeader() {
    CONCLAVE_CHECK(state_.supporters.contains(config_.self), "a leader supports itself");
    ++counters_.elections_won;
    CancelAllTimers();
    state_.role = Role::Leader;
    state_.leader = config_.self;
    state_.tentative_leader.reset();
    state_.refusals.clear();
    state_.heard_since_check.clear();
    state_.lsn = Lsn{state_.term, 0};
    SendToAll(state_.term, LeaderHeartbeat{state_.lsn});
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
    if (leader || tentative) {
        Arm(TimerId::HeartbeatCheck, config_.heartbeat_check_period);
    } else {
        const bool ranked = config_.backoff == Backoff::Ranked && lost_leader;
        Arm(TimerId::RandomWait,
            extra_wait + (ranked ? ranked_backoff(config_, state_.term, lost_leader, random_())
                                 : RandomBackoff()));
    }
    NotifyIfChanged(reason);
}

void Elector::AdoptTerm(Term term, std::optional<NodeId> vote) {
    CONCLAVE_CHECK(term > state_.term, "terms only grow");
    state_.term = term;
    state_.voted_for = vote;
    Persist();
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

void Elector::SendToAll(Term term, MessageBody body) {
    if (config_.cluster_size > 1) {
        out_.push_back(conclave::Broadcast{Message{config_.self, term, std::move(body)}});
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
    out_.push_back(PersistState{state_.durable()});
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
    snapshot_ = LeadershipSnapshot{state_.role, state_.term, state_.leader, token, reason, now_};
    out_.push_back(NotifyLeadership{snapshot_});
}

Millis Elector::RandomBackoff() {
    const auto span = static_cast<std::uint64_t>(config_.max_random_wait.count()) + 1;
    return Millis{static_cast<Millis::rep>(random_() % span)};
}

bool Elector::IsPeer(NodeId n) const {
    return n.value < config_.cluster_size && n != config_.self;
}

Actions Elector::Finish() {
    Actions result;
    result.swap(out_);
    return result;
}

}  // namespace conclave
