\* SPDX-License-Identifier: Apache-2.0
---------------------------- MODULE MCElectorLive ----------------------------
(***************************************************************************)
(* Liveness model: after the fault, does some node become leader and      *)
(* every node follow it (OneLeaderAfterFault)? The fault (MaxFaults, a      *)
(* crash) hits the leader after the first election; there is no loss and   *)
(* no duplication. Two shapes, chosen by constants:                        *)
(*  - LeaderRestarts = TRUE, Established = FALSE (ElectorLiveness.cfg): the *)
(*    cluster starts from Init, the crashed node restarts eventually.      *)
(*  - LeaderRestarts = FALSE, Established = TRUE (ElectorLiveLeader.cfg):  *)
(*    the cluster starts with a leader already elected and followed        *)
(*    (EstablishedInit, reachable from Init: README.md, "Liveness"), and   *)
(*    the crashed leader stays down for ever: the two others must elect    *)
(*    one of them, and their first timeouts may coincide (SplitTerm), so   *)
(*    an election can be lost.                                             *)
(*  - Partition # "None" (ElectorLivePartition*.cfg): from EstablishedInit,  *)
(*    no crash; a cut isolates Isolated from the two others, then heals      *)
(*    once (see "The partition" below).                                    *)
(*                                                                         *)
(* The spec leaves time out, so the liveness model states the timing       *)
(* assumptions of a stable period as guards on the timers:                 *)
(*  - Timely: no timer fires while a message to a running node is in       *)
(*    flight (timeouts are longer than message delays; a message to a node *)
(*    that stays down holds nothing back).                                 *)
(*  - Backoff: a random wait fires only when no other node is scouting or  *)
(*    campaigning (random backoffs eventually separate contenders), except  *)
(*    the random waits of nodes whose term is below SplitTerm: they may     *)
(*    fire at any time (split votes after a leader's loss). Initial waits   *)
(*    are not held back by contenders, but Timely still holds them back     *)
(*    while messages are in flight.                                        *)
(*  - A follower's heartbeat check does not expire while a leader is alive *)
(*    (its heartbeats arrive within the inactivity interval), and a        *)
(*    leader's check-quorum does not fail while its followers answer.      *)
(* Every timer, message delivery and restart is weakly fair. The bounds    *)
(* (MaxTerm, MaxRound, MaxMsgs) are guards on the actions (InBounds).      *)
(***************************************************************************)
EXTENDS Elector, TLC

CONSTANTS
    LeaderRestarts,  \* the crashed node restarts (eventually, weakly fair)
    Established,     \* start from EstablishedInit instead of Init
    SplitTerm,       \* random waits of nodes at a term below this may fire together
    Isolated,        \* the node the partition isolates from the two others
    Partition        \* "None", or the partition fault (ElectorLivePartition*.cfg):
                     \* "PeerDown" (both sides see PeerDown, then PeerUp after the heal)
                     \* or "Blackhole" (the connections stay up, no event at all)

VARIABLES
    net,  \* "whole", then (Partition only) "cut", then "healed": the partition heals once
    iso   \* the node the cut isolates (Isolated; Nil before the cut)

liveVars == <<vars, net, iso>>

\* A link across the cut (while it lasts): exactly one end is the isolated node.
Cut(a, b) == net = "cut" /\ a # b /\ (a = iso) # (b = iso)

\* A message across the cut is lost: it is never delivered, the heal drops it.
Lost(m) == Cut(m.from, m.to)

\* A node that is down and never comes back (only when LeaderRestarts is FALSE):
\* no action reads a message to it, so none of them holds a timer back or counts.
Gone(n) == ~LeaderRestarts /\ node[n].role = "stopped"

ToRunning == {m \in msgs : ~Gone(m.to) /\ ~Lost(m)}

Quiet == ToRunning = {}

\* Backoff separates contenders that can reach each other (not across the cut).
NobodyElse(n) ==
    \A p \in Node \ {n} : Cut(n, p) \/ (node[p].round.id = 0 /\ node[p].role # "candidate")

\* No leader whose heartbeats reach n (every leader, when there is no cut).
NoLeader(n) == \A l \in Node : node[l].role = "leader" => Cut(n, l)

\* The leader n cannot hear from a quorum while the cut lasts.
CutFromQuorum(n) == Cardinality({p \in Node : ~Cut(n, p)}) < Quorum

\* The first random wait after a leader's loss may coincide with another node's
\* (split votes): a node below SplitTerm may time out while others scout or
\* campaign and while messages are in flight. (SplitTerm 0: never.)
\* At most two contenders at once (a third one's backoff separates it): with three
\* running nodes (the partition models) a three-way split fills any small message bound.
Contending(p) == node[p].round.id # 0 \/ node[p].role = "candidate"

MaySplit(n, timer) ==
    /\ timer = "RandomWait" /\ node[n].term < SplitTerm
    /\ Cardinality({p \in Node \ {n} : ~Cut(n, p) /\ Contending(p)}) <= 1

\* ElectorLiveLeaderPriority.cfg (RandomWaitOutlastsCheck <- MCTrue): a survivor's next round
\* comes after the other followers' heartbeat checks on the leader that is gone have fired (a
\* random wait is at least what remains of their inactivity interval). Without it the model's
\* round bound lets every round of the only node that may stand reach a priority-0 follower
\* that still follows the dead leader, and refuse it; in time its check fires, rounds go on.
RandomWaitOutlastsCheck == FALSE
MCTrue == TRUE
FollowsGone(p) == node[p].leader \in Node /\ node[node[p].leader].role = "stopped"

Timely(n, timer) ==
    /\ Quiet \/ MaySplit(n, timer)
    /\ (RandomWaitOutlastsCheck /\ timer = "RandomWait") => \A p \in Node \ {n} : ~FollowsGone(p)
    /\ timer = "RandomWait" => NobodyElse(n) \/ MaySplit(n, timer)
    /\ timer = "HeartbeatCheck" => NoLeader(n)
    /\ timer = "CheckQuorum" =>
           Cardinality(node[n].heard_since_check \cup {n}) >= Quorum \/ CutFromQuorum(n)

\* The model's bounds (terms, round ids, messages in flight to running nodes) are
\* GUARDS on the actions, not a CONSTRAINT: a step that would leave them is
\* disabled. A behaviour that reaches a bound is then still a behaviour of the
\* model: it stays in the bounded state (stuttering or looping through the steps
\* that remain enabled) and weak fairness judges it there. With a CONSTRAINT,
\* TLC cuts such a behaviour off, and a cut-off behaviour is never a liveness
\* counterexample: a livelock that spends rounds or terms was invisible.
\* Why the guards are sound for OneLeaderAfterFault: README.md, "Liveness".
LiveBounds ==
    /\ \A n \in Node : node[n].term <= MaxTerm /\ node[n].last_round_id <= MaxRound
    /\ Cardinality(ToRunning) <= MaxMsgs

InBounds == LiveBounds'

\* The steps of the nodes leave the network's state alone (first, so that InBounds,
\* which reads net' and iso', can be evaluated).
Frozen == UNCHANGED <<net, iso>>

LiveFired(n, timer) == Frozen /\ Timely(n, timer) /\ Fired(n, timer) /\ InBounds

LiveDeliver == Frozen /\ \E m \in msgs : ~Lost(m) /\ Deliver(m, FALSE) /\ InBounds

\* The fault (a crash, or a cut connection) hits the leader, after the first election.
LiveFault ==
    Frozen /\ elected # {} /\ \E n \in Node : node[n].role = "leader" /\ Fault(n) /\ InBounds

LiveRestart(n) == Frozen /\ LeaderRestarts /\ Restart(n) /\ InBounds

-----------------------------------------------------------------------------
(* The partition (Partition # "None"): one cut, after the first election,   *)
(* isolates one node (the leader or a follower) from the two others; then   *)
(* it heals once, and the network is stable from then on.                   *)
(*  - PartitionCut: messages in flight across the cut are lost from now on. *)
(*  - "PeerDown": each end of each cut link sees PeerDown (weakly fair, any  *)
(*    order, interleaved with everything else); the cut heals only once all *)
(*    four were seen (the connections are down); after the heal each end    *)
(*    sees PeerUp (weakly fair).                                            *)
(*  - "Blackhole": the connections stay up, nobody is told; only timers     *)
(*    (heartbeat check, check-quorum) notice the silence.                   *)
(* PartitionHeal is weakly fair: the partition does not last for ever.      *)

PartitionCut ==
    /\ Partition # "None" /\ net = "whole" /\ elected # {} /\ Quiet
    /\ iso' = Isolated
    /\ net' = "cut"
    /\ faults' = faults + 1
    /\ UNCHANGED <<node, msgs, votes, elected, events, held>>

PartitionPeerDown(n, p) ==
    /\ Partition = "PeerDown" /\ Cut(n, p) /\ p \in node[n].peers_up
    /\ Frozen /\ UNCHANGED faults
    /\ Step(n, PeerDownR(n, node[n], p), {}) /\ InBounds

AllLinksDown == \A n, p \in Node : Cut(n, p) => p \notin node[n].peers_up

PartitionHeal ==
    /\ net = "cut"
    /\ Partition = "PeerDown" => AllLinksDown
    /\ net' = "healed"
    /\ msgs' = {m \in msgs : ~Lost(m)}
    /\ UNCHANGED <<node, faults, votes, elected, events, held, iso>>

PartitionPeerUp(n, p) ==
    /\ Partition = "PeerDown" /\ net = "healed" /\ p # n /\ p \notin node[n].peers_up
    /\ Frozen /\ PeerUp(n, p) /\ InBounds

PartitionNext ==
    \/ PartitionCut
    \/ \E n, p \in Node : PartitionPeerDown(n, p) \/ PartitionPeerUp(n, p)
    \/ PartitionHeal

LiveNext ==
    \/ LiveDeliver
    \/ \E n \in Node, timer \in Timers : LiveFired(n, timer)
    \/ LiveFault
    \/ \E n \in Node : LiveRestart(n)
    \/ PartitionNext

-----------------------------------------------------------------------------
(* An established leader: L won term 1 (scouting round 1, every vote), every *)
(* node heard its first heartbeat and acked it, nothing is in flight. This   *)
(* is the state Init reaches by: L's initial wait fires, the others answer   *)
(* yes, L campaigns, both grant (each becomes a follower with L tentative),   *)
(* L leads, both take its heartbeat and ack it, L takes the grant and the    *)
(* acks (README.md, "Liveness", lists the steps).                           *)

L == CHOOSE n \in Node : TRUE

\* EstablishedNode: Elector.tla.

EstablishedInit ==
    /\ node = [n \in Node |-> EstablishedNode(L, n)]
    /\ msgs = {}
    /\ faults = 0
    /\ votes = {<<n, 1, L>> : n \in Node}
    /\ elected = {<<1, L>>}
    /\ events = {}
    /\ held = [n \in Node |-> 0]

\* Canary (ElectorLiveReachable.cfg, which starts from Init): TLC must VIOLATE it,
\* which shows that EstablishedInit's state (up to the leader's name) is reachable.
CanaryNoEstablishedLeader ==
    ~\E l \in Node : node = [n \in Node |-> EstablishedNode(l, n)] /\ msgs = {}

LiveInit == (IF Established THEN EstablishedInit ELSE Init) /\ net = "whole" /\ iso = Nil

LiveSpec ==
    /\ LiveInit
    /\ [][LiveNext]_liveVars
    /\ WF_liveVars(LiveDeliver)
    /\ \A n \in Node, timer \in Timers : WF_liveVars(LiveFired(n, timer))
    /\ \A n \in Node : WF_liveVars(LiveRestart(n))
    /\ WF_liveVars(PartitionHeal)
    /\ \A n, p \in Node : WF_liveVars(PartitionPeerDown(n, p)) /\ WF_liveVars(PartitionPeerUp(n, p))

\* The model with a leader that stays down: the messages to it and the canaries'
\* history are left out of the view (no action, guard, bound or property reads
\* them, so states that differ only there have the same futures).
\* In the partition models the messages lost across the cut are left out too (no
\* action reads them: LiveDeliver skips them, PartitionHeal drops them).
LiveView == <<node, ToRunning, faults, votes, elected, net, iso>>

-----------------------------------------------------------------------------
(* Properties                                                               *)

\* Some running node leads and every running node follows it (every node, when
\* the crashed node restarts: AllFollowOneLeader).
RunningFollowOneLeader ==
    \E l \in Node : /\ node[l].role = "leader"
                    /\ \A n \in Node : node[n].role # "stopped" => node[n].leader = l

Converged == IF LeaderRestarts THEN AllFollowOneLeader ELSE RunningFollowOneLeader

\* After the fault, eventually one leader that every (running) node follows. (A
\* property <>AllFollowOneLeader alone is met by the first election, before the fault.)
OneLeaderAfterFault == [](faults > 0 => <>Converged)

\* Converged again and again: implies both EventuallyOneLeader (the first election)
\* and OneLeaderAfterFault (from any point, the fault's included, Converged comes).
\* ElectorLiveness.cfg checks this one property instead of those two: TLC checks each
\* property it is given as a separate problem, evaluating every fairness condition
\* on every state and step again, which doubled that model's cost.
ConvergedInfinitelyOften == []<>Converged

\* After the partition heals, eventually one leader that every node follows, for ever.
\* (OneLeaderAfterFault would be met at the cut itself, before anyone noticed it.)
OneLeaderAfterHeal == [](net = "healed" => <>[]Converged)
\* Priorities (ElectorLiveLeaderPriority.cfg): a node of priority 0 other than L; it never stands.
MCLivePriorityZero == {CHOOSE n \in Node \ {L} : TRUE}
=============================================================================
