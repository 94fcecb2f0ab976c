---------------------------- MODULE MCElectorLive ----------------------------
(***************************************************************************)
(* Liveness model: after the fault, does some node become leader and      *)
(* every running node follow it (OneLeaderAfterFault)? The fault           *)
(* (MaxFaults, a crash) hits the leader after the first election; the      *)
(* crashed node may stay down for ever or restart at any moment (Restart   *)
(* is not fair); there is no other loss and no duplication.                *)
(*                                                                         *)
(* The spec leaves time out, so the liveness model states the timing       *)
(* assumptions of a stable period as guards on the timers:                 *)
(*  - Timely: no timer fires while a message to a running node is in       *)
(*    flight (timeouts are longer than message delays).                    *)
(*  - Backoff: a random wait fires only when no other node is scouting or  *)
(*    campaigning (random backoffs eventually separate contenders); initial *)
(*    waits may fire together (split votes).                                *)
(*  - A follower's heartbeat check does not expire while a leader is alive *)
(*    (its heartbeats arrive within the inactivity interval), and a        *)
(*    leader's check-quorum does not fail while its followers answer.      *)
(* The bounds (MaxTerm, MaxRound, MaxMsgs) are guards too (InBounds).      *)
(* Every timer and message delivery is weakly fair.                        *)
(***************************************************************************)
EXTENDS Elector, TLC

\* No message in flight to a running node. (A message to a crashed node waits for its
\* restart, if it comes; it does not hold the timers back.)
Quiet == \A m \in msgs : node[m.to].role = "stopped"

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
\* counterexample: a livelock that spends rounds or terms (the mutants) was
\* invisible. Why the guards are sound for OneLeaderAfterFault: README.md.
\* Messages to a crashed node wait for its restart (a delay) and take no slot of MaxMsgs
\* while it is down; a restart that would bring more than MaxMsgs is not explored.
LiveBounds ==
    /\ \A n \in Node : node[n].term <= MaxTerm /\ node[n].last_round_id <= MaxRound
    /\ Cardinality({m \in msgs : node[m.to].role # "stopped"}) <= MaxMsgs

InBounds == LiveBounds'

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

\* Restart is NOT fair: the crashed leader may stay down for ever (the other two must then
\* elect one of them) or come back at any moment (and take part, split votes included).
LiveSpec ==
    /\ Init
    /\ [][LiveNext]_vars
    /\ WF_vars(LiveDeliver)
    /\ \A n \in Node, timer \in Timers : WF_vars(LiveFired(n, timer))

\* Some node leads and every running node follows it (a crashed node that never comes
\* back is not waited for; one that does must follow too).
AllRunningFollowOneLeader ==
    \E l \in Node : /\ node[l].role = "leader"
                   /\ \A n \in Node : node[n].role = "stopped" \/ node[n].leader = l

EventuallyOneLeaderLive == <>AllRunningFollowOneLeader

\* After the fault, eventually one leader that every running node follows. (A property
\* <>AllRunningFollowOneLeader alone is met by the first election, before the fault.)
OneLeaderAfterFault == [](faults > 0 => <>AllRunningFollowOneLeader)
=============================================================================
