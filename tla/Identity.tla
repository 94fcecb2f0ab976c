\* SPDX-License-Identifier: Apache-2.0
------------------------------- MODULE Identity -------------------------------
(***************************************************************************)
(* Node identity and state loss (docs/design.md, "Node identity";          *)
(* node/README.md, "Lost or damaged state"), at the level of votes.        *)
(*                                                                         *)
(* A node's durable record is (term, votedFor, incarnation) and its peer   *)
(* table known[n] (peers.json: the incarnation n admitted each peer with). *)
(* Two nodes exchange messages only while each has admitted the other's    *)
(* current incarnation (the net handshake, Handshake below). State loss is *)
(* an action (Wipe): the node's data directory is emptied, so it comes     *)
(* back with term 0, no vote, an empty peer table and a new incarnation.   *)
(* The guard (PeerIncarnations::admit): a peer that knows a node by one    *)
(* incarnation refuses another one (state_lost: the refused node stops,    *)
(* exit 3) unless the node announces itself repaired (conclaved --repair   *)
(* --min-term T, RepairWithMinTerm below).                                 *)
(*                                                                         *)
(* Elections are abstracted to votes: a candidate's request and a voter's  *)
(* grant are one step (Grant), a candidate holding a quorum of grants of   *)
(* its term becomes the leader of that term (leaders[t], a history).       *)
(* The safety property is OneLeaderPerTerm.                                *)
(*                                                                         *)
(* Switches (model constants):                                             *)
(*   PlantedBug = "AdmitAny": peers admit any incarnation (no guard).      *)
(*   FreshNeedsMajority: a node stands or votes only once a majority of    *)
(*     the other nodes admitted its current incarnation. The C++ does not  *)
(*     have this rule; without it a wiped node whose every earlier peer is *)
(*     unreachable is taken as new by the rest (tla/README.md, "Node       *)
(*     identity").                                                         *)
(*   RepairNeedsQuorumUp: the operator repairs only while the other nodes  *)
(*     that are running form a quorum, and T bounds their terms (the      *)
(*     documented procedure, node/README.md "Corrupt log", step 2).       *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    N,                  \* number of nodes (ids 1..N, initial incarnations 1..N)
    MaxTerm,            \* terms 0..MaxTerm
    MaxInc,             \* incarnations 1..MaxInc: MaxInc - N wipes in all
    MaxRepairs,         \* RepairWithMinTerm steps in all
    PlantedBug,         \* "None" or "AdmitAny"
    FreshNeedsMajority, \* BOOLEAN: the fix the C++ lacks (see above)
    RepairNeedsQuorumUp \* BOOLEAN: the operator follows the documented procedure

Node == 1..N
None == 0                       \* no vote, no incarnation known
Quorum == N \div 2 + 1
Terms == 0..MaxTerm

VARIABLES
    term,       \* durable: the node's current term
    votedFor,   \* durable: its vote in that term (None or a node)
    inc,        \* durable: its incarnation (a number, never reused)
    known,      \* durable: known[n][m] = the incarnation n admitted m with, or None
    repaired,   \* durable: the node carries the repaired marker (announced in its Hello)
    up,         \* the process runs
    role,       \* "follower", "candidate" or "leader" (volatile)
    votes,      \* grants a candidate holds for its current term (volatile)
    nextInc,    \* the next fresh incarnation
    wiped,      \* nodes whose state was lost at least once
    repairs,    \* RepairWithMinTerm steps taken
    leaders,    \* history: leaders[t] = the nodes that became leader of term t
    refused,    \* history: a peer refused a node as state_lost
    readmitted  \* history: a peer took a repaired node's new incarnation

vars == <<term, votedFor, inc, known, repaired, up, role, votes, nextInc, wiped, repairs,
          leaders, refused, readmitted>>

Init ==
    /\ term = [n \in Node |-> 0]
    /\ votedFor = [n \in Node |-> None]
    /\ inc = [n \in Node |-> n]
    /\ known = [n \in Node |-> [m \in Node |-> None]]
    /\ repaired = [n \in Node |-> FALSE]
    /\ up = [n \in Node |-> TRUE]
    /\ role = [n \in Node |-> "follower"]
    /\ votes = [n \in Node |-> {}]
    /\ nextInc = N + 1
    /\ wiped = {}
    /\ repairs = 0
    /\ leaders = [t \in 1..MaxTerm |-> {}]
    /\ refused = FALSE
    /\ readmitted = FALSE

-----------------------------------------------------------------------------
(* The handshake's admission (PeerIncarnations::admit): n admits m's       *)
(* current incarnation when it knows none for m, knows this one, or m      *)
(* announces itself repaired.                                              *)
Admits(n, m) ==
    \/ PlantedBug = "AdmitAny"
    \/ known[n][m] \in {None, inc[m]}
    \/ repaired[m]

\* Messages flow between n and m only over an admitted connection.
Connected(n, m) ==
    /\ up[n] /\ up[m]
    /\ known[n][m] = inc[m] /\ known[m][n] = inc[n]

\* The fix the C++ lacks: a majority of the other nodes admitted n's current incarnation.
AdmittedByMajority(n) ==
    2 * Cardinality({m \in Node \ {n} : known[m][n] = inc[n]}) > N - 1

MayVote(n) == FreshNeedsMajority => AdmittedByMajority(n)

\* n dials m. m checks n first (the acceptor answers the Hello): a refusal stops n (exit 3).
\* Then n checks m's answer: a refusal stops m. Each side records what it admitted.
Handshake(n, m) ==
    /\ n # m /\ up[n] /\ up[m]
    /\ ~(known[n][m] = inc[m] /\ known[m][n] = inc[n])
    /\ IF ~Admits(m, n)
         THEN /\ up' = [up EXCEPT ![n] = FALSE]
              /\ role' = [role EXCEPT ![n] = "follower"]
              /\ votes' = [votes EXCEPT ![n] = {}]
              /\ refused' = TRUE
              /\ UNCHANGED <<known, readmitted>>
         ELSE IF ~Admits(n, m)
           THEN /\ known' = [known EXCEPT ![m][n] = inc[n]]
                /\ up' = [up EXCEPT ![m] = FALSE]
                /\ role' = [role EXCEPT ![m] = "follower"]
                /\ votes' = [votes EXCEPT ![m] = {}]
                /\ refused' = TRUE
                /\ UNCHANGED readmitted
           ELSE /\ known' = [known EXCEPT ![m][n] = inc[n], ![n][m] = inc[m]]
                /\ readmitted' = (readmitted
                                  \/ known[m][n] \notin {None, inc[n]}
                                  \/ known[n][m] \notin {None, inc[m]})
                /\ UNCHANGED <<up, role, votes, refused>>
    /\ UNCHANGED <<term, votedFor, inc, repaired, nextInc, wiped, repairs, leaders>>

-----------------------------------------------------------------------------
(* Elections at the level of votes.                                        *)

\* An election timeout: a new term, a vote for itself.
Timeout(n) ==
    /\ up[n] /\ role[n] # "leader" /\ term[n] < MaxTerm
    /\ MayVote(n)
    /\ term' = [term EXCEPT ![n] = term[n] + 1]
    /\ votedFor' = [votedFor EXCEPT ![n] = n]
    /\ role' = [role EXCEPT ![n] = "candidate"]
    /\ votes' = [votes EXCEPT ![n] = {n}]
    /\ UNCHANGED <<inc, known, repaired, up, nextInc, wiped, repairs, leaders, refused,
                   readmitted>>

\* v grants candidate c's request (request, grant and its receipt in one step): v adopts c's
\* term durably with the vote before c counts it.
Grant(v, c) ==
    /\ v # c /\ Connected(v, c) /\ role[c] = "candidate"
    /\ \/ term[v] < term[c]
       \/ term[v] = term[c] /\ votedFor[v] \in {None, c}
    /\ MayVote(v)
    /\ term' = [term EXCEPT ![v] = term[c]]
    /\ votedFor' = [votedFor EXCEPT ![v] = c]
    /\ role' = [role EXCEPT ![v] = IF term[v] < term[c] THEN "follower" ELSE role[v]]
    /\ votes' = [votes EXCEPT ![c] = votes[c] \cup {v},
                              ![v] = IF term[v] < term[c] THEN {} ELSE votes[v]]
    /\ UNCHANGED <<inc, known, repaired, up, nextInc, wiped, repairs, leaders, refused,
                   readmitted>>

\* v hears a newer term from c without voting (a refused request, a heartbeat): it adopts
\* the term with no vote and follows.
AdoptTerm(v, c) ==
    /\ v # c /\ Connected(v, c) /\ term[v] < term[c]
    /\ term' = [term EXCEPT ![v] = term[c]]
    /\ votedFor' = [votedFor EXCEPT ![v] = None]
    /\ role' = [role EXCEPT ![v] = "follower"]
    /\ votes' = [votes EXCEPT ![v] = {}]
    /\ UNCHANGED <<inc, known, repaired, up, nextInc, wiped, repairs, leaders, refused,
                   readmitted>>

BecomeLeader(c) ==
    /\ up[c] /\ role[c] = "candidate" /\ Cardinality(votes[c]) >= Quorum
    /\ role' = [role EXCEPT ![c] = "leader"]
    /\ leaders' = [leaders EXCEPT ![term[c]] = @ \cup {c}]
    /\ UNCHANGED <<term, votedFor, inc, known, repaired, up, votes, nextInc, wiped, repairs,
                   refused, readmitted>>

\* The repaired marker is not cleared in this model (the C++ clears it once a leader of a term
\* above R has brought the node up to date; from then on the node announces itself as not
\* repaired, so peers that did not take its new incarnation yet refuse it): keeping it admits
\* more, never less.

-----------------------------------------------------------------------------
(* Faults and the operator.                                                *)

Crash(n) ==
    /\ up[n]
    /\ up' = [up EXCEPT ![n] = FALSE]
    /\ role' = [role EXCEPT ![n] = "follower"]
    /\ votes' = [votes EXCEPT ![n] = {}]
    /\ UNCHANGED <<term, votedFor, inc, known, repaired, nextInc, wiped, repairs, leaders,
                   refused, readmitted>>

\* A start from the durable record (a node refused as state_lost is refused again).
Restart(n) ==
    /\ ~up[n]
    /\ up' = [up EXCEPT ![n] = TRUE]
    /\ UNCHANGED <<term, votedFor, inc, known, repaired, role, votes, nextInc, wiped,
                   repairs, leaders, refused, readmitted>>

\* State loss: the node stops and its data directory is emptied; its next start creates a new
\* incarnation (given here) with term 0, no vote and an empty peer table. Only one node loses
\* its state in a behaviour (several times at most): two of three nodes losing theirs is a lost
\* quorum, which no check between peers can detect.
\* A vote record deleted beside an intact log (DeleteVoteRecordOnly) is refused at start in the
\* C++; its way back is --repair, which writes a new incarnation: a Wipe followed by
\* RepairWithMinTerm, with the peer table kept (which only makes the node refuse more).
Wipe(n) ==
    /\ nextInc <= MaxInc /\ wiped \subseteq {n}
    /\ term' = [term EXCEPT ![n] = 0]
    /\ votedFor' = [votedFor EXCEPT ![n] = None]
    /\ inc' = [inc EXCEPT ![n] = nextInc]
    /\ known' = [known EXCEPT ![n] = [m \in Node |-> None]]
    /\ repaired' = [repaired EXCEPT ![n] = FALSE]
    /\ up' = [up EXCEPT ![n] = FALSE]
    /\ role' = [role EXCEPT ![n] = "follower"]
    /\ votes' = [votes EXCEPT ![n] = {}]
    /\ nextInc' = nextInc + 1
    /\ wiped' = wiped \cup {n}
    /\ UNCHANGED <<repairs, leaders, refused, readmitted>>

\* The operator's bound: the highest term of any running node.
RunningTerms(n) == {term[m] : m \in {x \in Node \ {n} : up[x]}}
OperatorBound(n) == IF RunningTerms(n) = {} THEN 0
                    ELSE CHOOSE t \in RunningTerms(n) : \A u \in RunningTerms(n) : u <= t

\* conclaved --repair --min-term T on the stopped node: its term is raised to at least T (a
\* record it cannot read gets a vote for itself, so it never grants in term T), it is marked
\* repaired, and announces itself repaired so that peers take its new
\* incarnation (an unreadable record gets a new one: the wiped node already has one).
RepairWithMinTerm(n, T) ==
    /\ ~up[n] /\ repairs < MaxRepairs
    /\ T >= OperatorBound(n)
    /\ RepairNeedsQuorumUp => Cardinality({m \in Node \ {n} : up[m]}) >= Quorum
    /\ term' = [term EXCEPT ![n] = IF term[n] < T THEN T ELSE term[n]]
    /\ votedFor' = [votedFor EXCEPT ![n] = IF term[n] < T THEN n ELSE votedFor[n]]
    /\ repaired' = [repaired EXCEPT ![n] = TRUE]
    /\ repairs' = repairs + 1
    /\ UNCHANGED <<inc, known, up, role, votes, nextInc, wiped, leaders, refused, readmitted>>

Next ==
    \/ \E n, m \in Node : Handshake(n, m)
    \/ \E n \in Node : Timeout(n)
    \/ \E v, c \in Node : Grant(v, c)
    \/ \E v, c \in Node : AdoptTerm(v, c)
    \/ \E c \in Node : BecomeLeader(c)
    \/ \E n \in Node : Crash(n)
    \/ \E n \in Node : Restart(n)
    \/ \E n \in Node : Wipe(n)
    \/ \E n \in Node, T \in Terms : RepairWithMinTerm(n, T)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
TypeOK ==
    /\ term \in [Node -> Terms]
    /\ votedFor \in [Node -> Node \cup {None}]
    /\ inc \in [Node -> 1..MaxInc]
    /\ known \in [Node -> [Node -> 0..MaxInc]]
    /\ repaired \in [Node -> BOOLEAN]
    /\ up \in [Node -> BOOLEAN]
    /\ role \in [Node -> {"follower", "candidate", "leader"}]
    /\ votes \in [Node -> SUBSET Node]

\* The safety property: at most one node wins each term.
OneLeaderPerTerm == \A t \in 1..MaxTerm : Cardinality(leaders[t]) <= 1

\* Canaries (tla/check.sh runs CFG+CANARY: TLC must violate each, which shows the guard's region
\* is reached): a wiped node is refused by a peer that knew its earlier incarnation ...
CanaryNoRefusal == ~refused
\* ... a repaired node is admitted with its new incarnation by a peer that knew the old one ...
CanaryNoReadmission == ~readmitted
\* ... and a node that lost its state stands or grants a vote again (the fix does not silence it
\* for good).
CanaryWipedNeverVotes ==
    \A n \in wiped : role[n] # "candidate" /\ votedFor[n] \in {None, n}
=============================================================================
