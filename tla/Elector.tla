\* SPDX-License-Identifier: Apache-2.0
------------------------------- MODULE Elector -------------------------------
(***************************************************************************)
(* Conclave's elector, one TLA+ action per C++ handler of                  *)
(* elector/src/elector.cpp, with the same name.                            *)
(*                                                                         *)
(* The state of one node is one record whose fields are the fields of the  *)
(* C++ ElectorState, spelt as in the simulator's JSON traces, so that a    *)
(* trace step can be compared with the spec state field by field:          *)
(*   role, term, voted_for, leader, tentative_leader, supporters,          *)
(*   refusals, heard_since_check, peers_up, missed_checks, round,          *)
(*   last_round_id, lsn, armed_timers, voters, config_version.             *)
(*                                                                         *)
(* Each C++ handler is written as an operator from the node's state (the   *)
(* C++ `state_`) to a record [st |-> new state, out |-> messages sent]     *)
(* and the shared transitions (BecomeFollower, BecomeCandidate,            *)
(* BecomeLeader, AdoptTerm, StartScouting) are composed exactly as the C++ *)
(* calls them. Time is left out: the core decides on state only, so a      *)
(* timer is an action enabled while it is armed, and any armed timer may   *)
(* fire at any moment (random backoff values do not matter). The one       *)
(* exception, the leader lease's clock, is abstracted by nondeterminism    *)
(* under the constant LeaseSteps ("The leader lease", below).              *)
(*                                                                         *)
(* The network is a set of messages: a receive may consume the message or  *)
(* keep it (duplication). A message is lost by never being delivered, or,  *)
(* for the types in LossyTypes, by being lost as it is sent (it never      *)
(* enters the network, so it takes no slot of the models' MaxMsgs bound).  *)
(*                                                                         *)
(* PlantedBug mirrors Config::planted_bug: the deliberately wrong          *)
(* behaviours the mutation models switch on to prove the checks can fail.  *)
(*                                                                         *)
(* Membership (docs/membership.md, the elector's slice): each node holds   *)
(* the voters of its active configuration and its version (voters,         *)
(* config_version), given by SetVoters (Elector::set_voters). The models   *)
(* draw the configurations from a fixed history Configs (C0, C1, ...,      *)
(* each one voter added or removed from the previous) and let the log      *)
(* deliver them the way docs/membership.md's design does (HandleAppend,    *)
(* SetVoters below; README.md, "Membership in Elector.tla"). With the      *)
(* single default configuration (Configs = DefaultConfigs: every node      *)
(* votes, version 0) nothing of it can happen.                            *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, Sequences

CONSTANTS
    Node,           \* the nodes of the cluster
    Nil,            \* "no node" (std::nullopt)
    Quorum,         \* Elector::quorum()
    Scouting,       \* Config::scouting (ElectionScouting / PreVote)
    CheckQuorum,    \* Config::check_quorum
    CheckMisses,    \* Config::heartbeat_check_misses()
    \* Model bounds (used by the models' constraints and by Next below).
    MaxTerm,        \* largest term explored
    MaxRound,       \* largest scouting round id explored
    MaxLsn,         \* largest LSN counter explored
    MaxMsgs,        \* largest number of messages in flight explored
    MaxFaults,      \* Crash + Stop + PeerDown events allowed in a behaviour
    FaultKinds,     \* which of "Crash", "Stop", "PeerDown" a model allows
    Transfers,      \* the operator may call transfer_leadership
    Duplication,    \* the network may deliver a message more than once
    LossyTypes,     \* message types that may be lost as they are sent
    DurableLost,    \* NEGATIVE MODEL ONLY: a restart forgets term and vote
    PlantedBug,     \* "None" or a PlantedBug of config.hpp (mutation models)
    Configs,        \* the configuration history: Configs[k + 1] is the voter set of
                    \* version k; DefaultConfigs (every node votes, version 0) for the
                    \* models without membership changes
    LeaseSteps      \* the leader lease's clock decisions, by nondeterminism (see "The
                    \* leader lease" below): TRUE for trace validation of the C++ core,
                    \* FALSE in the models of the protocol without it

VARIABLES
    node,       \* node[n]: the ElectorState of n (a record, see Fresh)
    msgs,       \* messages in flight
    faults,     \* number of Crash/Stop/PeerDown events so far (model bound)
    \* History variables, written by Step only, read only by the invariants.
    votes,      \* <<voter, term, candidate>> for every vote ever cast
    elected,    \* <<term, leader>> for every node that ever became leader
    events,     \* <<kind, node, term>> of leader-life events, read only by the canaries:
                \* "transfer" (a leader of term t ceded to a named successor), "crash",
                \* "checkquorum" (check-quorum stepped the leader of term t down),
                \* "voterschanged" (SetVoters stepped the leader of term t down),
                \* "catchup" (CatchesUpTerm: a scouting request raised n's term to t),
                \* "higherterm" (the leader of term t stepped down on seeing a higher term),
                \* "leaseexpired" (LeaseSteps: the lease check stepped the leader of term t down),
                \* and the lease's decisions (LeaseSteps: the named actions of "The lease's
                \* decisions", node n at term t): "promiserefusal", "startpromiserefusal",
                \* "startpromisewait", "promiseendedcession", "promiseendedlink", and
                \* "promisebroken" (PromiseKept)
    \* The log's side of membership (environment, not elector state):
    held        \* held[n]: the highest configuration version in n's log (maybe uncommitted)

vars == <<node, msgs, faults, votes, elected, events, held>>

-----------------------------------------------------------------------------
(* Values                                                                   *)

Roles == {"stopped", "follower", "candidate", "leader"}
Timers == {"InitialWait", "RandomWait", "ScoutingResult", "ElectionResult",
           "HeartbeatBroadcast", "HeartbeatCheck", "CheckQuorum"}
Refusals == {"none", "stale-term", "already-voted", "has-leader", "i-am-leader",
             "stale-config", "not-a-voter"}
MsgTypes == {"ScoutingRequest", "ScoutingResponse", "ElectionProposal",
             "ElectionResponse", "LeaderHeartbeat", "HeartbeatAck",
             "HeartbeatResponse", "LeadershipCession"}

N == Cardinality(Node)

PlantedBugs == {"None", "DoubleVote", "MinorityQuorum", "CountStaleScoutingReplies",
                "SkipStickyLeader", "IgnoreConfigVersion", "IgnorePriority",
                \* leader lease (LeaseSteps): a follower ends its promise when a link to its leader
                \* that it closed itself goes down (LocalClose; the C++'s PromiseEndsOnLocalClose)
                "PromiseEndsOnLocalClose",
                \* leader lease, spec only (Lease.tla's ForgetPromiseOnRestart): a started node
                \* holds no start promise
                "ForgetPromiseOnRestart",
                \* liveness mutants of the spec only (no C++ counterpart), see MCElectorLive:
                "NeverDropLeader", "RefuseWhileRemembering", "NoRetry",
                \* leader mutants of the spec only (no C++ counterpart), see ElectorKeepLeading*.cfg:
                \* a leader adopts a newer term from a HeartbeatResponse, or from a newer leader's
                \* heartbeat, and keeps leading instead of stepping down
                "KeepLeadingOnHeartbeatResponse", "KeepLeadingOnNewerHeartbeat"}

\* The models without membership changes: one configuration, every node votes, version 0.
DefaultConfigs == <<Node>>

\* The true quorum of a voter set: the configured Quorum while every node votes, else a
\* majority of the voters (Elector::RecomputeQuorum). The invariants use it.
QuorumOf(V) == IF V = Node THEN Quorum ELSE Cardinality(V) \div 2 + 1

\* Elector::quorum_ for node state s: QuorumOf(s.voters), or half the voters with the
\* planted MinorityQuorum.
ElectorQuorum(s) ==
    IF PlantedBug = "MinorityQuorum" THEN Cardinality(s.voters) \div 2 ELSE QuorumOf(s.voters)

NoLsn == [term |-> 0, counter |-> 0]
NoRound == [id |-> 0, term |-> 0, yes |-> {}, no |-> {}]

\* Lsn's operator<=>: term first, then counter.
LsnLess(a, b) == a.term < b.term \/ (a.term = b.term /\ a.counter < b.counter)
LsnLeq(a, b) == LsnLess(a, b) \/ a = b

\* A freshly constructed core: Elector(config, DurableState{t, v}, random), with the
\* default configuration (every node votes, version 0).
Fresh(t, v) ==
    [role |-> "stopped", term |-> t, voted_for |-> v, leader |-> Nil,
     tentative_leader |-> Nil, supporters |-> {}, refusals |-> {},
     heard_since_check |-> {}, peers_up |-> {}, missed_checks |-> 0,
     round |-> NoRound, last_round_id |-> 0, lsn |-> NoLsn,
     armed_timers |-> {}, voters |-> Node, config_version |-> 0]

(* Messages: one record type with every body field; fields a body does not  *)
(* have keep a default value. Field names as in messages.hpp.               *)
(* config_version: the sender's active configuration version, on the five   *)
(* bodies that carry it (ScoutingRequest/Response, ElectionProposal/Response, *)
(* LeaderHeartbeat); 0 on the others.                                        *)
Msg(type, from, to, t) ==
    [type |-> type, from |-> from, to |-> to, term |-> t, round |-> 0,
     will_vote |-> FALSE, transfer |-> FALSE, granted |-> FALSE,
     refusal |-> "none", voter_term |-> 0, lsn |-> NoLsn, successor |-> Nil,
     config_version |-> 0]

ScoutingRequestMsg(f, to, t, r, cv) ==
    [Msg("ScoutingRequest", f, to, t) EXCEPT !.round = r, !.config_version = cv]
ScoutingResponseMsg(f, to, t, r, wv, why, cv) ==
    [Msg("ScoutingResponse", f, to, t) EXCEPT !.round = r, !.will_vote = wv,
                                              !.refusal = why, !.config_version = cv]
ElectionProposalMsg(f, to, t, tr, cv) ==
    [Msg("ElectionProposal", f, to, t) EXCEPT !.transfer = tr, !.config_version = cv]
ElectionResponseMsg(f, to, t, g, why, vt, cv) ==
    [Msg("ElectionResponse", f, to, t) EXCEPT !.granted = g, !.refusal = why,
                                              !.voter_term = vt, !.config_version = cv]
LeaderHeartbeatMsg(f, to, t, l, cv) ==
    [Msg("LeaderHeartbeat", f, to, t) EXCEPT !.lsn = l, !.config_version = cv]
HeartbeatAckMsg(f, to, t) == Msg("HeartbeatAck", f, to, t)
HeartbeatResponseMsg(f, to, t) == Msg("HeartbeatResponse", f, to, t)
LeadershipCessionMsg(f, to, t, s) == [Msg("LeadershipCession", f, to, t) EXCEPT !.successor = s]

\* Elector::SendToAll: one message per other node of the cluster (connected or not).
ToAll(n, MkMsg(_)) == {MkMsg(p) : p \in Node \ {n}}

\* Elector::SendToVoters: one message per other voter of n's configuration (the same
\* messages as ToAll while every node votes).
ToVoters(n, s, MkMsg(_)) == {MkMsg(p) : p \in s.voters \ {n}}

\* Elector::IsVoter(self).
IsVoter(n, s) == n \in s.voters

\* Priorities (docs/design.md, "Priorities"): the nodes of priority 0 (Config::priorities). They
\* never stand: no wait to scout, no scouting, no candidacy, never a successor; they still vote,
\* support and acknowledge. {} here; the priority models override it (ElectorPriority.cfg:
\* PriorityZero <- MCPriorityZero). The ranked order of the others is timing, which the spec
\* leaves out (every order of the scouting rounds is explored).
PriorityZero == {}
\* Elector::CanStand(): a voter of priority > 0 (any voter with the planted IgnorePriority).
CanStand(n, s) == IsVoter(n, s) /\ (n \notin PriorityZero \/ PlantedBug = "IgnorePriority")

\* The result of a handler: the new state and the messages it sent.
R(s, out) == [st |-> s, out |-> out]
Same(s) == R(s, {})

-----------------------------------------------------------------------------
(* Shared transitions (elector.cpp, "Shared transitions")                   *)

AdoptTerm(s, t, vote) == [s EXCEPT !.term = t, !.voted_for = vote]   \* + Persist

BecomeLeader(n, s) ==
    LET s1 == [s EXCEPT !.role = "leader", !.leader = n, !.tentative_leader = Nil,
                        !.refusals = {}, !.heard_since_check = {},
                        !.lsn = [term |-> s.term, counter |-> 0],
                        !.armed_timers = IF CheckQuorum
                                         THEN {"HeartbeatBroadcast", "CheckQuorum"}
                                         ELSE {"HeartbeatBroadcast"}]
    IN R(s1, ToAll(n, LAMBDA p : LeaderHeartbeatMsg(n, p, s1.term, s1.lsn, s1.config_version)))

BecomeCandidate(n, s, transfer) ==
    LET s1 == [s EXCEPT !.armed_timers = {}, !.role = "candidate", !.leader = Nil,
                        !.tentative_leader = Nil, !.round = NoRound, !.refusals = {},
                        !.heard_since_check = {}, !.supporters = {n},
                        !.term = s.term + 1, !.voted_for = n]
    IN IF Cardinality(s1.supporters) >= ElectorQuorum(s1)
       THEN BecomeLeader(n, s1)
       ELSE R([s1 EXCEPT !.armed_timers = {"ElectionResult"}],
              ToVoters(n, s1, LAMBDA p : ElectionProposalMsg(n, p, s1.term, transfer,
                                                             s1.config_version)))

\* A leader that leaves broadcasts a cession for the term it led (its LSN's term).
\* Without a leader to follow, a voter waits a random time; a non-voter never stands
\* and arms no wait (membership R7, R8).
BecomeFollower(n, s, ldr, tentative, successor) ==
    LET cession == IF s.role = "leader"
                   THEN ToAll(n, LAMBDA p : LeadershipCessionMsg(n, p, s.lsn.term, successor))
                   ELSE {}
        s1 == [s EXCEPT !.role = "follower", !.leader = ldr, !.tentative_leader = tentative,
                        !.supporters = {}, !.refusals = {}, !.heard_since_check = {},
                        !.missed_checks = 0, !.round = NoRound,
                        !.armed_timers = IF ldr # Nil \/ tentative # Nil THEN {"HeartbeatCheck"}
                                         ELSE IF CanStand(n, s) THEN {"RandomWait"} ELSE {}]
    IN R(s1, cession)

\* A candidate that lost its election becomes a follower (and retries after a
\* random wait; the NoRetry mutant arms no timer and never retries).
LostElection(n, s) ==
    LET f == BecomeFollower(n, s, Nil, Nil, Nil)
    IN IF PlantedBug = "NoRetry" THEN R([f.st EXCEPT !.armed_timers = {}], f.out) ELSE f

EndScoutingRound(s) ==
    [s EXCEPT !.round = NoRound, !.armed_timers = @ \ {"ScoutingResult"}]

\* With a start promise (LeaseSteps) the node does not stand: it waits again.
StartScouting(n, s, c) ==
    IF c.start THEN Same([s EXCEPT !.armed_timers = @ \cup {"RandomWait"}])
    ELSE IF ~Scouting THEN BecomeCandidate(n, s, FALSE)
    ELSE LET id == s.last_round_id + 1
             s1 == [s EXCEPT !.last_round_id = id,
                             !.round = [id |-> id, term |-> s.term + 1, yes |-> {n}, no |-> {}]]
         IN IF Cardinality(s1.round.yes) >= ElectorQuorum(s1)
            THEN BecomeCandidate(n, s1, FALSE)
            ELSE R([s1 EXCEPT !.armed_timers = @ \cup {"ScoutingResult"}],
                   ToVoters(n, s1, LAMBDA p : ScoutingRequestMsg(n, p, s1.round.term, id,
                                                                 s1.config_version)))

-----------------------------------------------------------------------------
(* The leader lease (docs/design.md, "The leader lease")                    *)
(*                                                                         *)
(* The C++ core answers three questions by its clock (LeaseTimes, kept     *)
(* apart from ElectorState): has this leader's lease ended (LeaseExpires,  *)
(* asked before every input of a running node)? does this follower's       *)
(* promise to its leader still hold (PromiseHolds: P after it last heard   *)
(* it)? does this node's start promise still hold (StartPromiseHolds: P    *)
(* after a start with a term > 0)? The spec leaves time out: with          *)
(* LeaseSteps, every input of a running node takes any answers (a Clock,   *)
(* chosen per input, of Clocks(n)); without it, the base protocol's one    *)
(* answer (BaseClock, which no handler reads), so that every model with    *)
(* LeaseSteps = FALSE explores exactly the base protocol. The lease's own  *)
(* property, one valid lease at a time under the drift bound, is           *)
(* Lease.tla's LeaseExclusive (and the simulator's check after every       *)
(* step).                                                                  *)
(*                                                                         *)
(* What the answers can do, and why the safety invariants keep their       *)
(* meaning (each is a step the base spec takes, or one that only holds     *)
(* back or ends what the base spec does):                                  *)
(*  - expired: a leader steps down and cedes before the input, exactly as  *)
(*    on any other step-down (it ends a leadership early);                 *)
(*  - start, or promise held: a node refuses scouting support and votes,   *)
(*    does not stand (it waits again), and a follower's last heartbeat     *)
(*    check keeps its leader (it withholds, or keeps a follower            *)
(*    following);                                                          *)
(*  - promise ended: the follower no longer keeps the leader it records:   *)
(*    it corroborates a newer scouting request at any missed_checks, and   *)
(*    answers a proposal without the has-leader refusal. That is the state *)
(*    the base spec reaches by firing its remaining heartbeat checks first *)
(*    (any armed timer may fire at any moment), except for a proposal of   *)
(*    its own term: its answer (the grant of the vote it already cast, or  *)
(*    a refusal) leaves the follower following, as the has-leader refusal  *)
(*    does; a vote is never cast twice (OneVotePerTerm).                   *)
(* The lease's other checks inside a handler (PeerDown and SetVoters of a  *)
(* leader recompute the lease over its remaining promises and may expire   *)
(* it) step down to the state and cession that the check before the input *)
(* gives, so they need no answer of their own. Heartbeat round ids         *)
(* (LeaderHeartbeat.round, HeartbeatAck.round) only feed the lease's       *)
(* times; the spec's messages leave them out.                              *)

BaseClock == [expired |-> FALSE, promise |-> FALSE, start |-> FALSE]

\* Whether n (state s) may hold a start promise: the C++ sets one only at a start with a term
\* > 0, and terms never decrease, so a node of term 0 holds none. The models, whose initial
\* nodes all started with term 0, narrow it (MCElector's MCStartPromiseMayHold).
StartPromiseMayHold(n, s) == s.term > 0

\* The answers the clock may give at an input of n: only a leader's lease can have ended, only
\* a follower of a leader promises, and only a node started with a term > 0 (terms never
\* decrease) holds a start promise.
Clocks(n) ==
    IF ~LeaseSteps THEN {BaseClock}
    ELSE LET s == node[n] IN
         [expired : IF s.role = "leader" THEN BOOLEAN ELSE {FALSE},
          promise : IF s.role = "follower" /\ s.leader # Nil THEN BOOLEAN ELSE {FALSE},
          start : IF StartPromiseMayHold(n, s) /\ PlantedBug # "ForgetPromiseOnRestart"
                  THEN BOOLEAN ELSE {FALSE}]

\* Elector::PromiseHolds.
PromiseHolds(s, c) == c.promise /\ s.role = "follower" /\ s.leader # Nil

\* Elector::LeaseExpires: a leader whose lease ended steps down (Reason::LeaseExpired).
LeaseExpiresR(n, s) == BecomeFollower(n, s, Nil, Nil, Nil)

\* The history event of the lease check with answer c at n.
LeaseEv(n, c) == IF c.expired THEN {<<"leaseexpired", n, node[n].term>>} ELSE {}

\* An input: the lease check with answer c, then the input's handler H, with the messages of both.
AfterLeaseCheck(n, s, c, H(_)) ==
    IF c.expired
    THEN LET x == LeaseExpiresR(n, s)
             y == H(x.st)
         IN R(y.st, x.out \cup y.out)
    ELSE H(s)

-----------------------------------------------------------------------------
(* Message handlers                                                         *)

\* Elector::CorroboratesSilence: a follower one heartbeat check short of
\* dropping its leader takes a request for a newer term as that check's
\* evidence (never with a single check). It drops the leader first, exactly
\* as HeartbeatCheckFired's last check would (its longer wait is time, which
\* the spec abstracts), then answers as a node without a leader. With
\* LeaseSteps, the C++ rule: once its promise has ended (at any missed_checks,
\* also with a single check).
CorroboratesSilence(s, m, c) ==
    /\ s.role = "follower" /\ s.leader # Nil
    /\ m.term > s.term
    /\ IF LeaseSteps THEN ~PromiseHolds(s, c)
       ELSE CheckMisses >= 2 /\ s.missed_checks + 1 >= CheckMisses

\* Elector::ConfigFence (membership R5): no support or vote for a candidate of an older
\* configuration; a non-voter of its own configuration supports and votes only for a candidate
\* of a newer one (that configuration made it a voter: a learner promoted without knowing it).
ConfigFence(n, s, m) ==
    IF m.config_version < s.config_version /\ PlantedBug # "IgnoreConfigVersion"
    THEN "stale-config"
    ELSE IF ~IsVoter(n, s) /\ m.config_version <= s.config_version THEN "not-a-voter"
    ELSE "none"

\* Elector::CatchesUpTerm (membership liveness): a leaderless follower that refuses a stale
\* candidate takes the asker's term (the request's term - 1, held by the asker), with no vote.
CatchesUpTerm(s, m, fence) ==
    /\ fence = "stale-config"
    /\ s.role = "follower"
    /\ s.leader = Nil
    /\ m.term - 1 > s.term

\* The fence first: a request it refuses corroborates nothing either. Sticky leader: a node
\* that knows a leader says no; with LeaseSteps, a leader, and a node within its promise or
\* its start promise (the C++ rule).
HandleScoutingRequestR(n, s, m, c) ==
    LET fence == ConfigFence(n, s, m)
        s0 == IF CatchesUpTerm(s, m, fence)
              THEN BecomeFollower(n, AdoptTerm(s, m.term - 1, Nil), Nil, Nil, Nil).st ELSE s
        s1 == IF fence = "none" /\ CorroboratesSilence(s0, m, c)
              THEN BecomeFollower(n, s0, Nil, Nil, Nil).st ELSE s0
        knows_leader ==
            IF LeaseSteps
            THEN \/ s1.role = "leader"
                 \/ (PromiseHolds(s1, c) \/ c.start) /\ PlantedBug # "SkipStickyLeader"
            ELSE /\ (s1.leader # Nil \/ (PlantedBug = "RefuseWhileRemembering" /\ s1.lsn.term > 0))
                 /\ ~(PlantedBug = "SkipStickyLeader" /\ s1.role = "follower")
        will_vote == fence = "none" /\ ~knows_leader /\ m.term > s1.term
    IN R(s1, {ScoutingResponseMsg(n, m.from, m.term, m.round, will_vote, fence,
                                  s1.config_version)})

\* Only the voters of this node's configuration are counted.
HandleScoutingResponseR(n, s, m) ==
    IF s.role # "follower" \/ s.round.id = 0 \/ m.term # s.round.term
       \/ (m.round # s.round.id /\ PlantedBug # "CountStaleScoutingReplies")
       \/ m.from \notin s.voters
    THEN Same(s)
    ELSE LET r == s.round
             r1 == IF m.will_vote
                   THEN [r EXCEPT !.yes = @ \cup {m.from}, !.no = @ \ {m.from}]
                   ELSE IF m.from \notin r.yes THEN [r EXCEPT !.no = @ \cup {m.from}]
                   ELSE r
             s1 == [s EXCEPT !.round = r1]
         IN IF Cardinality(r1.yes) >= ElectorQuorum(s1) THEN BecomeCandidate(n, s1, FALSE)
            ELSE IF Cardinality(r1.no) > Cardinality(s1.voters) - ElectorQuorum(s1)
                 THEN Same([EndScoutingRound(s1) EXCEPT !.armed_timers = @ \cup {"RandomWait"}])
            ELSE Same(s1)

\* A stale term is refused by the kind's term rule, before the handler (and the fence) runs.
\* has-leader: a follower of a leader; with LeaseSteps, a node within its promise or its start
\* promise (the C++ rule).
HandleElectionProposalR(n, s, m, c) ==
    LET t == s.term
        Refuse(why) == R(s, {ElectionResponseMsg(n, m.from, m.term, FALSE, why, t,
                                                 s.config_version)})
        grant == ElectionResponseMsg(n, m.from, m.term, TRUE, "none", m.term, s.config_version)
        sticky == Scouting /\ ~m.transfer /\ PlantedBug # "SkipStickyLeader"
        fence == ConfigFence(n, s, m)
    IN IF m.term < t THEN Refuse("stale-term")
       ELSE IF fence # "none" THEN Refuse(fence)   \* the term is left alone
       ELSE IF sticky /\ s.role = "leader" THEN Refuse("i-am-leader")
       ELSE IF sticky /\ (IF LeaseSteps THEN PromiseHolds(s, c) \/ c.start
                          ELSE s.role = "follower" /\ s.leader # Nil)
            THEN Refuse("has-leader")
       ELSE IF m.term = t
            THEN IF s.voted_for = m.from THEN R(s, {grant})
                 ELSE IF PlantedBug = "DoubleVote" /\ s.role = "follower"
                 THEN R([s EXCEPT !.voted_for = m.from, !.tentative_leader = m.from], {grant})
                 ELSE Refuse(IF s.voted_for # Nil THEN "already-voted" ELSE "stale-term")
       ELSE LET f == BecomeFollower(n, AdoptTerm(s, m.term, m.from), Nil, m.from, Nil)
            IN R(f.st, f.out \cup {grant})

\* Only the voters of this node's configuration count (a newer term is adopted from anyone).
HandleElectionResponseR(n, s, m) ==
    LET voter == m.from \in s.voters IN
    IF m.term # s.term THEN Same(s)
    ELSE IF s.role = "leader"
         THEN IF m.granted /\ voter
              THEN Same([s EXCEPT !.supporters = @ \cup {m.from},
                                  !.heard_since_check = @ \cup {m.from}])
              ELSE Same(s)
    ELSE IF s.role # "candidate" THEN Same(s)
    ELSE IF m.granted
         THEN IF ~voter THEN Same(s)
              ELSE LET s1 == [s EXCEPT !.supporters = @ \cup {m.from}]
                   IN IF Cardinality(s1.supporters) >= ElectorQuorum(s1) THEN BecomeLeader(n, s1)
                      ELSE Same(s1)
    ELSE IF m.voter_term > s.term
         THEN BecomeFollower(n, AdoptTerm(s, m.voter_term, Nil), Nil, Nil, Nil)
    ELSE IF ~voter THEN Same(s)
    ELSE LET s1 == [s EXCEPT !.refusals = @ \cup {m.from}]
         IN IF Cardinality(s1.refusals) > Cardinality(s1.voters) - ElectorQuorum(s1)
            THEN LostElection(n, s1)
            ELSE Same(s1)

\* A heartbeat of an older configuration is followed like any other (membership R5: the
\* leader won a legitimate election; the C++ only counts it, stale_config_heartbeats).
HandleLeaderHeartbeatR(n, s, m) ==
    LET t == s.term
        src == m.from
    IN IF m.term < t
       THEN IF s.role = "leader"
            THEN R(s, {LeaderHeartbeatMsg(n, src, t, s.lsn, s.config_version)})   \* follow us
            ELSE R(s, {HeartbeatResponseMsg(n, src, t)})        \* InvalidHeartbeat
       ELSE IF m.term = t /\ s.role = "leader"
            THEN R(s, {LeaderHeartbeatMsg(n, src, t, s.lsn, s.config_version)})   \* RaiseAlarm
       ELSE IF m.term = t /\ s.role = "follower" /\ s.leader # Nil /\ s.leader # src
            THEN Same(s)                                        \* RaiseAlarm(TwoLeadersInTerm)
       ELSE IF m.term > t /\ s.role = "leader" /\ PlantedBug = "KeepLeadingOnNewerHeartbeat"
            THEN LET s1 == [AdoptTerm(s, m.term, Nil) EXCEPT !.lsn = [term |-> m.term, counter |-> 0]]
                 IN R(s1, {LeaderHeartbeatMsg(n, src, s1.term, s1.lsn, s1.config_version)})
       \* note_lsn: the heartbeat's LSN is recorded only once this node is a follower, so a
       \* leader preempted here cedes the term it led (BecomeFollower reads its own LSN).
       ELSE LET NoteLsn(x) == IF LsnLess(x.lsn, m.lsn) THEN [x EXCEPT !.lsn = m.lsn] ELSE x
            IN IF m.term = t /\ s.role = "follower" /\ s.leader = src
               THEN R([NoteLsn(s) EXCEPT !.missed_checks = 0], {HeartbeatAckMsg(n, src, t)})
               ELSE LET was_tentative == s.role = "follower" /\ s.tentative_leader = src
                        s2 == IF m.term > t THEN AdoptTerm(s, m.term, Nil) ELSE s
                        f == BecomeFollower(n, s2, src, Nil, Nil)
                        reply == IF was_tentative /\ f.st.term = t
                                 THEN HeartbeatAckMsg(n, src, f.st.term)
                                 ELSE ElectionResponseMsg(n, src, f.st.term, TRUE, "none",
                                                          f.st.term, f.st.config_version)
                    IN R(NoteLsn(f.st), f.out \cup {reply})

\* A learner's ack counts toward no quorum (R7).
HandleHeartbeatAckR(n, s, m) ==
    IF s.role = "leader" /\ m.term = s.term /\ m.from \in s.voters
    THEN Same([s EXCEPT !.supporters = @ \cup {m.from}, !.heard_since_check = @ \cup {m.from}])
    ELSE Same(s)

HandleHeartbeatResponseR(n, s, m) ==
    IF s.role # "leader" \/ m.term <= s.term THEN Same(s)
    ELSE IF PlantedBug = "KeepLeadingOnHeartbeatResponse"
         THEN Same([AdoptTerm(s, m.term, Nil) EXCEPT !.lsn = [term |-> m.term, counter |-> 0]])
    ELSE BecomeFollower(n, AdoptTerm(s, m.term, Nil), Nil, Nil, Nil)

HandleLeadershipCessionR(n, s, m) ==
    IF s.role # "follower" \/ m.term # s.term THEN Same(s)
    ELSE IF s.leader # m.from /\ s.tentative_leader # m.from THEN Same(s)
    ELSE IF m.successor = n /\ CanStand(n, s) THEN BecomeCandidate(n, s, TRUE)
    ELSE BecomeFollower(n, s, Nil, Nil, Nil)

-----------------------------------------------------------------------------
(* Timer handlers (called after timer_fired cleared the timer's bit)        *)

RandomWaitFiredR(n, s, c) ==
    IF s.role = "follower" /\ s.leader = Nil /\ s.tentative_leader = Nil /\ CanStand(n, s)
    THEN StartScouting(n, s, c) ELSE Same(s)

InitialWaitFiredR(n, s, c) == RandomWaitFiredR(n, s, c)

ScoutingResultFiredR(n, s) ==
    IF s.round.id # 0
    THEN Same([EndScoutingRound(s) EXCEPT !.armed_timers = @ \cup {"RandomWait"}])
    ELSE Same(s)

ElectionResultFiredR(n, s) ==
    IF s.role = "candidate" THEN LostElection(n, s) ELSE Same(s)

HeartbeatBroadcastFiredR(n, s) ==
    IF s.role # "leader" THEN Same(s)
    ELSE R([s EXCEPT !.armed_timers = @ \cup {"HeartbeatBroadcast"}],
           ToAll(n, LAMBDA p : LeaderHeartbeatMsg(n, p, s.term, s.lsn, s.config_version)))

\* With LeaseSteps, the last check keeps a leader whose promise still holds and re-arms for
\* the promise's end, where it has ended: the check after it never finds it holding (so
\* missed_checks stays within CheckMisses).
HeartbeatCheckFiredR(n, s, c) ==
    IF s.role # "follower" \/ (s.leader = Nil /\ s.tentative_leader = Nil) THEN Same(s)
    ELSE IF PlantedBug = "NeverDropLeader" /\ s.leader # Nil   \* liveness mutant
         THEN Same([s EXCEPT !.armed_timers = @ \cup {"HeartbeatCheck"}])
    ELSE LET s1 == [s EXCEPT !.missed_checks = @ + 1]
         IN IF \/ s1.missed_checks < CheckMisses
               \/ PromiseHolds(s1, c) /\ s1.missed_checks = CheckMisses
            THEN Same([s1 EXCEPT !.armed_timers = @ \cup {"HeartbeatCheck"}])
            ELSE BecomeFollower(n, s1, Nil, Nil, Nil)

\* Voters only (heard_since_check holds no other; the leader itself counts as a voter).
CheckQuorumFiredR(n, s) ==
    IF s.role # "leader" THEN Same(s)
    ELSE IF Cardinality((s.heard_since_check \cup {n}) \cap s.voters) < ElectorQuorum(s)
         THEN BecomeFollower(n, s, Nil, Nil, Nil)
         ELSE Same([s EXCEPT !.heard_since_check = {},
                             !.armed_timers = @ \cup {"CheckQuorum"}])

-----------------------------------------------------------------------------
(* Connection events and commands                                           *)

PeerUpR(n, s, p) ==
    LET s1 == [s EXCEPT !.peers_up = @ \cup {p}]
    IN IF s.role = "leader" THEN R(s1, {LeaderHeartbeatMsg(n, p, s.term, s.lsn, s.config_version)})
       ELSE Same(s1)

PeerDownR(n, s, p) ==
    LET s1 == [s EXCEPT !.peers_up = @ \ {p}]
    IN IF s.role = "follower" /\ (s.leader = p \/ s.tentative_leader = p)
       THEN BecomeFollower(n, s1, Nil, Nil, Nil)
       ELSE IF s.role = "leader"
            THEN LET s2 == [s1 EXCEPT !.supporters = @ \ {p}]
                 IN IF Cardinality(s2.supporters) < ElectorQuorum(s2)
                    THEN BecomeFollower(n, s2, Nil, Nil, Nil)
                    ELSE Same(s2)
       ELSE Same(s1)

\* Elector::transfer_error(target) is empty.
TransferAllowed(n, s, target) ==
    s.role = "leader" /\ target \in Node /\ target # n /\ target \in s.voters
    /\ target \in s.peers_up
    /\ (target \notin PriorityZero \/ PlantedBug = "IgnorePriority")

TransferLeadershipR(n, s, target) == BecomeFollower(n, s, Nil, Nil, target)

\* A learner or removed node never stands: it arms no initial wait (R7, R8).
StartR(n, s) ==
    [s EXCEPT !.role = "follower", !.leader = Nil, !.tentative_leader = Nil,
              !.missed_checks = 0, !.round = NoRound,
              !.armed_timers = IF CanStand(n, s) THEN @ \cup {"InitialWait"} ELSE @]

\* stop(): a leader cedes; only term, vote, last round id, LSN, peers_up and the
\* configuration are kept.
StopR(n, s) ==
    LET cession == IF s.role = "leader"
                   THEN ToAll(n, LAMBDA p : LeadershipCessionMsg(n, p, s.lsn.term, Nil))
                   ELSE {}
        kept == [Fresh(s.term, s.voted_for) EXCEPT !.last_round_id = s.last_round_id,
                                                   !.lsn = s.lsn, !.peers_up = s.peers_up,
                                                   !.voters = s.voters,
                                                   !.config_version = s.config_version]
    IN R(kept, cession)

\* What a restarted process reads back: DurableState{term, voted_for}, and the
\* configuration of its log, which the runtime gives the new core before start()
\* (set_voters; membership R9). (The simulator's trace records a crashed core without
\* it; tla/trace_to_tla.py fills it in, README.md, "Trace validation".)
Restored(s) ==
    [IF DurableLost THEN Fresh(0, Nil) ELSE Fresh(s.term, s.voted_for)
     EXCEPT !.voters = s.voters, !.config_version = s.config_version]

\* Elector::voters_error(voters, version) is empty.
VotersAllowed(s, V, v) ==
    /\ V # {} /\ V \subseteq Node
    /\ v >= s.config_version
    /\ v = s.config_version => V = s.voters

\* Elector::set_voters / SetVoters: the active configuration changed. Tallies keep only the
\* new voters; a leader that is no longer a voter, or a candidate that is not one or whose
\* version changed, steps down (Reason::VotersChanged); a scouting follower ends its round;
\* a non-voter cancels its waits, a voter without a leader and without a wait starts one.
\* A refused call (voters_error) or the same configuration again changes nothing.
SetVotersR(n, s, V, v) ==
    IF ~VotersAllowed(s, V, v) \/ (v = s.config_version /\ V = s.voters) THEN Same(s)
    ELSE LET new_version == v # s.config_version
             voter == n \in V
             s1 == [s EXCEPT !.voters = V, !.config_version = v,
                             !.supporters = @ \cap V, !.refusals = @ \cap V,
                             !.heard_since_check = @ \cap V,
                             !.round.yes = @ \cap V, !.round.no = @ \cap V]
         IN IF s.role = "stopped" THEN Same(s1)
            ELSE IF \/ s.role = "leader" /\ ~voter
                    \/ s.role = "candidate" /\ (~voter \/ new_version)
                 THEN BecomeFollower(n, s1, Nil, Nil, Nil)
            ELSE IF s.role # "follower" THEN Same(s1)
            ELSE LET s2 == IF s1.round.id # 0 THEN EndScoutingRound(s1) ELSE s1
                 IN IF ~voter
                    THEN Same([s2 EXCEPT !.armed_timers = @ \ {"InitialWait", "RandomWait"}])
                    ELSE IF /\ s2.armed_timers \cap {"InitialWait", "RandomWait", "HeartbeatCheck"} = {}
                            /\ s2.leader = Nil /\ s2.tentative_leader = Nil
                         THEN Same([s2 EXCEPT !.armed_timers = @ \cup {"RandomWait"}])
                    ELSE Same(s2)

-----------------------------------------------------------------------------
(* Steps. Step(n, r, consumed) installs the result r of a handler run by n, *)
(* removes the consumed messages and adds the sent ones, and records the   *)
(* history (votes cast, leaders elected).                                  *)
(*                                                                         *)
(* Loss at send: the messages of r.out whose type is in LossyTypes may be  *)
(* lost as they leave (e.g. a broadcast reaches any subset of the peers).  *)
(* A message that is sent but never delivered is lost too, whatever its    *)
(* type; what losing it at send adds is that it takes no slot of the       *)
(* models' MaxMsgs bound. Dropping a message later instead is covered: see *)
(* tla/README.md, "Loss at send".                                          *)

\* The subsets of out that may reach the network.
Kept(out) ==
    LET lossy == {m \in out : m.type \in LossyTypes}
    IN {(out \ lossy) \cup k : k \in SUBSET lossy}

StepH(n, r, consumed, ev, h) ==
    /\ node' = [node EXCEPT ![n] = r.st]
    /\ \E kept \in Kept(r.out) : msgs' = (msgs \ consumed) \cup kept
    /\ votes' = IF r.st.voted_for # Nil
                THEN votes \cup {<<n, r.st.term, r.st.voted_for>>} ELSE votes
    /\ elected' = IF r.st.role = "leader" /\ node[n].role # "leader"
                  THEN elected \cup {<<r.st.term, n>>} ELSE elected
    /\ events' = events \cup ev
                 \cup (IF r.st.term > node[n].term /\ \E c \in consumed : c.type = "ScoutingRequest"
                      THEN {<<"catchup", n, r.st.term>>} ELSE {})
                 \cup (IF node[n].role = "leader" /\ r.st.role # "leader" /\ r.st.term > node[n].term
                      THEN {<<"higherterm", n, node[n].term>>} ELSE {})
                 \cup {<<"transfer", m.successor, m.term>> :
                        m \in {c \in r.out : c.type = "LeadershipCession" /\ c.successor # Nil}}
    /\ held' = h

StepE(n, r, consumed, ev) == StepH(n, r, consumed, ev, held)

Step(n, r, consumed) == StepE(n, r, consumed, {})

\* receive(): ignored while stopped; dispatch on the body (std::visit).
\* `keep` leaves the message in flight, so that it can be delivered again (duplication).
Handler(n, s, m, c) ==
    CASE m.type = "ScoutingRequest" -> HandleScoutingRequestR(n, s, m, c)
      [] m.type = "ScoutingResponse" -> HandleScoutingResponseR(n, s, m)
      [] m.type = "ElectionProposal" -> HandleElectionProposalR(n, s, m, c)
      [] m.type = "ElectionResponse" -> HandleElectionResponseR(n, s, m)
      [] m.type = "LeaderHeartbeat" -> HandleLeaderHeartbeatR(n, s, m)
      [] m.type = "HeartbeatAck" -> HandleHeartbeatAckR(n, s, m)
      [] m.type = "HeartbeatResponse" -> HandleHeartbeatResponseR(n, s, m)
      [] m.type = "LeadershipCession" -> HandleLeadershipCessionR(n, s, m)

\* The history event of an input at n, with answer c, that gives a newer term scouting support
\* or a vote (a transfer's proposal excepted, as in the C++ and Lease.tla) while n's promise to
\* its leader, or its start promise, holds: the lease's rule broken (PromiseKept).
PromiseBrokenEv(n, c, m, r) ==
    IF /\ c.promise \/ c.start
       /\ m.type \in {"ScoutingRequest", "ElectionProposal"} /\ ~m.transfer
       /\ \E o \in r.out : /\ o.to = m.from
                           /\ \/ o.type = "ScoutingResponse" /\ o.will_vote
                              \/ o.type = "ElectionResponse" /\ o.granted /\ o.term > node[n].term
    THEN {<<"promisebroken", n, node[n].term>>} ELSE {}

\* receive(m) with the clock's answer drawn from C (Receive: any of Clocks(n)) and the extra
\* history events ev (the named lease decisions, below). Every input below draws its step from the
\* set of outcomes <<result, events>> over the answers, not from the answers themselves: answers
\* that lead to the same outcome give TLC one successor state
\* to check rather than one each. The steps are the same.
ReceiveWith(m, keep, C, ev) ==
    LET n == m.to IN
    /\ m.from # n
    /\ node[n].role # "stopped"
    /\ \E o \in {LET r == AfterLeaseCheck(n, node[n], c, LAMBDA s : Handler(n, s, m, c))
                  IN <<r, LeaseEv(n, c) \cup PromiseBrokenEv(n, c, m, r) \cup ev>> : c \in C} :
          StepE(n, o[1], IF keep THEN {} ELSE {m}, o[2])
    /\ UNCHANGED faults

Receive(m, keep) == ReceiveWith(m, keep, Clocks(m.to), {})

HandleScoutingRequest(m, keep) == m.type = "ScoutingRequest" /\ Receive(m, keep)
HandleScoutingResponse(m, keep) == m.type = "ScoutingResponse" /\ Receive(m, keep)
HandleElectionProposal(m, keep) == m.type = "ElectionProposal" /\ Receive(m, keep)
HandleElectionResponse(m, keep) == m.type = "ElectionResponse" /\ Receive(m, keep)
HandleLeaderHeartbeat(m, keep) == m.type = "LeaderHeartbeat" /\ Receive(m, keep)
HandleHeartbeatAck(m, keep) == m.type = "HeartbeatAck" /\ Receive(m, keep)
HandleHeartbeatResponse(m, keep) == m.type = "HeartbeatResponse" /\ Receive(m, keep)
HandleLeadershipCession(m, keep) == m.type = "LeadershipCession" /\ Receive(m, keep)

\* (Each XFired(n) below repeats Fired's "armed" guard so that TLC's coverage report
\* names the action XFired rather than Fired.)
\* timer_fired(): ignored while stopped; clears the timer's bit, runs the lease check, then
\* ignores a timer that was not armed (LeaseExpiresOnly below).
TimerHandler(n, timer, s, c) ==
    CASE timer = "InitialWait" -> InitialWaitFiredR(n, s, c)
      [] timer = "RandomWait" -> RandomWaitFiredR(n, s, c)
      [] timer = "ScoutingResult" -> ScoutingResultFiredR(n, s)
      [] timer = "ElectionResult" -> ElectionResultFiredR(n, s)
      [] timer = "HeartbeatBroadcast" -> HeartbeatBroadcastFiredR(n, s)
      [] timer = "HeartbeatCheck" -> HeartbeatCheckFiredR(n, s, c)
      [] timer = "CheckQuorum" -> CheckQuorumFiredR(n, s)

\* timer_fired with the clock's answer drawn from C and the extra history events ev.
FiredWith(n, timer, C, ev) ==
    /\ node[n].role # "stopped"
    /\ timer \in node[n].armed_timers
    /\ \E o \in {LET r == AfterLeaseCheck(n, [node[n] EXCEPT !.armed_timers = @ \ {timer}], c,
                                          LAMBDA s : TimerHandler(n, timer, s, c))
                  IN <<r, LeaseEv(n, c) \cup ev \cup
                          (IF timer = "CheckQuorum" /\ node[n].role = "leader"
                              /\ r.st.role # "leader" /\ ~c.expired
                           THEN {<<"checkquorum", n, node[n].term>>} ELSE {})>> : c \in C} :
          StepE(n, o[1], {}, o[2])
    /\ UNCHANGED faults

Fired(n, timer) == FiredWith(n, timer, Clocks(n), {})

InitialWaitFired(n) == "InitialWait" \in node[n].armed_timers /\ Fired(n, "InitialWait")
RandomWaitFired(n) == "RandomWait" \in node[n].armed_timers /\ Fired(n, "RandomWait")
ScoutingResultFired(n) == "ScoutingResult" \in node[n].armed_timers /\ Fired(n, "ScoutingResult")
ElectionResultFired(n) == "ElectionResult" \in node[n].armed_timers /\ Fired(n, "ElectionResult")
HeartbeatBroadcastFired(n) == "HeartbeatBroadcast" \in node[n].armed_timers /\ Fired(n, "HeartbeatBroadcast")
HeartbeatCheckFired(n) == "HeartbeatCheck" \in node[n].armed_timers /\ Fired(n, "HeartbeatCheck")
CheckQuorumFired(n) == "CheckQuorum" \in node[n].armed_timers /\ Fired(n, "CheckQuorum")

\* The connection events and set_voters run the lease check first too; transfer_leadership
\* does, and then refuses a leader that stepped down (LeaseExpiresOnly below).
PeerUp(n, p) ==
    /\ p # n
    /\ \E o \in {<<AfterLeaseCheck(n, node[n], c, LAMBDA s : PeerUpR(n, s, p)), LeaseEv(n, c)>> :
                 c \in Clocks(n)} :
          StepE(n, o[1], {}, o[2])
    /\ UNCHANGED faults

\* peer_down(p) with a closure that proves p gone (LinkLoss::PeerClosed or PeerRestarted), with
\* the clock's answer drawn from C and the extra history events ev.
PeerDownWith(n, p, C, ev) ==
    /\ p # n
    /\ \E o \in {<<AfterLeaseCheck(n, node[n], c, LAMBDA s : PeerDownR(n, s, p)),
                   LeaseEv(n, c) \cup ev>> : c \in C} :
          StepE(n, o[1], {}, o[2])
    /\ faults' = faults + 1

PeerDown(n, p) == PeerDownWith(n, p, Clocks(n), {})

\* peer_down(p, LinkLoss::Local): n closed the link itself (a keepalive or user timeout, a
\* duplicate hello, a full queue): nothing proves that p stopped. A follower keeps its leader (its
\* promise and heartbeat checks run out on its clock); a link to a tentative leader carries no
\* promise; a leader drops p as on any closure. The planted PromiseEndsOnLocalClose takes the
\* closure for proof, and a follower whose promise holds breaks it (PromiseKept).
LocalCloseR(n, s, p) ==
    IF s.role = "follower" /\ s.leader = p /\ PlantedBug # "PromiseEndsOnLocalClose"
    THEN Same([s EXCEPT !.peers_up = @ \ {p}])
    ELSE PeerDownR(n, s, p)

LocalClose(n, p) ==
    /\ p # n
    /\ \E o \in {LET r == AfterLeaseCheck(n, node[n], c, LAMBDA s : LocalCloseR(n, s, p))
                  IN <<r, LeaseEv(n, c) \cup
                          (IF PromiseHolds(node[n], c) /\ node[n].leader = p /\ r.st.leader # p
                           THEN {<<"promisebroken", n, node[n].term>>} ELSE {})>> : c \in Clocks(n)} :
          StepE(n, o[1], {}, o[2])
    /\ faults' = faults + 1

\* An input that the core ignores after the lease check (a timer that is not armed, a transfer
\* refused because the leader just stepped down, a connection event about the node itself):
\* the check alone. HeartbeatBroadcastFired (armed at every leader) with an ended lease takes the
\* same step, which Next names LeaseExpiry. Trace validation uses it.
LeaseExpiresOnly(n) ==
    /\ LeaseSteps
    /\ node[n].role = "leader"
    /\ StepE(n, LeaseExpiresR(n, node[n]), {}, {<<"leaseexpired", n, node[n].term>>})
    /\ UNCHANGED faults

TransferLeadership(n, target) ==
    /\ TransferAllowed(n, node[n], target)
    /\ Step(n, TransferLeadershipR(n, node[n], target), {})
    /\ UNCHANGED faults

IssueLsn(n) ==
    /\ node[n].role = "leader"
    /\ Step(n, Same([node[n] EXCEPT !.lsn.counter = @ + 1]), {})
    /\ UNCHANGED faults

Start(n) ==
    /\ node[n].role = "stopped"
    /\ Step(n, Same(StartR(n, node[n])), {})
    /\ UNCHANGED faults

Stop(n) ==
    /\ node[n].role # "stopped"
    /\ Step(n, StopR(n, node[n]), {})
    /\ faults' = faults + 1

\* The process dies: everything but the durable state is lost, nothing is sent.
Crash(n) ==
    /\ StepE(n, Same(Restored(node[n])), {}, {<<"crash", n, node[n].term>>})
    /\ faults' = faults + 1

\* A new process: a core constructed from the durable state, then start().
Restart(n) ==
    /\ node[n].role = "stopped"
    /\ Step(n, Same(StartR(n, Restored(node[n]))), {})
    /\ UNCHANGED faults

-----------------------------------------------------------------------------
(* The lease's decisions as actions of their own (LeaseSteps).             *)
(*                                                                         *)
(* Each is a step that Next takes anyway (an input with one answer of the  *)
(* clock), named so that TLC's coverage reports it (tla/check.sh's gate    *)
(* requires each to reach new states) and recorded in the history events  *)
(* that the canaries read. Next lists them before the inputs, so coverage  *)
(* credits a state to the decision that reaches it first. Without          *)
(* LeaseSteps each is disabled (its answer is not in Clocks(n)).           *)

HeldClock == [expired |-> FALSE, promise |-> TRUE, start |-> FALSE]
StartClock == [expired |-> FALSE, promise |-> FALSE, start |-> TRUE]

\* A scouting request or proposal of a newer term, which n would answer without the lease's
\* rules (no transfer, the configuration fence passes).
AsksNewerTerm(n, m) ==
    /\ m.type \in {"ScoutingRequest", "ElectionProposal"} /\ m.to = n /\ ~m.transfer
    /\ m.term > node[n].term
    /\ ConfigFence(n, node[n], m) = "none"

\* The leader's lease has ended: it steps down and cedes; the input (here its heartbeat
\* broadcast, armed at every leader) is then ignored (LeaseExpiresOnly).
LeaseExpiry(n) ==
    /\ LeaseSteps
    /\ "HeartbeatBroadcast" \in node[n].armed_timers
    /\ LeaseExpiresOnly(n)

\* A follower within its promise to its leader refuses a newer term (sticky leader by time).
PromiseRefusal(m) ==
    /\ LeaseSteps
    /\ AsksNewerTerm(m.to, m)
    /\ ReceiveWith(m, FALSE, {HeldClock} \cap Clocks(m.to),
                   {<<"promiserefusal", m.to, node[m.to].term>>})

\* A node within its start promise refuses a newer term ...
StartPromiseRefusal(m) ==
    /\ LeaseSteps
    /\ AsksNewerTerm(m.to, m) /\ node[m.to].role # "leader"
    /\ ReceiveWith(m, FALSE, {StartClock} \cap Clocks(m.to),
                   {<<"startpromiserefusal", m.to, node[m.to].term>>})

\* ... and does not stand when its wait fires: it waits again.
StartPromiseWait(n) ==
    /\ LeaseSteps
    /\ node[n].role = "follower" /\ node[n].leader = Nil /\ node[n].tentative_leader = Nil
    /\ CanStand(n, node[n])
    /\ \E t \in {"InitialWait", "RandomWait"} :
          FiredWith(n, t, {StartClock} \cap Clocks(n), {<<"startpromisewait", n, node[n].term>>})

\* A follower's promise to its leader, still held, ends with the leader's cession ...
PromiseEndedByCession(m) ==
    /\ LeaseSteps
    /\ m.type = "LeadershipCession"
    /\ node[m.to].role = "follower" /\ node[m.to].leader = m.from /\ m.term = node[m.to].term
    /\ ReceiveWith(m, FALSE, {HeldClock} \cap Clocks(m.to),
                   {<<"promiseendedcession", m.to, node[m.to].term>>})

\* ... or with a closure of the link to it that proves it gone (PeerDown; not LocalClose).
PromiseEndedByLink(n, p) ==
    /\ LeaseSteps
    /\ faults < MaxFaults /\ "PeerDown" \in FaultKinds
    /\ node[n].role = "follower" /\ node[n].leader = p /\ p \in node[n].peers_up
    /\ PeerDownWith(n, p, {HeldClock} \cap Clocks(n), {<<"promiseendedlink", n, node[n].term>>})

-----------------------------------------------------------------------------
(* Membership: the runtime delivers the configurations the log commits.    *)
(*                                                                         *)
(* The log is not modelled; what the elector's safety needs from it        *)
(* (docs/membership.md, sections 3 and 5) is kept by two environment       *)
(* actions over the fixed history Configs (version k has voters            *)
(* CfgVoters(k), each one voter away from the previous):                   *)
(*  - HandleAppend(n): n's log receives configuration k = Committed + 1,  *)
(*    the one pending change (R2: the next is appended only once this one *)
(*    committed). The Append that carries it carries a commit point        *)
(*    covering k - 1 (lemma L, R4), so n holds k - 1 active first.         *)
(*  - Committed: k is committed once a quorum of the voters of k - 1 hold  *)
(*    it (R1). (Counted as soon as it is true: a later count by the leader *)
(*    only delays what may happen after it, which the model may delay too.)*)
(*  - SetVoters(n, k): n learns that k (committed) is committed and the    *)
(*    runtime calls set_voters; at any time, possibly late, possibly never *)
(*    (a node may skip versions: a snapshot).                               *)
(* Which leader appended a change, and logs being truncated, are left out  *)
(* (truncation only takes holders away, and holders only enable commits).  *)

CfgVoters(k) == Configs[k + 1]
MaxVersion == Len(Configs) - 1

Committed ==
    LET ks == {k \in 1..MaxVersion :
                  Cardinality({v \in CfgVoters(k - 1) : held[v] >= k}) >= QuorumOf(CfgVoters(k - 1))}
    IN IF ks = {} THEN 0 ELSE CHOOSE k \in ks : \A j \in ks : j <= k

HandleAppend(n) ==
    LET k == Committed + 1 IN
    /\ k <= MaxVersion
    /\ node[n].role # "stopped"
    /\ held[n] < k
    /\ node[n].config_version = k - 1
    /\ held' = [held EXCEPT ![n] = k]
    /\ UNCHANGED <<node, msgs, faults, votes, elected, events>>

\* set_voters(V, v) on n (after the lease check), the log's holding h after it.
SetVotersStep(n, V, v, h) ==
    /\ \E o \in {LET r == AfterLeaseCheck(n, node[n], c, LAMBDA s : SetVotersR(n, s, V, v))
                  IN <<r, LeaseEv(n, c) \cup
                          (IF node[n].role = "leader" /\ r.st.role # "leader" /\ ~c.expired
                           THEN {<<"voterschanged", n, node[n].term>>} ELSE {})>> : c \in Clocks(n)} :
          StepH(n, o[1], {}, o[2], h)
    /\ UNCHANGED faults

SetVoters(n, k) ==
    /\ node[n].config_version < k /\ k <= Committed
    /\ SetVotersStep(n, CfgVoters(k), k, [held EXCEPT ![n] = IF @ < k THEN k ELSE @])

\* Trace validation: set_voters with any arguments (the simulator's own history).
SetVotersTo(n, V, v) == SetVotersStep(n, V, v, held)

-----------------------------------------------------------------------------
(* Specification                                                            *)

\* Every node started (follower, initial wait armed if a voter) with the first
\* configuration of the history (given before start, as the runtime does with the one
\* in its log; version 0 here) and connected to every peer.
Init ==
    /\ node = [n \in Node |->
                 [StartR(n, [Fresh(0, Nil) EXCEPT !.voters = CfgVoters(0)])
                  EXCEPT !.peers_up = Node \ {n}]]
    /\ msgs = {}
    /\ faults = 0
    /\ votes = {}
    /\ elected = {}
    /\ events = {}
    /\ held = [n \in Node |-> 0]

\* An established leader l: it won term 1 (scouting round 1, every vote), every node heard
\* its first heartbeat and acked it, nothing is in flight. Init reaches this state up to the
\* leader's name (MCElectorLive's canary CanaryNoEstablishedLeader, README.md, "Liveness").
EstablishedNode(l, n) ==
    IF n = l
    THEN [Fresh(1, l) EXCEPT !.role = "leader", !.leader = l, !.supporters = Node,
                             !.heard_since_check = Node \ {l}, !.peers_up = Node \ {l},
                             !.last_round_id = 1, !.lsn = [term |-> 1, counter |-> 0],
                             !.armed_timers = IF CheckQuorum
                                              THEN {"HeartbeatBroadcast", "CheckQuorum"}
                                              ELSE {"HeartbeatBroadcast"}]
    ELSE [Fresh(1, l) EXCEPT !.role = "follower", !.leader = l, !.peers_up = Node \ {n},
                             !.lsn = [term |-> 1, counter |-> 0],
                             !.armed_timers = {"HeartbeatCheck"}]

\* Freshly constructed cores, not started, no connection reported yet (trace validation).
InitFresh ==
    /\ node = [n \in Node |-> Fresh(0, Nil)]
    /\ msgs = {}
    /\ faults = 0
    /\ votes = {}
    /\ elected = {}
    /\ events = {}
    /\ held = [n \in Node |-> 0]

Deliver(m, keep) ==
    \/ HandleScoutingRequest(m, keep)
    \/ HandleScoutingResponse(m, keep)
    \/ HandleElectionProposal(m, keep)
    \/ HandleElectionResponse(m, keep)
    \/ HandleLeaderHeartbeat(m, keep)
    \/ HandleHeartbeatAck(m, keep)
    \/ HandleHeartbeatResponse(m, keep)
    \/ HandleLeadershipCession(m, keep)

TimerFired(n) ==
    \/ InitialWaitFired(n)
    \/ RandomWaitFired(n)
    \/ ScoutingResultFired(n)
    \/ ElectionResultFired(n)
    \/ HeartbeatBroadcastFired(n)
    \/ HeartbeatCheckFired(n)
    \/ CheckQuorumFired(n)

\* Environment events a model allows: faults are budgeted, the connection
\* events report changes only.
Fault(n) ==
    /\ faults < MaxFaults
    /\ \/ "Crash" \in FaultKinds /\ Crash(n)
       \/ "Stop" \in FaultKinds /\ Stop(n)
       \/ "PeerDown" \in FaultKinds /\ \E p \in node[n].peers_up : PeerDown(n, p)
       \/ "LocalClose" \in FaultKinds /\ \E p \in node[n].peers_up : LocalClose(n, p)

(* Next with one named operator per action: TLC names an action after the  *)
(* innermost operator it can expand, and it cannot expand \E m \in msgs, so  *)
(* each handler gets an "Any" wrapper; tla/check.sh's coverage gate strips   *)
(* the suffix. Next is the same relation as Deliver + TimerFired + Fault.    *)
Keeps == IF Duplication THEN BOOLEAN ELSE {FALSE}
HandleScoutingRequestAny == \E m \in msgs : \E keep \in Keeps : HandleScoutingRequest(m, keep)
HandleScoutingResponseAny == \E m \in msgs : \E keep \in Keeps : HandleScoutingResponse(m, keep)
HandleElectionProposalAny == \E m \in msgs : \E keep \in Keeps : HandleElectionProposal(m, keep)
HandleElectionResponseAny == \E m \in msgs : \E keep \in Keeps : HandleElectionResponse(m, keep)
HandleLeaderHeartbeatAny == \E m \in msgs : \E keep \in Keeps : HandleLeaderHeartbeat(m, keep)
HandleHeartbeatAckAny == \E m \in msgs : \E keep \in Keeps : HandleHeartbeatAck(m, keep)
HandleHeartbeatResponseAny == \E m \in msgs : \E keep \in Keeps : HandleHeartbeatResponse(m, keep)
HandleLeadershipCessionAny == \E m \in msgs : \E keep \in Keeps : HandleLeadershipCession(m, keep)
PeerUpAny(n) == \E p \in Node \ node[n].peers_up : p # n /\ PeerUp(n, p)
TransferLeadershipAny(n) == Transfers /\ \E p \in Node : TransferLeadership(n, p)
IssueLsnAny(n) == node[n].lsn.counter < MaxLsn /\ IssueLsn(n)
CrashAny(n) == faults < MaxFaults /\ "Crash" \in FaultKinds /\ Crash(n)
StopAny(n) == faults < MaxFaults /\ "Stop" \in FaultKinds /\ Stop(n)
PeerDownAny(n) ==
    faults < MaxFaults /\ "PeerDown" \in FaultKinds /\ \E p \in node[n].peers_up : PeerDown(n, p)
LocalCloseAny(n) ==
    faults < MaxFaults /\ "LocalClose" \in FaultKinds /\ \E p \in node[n].peers_up : LocalClose(n, p)
SetVotersAny(n) == \E k \in 1..MaxVersion : SetVoters(n, k)
PromiseRefusalAny == \E m \in msgs : PromiseRefusal(m)
StartPromiseRefusalAny == \E m \in msgs : StartPromiseRefusal(m)
PromiseEndedByCessionAny == \E m \in msgs : PromiseEndedByCession(m)
PromiseEndedByLinkAny(n) == \E p \in Node : PromiseEndedByLink(n, p)

Next ==
    \* the lease's decisions (LeaseSteps), first: each is also a step of the inputs below
    \/ PromiseRefusalAny
    \/ StartPromiseRefusalAny
    \/ PromiseEndedByCessionAny
    \/ \E n \in Node :
        \/ LeaseExpiry(n)
        \/ StartPromiseWait(n)
        \/ PromiseEndedByLinkAny(n)
    \/ HandleScoutingRequestAny
    \/ HandleScoutingResponseAny
    \/ HandleElectionProposalAny
    \/ HandleElectionResponseAny
    \/ HandleLeaderHeartbeatAny
    \/ HandleHeartbeatAckAny
    \/ HandleHeartbeatResponseAny
    \/ HandleLeadershipCessionAny
    \/ \E n \in Node :
        \/ TimerFired(n)
        \/ PeerUpAny(n)
        \/ TransferLeadershipAny(n)
        \/ IssueLsnAny(n)
        \/ Restart(n)   \* before Start: after a crash they reach the same state, and
        \/ Start(n)     \* coverage credits the first action that reaches a state
        \/ CrashAny(n)
        \/ StopAny(n)
        \/ PeerDownAny(n)
        \/ LocalCloseAny(n)
        \/ SetVotersAny(n)   \* membership: both disabled with DefaultConfigs
        \/ HandleAppend(n)

Spec == Init /\ [][Next]_vars

\* Model bounds.
Bounds ==
    /\ \A n \in Node : node[n].term <= MaxTerm /\ node[n].last_round_id <= MaxRound
    /\ Cardinality(msgs) <= MaxMsgs

-----------------------------------------------------------------------------
(* Invariants                                                               *)

NodeOrNil == Node \cup {Nil}
LsnType == [term : Nat, counter : Nat]

\* TypeOK by part, so that TypeOKEveryStep (MCElector.tla) can check only what a step changed.
NodeTypeOK(n) ==
        LET s == node[n] IN
        /\ s.role \in Roles
        /\ s.term \in Nat
        /\ s.voted_for \in NodeOrNil
        /\ s.leader \in NodeOrNil
        /\ s.tentative_leader \in NodeOrNil
        /\ s.supporters \subseteq Node
        /\ s.refusals \subseteq Node
        /\ s.heard_since_check \subseteq Node
        /\ s.peers_up \subseteq Node \ {n}
        /\ s.missed_checks \in 0..CheckMisses
        /\ s.round.id \in Nat
        /\ s.round.term \in Nat
        /\ s.round.yes \subseteq Node /\ s.round.no \subseteq Node
        /\ s.last_round_id \in Nat
        /\ s.lsn \in LsnType
        /\ s.armed_timers \subseteq Timers
        /\ s.voters \subseteq Node /\ s.voters # {}
        /\ s.config_version \in Nat
        \* role-specific shape (Elector::CheckRoleInvariants and CheckTimerInvariants check these
        \* and more after every input in the C++'s debug builds)
        /\ s.role = "stopped" => s.armed_timers = {}
        /\ s.role = "leader" => s.leader = n /\ s.lsn.term = s.term
        /\ s.tentative_leader # Nil => s.role = "follower" /\ s.leader = Nil
        /\ s.lsn.term <= s.term

MsgTypeOK(m) ==
        /\ m.type \in MsgTypes
        /\ m.from \in Node /\ m.to \in Node /\ m.from # m.to
        /\ m.term \in Nat
        /\ m.refusal \in Refusals
        /\ m.lsn \in LsnType
        /\ m.successor \in NodeOrNil
        /\ m.config_version \in Nat

CountersTypeOK ==
    /\ faults \in Nat
    /\ held \in [Node -> Nat]

TypeOK ==
    /\ \A n \in Node : NodeTypeOK(n)
    /\ \A m \in msgs : MsgTypeOK(m)
    /\ CountersTypeOK
    /\ PlantedBug \in PlantedBugs

\* At most one leader per term, over the whole history.
OneLeaderPerTerm ==
    \A e1, e2 \in elected : e1[1] = e2[1] => e1[2] = e2[2]

\* Priorities: a node of priority 0 never leads (the simulator's priority-zero-leads).
PriorityZeroNeverLeads == \A n \in PriorityZero : node[n].role # "leader"

\* At most one vote per node per term, over the whole history.
OneVotePerTerm ==
    \A v1, v2 \in votes : (v1[1] = v2[1] /\ v1[2] = v2[2]) => v1[3] = v2[3]

\* Every leader was voted for in its term by a quorum of the voters of a configuration
\* of the history that has it as a voter (it counted only votes, of voters only).
LeaderHadQuorum ==
    \A e \in elected : \E k \in 1..Len(Configs) :
        /\ e[2] \in Configs[k]
        /\ Cardinality({v \in Configs[k] : <<v, e[1], e[2]>> \in votes}) >= QuorumOf(Configs[k])

\* Membership (Elector::CheckMembershipInvariants, always on in the C++): only voters are
\* counted; a non-voter neither stands nor waits to (R7, R8).
VotersOnlyCountAndStand ==
    \A n \in Node :
        LET s == node[n] IN
        /\ s.supporters \cup s.refusals \cup s.heard_since_check \cup s.round.yes \cup s.round.no
               \subseteq s.voters
        /\ (n \notin s.voters /\ s.role # "stopped")
               => /\ s.role = "follower" /\ s.round.id = 0
                  /\ s.armed_timers \cap {"InitialWait", "RandomWait"} = {}

\* What the application is told (Elector::NotifyIfChanged, NotifyLeadership; checked after every
\* input by Elector::CheckRoleInvariants in debug builds): the role, the
\* known leader and the fencing token, the known leader's term or 0 without one. Every change
\* of role, leader, or term while a leader is known runs through Start, Stop, BecomeCandidate,
\* BecomeLeader or BecomeFollower, each of which notifies, so after every step the last
\* snapshot the application got is this function of the state.
Told(n) ==
    [role |-> node[n].role, leader |-> node[n].leader,
     token |-> IF node[n].leader # Nil THEN node[n].term ELSE 0]

\* No two nodes act as leader with the same fencing token: a store that fences on the token
\* can tell every pair of acting leaders apart.
FencingTokensUnique ==
    \A a, b \in Node : (a # b /\ Told(a).role = "leader" /\ Told(b).role = "leader")
                        => Told(a).token # Told(b).token

\* Every leadership the application is told of (a node told it leads, or told who leads) was
\* won in an election of the token's term.
ToldLeaderWasElected ==
    \A n \in Node : Told(n).leader # Nil => <<Told(n).token, Told(n).leader>> \in elected

\* A current leader is one that was elected (and so had a quorum).
LeaderWasElected ==
    \A n \in Node : node[n].role = "leader" => <<node[n].term, n>> \in elected

-----------------------------------------------------------------------------
(* Action properties                                                        *)

\* Terms never decrease, also across Stop, Crash and Restart.
TermsNeverDecrease ==
    [][\A n \in Node : node'[n].term >= node[n].term]_vars

\* A node's LSN never goes back while its process lives. The LSN is volatile
\* state in the C++ core (a restarted core starts from LSN (0, 0)), so Crash
\* and Restart are excluded.
LsnNeverGoesBack ==
    [][\A n \in Node : LsnLeq(node[n].lsn, node'[n].lsn) \/ Crash(n) \/ Restart(n)]_vars

\* Stability (not safety): a follower that knows a live leader never says yes
\* to a scouting round; "live" = more than one heartbeat check from dropping
\* it (CorroboratesSilence). Broken by PlantedBug "SkipStickyLeader".
StickyLeaderHonoured ==
    [][\A m \in msgs' \ msgs :
         (m.type = "ScoutingResponse" /\ m.will_vote /\ node[m.from].role = "follower")
            => \/ node[m.from].leader = Nil
               \/ CheckMisses >= 2 /\ node[m.from].missed_checks + 1 >= CheckMisses]_vars

\* The leader lease (LeaseSteps): a node whose promise to its leader, or whose start promise,
\* holds at an input gives a newer term no scouting support and no vote (a transfer's proposal
\* excepted), and a follower keeps the leader its promise is for through a link it closed itself
\* (PromiseBrokenEv, LocalClose). The rules that Lease.tla's LeaseExclusive rests on, as the
\* untimed spec can state them. Broken by PlantedBug "SkipStickyLeader" (Lease.tla's
\* VoteInsidePromise) and "PromiseEndsOnLocalClose" (Lease.tla's EndPromiseOnLocalClose).
PromiseKept == [][\A e \in events' \ events : e[1] # "promisebroken"]_vars

\* Canary: no follower is ever in a state where a scouting request in flight
\* would be corroborated. TLC must violate it in a model with CheckMisses >= 2,
\* which shows the corroboration branch is reached.
CanaryNoCorroboration ==
    \A m \in msgs : m.type = "ScoutingRequest" => ~CorroboratesSilence(node[m.to], m, BaseClock)

\* Stability (not safety): a reply to another scouting round than the
\* receiver's current one changes nothing. Broken by PlantedBug
\* "CountStaleScoutingReplies".
ScoutingRepliesFromThisRound ==
    [][\A m \in msgs :
         (/\ m.type = "ScoutingResponse" /\ m.round # node[m.to].round.id
          /\ node'[m.to] # node[m.to])
            => ~\E keep \in BOOLEAN : HandleScoutingResponse(m, keep)]_vars

-----------------------------------------------------------------------------
(* Liveness                                                                 *)

\* Some node leads and every node follows it.
AllFollowOneLeader ==
    \E l \in Node : \A n \in Node : node[n].role # "stopped" /\ node[n].leader = l

EventuallyOneLeader == <>AllFollowOneLeader

=============================================================================
