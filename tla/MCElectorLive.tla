---------------------------- MODULE MCElectorLive ----------------------------
(***************************************************************************)
(* Liveness model: after the fault, does some node become leader and      *)
(* every node follow it (OneLeaderAfterFault)? The fault (MaxFaults, a      *)
(* crash) hits the leader after the first election; the crashed node        *)
(* restarts eventually; there is no loss and no duplication.               *)
(*                                                                         *)
(* The spec leaves time out, so the liveness model states the timing       *)
(* assumptions of a stable period as guards on the timers:                 *)
(*  - Timely: no timer fires while a message is in flight (timeouts are    *)
(*    longer than message delays).                                         *)
(*  - Backoff: a random wait fires only when no other node is scouting or  *)
(*    campaigning (random backoffs eventually separate contenders); initial *)
(*    waits may fire together (split votes).                                *)
(*  - A follower's heartbeat check does not expire while a leader is alive *)
(*    (its heartbeats arrive within the inactivity interval), and a        *)
(*    leader's check-quorum does not fail while its followers answer.      *)
(* Every timer, message delivery and restart is weakly fair. The bounds    *)
(* (MaxTerm, MaxRound, MaxMsgs) are guards on the actions (InBounds).      *)
(***************************************************************************)
EXTENDS Elector, TLC

Quiet == msgs = {}

NobodyElse(n) ==
    \A p \in Node \ {n} : node[p].round.id = 0 /\ node[p].role # "candidate"

NoLeader == \A l \in Node : node[l].role # "leader"

Timely(n, timer) ==
    /\ Quiet
    \* Initial waits may fire together (split votes at the first election and
    \* when a restarted node campaigns); random backoffs separate contenders.
    /\ timer = "RandomWait" => NobodyElse(n)
    /\ timer = "HeartbeatCheck" => NoLeader
    /\ timer = "CheckQuorum" =>
           Cardinality(node[n].heard_since_check \cup {n}) >= Quorum

\* The model's bounds (terms, round ids, messages in flight) are GUARDS on the
\* actions, not a CONSTRAINT: a step that would leave them is disabled. A
\* behaviour that reaches a bound is then still a behaviour of the model: it
\* stays in the bounded state (stuttering or looping through the steps that
\* remain enabled) and weak fairness judges it there. With a CONSTRAINT, TLC
\* cuts such a behaviour off, and a cut-off behaviour is never a liveness
\* counterexample: a livelock that spends rounds or terms was invisible.
\* Why the guards are sound for OneLeaderAfterFault: README.md, "Liveness".
InBounds == Bounds'

LiveFired(n, timer) == Timely(n, timer) /\ Fired(n, timer) /\ InBounds

LiveDeliver == \E m \in msgs : Deliver(m, FALSE) /\ InBounds

\* The fault (a crash, or a cut connection) hits the leader, after the first election.
LiveFault == elected # {} /\ \E n \in Node : node[n].role = "leader" /\ Fault(n) /\ InBounds

LiveRestart(n) == Restart(n) /\ InBounds

LiveNext ==
    \/ LiveDeliver
    \/ \E n \in Node, timer \in Timers : LiveFired(n, timer)
    \/ LiveFault
    \/ \E n \in Node : LiveRestart(n)

LiveSpec ==
    /\ Init
    /\ [][LiveNext]_vars
    /\ WF_vars(LiveDeliver)
    /\ \A n \in Node, timer \in Timers : WF_vars(LiveFired(n, timer))
    /\ \A n \in Node : WF_vars(LiveRestart(n))

\* After the fault, eventually one leader that every node follows. (A property
\* <>AllFollowOneLeader alone is met by the first election, before the fault.)
OneLeaderAfterFault == [](faults > 0 => <>AllFollowOneLeader)
=============================================================================
