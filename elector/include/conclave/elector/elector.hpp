// SPDX-License-Identifier: Apache-2.0
// The elector core: a pure, deterministic state machine.
//
// Inputs are method calls (start, stop, receive, timer_fired, peer_up, peer_down,
// transfer_leadership), each carrying `now`; each returns the ordered list of actions the driver
// must perform (see actions.hpp for the ordering contract). Nothing in here reads a clock, a global
// random generator, a socket or a file: randomness comes from the injected RandomSource.
//
// Every handler is named after the TLA+ action that mirrors it (tla/Elector.tla); the table in
// tla/README.md links the two. Protocol decisions depend only on `ElectorState`, with one
// exception: the leader lease (docs/design.md) compares `now` with the deadlines in `LeaseTimes`
// (the follower's promise, the leader's lease). Those are kept apart, so that the explorer can
// still hash states and tla/Elector.tla leave time out (its LeaseSteps let each input take either
// answer of the clock; tla/Lease.tla models the times).
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "conclave/core/link_loss.hpp"
#include "conclave/elector/actions.hpp"
#include "conclave/elector/config.hpp"
#include "conclave/elector/messages.hpp"

namespace conclave::elector {

/// Returns uniformly distributed 64-bit values. Injected so that runs are reproducible.
using RandomSource = std::function<std::uint64_t()>;

/// The scouting (PreVote) round a leaderless follower runs before it proposes an election.
struct ScoutingRound {
    std::uint64_t id = 0;  // 0: no round in progress
    Term term{};           // the term the round asks about: own term + 1
    NodeSet yes;           // includes self
    NodeSet no;
    bool operator==(const ScoutingRound&) const = default;
};

/// Everything the protocol's decisions depend on. Plain data: the explorer copies and hashes it,
/// the simulator checks invariants on it, the TLA+ spec has one variable per field.
struct ElectorState {
    Role role = Role::Stopped;
    Term term{};                             // durable
    std::optional<NodeId> voted_for;         // durable: vote cast in `term`
    std::optional<NodeId> leader;            // confirmed leader (self when leader)
    std::optional<NodeId> tentative_leader;  // follower: candidate voted for, no heartbeat yet
    NodeSet supporters;               // candidate: votes; leader: supporting followers (+self)
    NodeSet refusals;                 // candidate: explicit refusals in this election
    NodeSet heard_since_check;        // leader: followers heard from since the last check
    NodeSet peers_up;                 // connection state reported by the driver
    std::uint32_t missed_checks = 0;  // follower: heartbeat checks since the last heartbeat
    ScoutingRound round;              // follower: current scouting round
    std::uint64_t last_round_id = 0;  // id of the most recent scouting round
    Lsn lsn{};                        // leader: last issued; others: highest seen
    std::uint8_t armed_timers = 0;    // bit per TimerId
    // Membership (docs/membership.md): the voters of the node's active configuration and its
    // version, given by set_voters() (default: every member of the cluster, version 0). Only
    // voters count in quorums, are asked for votes, vote and stand.
    NodeSet voters;
    std::uint64_t config_version = 0;

    bool timer_armed(TimerId t) const { return (armed_timers >> static_cast<unsigned>(t)) & 1U; }
    DurableState durable() const { return DurableState{term, voted_for}; }
    bool operator==(const ElectorState&) const = default;
};

/// The leader lease (docs/design.md), on the driver's clock. Not part of ElectorState: its times
/// are what the explorer and tla/Elector.tla abstract away.
struct LeaseTimes {
    /// Heartbeat rounds remembered per leadership: an ack of an older round is not counted.
    static constexpr std::size_t kRoundsKept = 8;
    struct SentRound {
        std::uint64_t round = 0;
        Millis sent_at{};
        bool operator==(const SentRound&) const = default;
    };
    /// Follower: when its leader was last heard. The promise holds while now < heard_leader_at + E.
    std::optional<Millis> heard_leader_at;
    /// A node restarted with a term > 0 may have promised a leader before it crashed and no
    /// longer knows it: until start + E it neither stands nor supports nor votes for anyone.
    std::optional<Millis> start_promise_until;
    /// Leader: per follower, when its connection last went down. An ack of a round sent before
    /// renews nothing: the follower's promise for that round ended with the link.
    std::array<std::optional<Millis>, kMaxClusterSize> down_at{};
    /// Leader: the id of the next heartbeat round, and the send times of the latest rounds
    /// (round r at index r % kRoundsKept).
    std::uint64_t next_round = 0;
    std::array<SentRound, kRoundsKept> sent{};
    /// Leader: per voter (self included), until when its promise covers this leadership:
    /// s + Config::lease_duration() for the newest round s it acknowledged.
    std::array<std::optional<Millis>, kMaxClusterSize> promise_until{};
    /// Leader: the quorum-th largest promise_until over the voters (none: no lease).
    std::optional<Millis> lease_end;
    /// Leader: a lease was held in this leadership (expiry steps down only after one).
    bool had_lease = false;
    bool operator==(const LeaseTimes&) const = default;
};

/// The preferred leader's hand-back (docs/design.md, "Priorities"), on the driver's clock. Not
/// part of ElectorState: like LeaseTimes, it decides only when a leader asks for a transfer, which
/// tla/Elector.tla lets a leader do at any time.
struct HandBackTimes {
    /// Leader: when this leadership started.
    std::optional<Millis> leading_since;
    /// Leader: per peer, since when it has been connected and acknowledging every heartbeat
    /// round (none: not healthy now).
    std::array<std::optional<Millis>, kMaxClusterSize> healthy_since{};
    /// Leader: per peer, one more than the newest heartbeat round it acknowledged (0: none).
    std::array<std::uint64_t, kMaxClusterSize> acked_round{};
    bool operator==(const HandBackTimes&) const = default;
};

/// Counters for metrics. Not part of the protocol state.
struct ElectorCounters {
    std::uint64_t scouting_rounds_started = 0;
    std::uint64_t elections_started = 0;
    std::uint64_t elections_won = 0;
    std::uint64_t prevotes_granted = 0;
    std::uint64_t prevotes_refused = 0;
    // Leaders dropped on a scouting request, one heartbeat check short (corroboration).
    std::uint64_t silences_corroborated = 0;
    std::uint64_t votes_granted = 0;
    std::array<std::uint64_t, kVoteRefusalCount> votes_refused_by_reason{};  // by Refusal
    std::uint64_t leader_changes = 0;  // snapshots whose leader differs from the previous one
    std::uint64_t two_leader_alarms = 0;
    std::uint64_t messages_dropped = 0;      // from a non-member, or with a term no node can reach
    std::uint64_t term_space_exhausted = 0;  // elections not started: the term is 2^63 - 1
    // messages_dropped split by reason (the total stays).
    std::uint64_t dropped_not_a_peer = 0;  // sender is not another member
    // A term >= 2^63 in the header or the body, or a heartbeat's LSN term above the header's.
    std::uint64_t dropped_term_out_of_range = 0;
    // Membership.
    std::uint64_t voter_set_changes = 0;        // set_voters() calls that changed the configuration
    std::uint64_t voter_set_refused = 0;        // set_voters() calls refused (see voters_error())
    std::uint64_t stale_config_heartbeats = 0;  // followed a leader of an older configuration
};

class Elector {
  public:
    /// `config` must validate (throws std::invalid_argument naming the field otherwise).
    /// `restored` is the durable state read back by the driver (default: a brand-new node).
    Elector(Config config, DurableState restored, RandomSource random);

    // ---- Inputs -------------------------------------------------------------------------------
    Actions start(Millis now);
    Actions stop(Millis now);
    Actions receive(Millis now, const Message& message);
    /// The driver reports a timer that fired. Firings of timers that are not armed are ignored
    /// (the driver is expected to filter out firings of replaced instances itself).
    Actions timer_fired(Millis now, TimerId timer);
    Actions peer_up(Millis now, NodeId peer);
    /// The connection to `peer` went down, for the reason `loss`. A follower's promise to its
    /// leader ends only on a closure that proves the leader can no longer act (proves_peer_gone:
    /// the leader's process closed the link, or a newer incarnation of it proved itself); after
    /// one this node closed itself the follower keeps its leader until its promise and its
    /// heartbeat checks run out, as over a silent link. A leader drops the peer's promise from
    /// its lease on every closure. The default is what a caller that models only closures by
    /// the peer passes (the simulator, the explorer).
    Actions peer_down(Millis now, NodeId peer, LinkLoss loss = LinkLoss::PeerClosed);
    /// Leader only: hand leadership to `target`. See transfer_error() for when it is refused; a
    /// refused transfer returns no actions.
    Actions transfer_leadership(Millis now, NodeId target);
    /// Why transfer_leadership(target) would be refused, or nullopt if it would be accepted.
    std::optional<std::string> transfer_error(NodeId target) const;
    /// Membership (docs/membership.md, R5-R8): the active configuration changed; from now on only
    /// `voters` count in quorums, are asked for votes, vote and stand, and this node's messages
    /// carry `version`. Called by the runtime when a configuration entry commits (and at start
    /// with the one in the log). Versions never go back; calling again with the current version
    /// and voters does nothing. A leader or candidate that is no longer a voter steps down; a
    /// candidate or scouting follower whose configuration changed abandons its round (its votes
    /// were asked under the old one); a non-voter never arms InitialWait or RandomWait. Refused
    /// (counted, no actions) when voters_error() says why.
    Actions set_voters(Millis now, NodeSet voters, std::uint64_t version);
    /// Why set_voters(voters, version) would be refused: empty, a node outside the cluster, a
    /// version >= 2^63, below the current one, or the current one with other voters.
    std::optional<std::string> voters_error(NodeSet voters, std::uint64_t version) const;

    /// Membership (docs/membership.md §8): the node table grew to `cluster_size` nodes (a
    /// configuration added a node with a new id; ids are never reused, so the table only grows).
    /// Messages from the new indices are heard from now on; the voters are unchanged (the new
    /// node is a learner until a configuration promotes it, given by set_voters), and the quorum
    /// is a majority of the voters. No actions. Refused (returns why, changes nothing) below the
    /// current size or above kMaxClusterSize.
    std::optional<std::string> grow_table(std::size_t cluster_size);

    /// Priorities (docs/design.md): `node`'s priority is now `priority` on this node (an
    /// operator's change at run time). Refused (returns why, no actions) for a node outside the
    /// table, a priority above Config::kMaxPriority, or a change that would leave no node of
    /// priority > 0. This node, leading or standing, steps down (Reason::VotersChanged) when its
    /// own priority becomes 0; a waiting one stops waiting to stand.
    std::optional<std::string> priority_error(NodeId node, std::uint32_t priority) const;
    Actions set_priority(Millis now, NodeId node, std::uint32_t priority);

    /// The driver's current estimate of the peer round trip (the mesh's smoothed RTT; the
    /// simulator's link delays). Sets the ranked backoff's slot to adaptive_rank_slot() of it
    /// (visible as config().rank_slot); no actions, no protocol state: time is abstracted in the
    /// TLA+ spec, and only when the next ranked wait ends depends on it.
    void observe_round_trip(std::chrono::microseconds round_trip);

    /// The preferred leader's hand-back (docs/design.md, "Priorities"): the voter this leader
    /// should hand leadership to now, if any. With Config::preferred_stability S > 0, a leader
    /// that has led for S names the connected voter of the highest priority above its own that
    /// has acknowledged every heartbeat round for S (transfer_error() accepts it). A query: the
    /// runtime gives the transfer as the input transfer_leadership (ElectorRuntime::hand_back).
    std::optional<NodeId> handback_target() const;

    /// Leader only: issue the next Leader Sequence Number (term, counter+1).
    std::optional<Lsn> issue_lsn();

    // ---- Observation --------------------------------------------------------------------------
    const ElectorState& state() const { return state_; }
    const Config& config() const { return config_; }
    const LeadershipSnapshot& snapshot() const { return snapshot_; }
    const LeaseTimes& lease() const { return lease_; }
    const HandBackTimes& handback() const { return handback_; }
    /// Leader: the end of its lease on the driver's clock; none when not a leader or no quorum
    /// has acknowledged a heartbeat round yet (docs/design.md, the leader lease).
    std::optional<Millis> lease_end() const { return lease_.lease_end; }
    const ElectorCounters& counters() const { return counters_; }
    std::size_t quorum() const { return quorum_; }

  private:
    // ---- Handlers (one per event; names match tla/Elector.tla) ---------------------------------
    // Private: an input (above) sets `now`, applies the entry filters (stopped, non-member,
    // unreachable term) and the kind's term rules, then calls one handler. Tests drive the core
    // through the inputs (tests/elector/harness.hpp reads like a transcript).

    /// How the envelope term of a received message compares with the node's term (when higher
    /// and the kind's rule adopts it, the node has adopted it before the handler runs).
    enum class TermOrder : std::uint8_t { Stale, Equal, Newer };
    /// One per message kind (elector.cpp): which roles hear it, what a lower, equal and higher
    /// term means, its handler and, if a stale one is answered, its reply.
    template <class Body>
    struct Rules;

    void HandleScoutingRequest(const Message& m, const ScoutingRequest& body, TermOrder order);
    void HandleScoutingResponse(const Message& m, const ScoutingResponse& body, TermOrder order);
    void RefuseStaleProposal(const Message& m, const ElectionProposal& body);
    void HandleElectionProposal(const Message& m, const ElectionProposal& body, TermOrder order);
    void HandleElectionResponse(const Message& m, const ElectionResponse& body, TermOrder order);
    void ReplyToStaleHeartbeat(const Message& m, const LeaderHeartbeat& body);
    void HandleLeaderHeartbeat(const Message& m, const LeaderHeartbeat& body, TermOrder order);
    void HandleHeartbeatAck(const Message& m, const HeartbeatAck& body, TermOrder order);
    void HandleHeartbeatResponse(const Message& m, const HeartbeatResponse& body, TermOrder order);
    void HandleLeadershipCession(const Message& m, const LeadershipCession& body, TermOrder order);
    // The handlers' steps: each Handle* above checks its preconditions, runs its step, then
    // checks its postconditions (HACKING.md, "Pre- and postconditions").
    void CountScoutingResponse(const Message& m, const ScoutingResponse& body);
    void AnswerElectionProposal(const Message& m, const ElectionProposal& body, TermOrder order);
    void CountElectionResponse(const Message& m, const ElectionResponse& body);
    void FollowHeartbeat(const Message& m, const LeaderHeartbeat& body, TermOrder order);
    void InitialWaitFired();
    void RandomWaitFired();
    void ScoutingResultFired();
    void ElectionResultFired();
    void HeartbeatBroadcastFired();
    void HeartbeatCheckFired();
    void CheckQuorumFired();
    void PeerUp(NodeId peer);
    void PeerDown(NodeId peer, LinkLoss loss);
    void TransferLeadership(NodeId target);
    void SetVoters(NodeSet voters, std::uint64_t version);
    void SetPriority(NodeId node, std::uint32_t priority);
    /// Every input of a running node, before its handler: a leader whose lease has run out
    /// (now >= lease_end after it held one) steps down with Reason::LeaseExpired.
    void LeaseExpires();

    // The leader lease (docs/design.md).
    /// Follower: its leader was heard from at now (a heartbeat, or discovery).
    bool PromiseHolds() const;
    bool StartPromiseHolds() const;
    /// Leader: starts heartbeat round next_round at now (to every other node) and returns it.
    LeaderHeartbeat StartHeartbeatRound();
    /// Leader: the heartbeat to send outside a round (the latest round's id).
    LeaderHeartbeat LatestHeartbeat() const;
    /// Leader: `peer` acknowledged heartbeat round `round`.
    void RenewPromise(NodeId peer, std::uint64_t round);
    /// The leader's lease duration: Config::lease_duration() (E with the planted
    /// LeaseIgnoresDrift).
    Millis LeaseDuration() const;
    /// Leader: sets `who`'s promise_until and updates lease_end (RecomputeLease when it can move).
    void RaisePromise(NodeId who, Millis until);
    /// Leader: lease_end from promise_until over the current voters.
    void RecomputeLease();
    /// Forgets every lease time (a node that is not a leader, or a new leadership).
    void EndLease();
    void CheckLeaseInvariants() const;

    // The preferred leader's hand-back (HandBackTimes).
    /// Leader: `peer` acknowledged heartbeat round `round`: healthy from now if it was not.
    void NoteAcknowledged(NodeId peer, std::uint64_t round);
    /// Leader, before each heartbeat round: a peer that left the last two rounds unacknowledged
    /// is no longer healthy.
    void ForgetSilentPeers();

    // Transitions shared by several handlers (etcd-raft's becomeX).
    bool CorroboratesSilence(TermOrder order) const;
    bool TermSpaceExhausted();
    void StartScouting();
    void BecomeCandidate(bool transfer);
    void BecomeLeader();
    /// Leaves the current role for FOLLOWER following `leader` (or voting for `tentative`, or
    /// neither). A leader that leaves broadcasts a LeadershipCession for the term it led (its LSN's
    /// term, which AdoptTerm leaves alone) naming `successor` if any. Arms HeartbeatCheck
    /// when there is a leader or tentative leader, else RandomWait after `extra_wait` + backoff.
    void BecomeFollower(Reason reason, std::optional<NodeId> leader,
                        std::optional<NodeId> tentative, std::optional<NodeId> successor = {},
                        Millis extra_wait = Millis{0});
    /// BecomeFollower with no leader known: wait (backoff, plus `extra_wait`), then scout.
    void StepDown(Reason reason, Millis extra_wait = Millis{0});
    /// BecomeFollower of `leader`, whose heartbeat was heard.
    void FollowLeader(Reason reason, NodeId leader);
    /// BecomeFollower that voted for `candidate` and waits for its first heartbeat.
    void FollowCandidate(Reason reason, NodeId candidate);
    void AdoptTerm(Term term, std::optional<NodeId> vote);
    void EndScoutingRound();

    // Primitive outputs.
    void Send(NodeId to, Term term, MessageBody body);
    void SendToAll(Term term, MessageBody body);
    void Arm(TimerId timer, Millis delay);
    void Cancel(TimerId timer);
    void CancelAllTimers();
    void Persist();
    void NotifyIfChanged(Reason reason);
    Millis RandomBackoff();
    bool IsPeer(NodeId n) const;
    bool IsVoter(NodeId n) const { return state_.voters.contains(n); }
    /// A voter of priority > 0 (any voter with the planted IgnorePriority): it may scout, stand
    /// and be named a successor.
    bool CanStand() const;
    /// The ranked candidacy orders by priority (not with the planted IgnorePriority).
    bool UsePriorities() const;
    /// Every member of the cluster is a voter (the default configuration's voter set).
    bool AllMembersVote() const;
    /// The quorum over the current voter set (Config::quorum when every member votes).
    void RecomputeQuorum();
    /// ScoutingRequest / ElectionProposal: to every voter but self (a Broadcast when every
    /// member votes, so that runs without membership changes are unchanged).
    void SendToVoters(Term term, MessageBody body);
    /// The membership refusal (R5) this node gives a candidate of `version`, or None.
    Refusal ConfigFence(std::uint64_t version) const;
    bool CatchesUpTerm(const Message& m, Refusal fence) const;
    /// Postconditions of every input (debug builds, kFullElectorChecks): role, leader, term and
    /// vote consistency, the application's snapshot and the persisted durable state (role), and the
    /// timers each role keeps armed (timers).
    void CheckRoleInvariants() const;
    void CheckTimerInvariants() const;
    /// Postconditions of every input about membership (always-on checks).
    void CheckMembershipInvariants() const;
    /// True when `bug` is planted. Always false in the production library (conclave_elector):
    /// only conclave_elector_planted, built with CONCLAVE_PLANTED_BUGS for the simulator and the
    /// tests, has planted-bug code paths.
    bool planted(PlantedBug bug) const;

    Actions Finish();

    Config config_;
    std::size_t quorum_;
    // Config::promise_duration() and lease_duration(), computed once (the config's timing fields
    // never change): the lease checks read them on every input.
    Millis promise_duration_{};
    Millis lease_duration_{};
    std::size_t lease_quorum_ = 0;  // the quorum lease_end was last computed over
    RandomSource random_;
    ElectorState state_;
    LeadershipSnapshot snapshot_;
    LeaseTimes lease_;
    HandBackTimes handback_;
    ElectorCounters counters_;
    /// The durable state of the latest PersistState (the restored one before any): after every
    /// input it equals state_.durable().
    DurableState persisted_;
    Millis now_{};
    Actions out_;
};

}  // namespace conclave::elector
