\* SPDX-License-Identifier: Apache-2.0
------------------------------ MODULE MCElector ------------------------------
(***************************************************************************)
(* Model-checking wrapper for Elector: symmetry, state constraints, a      *)
(* schedule that restarts crashed nodes at once, and a VIEW that forgets   *)
(* what can no longer matter. Elector.tla itself is unchanged: every step  *)
(* of ModelSpec is a step of Elector's Next, with the same action names.  *)
(* The reductions and why each is sound are in tla/README.md ("Keeping     *)
(* the state space small"); in short:                                      *)
(*                                                                         *)
(*  - EagerRestart: a stopped node is started again before anything else   *)
(*    happens. A stopped node takes no step and nobody reads its state,    *)
(*    and its (term, voted_for) cannot change while it is down. Messages   *)
(*    sent to it during the outage are, after the reordering, sent after   *)
(*    its restart, where they may still never be delivered (lost). So      *)
(*    every behaviour with a longer outage is the same as one with an      *)
(*    immediate restart in which the other nodes' steps come after it.     *)
(*  - EagerReconnect (models without PeerDown or LocalClose faults): the   *)
(*    driver reports the connections of a restarted process before        *)
(*    anything else. Without transfers and closures, peers_up is read     *)
(*    only by PeerUp, to send a leader's heartbeat to the new peer, which  *)
(*    is the same message that HeartbeatBroadcastFired sends to it.        *)
(*  - Dead messages: a message whose delivery can no longer change         *)
(*    anything (Dead(m), e.g. a reply from an older term) is left out of   *)
(*    the VIEW and is not counted against MaxMsgs. Deadness is permanent   *)
(*    because terms never decrease (TermsNeverDecrease is checked).        *)
(*  - Dead history: votes and elections of terms below every node's term   *)
(*    can never be compared with a later vote or election (same-term       *)
(*    comparisons only), so the VIEW leaves them out.                      *)
(*  - Leader bookkeeping: without closures a leader's supporters         *)
(*    set is never read (SetVoters only intersects it); heard_since_check  *)
(*    is read only as "a quorum was heard", which stays true until the set *)
(*    is cleared (not in membership models: SetVoters intersects it with   *)
(*    the new voters, so which nodes were heard matters there).            *)
(*  - Membership: held (the log's holdings) is part of the view.           *)
(* The VIEW is only for models where terms never decrease (not the        *)
(* negative DurableLost model, which uses ModelSpec with Constraint).      *)
(***************************************************************************)
EXTENDS Elector, TLC

Symmetry == Permutations(Node)

\* Priorities (ElectorPriority*.cfg): one node of priority 0, and the symmetry of the others.
MCPriorityZero == {CHOOSE n \in Node : TRUE}
PrioritySymmetry == Permutations(Node \ MCPriorityZero)

\* LeaseSteps: a start promise is set only by a start with a term > 0 (Elector.tla,
\* StartPromiseMayHold). Every node of Init and of EstablishedLeaderInit started with term 0, so
\* only a later start (Start after Stop, Restart after Crash: both count in faults) can set one:
\* before the first fault no node holds a start promise. (After a fault of any kind, any node of
\* term > 0 may: more than the C++, where only the node that started does, for P.) The lease
\* models use it (StartPromiseMayHold <- MCStartPromiseMayHold).
MCStartPromiseMayHold(n, s) == s.term > 0 /\ faults > 0

\* The plain bounds, for models without the VIEW (the negative model).
Constraint == Bounds

-----------------------------------------------------------------------------
(* Schedule                                                                 *)

Down == {n \in Node : node[n].role = "stopped"}
\* No fault closes a link (PeerDown, LocalClose): a link is down only until a start reports it.
ClosuresNone == FaultKinds \cap {"PeerDown", "LocalClose"} = {}
Unreported == {np \in Node \X Node : np[1] # np[2] /\ np[2] \notin node[np[1]].peers_up}

ModelNext ==
    IF Down # {}
    THEN \E n \in Down : Start(n) \/ Restart(n)
    ELSE IF Unreported # {} /\ ClosuresNone
         THEN \E np \in Unreported : PeerUp(np[1], np[2])
         ELSE Next

ModelSpec == Init /\ [][ModelNext]_vars

\* The same schedule as an ACTION_CONSTRAINT over Spec (Init /\ [][Next]_vars): a step of
\* Next is explored only if it is a step ModelNext allows. The models use this form so that
\* TLC's coverage report names every action of Next (it cannot split an IF over actions).
Schedule ==
    IF Down # {}
    THEN \E n \in Down : Start(n) \/ Restart(n)
    ELSE IF Unreported # {} /\ ClosuresNone
         THEN \E np \in Unreported : PeerUp(np[1], np[2])
         ELSE TRUE

-----------------------------------------------------------------------------
(* Dead messages: delivering m changes no state and sends only dead        *)
(* messages, now and in every later state (the conditions only get truer   *)
(* as terms grow; a follower at term t never becomes candidate or leader   *)
(* at term t, because BecomeCandidate increments the term).                *)

Dead(m) ==
    LET r == node[m.to]      \* the receiver
        f == node[m.from]    \* the sender, who gets any reply
    IN CASE m.type = "ScoutingRequest" -> m.term <= f.term    \* reply dead at f
         [] m.type = "ScoutingResponse" -> m.term <= r.term   \* a round asks for term + 1
         [] m.type = "ElectionProposal" -> m.term < r.term /\ m.term < f.term
         [] m.type \in {"ElectionResponse", "HeartbeatAck"} ->
                \/ m.term < r.term
                \/ m.term = r.term /\ r.role \in {"follower", "stopped"}
         [] m.type = "HeartbeatResponse" -> m.term <= r.term
         [] m.type = "LeadershipCession" -> m.term < r.term
         [] OTHER -> FALSE    \* LeaderHeartbeat: always answered

LiveMsgs == {m \in msgs : ~Dead(m)}

\* Bounds for the models with the VIEW: dead messages take no slot.
ViewConstraint ==
    /\ \A n \in Node : node[n].term <= MaxTerm /\ node[n].last_round_id <= MaxRound
    /\ Cardinality(LiveMsgs) <= MaxMsgs

-----------------------------------------------------------------------------
(* View                                                                     *)

MinTerm == CHOOSE t \in {node[n].term : n \in Node} : \A n \in Node : t <= node[n].term

NodeView(n) ==
    LET s == node[n] IN
    IF s.role # "leader" THEN s
    ELSE [s EXCEPT
            !.supporters = IF ClosuresNone THEN {} ELSE @,
            \* Node (which contains n, unlike any heard set) stands for "enough".
            !.heard_since_check = IF MaxVersion = 0 /\ Cardinality(@ \cup {n}) >= Quorum
                                  THEN Node ELSE @]

View ==
    <<[n \in Node |-> NodeView(n)], LiveMsgs, faults,
      {v \in votes : v[2] >= MinTerm}, {e \in elected : e[1] >= MinTerm}, held>>

\* Leader-life models: a non-leader's LSN and a heartbeat's LSN are left out of the view
\* too. A non-leader's LSN is read only to raise itself (note_lsn keeps the larger) and by
\* the action property LsnNeverGoesBack at that node, which note_lsn keeps by construction
\* whatever the value; BecomeLeader overwrites it, and a leader's own LSN (kept in the
\* view) is what its heartbeats, cessions and IssueLsn read. A heartbeat's LSN is read
\* only by note_lsn. (No liveness mutant reads it in these models.)
LeaderNodeView(n) ==
    IF node[n].role = "leader" THEN NodeView(n) ELSE [NodeView(n) EXCEPT !.lsn = NoLsn]

LeaderMsgView(m) == IF m.type = "LeaderHeartbeat" THEN [m EXCEPT !.lsn = NoLsn] ELSE m

LeaderView ==
    <<[n \in Node |-> LeaderNodeView(n)], {LeaderMsgView(m) : m \in LiveMsgs}, faults,
      {v \in votes : v[2] >= MinTerm}, {e \in elected : e[1] >= MinTerm}, held>>

\* Leader-life models: a new leader puts a heartbeat to every peer in flight at once,
\* and heartbeats are never dead, so a bound on all live messages cuts every leader
\* off. Here MaxMsgs bounds the live messages other than heartbeats, and heartbeats
\* are bounded by link instead: at most one in flight from a to b (a bound, like
\* every constraint: a broadcast that would put a second one on a link is not
\* explored; with LeaderHeartbeat in LossyTypes the broadcast may skip that link).
LeaderConstraint ==
    /\ \A n \in Node : node[n].term <= MaxTerm /\ node[n].last_round_id <= MaxRound
    /\ Cardinality({m \in LiveMsgs : m.type # "LeaderHeartbeat"}) <= MaxMsgs
    /\ \A a, b \in Node :
           Cardinality({m \in msgs : m.type = "LeaderHeartbeat" /\ m.from = a /\ m.to = b}) <= 1

-----------------------------------------------------------------------------
(* Leader-life models started from an established leader (ElectorLeaderLife*.cfg): *)
(* the term-1 election is the one Init reaches in a few steps (MCElectorLive's     *)
(* canary CanaryNoEstablishedLeader shows it), so the budget goes to what follows  *)
(* it: heartbeats, acks, LSNs, check-quorum, transfers, newer terms beside it.     *)

EstablishedLeaderInit ==
    /\ node = [n \in Node |-> EstablishedNode(CHOOSE l \in Node : TRUE, n)]
    /\ msgs = {}
    /\ faults = 0
    /\ votes = {<<n, 1, CHOOSE l \in Node : TRUE>> : n \in Node}
    /\ elected = {<<1, CHOOSE l \in Node : TRUE>>}
    /\ events = {}
    /\ held = [n \in Node |-> 0]

LeaderSpec == EstablishedLeaderInit /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Canaries: each must be VIOLATED (tla/check.sh runs them as expected       *)
(* failures). If TLC cannot break one, the model never reaches that part of  *)
(* the protocol and the invariants say nothing about it.                     *)

\* A leader of term >= 2 exists while a leader of an older term still believes it leads.
CanaryNoStaleLeader ==
    ~\E a, b \in Node : /\ node[a].role = "leader" /\ node[b].role = "leader"
                        /\ node[a].term < node[b].term /\ node[b].term >= 2
\* A leader of term 1 still leads beside a leader of a term >= 2.
CanaryNoTerm1BesideNewer ==
    ~\E a, b \in Node : /\ node[a].role = "leader" /\ node[b].role = "leader"
                        /\ node[a].term = 1 /\ node[b].term >= 2
\* A newer leader's heartbeat is in flight to a stale leader (its delivery is enabled).
CanaryNoNewerHeartbeatAtStaleLeader ==
    ~\E m \in msgs : /\ m.type = "LeaderHeartbeat" /\ node[m.to].role = "leader"
                     /\ m.term > node[m.to].term
\* A leader stepped down on seeing a higher term (heartbeat, response, proposal, ...).
CanaryNoHigherTermStepDown == ~\E e \in events : e[1] = "higherterm"
\* A transfer completed: the named successor became leader in the next term.
CanaryNoTransfer ==
    ~\E e \in events : e[1] = "transfer" /\ <<e[3] + 1, e[2]>> \in elected
\* A leader issued an LSN with counter >= 2.
CanaryLsnBelow2 == \A n \in Node : node[n].lsn.counter < 2
\* Check-quorum stepped a leader down.
CanaryNoCheckQuorumStepDown == ~\E e \in events : e[1] = "checkquorum"
\* A node that crashed and restarted became leader.
CanaryRestartedNeverLeads ==
    ~\E e \in events : e[1] = "crash" /\ node[e[2]].role = "leader"
\* LeaseSteps: the lease check stepped a leader down (LeaseExpires).
CanaryNoLeaseExpiry == ~\E e \in events : e[1] = "leaseexpired"
\* LeaseSteps: each of the lease's named decisions (Elector.tla, "The lease's decisions") is
\* taken: a follower refuses a newer term within its promise; a node refuses one, or does not
\* stand, within its start promise; a promise held ends with its leader's cession, or with a
\* link closure that proves its leader gone.
CanaryNoPromiseRefusal == ~\E e \in events : e[1] = "promiserefusal"
CanaryNoStartPromiseRefusal == ~\E e \in events : e[1] = "startpromiserefusal"
CanaryNoStartPromiseWait == ~\E e \in events : e[1] = "startpromisewait"
CanaryNoPromiseEndedByCession == ~\E e \in events : e[1] = "promiseendedcession"
CanaryNoPromiseEndedByLink == ~\E e \in events : e[1] = "promiseendedlink"

\* TypeOK on every state reached, whatever its view (TLC checks invariants only
\* on states whose view is new). TypeOK is checked on the initial states; after
\* that, each step checks only the parts it changes: the step's first state was
\* reached by an initial state or a checked step, so by induction every reached
\* state has TypeOK. A model with this property needs no TypeOK invariant, which
\* would check the whole state again on every new view.
TypeOKEveryStep ==
    /\ TypeOK
    /\ [][/\ \A n \in Node : node'[n] # node[n] => NodeTypeOK(n)'
          /\ \A m \in msgs' \ msgs : MsgTypeOK(m)
          /\ CountersTypeOK']_vars
=============================================================================
