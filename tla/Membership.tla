\* SPDX-License-Identifier: Apache-2.0
----------------------------- MODULE Membership -----------------------------
(***************************************************************************)
(* Membership changes: the design of docs/membership.md, before *)
(* any C++ exists. Elections and the replicated log are abstracted to the  *)
(* parts membership touches; the full handlers are in Elector.tla and      *)
(* ReplicatedLog.tla, whose action names are reused where an action here   *)
(* stands for one of theirs.                                               *)
(*                                                                         *)
(* The design checked here:                                                *)
(*  - a configuration [ver, voters, learners] is an entry of the log;      *)
(*  - a node's ACTIVE configuration is the latest one in its COMMITTED     *)
(*    prefix (not the latest appended);                                    *)
(*  - the elector does not compare logs: a candidate counts votes over the *)
(*    voters of its own active configuration, and a voter refuses a        *)
(*    candidate whose configuration version is lower than its own          *)
(*    (the version fence), and refuses to vote at all unless it is a       *)
(*    voter of its own active configuration (learners, removed nodes);     *)
(*  - a new leader syncs with a quorum of its active configuration, adopts *)
(*    the log with the highest last LSN, appends its sync point and is    *)
(*    ACTIVE once the sync point is committed (an entry of its own term);  *)
(*  - the leader counts commits over the voters of its active              *)
(*    configuration at the time it counts, and steps down when a commit    *)
(*    makes a configuration active in which it is not a voter;             *)
(*  - a leader proposes a change only when ACTIVE, with no configuration   *)
(*    entry pending (uncommitted) in its log. (A first draft also waited   *)
(*    for a quorum to report the active version: TLC showed it redundant, *)
(*    see docs/membership.md, section 7.)                                  *)
(*                                                                         *)
(* Abstractions (see README.md, "Membership"): message exchanges are       *)
(* atomic (a request and its answer are one step; loss = the step is not   *)
(* taken); no crashes (term, vote, log and commit point are durable: the   *)
(* design requires the commit point to be durable before a node acks an    *)
(* Append that moved it past a configuration, R4); scouting (PreVote) is  *)
(* left out (it only refuses more); no data entries (sync points and     *)
(* configurations are the entries whose loss is checked); entries are      *)
(* [term, kind, cfg] at an index, LSN order is (term, index).              *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    Node,          \* every node that may ever be a member
    InitVoters,    \* voters of configuration 0 (hold it committed at start)
    InitLearners,  \* learners of configuration 0 (start with an empty log: they join)
    Joiners,       \* nodes outside configuration 0 that may be added as learners
    MinVoters,     \* a removal keeps at least this many voters
    MaxTerm,
    MaxVersion,    \* at most this many changes
    MaxLen,        \* log length bound
    PlantedBug     \* "None", "SkipOwnTermCommit", "IgnoreConfigVersion", "NonVoterVotes"

None == "none"

VARIABLES
    term, votedFor, role,  \* elector: durable term and vote; "F" (follower) or "L"
    lst,                   \* the log's leader state: "none", "synced", "active"
    log, commit,           \* durable log and commit point (a length)
    match,                 \* a leader's view of each node's matched length (AppendAck)
    elected,               \* history: every election won [t, n, ver, voters]
    committed              \* history: [idx, e, t] for every entry a leader counted committed in term t

vars == <<term, votedFor, role, lst, log, commit, match, elected, committed>>

Cfg(v, V, L) == [ver |-> v, voters |-> V, learners |-> L]
NoCfg == Cfg(-1, {}, {})
C0 == Cfg(0, InitVoters, InitLearners)
Members(c) == c.voters \cup c.learners

CfgEntry(t, c) == [term |-> t, kind |-> "cfg", cfg |-> c]
SyncEntry(t) == [term |-> t, kind |-> "sync", cfg |-> NoCfg]

Quorum(S, voters) == 2 * Cardinality(S \cap voters) > Cardinality(voters)
Quorums(voters) == {Q \in SUBSET voters : Quorum(Q, voters)}

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b

\* The latest configuration in the first k entries of a log.
CfgIn(lg, k) ==
    LET idx == {i \in 1..k : lg[i].kind = "cfg"}
    IN IF idx = {} THEN NoCfg ELSE lg[CHOOSE i \in idx : \A j \in idx : j <= i].cfg
Latest(n) == CfgIn(log[n], Len(log[n]))
\* The design: a node's active configuration is the latest committed one.
Active(n) == CfgIn(log[n], commit[n])
\* A configuration entry appended but not committed.
Pending(n) == \E i \in (commit[n] + 1)..Len(log[n]) : log[n][i].kind = "cfg"

\* LSN order of logs: last entry's term, then its index.
LastLsn(lg) == IF lg = << >> THEN <<-1, 0>> ELSE <<lg[Len(lg)].term, Len(lg)>>
LsnGreater(a, b) == a[1] > b[1] \/ (a[1] = b[1] /\ a[2] > b[2])

CommonPrefix(a, b) ==
    LET ks == {k \in 0..Min(Len(a), Len(b)) : \A i \in 1..k : a[i] = b[i]}
    IN CHOOSE k \in ks : \A j \in ks : j <= k

Init ==
    /\ term = [n \in Node |-> 0]
    /\ votedFor = [n \in Node |-> None]
    /\ role = [n \in Node |-> "F"]
    /\ lst = [n \in Node |-> "none"]
    /\ log = [n \in Node |-> IF n \in InitVoters THEN <<CfgEntry(0, C0)>> ELSE << >>]
    /\ commit = [n \in Node |-> IF n \in InitVoters THEN 1 ELSE 0]
    /\ match = [n \in Node |-> [m \in Node |-> 0]]
    /\ elected = {}
    /\ committed = {[idx |-> 1, e |-> CfgEntry(0, C0), t |-> 0]}

(***************************************************************************)
(* Elector                                                                 *)
(***************************************************************************)

\* May v grant its vote to candidate c of term t counting over configuration cc?
\* (HandleElectionProposal, ConfigFence.) v must not have voted for another in t, (the version
\* fence) its active configuration must not be newer than the candidate's, and it must be a
\* voter of its own active configuration unless the candidate's is newer: cc names v as a voter
\* (c asks only cc's voters), so v is a learner promoted without knowing it yet (refusing it
\* too deadlocks elections: docs/membership.md, R5). NonVoterVotes drops the voter condition
\* altogether (a superset of the grants allowed here).
Grants(v, c, t, cc) ==
    /\ \/ PlantedBug = "NonVoterVotes"
       \/ v \in Active(v).voters
       \/ Active(v).ver < cc.ver
    /\ term[v] < t \/ (term[v] = t /\ votedFor[v] \in {None, c})
    /\ PlantedBug = "IgnoreConfigVersion" \/ Active(v).ver <= cc.ver

\* One whole election, abstracted: RandomWaitFired, scouting, ScoutingResultFired, the
\* ElectionProposal to a quorum Q of the candidate's own active voters, each
\* HandleElectionProposal granting, and the HandleElectionResponse that completes the quorum.
\* Only a voter of its own active configuration stands. (A failed election only raises
\* terms and spends votes; the model leaves it out, see README.md.)
HandleElectionResponse(c, Q) ==
    LET t == term[c] + 1
        cc == Active(c)
    IN
    /\ role[c] = "F"
    /\ c \in cc.voters
    /\ t <= MaxTerm
    /\ c \in Q
    /\ Q \in Quorums(cc.voters)
    /\ \A v \in Q : Grants(v, c, t, cc)
    /\ term' = [n \in Node |-> IF n \in Q THEN t ELSE term[n]]
    /\ votedFor' = [n \in Node |-> IF n \in Q THEN c ELSE votedFor[n]]
    /\ role' = [n \in Node |-> IF n = c THEN "L" ELSE IF n \in Q THEN "F" ELSE role[n]]
    /\ lst' = [n \in Node |-> IF n = c THEN "none" ELSE IF n \in Q THEN "none" ELSE lst[n]]
    /\ match' = [match EXCEPT ![c] = [m \in Node |-> 0]]
    /\ elected' = elected \cup {[t |-> t, n |-> c, ver |-> cc.ver, voters |-> cc.voters]}
    /\ UNCHANGED <<log, commit, committed>>

(***************************************************************************)
(* Log: leader sync                                                        *)
(***************************************************************************)

\* The leader's whole sync, abstracted: SyncRequest to a quorum Q of its active voters,
\* their SyncResponses (each promises the leader's term, durably), the fetch of the log with
\* the highest last LSN (the leader keeps its own on a tie), and FinishSync appending the
\* sync point (an entry of the leader's own term). ReplicatedLog.tla has these steps one by
\* one and checks them.
HandleSyncResponse(l, Q) ==
    LET best == CHOOSE f \in Q : \A g \in Q : ~LsnGreater(LastLsn(log[g]), LastLsn(log[f]))
        lg == IF LsnGreater(LastLsn(log[best]), LastLsn(log[l])) THEN log[best] ELSE log[l]
    IN
    /\ role[l] = "L" /\ lst[l] = "none"
    /\ l \in Q
    /\ Q \in Quorums(Active(l).voters)
    /\ \A f \in Q : term[f] <= term[l]
    /\ Len(lg) < MaxLen
    /\ term' = [n \in Node |-> IF n \in Q THEN term[l] ELSE term[n]]
    /\ votedFor' = [n \in Node |-> IF n \in Q /\ term[n] < term[l] THEN None ELSE votedFor[n]]
    /\ role' = [n \in Node |-> IF n \in Q \ {l} THEN "F" ELSE role[n]]
    /\ lst' = [lst EXCEPT ![l] = "synced"]
    /\ log' = [log EXCEPT ![l] = Append(lg, SyncEntry(term[l]))]
    /\ commit' = [commit EXCEPT ![l] = Min(commit[l], Len(lg))]
    /\ match' = [match EXCEPT ![l][l] = Len(lg) + 1]
    /\ UNCHANGED <<elected, committed>>

(***************************************************************************)
(* Log: replication and commit                                             *)
(***************************************************************************)

\* Who a leader replicates to: the members of its active and of its latest configuration
\* (a node being added gets entries at once; a node being removed until the removal commits).
Targets(l) == (Members(Active(l)) \cup Members(Latest(l))) \ {l}

\* AdvanceCommit's choice: the longest prefix ending in an entry of the leader's term that a
\* quorum of the voters of its active configuration holds (mt: the matched lengths).
CommitPoint(l, mt) ==
    LET ks == {k \in (commit[l] + 1)..Len(log[l]) :
                  /\ log[l][k].term = term[l]
                  /\ Quorum({m \in Node : mt[m] >= k}, Active(l).voters)}
    IN IF ks = {} THEN commit[l] ELSE CHOOSE k \in ks : \A j \in ks : j <= k

\* Append from leader l to f, f's AppendAck, and the leader's HandleAppendAck, in one step:
\* f drops a conflicting uncommitted suffix and takes the rest of l's log (flow control is
\* abstracted: which followers hold which of the leader's successive logs still varies),
\* learns l's commit point, and acknowledges the matched length; the leader raises match and
\* advances its commit point (AdvanceCommit). The sync point committing makes the leader ACTIVE; a
\* configuration becoming active without the leader makes it step down.
HandleAppend(l, f) ==
    LET p == CommonPrefix(log[f], log[l])
        nl == log[l]
        fc == Max(commit[f], commit[l])
        mt == [match[l] EXCEPT ![f] = Len(nl)]
        lc == CommitPoint(l, mt)
        la == CfgIn(log[l], lc)
        isv == l \in la.voters
    IN
    /\ role[l] = "L" /\ lst[l] \in {"synced", "active"}
    /\ f \in Targets(l)
    /\ term[f] <= term[l]
    /\ p >= commit[f]  \* a correct follower never truncates committed entries (C++: alarm, drop)
    /\ nl # log[f] \/ fc # commit[f] \/ match[l][f] # Len(nl) \/ term[f] # term[l]
    /\ log' = [log EXCEPT ![f] = nl]
    /\ commit' = [commit EXCEPT ![f] = fc, ![l] = lc]
    /\ match' = [match EXCEPT ![l] = mt]
    /\ term' = [term EXCEPT ![f] = term[l]]
    /\ votedFor' = [votedFor EXCEPT ![f] = IF term[f] < term[l] THEN None ELSE votedFor[f]]
    /\ role' = [role EXCEPT ![f] = "F", ![l] = IF isv THEN "L" ELSE "F"]
    /\ lst' = [lst EXCEPT ![f] = "none",
                          ![l] = IF ~isv THEN "none"
                                 ELSE IF lc > commit[l] \/ lst[l] = "active" THEN "active"
                                 ELSE "synced"]
    \* (only the first time an index is counted: the lowest term is the strongest check)
    /\ committed' = committed \cup {[idx |-> i, e |-> log[l][i], t |-> term[l]] :
                                    i \in {j \in (commit[l] + 1)..lc :
                                              ~\E a \in committed : a.idx = j}}
    /\ UNCHANGED <<elected>>

(***************************************************************************)
(* Membership changes (POST /members on the leader)                         *)
(***************************************************************************)

\* May leader l append a configuration entry now?
CanChange(l) ==
    /\ role[l] = "L"
    \* own-term rule: only once the sync point (an entry of its term) is committed
    /\ \/ lst[l] = "active"
       \/ PlantedBug = "SkipOwnTermCommit" /\ lst[l] = "synced"
    /\ ~Pending(l)                      \* one change at a time
    /\ Active(l).ver < MaxVersion
    /\ Len(log[l]) < MaxLen

AppendCfg(l, c) ==
    /\ log' = [log EXCEPT ![l] = Append(log[l], CfgEntry(term[l], c))]
    /\ match' = [match EXCEPT ![l][l] = Len(log[l]) + 1]
    /\ UNCHANGED <<term, votedFor, role, lst, commit, elected, committed>>

ProposeAddLearner(l, x) ==
    LET a == Active(l) IN
    /\ CanChange(l)
    /\ x \in Joiners \ Members(a)
    /\ AppendCfg(l, Cfg(a.ver + 1, a.voters, a.learners \cup {x}))

\* A learner is promoted once it holds the leader's committed prefix.
ProposePromote(l, x) ==
    LET a == Active(l) IN
    /\ CanChange(l)
    /\ x \in a.learners
    /\ match[l][x] >= commit[l]
    /\ AppendCfg(l, Cfg(a.ver + 1, a.voters \cup {x}, a.learners \ {x}))

ProposeRemove(l, x) ==
    LET a == Active(l) IN
    /\ CanChange(l)
    /\ x \in a.voters
    /\ Cardinality(a.voters) > MinVoters
    /\ AppendCfg(l, Cfg(a.ver + 1, a.voters \ {x}, a.learners))

\* The "Any" wrappers name each action for TLC's coverage report (check.sh's gate).
HandleElectionResponseAny ==
    \E c \in Node : \E Q \in Quorums(Active(c).voters) : HandleElectionResponse(c, Q)
HandleSyncResponseAny ==
    \E l \in Node : \E Q \in Quorums(Active(l).voters) : HandleSyncResponse(l, Q)
HandleAppendAny == \E l, f \in Node : HandleAppend(l, f)
ProposeAddLearnerAny == \E l, x \in Node : ProposeAddLearner(l, x)
ProposePromoteAny == \E l, x \in Node : ProposePromote(l, x)
ProposeRemoveAny == \E l, x \in Node : ProposeRemove(l, x)

Next ==
    \/ HandleElectionResponseAny
    \/ HandleSyncResponseAny
    \/ HandleAppendAny
    \/ ProposeAddLearnerAny
    \/ ProposePromoteAny
    \/ ProposeRemoveAny

Spec == Init /\ [][Next]_vars

(***************************************************************************)
(* Invariants                                                              *)
(***************************************************************************)

\* Never two leaders in one term, whatever configurations they were elected with.
OneLeaderPerTerm == \A a, b \in elected : a.t = b.t => a.n = b.n

\* One entry per index among everything ever counted committed, and every node's committed
\* prefix agrees with it.
CommittedPrefixesAgree ==
    /\ \A a, b \in committed : a.idx = b.idx => a.e = b.e
    /\ \A n \in Node : commit[n] <= Len(log[n])
    /\ \A n \in Node, a \in committed : a.idx <= commit[n] => log[n][a.idx] = a.e

\* Committed entries (configurations included) are never lost: an ACTIVE leader of a term at
\* or after the one an entry was committed in holds it at its index.
LeaderCompleteness ==
    \A n \in Node, a \in committed :
        (role[n] = "L" /\ lst[n] = "active" /\ term[n] >= a.t)
            => Len(log[n]) >= a.idx /\ log[n][a.idx] = a.e

\* The configuration committed last (highest version) among those committed in terms <= t.
CommittedCfgs == {a \in committed : a.e.kind = "cfg"}

\* A node decides (is an ACTIVE leader) only as a voter of its active configuration, and
\* that configuration is at least as new as every configuration committed in its term or
\* before: a removed node never decides, nor does one unaware of its removal.
RemovedNeverDecides ==
    \A n \in Node :
        (role[n] = "L" /\ lst[n] = "active") =>
            /\ n \in Active(n).voters
            /\ \A a \in CommittedCfgs : a.t <= term[n] => a.e.cfg.ver <= Active(n).ver

\* A leader is itself a voter of the configuration it counted votes over. (Votes come only from
\* that configuration's voters, each a voter of its own active configuration: Grants.)
ElectedByVoters == \A e \in elected : e.n \in e.voters

\* The node's active configuration never goes back.
ActiveCfgsOneHistory ==
    \A a, b \in CommittedCfgs : a.e.cfg.ver = b.e.cfg.ver => a.e.cfg = b.e.cfg

TypeOK ==
    /\ role \in [Node -> {"F", "L"}]
    /\ lst \in [Node -> {"none", "synced", "active"}]
    /\ \A n \in Node : commit[n] \in 0..Len(log[n])

Safety ==
    /\ TypeOK /\ OneLeaderPerTerm /\ CommittedPrefixesAgree /\ LeaderCompleteness
    /\ RemovedNeverDecides /\ ElectedByVoters /\ ActiveCfgsOneHistory

(***************************************************************************)
(* Canaries: each must be violated (check.sh), so the model reaches them   *)
(***************************************************************************)
CanaryNoConfigCommitted == \A a \in CommittedCfgs : a.e.cfg.ver = 0
\* a node was removed (committed) and a leader was elected afterwards, counted over a
\* configuration without it
CanaryNoLeaderAfterRemoval ==
    ~\E e \in elected : \E r \in InitVoters : r \notin e.voters
\* a learner was promoted (committed configuration where a non-initial voter votes)
CanaryNoPromotion == \A a \in CommittedCfgs : a.e.cfg.voters \subseteq InitVoters
\* the planted SkipOwnTermCommit is reached: a leader whose sync point has not committed holds a
\* configuration entry of its own term (only the mutation appends one before ACTIVE; a leader
\* never goes back from ACTIVE to synced within its term, so without it this never holds)
CanaryNoChangeBeforeOwnTermCommit ==
    ~\E l \in Node :
        /\ role[l] = "L" /\ lst[l] = "synced"
        /\ \E i \in 1..Len(log[l]) : log[l][i].kind = "cfg" /\ log[l][i].term = term[l]
\* the promoted node became an ACTIVE leader
CanaryJoinerNeverLeads ==
    \A n \in Node : (role[n] = "L" /\ lst[n] = "active") => n \in InitVoters

Bounds == TRUE
=============================================================================
