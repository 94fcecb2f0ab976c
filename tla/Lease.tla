\* SPDX-License-Identifier: Apache-2.0
-------------------------------- MODULE Lease --------------------------------
(***************************************************************************)
(* The leader lease under bounded clock drift (tla/README.md, "Leader     *)
(* lease (Lease.tla)"): at most one node is leader with an unexpired      *)
(* lease at any real time (LeaseExclusive), on top of one leader per term. *)
(*                                                                         *)
(* Time. Real time `now` advances in integer ticks (Tick, at most         *)
(* MaxTime). In one real tick every node's monotonic clock advances by an  *)
(* integer in Lo..Hi units: its rate lies in [Lo, Hi], that is            *)
(* [1 - rho, 1 + rho] times the nominal rate (Lo + Hi) / 2, with           *)
(* rho = (Hi - Lo) / (Hi + Lo). Every other step takes no real time.       *)
(*                                                                         *)
(* Follower promise. A follower that hears a heartbeat of its leader at    *)
(* local time r promises, while its clock reads < r + E, not to stand, not *)
(* to vote for another candidate and not to adopt a newer term from a      *)
(* proposal. Exceptions: a transfer proposal of the successor its own      *)
(* leader chose (TransferBegin), the connection to the leader closing      *)
(* (PeerDown: the leader's side closed it), the leader ceding             *)
(* (LeaseExpireStepDown's cession). A connection the follower closed      *)
(* itself (LocalClose) ends no promise.                                    *)
(* A node that starts (Restart) promises the same for E from its start: it *)
(* may have made a promise it no longer remembers.                         *)
(*                                                                         *)
(* Leader lease. A heartbeat carries its send time s on the leader's       *)
(* clock (the round id); the follower's ack echoes it. For each follower   *)
(* the leader keeps promiseUntil = s + LeaseLen for the newest round that  *)
(* follower acknowledged; its lease ends at the (Quorum - 1)-th largest    *)
(* promiseUntil (the leader counts itself). PeerDown drops the follower.   *)
(*                                                                         *)
(* LeaseLen, the integer form of E (1 - rho) / (1 + rho). A follower that  *)
(* got the heartbeat d real ticks after it was sent (d >= 0) holds its     *)
(* promise at every real time t with Hi * (t - send time) < E, since its   *)
(* clock ran at most Hi per tick. The leader holds its lease while        *)
(* s + Lo * (t - send time) <= clock < s + LeaseLen, so only while         *)
(* Lo * (t - send time) < LeaseLen. The lease is covered when              *)
(* LeaseLen / Lo <= E / Hi: LeaseLen = the largest integer with            *)
(* LeaseLen * Hi <= E * Lo, i.e. (E * Lo) \div Hi. With Lo = (1 - rho) u,  *)
(* Hi = (1 + rho) u this is E (1 - rho) / (1 + rho), rounded down.         *)
(*                                                                         *)
(* Elections are abstracted to votes as in Identity.tla: a proposal, its   *)
(* grant and the grant's receipt are one step (Vote); scouting (PreVote)   *)
(* is folded into it (a support is a vote). Heartbeats and transfer        *)
(* requests are messages: delayed any number of ticks, or never delivered  *)
(* (lost); an ack is taken with its heartbeat, a cession at once (see      *)
(* HeartbeatAck, LeaseExpireStepDown for why neither loses a behaviour     *)
(* that could shorten a promise or lengthen a lease).                      *)
(*                                                                         *)
(* Switches (model constants):                                             *)
(*   PlantedBug = "IgnoreDrift": the lease lasts E, not LeaseLen.          *)
(*              "VoteInsidePromise": followers vote inside their promise.  *)
(*              "KeepPromiseOnPeerDown": the leader keeps a follower's     *)
(*                promise after their connection closed.                   *)
(*              "ForgetPromiseOnRestart": a started node promises nothing. *)
(*              "EndPromiseOnLocalClose": a follower ends its promise when  *)
(*                it closes the connection to its leader itself.           *)
(*              "GrantAnyTransfer": inside its promise a follower grants   *)
(*                every transfer proposal, not only its leader's           *)
(*                successor's (safe here: docs/tla-lease.md).              *)
(*   DriftBeyond: a clock may advance Lo - DriftBeyond .. Hi + DriftBeyond *)
(*     units per tick: drift beyond the stated bound (0 within it).       *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    N,           \* number of nodes (ids 1..N), all voters
    Lo, Hi,      \* a clock advances Lo..Hi units per real tick
    E,           \* promise duration (the inactivity interval), in clock units
    MaxTime,     \* real ticks
    MaxTerm,     \* terms 0..MaxTerm
    PlantedBug,  \* "None" or one of the planted bugs above
    DriftBeyond, \* 0, or how far a clock may run outside Lo..Hi per tick
    MaxFaults    \* Crash, PeerDown and LocalClose steps in all

ASSUME Lo >= DriftBeyond /\ Lo <= Hi

Node == 1..N
None == 0                           \* no node
NoTime == -1                        \* no deadline (below every clock reading)
Quorum == N \div 2 + 1
Rates == (Lo - DriftBeyond)..(Hi + DriftBeyond)
LeaseLen == IF PlantedBug = "IgnoreDrift" THEN E ELSE (E * Lo) \div Hi

VARIABLES
    now,          \* real time, in ticks
    clock,        \* clock[n]: n's monotonic clock reading
    up,           \* the process runs
    term,         \* durable: the current term
    votedFor,     \* durable: the vote in that term (None or a node)
    role,         \* "follower", "candidate" or "leader"
    votes,        \* a candidate's grants for its term
    xferFrom,     \* a candidate standing as the chosen successor of this leader (or None)
    promiseEnd,   \* follower: promises while clock < promiseEnd (NoTime: no promise)
    leaderOf,     \* follower: the leader its promise is for (None: a start promise, or none)
    promiseUntil, \* leader: promiseUntil[l][f] = s + LeaseLen of f's newest acked round
    hadLease,     \* leader: had a lease in this leadership
    lastRound,    \* leader: the send time of its newest heartbeat round
    msgs,         \* heartbeats, acks, transfer requests, cessions in flight
    leaders,      \* history: leaders[t] = the nodes that won term t
    leased,       \* history: <<term, won by transfer>> of every lease taken
    faults        \* Crash, PeerDown and LocalClose steps taken

vars == <<now, clock, up, term, votedFor, role, votes, xferFrom, promiseEnd, leaderOf,
          promiseUntil, hadLease, lastRound, msgs, leaders, leased, faults>>

NoPromises == [f \in Node |-> NoTime]

Init ==
    /\ now = 0
    /\ clock = [n \in Node |-> 0]
    /\ up = [n \in Node |-> TRUE]
    /\ term = [n \in Node |-> 0]
    /\ votedFor = [n \in Node |-> None]
    /\ role = [n \in Node |-> "follower"]
    /\ votes = [n \in Node |-> {}]
    /\ xferFrom = [n \in Node |-> None]
    /\ promiseEnd = [n \in Node |-> NoTime]
    /\ leaderOf = [n \in Node |-> None]
    /\ promiseUntil = [n \in Node |-> NoPromises]
    /\ hadLease = [n \in Node |-> FALSE]
    /\ lastRound = [n \in Node |-> NoTime]
    /\ msgs = {}
    /\ leaders = [t \in 1..MaxTerm |-> {}]
    /\ leased = {}
    /\ faults = 0

Msg(type, from, to, t, sent) == [type |-> type, from |-> from, to |-> to, term |-> t, sent |-> sent]

-----------------------------------------------------------------------------
(* The two halves of the lease.                                            *)

InPromise(n) == clock[n] < promiseEnd[n]

\* The leader's lease_end: the (Quorum - 1)-th largest promiseUntil over the other nodes.
AckedBy(pu, x) == Cardinality({f \in Node : pu[f] >= x})
LeaseEndOf(pu) ==
    LET ends == {pu[f] : f \in Node} \ {NoTime}
        ok == {x \in ends : AckedBy(pu, x) >= Quorum - 1}
    IN IF ok = {} THEN NoTime ELSE CHOOSE x \in ok : \A y \in ok : y <= x
LeaseEnd(n) == LeaseEndOf(promiseUntil[n])

\* valid_now(): leader, and its clock is before lease_end.
LeaseValid(n) == up[n] /\ role[n] = "leader" /\ clock[n] < LeaseEnd(n)

-----------------------------------------------------------------------------
(* Time.                                                                   *)

Tick ==
    /\ now < MaxTime
    /\ now' = now + 1
    /\ \E d \in [Node -> Rates] : clock' = [n \in Node |-> clock[n] + d[n]]
    /\ UNCHANGED <<faults, up, term, votedFor, role, votes, xferFrom, promiseEnd, leaderOf,
                   promiseUntil, hadLease, lastRound, msgs, leaders, leased>>

-----------------------------------------------------------------------------
(* Elections.                                                              *)

\* The follower's inactivity timer: it stands once its promise has run out (scouting and
\* the proposal folded into one step; a transfer's successor stands in HandleTransfer).
StandR(c, xfer) ==
    /\ term' = [term EXCEPT ![c] = term[c] + 1]
    /\ votedFor' = [votedFor EXCEPT ![c] = c]
    /\ role' = [role EXCEPT ![c] = "candidate"]
    /\ votes' = [votes EXCEPT ![c] = {c}]
    /\ xferFrom' = [xferFrom EXCEPT ![c] = xfer]
    /\ promiseEnd' = [promiseEnd EXCEPT ![c] = NoTime]
    /\ leaderOf' = [leaderOf EXCEPT ![c] = None]

Stand(c) ==
    /\ up[c] /\ role[c] # "leader" /\ term[c] < MaxTerm
    /\ ~InPromise(c)
    /\ StandR(c, None)
    /\ UNCHANGED <<faults, now, clock, up, promiseUntil, hadLease, lastRound, msgs, leaders,
                   leased>>

\* A transfer proposal of c that is not from v's own leader's successor in the next term.
ForeignTransfer(v, c) == xferFrom[c] # None /\ ~(xferFrom[c] = leaderOf[v] /\ term[c] = term[v] + 1)

\* v grants c's proposal (proposal, grant and its receipt in one step). Inside its promise v
\* grants only the successor its own leader chose (the proposal names the transfer and the
\* term after the leader's). A leader refuses ("i-am-leader") unless the proposal names a
\* transfer; granting a newer term makes it a follower, without a lease.
Vote(v, c) ==
    /\ v # c /\ up[v] /\ up[c] /\ role[c] = "candidate"
    /\ LET xferOk == xferFrom[c] # None /\ (PlantedBug = "GrantAnyTransfer" \/ ~ForeignTransfer(v, c))
           newer == term[v] < term[c]
       IN /\ ~InPromise(v) \/ xferOk \/ PlantedBug = "VoteInsidePromise"
          /\ role[v] = "leader" => (newer /\ xferFrom[c] # None)
          /\ newer \/ (term[v] = term[c] /\ votedFor[v] = None)
          /\ term' = [term EXCEPT ![v] = term[c]]
          /\ votedFor' = [votedFor EXCEPT ![v] = c]
          /\ role' = [role EXCEPT ![v] = IF newer THEN "follower" ELSE role[v]]
          /\ votes' = [votes EXCEPT ![c] = @ \cup {v}, ![v] = IF newer THEN {} ELSE @]
          /\ xferFrom' = [xferFrom EXCEPT ![v] = IF newer THEN None ELSE @]
          /\ promiseEnd' = [promiseEnd EXCEPT ![v] = NoTime]
          /\ leaderOf' = [leaderOf EXCEPT ![v] = None]
          /\ promiseUntil' = [promiseUntil EXCEPT ![v] = IF newer THEN NoPromises ELSE @]
          /\ hadLease' = [hadLease EXCEPT ![v] = IF newer THEN FALSE ELSE @]
    /\ UNCHANGED <<faults, now, clock, up, lastRound, msgs, leaders, leased>>

\* A new leader has no lease until its first quorum-acknowledged round.
BecomeLeader(c) ==
    /\ up[c] /\ role[c] = "candidate" /\ Cardinality(votes[c]) >= Quorum
    /\ role' = [role EXCEPT ![c] = "leader"]
    /\ promiseUntil' = [promiseUntil EXCEPT ![c] = NoPromises]
    /\ hadLease' = [hadLease EXCEPT ![c] = FALSE]
    /\ leaders' = [leaders EXCEPT ![term[c]] = @ \cup {c}]
    /\ UNCHANGED <<faults, now, clock, up, term, votedFor, votes, xferFrom, promiseEnd, leaderOf,
                   lastRound, msgs, leased>>

-----------------------------------------------------------------------------
(* Heartbeats and the lease.                                               *)

\* A heartbeat round to every other node; its id is the send time on the leader's clock. It
\* supersedes the leader's heartbeats still in flight, which are lost (at most one heartbeat
\* per connection in flight: a bound of the model, see tla/README.md).
HeartbeatSend(l) ==
    /\ up[l] /\ role[l] = "leader" /\ lastRound[l] < clock[l]
    /\ lastRound' = [lastRound EXCEPT ![l] = clock[l]]
    /\ msgs' = {m \in msgs : m.type # "Heartbeat" \/ m.from # l}
               \cup {Msg("Heartbeat", l, f, term[l], clock[l]) : f \in Node \ {l}}
    /\ UNCHANGED <<faults, now, clock, up, term, votedFor, role, votes, xferFrom, promiseEnd,
                   leaderOf, promiseUntil, hadLease, leaders, leased>>

\* A follower hears its leader: it adopts the term, promises until clock + E and echoes the
\* round. The leader takes the ack in the same step (HeartbeatAck): promiseUntil of the newest
\* round the follower acknowledged. An ack taken later gives the same promiseUntil, only later,
\* and a closed connection loses it (PeerDown): taking it at once lets the leader hold its lease
\* at least as long as any later receipt would.
HeartbeatAckR(l, f, m) ==
    LET old == promiseUntil[l][f]
        pu == [promiseUntil[l] EXCEPT ![f] = IF old < m.sent + LeaseLen
                                              THEN m.sent + LeaseLen ELSE old]
        acked == up[l] /\ role[l] = "leader" /\ term[l] = m.term
    IN /\ promiseUntil' = [promiseUntil EXCEPT ![f] = NoPromises, ![l] = IF acked THEN pu ELSE @]
       /\ hadLease' = [hadLease EXCEPT ![f] = FALSE,
                                       ![l] = @ \/ (acked /\ LeaseEndOf(pu) # NoTime)]
       /\ leased' = IF acked /\ clock[l] < LeaseEndOf(pu)
                    THEN leased \cup {<<term[l], xferFrom[l] # None>>} ELSE leased

HeartbeatAck(f, m) ==
    /\ m.type = "Heartbeat" /\ m.to = f /\ up[f]
    /\ msgs' = msgs \ {m}
    /\ IF m.term < term[f]
       THEN UNCHANGED <<term, votedFor, role, votes, xferFrom, promiseEnd, leaderOf,
                        promiseUntil, hadLease, leased>>
       ELSE LET newer == term[f] < m.term IN
            /\ term' = [term EXCEPT ![f] = m.term]
            /\ votedFor' = [votedFor EXCEPT ![f] = IF newer THEN None ELSE @]
            /\ role' = [role EXCEPT ![f] = "follower"]
            /\ votes' = [votes EXCEPT ![f] = {}]
            /\ xferFrom' = [xferFrom EXCEPT ![f] = None]
            /\ promiseEnd' = [promiseEnd EXCEPT ![f] = clock[f] + E]
            /\ leaderOf' = [leaderOf EXCEPT ![f] = m.from]
            /\ HeartbeatAckR(m.from, f, m)
    /\ UNCHANGED <<faults, now, clock, up, lastRound, leaders>>

\* A leader whose lease ran out (after having had one) steps down and cedes (LeaderCeded):
\* a follower whose promise is for it, in its term, ends the promise. The cession is taken by
\* every follower at once, after the leader's heartbeats still in flight (one connection
\* delivers in order; they reach a leader that no longer leads and are dropped here): a
\* cession taken later or lost only keeps a follower in its promise longer.
LeaseExpireStepDown(l) ==
    /\ up[l] /\ role[l] = "leader" /\ hadLease[l] /\ ~(clock[l] < LeaseEnd(l))
    /\ LET ceded == {f \in Node : leaderOf[f] = l /\ term[f] = term[l]} IN
       /\ promiseEnd' = [f \in Node |-> IF f \in ceded THEN NoTime ELSE promiseEnd[f]]
       /\ leaderOf' = [f \in Node |-> IF f \in ceded THEN None ELSE leaderOf[f]]
    /\ role' = [role EXCEPT ![l] = "follower"]
    /\ promiseUntil' = [promiseUntil EXCEPT ![l] = NoPromises]
    /\ hadLease' = [hadLease EXCEPT ![l] = FALSE]
    /\ msgs' = {m \in msgs : m.from # l \/ m.type # "Heartbeat"}
    /\ UNCHANGED <<faults, now, clock, up, term, votedFor, votes, xferFrom, lastRound, leaders,
                   leased>>

-----------------------------------------------------------------------------
(* Leadership transfer: the leader ends its lease (it becomes a follower)  *)
(* before it sends the request; the successor stands naming the transfer.  *)

\* (A successor at MaxTerm cannot stand: no transfer there, a bound of the model.)
TransferBegin(l, s) ==
    /\ up[l] /\ role[l] = "leader" /\ s # l /\ term[l] < MaxTerm
    /\ role' = [role EXCEPT ![l] = "follower"]
    /\ promiseUntil' = [promiseUntil EXCEPT ![l] = NoPromises]
    /\ hadLease' = [hadLease EXCEPT ![l] = FALSE]
    /\ msgs' = msgs \cup {Msg("TransferRequest", l, s, term[l], 0)}
    /\ UNCHANGED <<faults, now, clock, up, term, votedFor, votes, xferFrom, promiseEnd, leaderOf,
                   lastRound, leaders, leased>>

HandleTransfer(s, m) ==
    /\ m.type = "TransferRequest" /\ m.to = s /\ up[s]
    /\ msgs' = msgs \ {m}
    /\ IF role[s] = "follower" /\ term[s] = m.term /\ term[s] < MaxTerm
       THEN StandR(s, m.from)
       ELSE UNCHANGED <<term, votedFor, role, votes, xferFrom, promiseEnd, leaderOf>>
    /\ UNCHANGED <<faults, now, clock, up, promiseUntil, hadLease, lastRound, leaders, leased>>

-----------------------------------------------------------------------------
(* Faults.                                                                 *)

\* The connection between a and b closes (peer_down on both sides). Stated model: it closes
\* only because a peer exited or closed it itself, and a leader that closes a link or learns
\* that it closed first drops that follower from its lease. The follower's promise to the
\* other end ends at once; what was in flight on the connection is lost.
PeerDown(a, b) ==
    /\ a # b /\ faults < MaxFaults
    /\ faults' = faults + 1
    /\ LET Ends(x, y) == leaderOf[x] = y
           Drops(x) == role[x] = "leader" /\ PlantedBug # "KeepPromiseOnPeerDown"
       IN /\ promiseEnd' = [promiseEnd EXCEPT ![a] = IF Ends(a, b) THEN NoTime ELSE @,
                                              ![b] = IF Ends(b, a) THEN NoTime ELSE @]
          /\ leaderOf' = [leaderOf EXCEPT ![a] = IF Ends(a, b) THEN None ELSE @,
                                          ![b] = IF Ends(b, a) THEN None ELSE @]
          /\ promiseUntil' = [promiseUntil EXCEPT ![a][b] = IF Drops(a) THEN NoTime ELSE @,
                                                  ![b][a] = IF Drops(b) THEN NoTime ELSE @]
    /\ msgs' = {m \in msgs : {m.from, m.to} # {a, b}}
    /\ UNCHANGED <<now, clock, up, term, votedFor, role, votes, xferFrom, hadLease, lastRound,
                   leaders, leased>>

\* a closes its connection to b itself (its keepalive or user timeout, a duplicate hello, a full
\* send queue): nothing proves that b stopped (docs/design.md, assumption 3). As a leader a drops
\* b from its lease (b may take the closure, which reaches it as a FIN or an RST, for proof: that
\* is a PeerDown, a step of its own that may come later or never); as a follower a keeps its
\* promise, which runs out on its clock. What was in flight on the connection is lost.
LocalClose(a, b) ==
    /\ a # b /\ faults < MaxFaults
    /\ faults' = faults + 1
    /\ LET ends == leaderOf[a] = b /\ PlantedBug = "EndPromiseOnLocalClose"
       IN /\ promiseEnd' = [promiseEnd EXCEPT ![a] = IF ends THEN NoTime ELSE @]
          /\ leaderOf' = [leaderOf EXCEPT ![a] = IF ends THEN None ELSE @]
    /\ promiseUntil' = [promiseUntil EXCEPT ![a][b] = IF role[a] = "leader" THEN NoTime ELSE @]
    /\ msgs' = {m \in msgs : {m.from, m.to} # {a, b}}
    /\ UNCHANGED <<now, clock, up, term, votedFor, role, votes, xferFrom, hadLease, lastRound,
                   leaders, leased>>

\* The process exits: volatile state is gone, messages to it are lost (its connections close;
\* the peers' PeerDown is a step of its own, it may come late or not at all).
Crash(n) ==
    /\ up[n] /\ faults < MaxFaults
    /\ faults' = faults + 1
    /\ up' = [up EXCEPT ![n] = FALSE]
    /\ role' = [role EXCEPT ![n] = "follower"]
    /\ votes' = [votes EXCEPT ![n] = {}]
    /\ xferFrom' = [xferFrom EXCEPT ![n] = None]
    /\ promiseEnd' = [promiseEnd EXCEPT ![n] = NoTime]
    /\ leaderOf' = [leaderOf EXCEPT ![n] = None]
    /\ promiseUntil' = [promiseUntil EXCEPT ![n] = NoPromises]
    /\ hadLease' = [hadLease EXCEPT ![n] = FALSE]
    /\ msgs' = {m \in msgs : m.to # n}
    /\ UNCHANGED <<now, clock, term, votedFor, lastRound, leaders, leased>>

\* A start from the durable (term, vote). The node may have promised a leader before it
\* stopped and does not remember it: it promises nobody for E from its start.
Restart(n) ==
    /\ ~up[n]
    /\ up' = [up EXCEPT ![n] = TRUE]
    /\ promiseEnd' = [promiseEnd EXCEPT ![n] =
                         IF PlantedBug = "ForgetPromiseOnRestart" THEN NoTime ELSE clock[n] + E]
    /\ UNCHANGED <<faults, now, clock, term, votedFor, role, votes, xferFrom, leaderOf,
                   promiseUntil, hadLease, lastRound, msgs, leaders, leased>>

-----------------------------------------------------------------------------
\* The deliveries, named so that TLC's coverage reports them (tla/check.sh's gate).
HeartbeatAckAny == \E m \in msgs : HeartbeatAck(m.to, m)
HandleTransferAny == \E m \in msgs : HandleTransfer(m.to, m)

Next ==
    \/ Tick
    \/ \E c \in Node : Stand(c)
    \/ \E v, c \in Node : Vote(v, c)
    \/ \E c \in Node : BecomeLeader(c)
    \/ \E l \in Node : HeartbeatSend(l)
    \/ HeartbeatAckAny
    \/ \E l \in Node : LeaseExpireStepDown(l)
    \/ \E l, s \in Node : TransferBegin(l, s)
    \/ HandleTransferAny
    \/ \E a, b \in Node : PeerDown(a, b)
    \/ \E a, b \in Node : LocalClose(a, b)
    \/ \E n \in Node : Crash(n)
    \/ \E n \in Node : Restart(n)

Spec == Init /\ [][Next]_vars

\* The start of the leader-half models: node 1 has just won term 1 with every vote (as a
\* behaviour of Spec reaches: Stand(1), Vote(2, 1), Vote(3, 1), BecomeLeader(1)), no
\* heartbeat sent yet, so no lease and no promise.
LeaderInit ==
    /\ now = 0
    /\ clock = [n \in Node |-> 0]
    /\ up = [n \in Node |-> TRUE]
    /\ term = [n \in Node |-> 1]
    /\ votedFor = [n \in Node |-> 1]
    /\ role = [n \in Node |-> IF n = 1 THEN "leader" ELSE "follower"]
    /\ votes = [n \in Node |-> IF n = 1 THEN Node ELSE {}]
    /\ xferFrom = [n \in Node |-> None]
    /\ promiseEnd = [n \in Node |-> NoTime]
    /\ leaderOf = [n \in Node |-> None]
    /\ promiseUntil = [n \in Node |-> NoPromises]
    /\ hadLease = [n \in Node |-> FALSE]
    /\ lastRound = [n \in Node |-> NoTime]
    /\ msgs = {}
    /\ leaders = [t \in 1..MaxTerm |-> IF t = 1 THEN {1} ELSE {}]
    /\ leased = {}
    /\ faults = 0
LeaderSpec == LeaderInit /\ [][Next]_vars

-----------------------------------------------------------------------------
MaxClock == MaxTime * (Hi + DriftBeyond)
Times == NoTime..(MaxClock + E)

TypeOK ==
    /\ now \in 0..MaxTime
    /\ clock \in [Node -> 0..MaxClock]
    /\ up \in [Node -> BOOLEAN]
    /\ term \in [Node -> 0..MaxTerm]
    /\ votedFor \in [Node -> Node \cup {None}]
    /\ role \in [Node -> {"follower", "candidate", "leader"}]
    /\ votes \in [Node -> SUBSET Node]
    /\ xferFrom \in [Node -> Node \cup {None}]
    /\ promiseEnd \in [Node -> Times]
    /\ leaderOf \in [Node -> Node \cup {None}]
    /\ promiseUntil \in [Node -> [Node -> Times]]
    /\ hadLease \in [Node -> BOOLEAN]
    /\ lastRound \in [Node -> NoTime..MaxClock]
    /\ \A m \in msgs :
         /\ m.type \in {"Heartbeat", "TransferRequest"}
         /\ m.from \in Node /\ m.to \in Node /\ m.from # m.to
         /\ m.term \in 1..MaxTerm /\ m.sent \in 0..MaxClock

\* The state up to the clocks' offsets, for TLC's VIEW: every deadline relative to its owner's
\* clock (an expired one is NoTime, as is a promise's leader then), a round's send time relative
\* to the leader's clock. Steps depend on clocks only through these, and Tick shifts them all
\* alike, so states with one view have the same futures.
Rel(x, c) == IF x <= c THEN NoTime ELSE x - c
RelMsg(m) ==
    [m EXCEPT !.sent = IF m.type = "Heartbeat" THEN m.sent - clock[m.from] ELSE 0]
View ==
    <<now, up, term, votedFor, role, votes, xferFrom,
      [n \in Node |-> Rel(promiseEnd[n], clock[n])],
      [n \in Node |-> IF InPromise(n) THEN leaderOf[n] ELSE None],
      [n \in Node |-> [f \in Node |-> Rel(promiseUntil[n][f], clock[n])]],
      hadLease, [n \in Node |-> lastRound[n] < clock[n]],
      {RelMsg(m) : m \in msgs}, leaders, leased, faults>>

\* The lease property: at no real time do two nodes both hold a valid lease.
LeaseExclusive == \A a, b \in Node : a # b => ~(LeaseValid(a) /\ LeaseValid(b))

OneLeaderPerTerm == \A t \in 1..MaxTerm : Cardinality(leaders[t]) <= 1

\* Canaries (tla/check.sh runs CFG+CANARY: TLC must violate each): some leader takes a lease ...
CanaryNoLease == leased = {}
\* ... leases are taken in two terms (a second node after the first lost its lease) ...
CanaryNoSecondLease == Cardinality({e[1] : e \in leased}) <= 1
\* ... and a successor elected by a transfer takes a lease.
CanaryNoTransferLease == \A e \in leased : ~e[2]
\* ... and a follower inside its promise (a leader's or a start promise) is asked by a transfer
\* candidate it refuses only because the proposal is not from its leader's successor: the
\* state where the planted GrantAnyTransfer grants (docs/tla-lease.md, "Transfer proposals").
CanaryNoForeignTransferInsidePromise ==
    ~\E v, c \in Node :
        /\ v # c /\ up[v] /\ up[c] /\ role[c] = "candidate" /\ InPromise(v)
        /\ ForeignTransfer(v, c)
        /\ role[v] = "leader" => term[v] < term[c]
        /\ term[v] < term[c] \/ votedFor[v] = None
=============================================================================
