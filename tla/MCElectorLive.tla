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
    SplitTerm        \* random waits of nodes at a term below this may fire together

\* A node that is down and never comes back (only when LeaderRestarts is FALSE):
\* no action reads a message to it, so none of them holds a timer back or counts.
Gone(n) == ~LeaderRestarts /\ node[n].role = "stopped"

ToRunning == {m \in msgs : ~Gone(m.to)}

Quiet == ToRunning = {}

NobodyElse(n) ==
    \A p \in Node \ {n} : node[p].round.id = 0 /\ node[p].role # "candidate"

NoLeader == \A l \in Node : node[l].role # "leader"

\* The first random wait after a leader's loss may coincide with another node's
\* (split votes): a node below SplitTerm may time out while others scout or
\* campaign and while messages are in flight. (SplitTerm 0: never.)
MaySplit(n, timer) == timer = "RandomWait" /\ node[n].term < SplitTerm

Timely(n, timer) ==
    /\ Quiet \/ MaySplit(n, timer)
    /\ timer = "RandomWait" => NobodyElse(n) \/ MaySplit(n, timer)
    /\ timer = "HeartbeatCheck" => NoLeader
    /\ timer = "CheckQuorum" =>
           Cardinality(node[n].heard_since_check \cup {n}) >= Quorum

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

LiveFired(n, timer) == Timely(n, timer) /\ Fired(n, timer) /\ InBounds

LiveDeliver == \E m \in msgs : Deliver(m, FALSE) /\ InBounds

\* The fault (a crash, or a cut connection) hits the leader, after the first election.
LiveFault == elected # {} /\ \E n \in Node : node[n].role = "leader" /\ Fault(n) /\ InBounds

LiveRestart(n) == LeaderRestarts /\ Restart(n) /\ InBounds

LiveNext ==
    \/ LiveDeliver
    \/ \E n \in Node, timer \in Timers : LiveFired(n, timer)
    \/ LiveFault
    \/ \E n \in Node : LiveRestart(n)

-----------------------------------------------------------------------------
(* An established leader: L won term 1 (scouting round 1, every vote), every *)
(* node heard its first heartbeat and acked it, nothing is in flight. This   *)
(* is the state Init reaches by: L's initial wait fires, the others answer   *)
(* yes, L campaigns, both grant (each becomes a follower with L tentative),   *)
(* L leads, both take its heartbeat and ack it, L takes the grant and the    *)
(* acks (README.md, "Liveness", lists the steps).                           *)

L == CHOOSE n \in Node : TRUE

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

EstablishedInit ==
    /\ node = [n \in Node |-> EstablishedNode(L, n)]
    /\ msgs = {}
    /\ faults = 0
    /\ votes = {<<n, 1, L>> : n \in Node}
    /\ elected = {<<1, L>>}
    /\ events = {}

\* Canary (ElectorLiveReachable.cfg, which starts from Init): TLC must VIOLATE it,
\* which shows that EstablishedInit's state (up to the leader's name) is reachable.
CanaryNoEstablishedLeader ==
    ~\E l \in Node : node = [n \in Node |-> EstablishedNode(l, n)] /\ msgs = {}

LiveInit == IF Established THEN EstablishedInit ELSE Init

LiveSpec ==
    /\ LiveInit
    /\ [][LiveNext]_vars
    /\ WF_vars(LiveDeliver)
    /\ \A n \in Node, timer \in Timers : WF_vars(LiveFired(n, timer))
    /\ \A n \in Node : WF_vars(LiveRestart(n))

\* The model with a leader that stays down: the messages to it and the canaries'
\* history are left out of the view (no action, guard, bound or property reads
\* them, so states that differ only there have the same futures).
LiveView == <<node, ToRunning, faults, votes, elected>>

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
=============================================================================
