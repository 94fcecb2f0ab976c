\* SPDX-License-Identifier: Apache-2.0
---------------------------- MODULE ReplicatedLog ----------------------------
(***************************************************************************)
(* Conclave's replicated metadata log with leader sync, one TLA+ action    *)
(* per handler of replication/src/log.cpp, with the same name.             *)
(*                                                                         *)
(* Leadership is abstracted: the elector's guarantee (at most one leader   *)
(* per term, proved by Elector.tla) is taken as given. Any node may be     *)
(* told at any moment that it leads a term no node has led yet             *)
(* (OnLeadership, the C++ on_leadership with a snapshot naming it), and a  *)
(* leader may be told at any moment that it no longer leads                *)
(* (OnLeadershipLost). An old leader may also stay unaware and keep        *)
(* serving until a message of a higher term reaches it.                    *)
(*                                                                         *)
(* The state of one node is one record whose fields are those of the C++  *)
(* LogState, entries_, sync_ and progress_[].match_len, plus the durable   *)
(* meta (LogMeta::commit_lsn; LogMeta::term is `term`, which AdoptTerm     *)
(* persists on every change). Each handler is an operator from the node's *)
(* state to a SET of results [st |-> new state, out |-> messages sent]:    *)
(* a singleton except where the C++ breaks a tie by node index            *)
(* (EvaluateSync), where the spec allows every tied node.                  *)
(*                                                                         *)
(* An entry is its LSN [term, counter]: one LSN names one entry (one      *)
(* leader per term, counters never reused), which the C++ checks in       *)
(* Merge. Sync points are [T, 0]; proposals [T, k > 0].                    *)
(*                                                                         *)
(* Flow control is abstracted: which slice of its log a leader sends, and  *)
(* when, is decided in the C++ by PeerProgress (next_len, inflight_ends,   *)
(* probing, Rewind) from FinishSync, propose, HandleAppendAck,             *)
(* HeartbeatFired and peer_up. The spec lets a synced leader send any      *)
(* slice of at most MaxBatch entries at any moment (action Replicate),     *)
(* a superset of what Replicate()/SendHeartbeat() choose. Message fields   *)
(* that only flow control reads are left out (AppendAck's prev/last/commit *)
(* when refused, SyncResponse.commit_lsn, FetchResponse.last_lsn).         *)
(*                                                                         *)
(* Storage: PersistEntries is not durable until Persisted (the driver's    *)
(* persisted(storage.flush()), a step of its own, or the end of every step *)
(* with FlushEachStep); PersistMeta and TruncateEntries are                *)
(* durable when performed, so a step is atomic with them. A crash keeps    *)
(* any prefix of the log between what the core knows durable and all of    *)
(* it (OS-buffered writes may survive; a torn or corrupt tail is cut);    *)
(* with CrashLosesTail it keeps exactly the durable prefix.                *)
(*                                                                         *)
(* The network is a set of messages: a receive may consume the message or *)
(* keep it (duplication). A message is lost by never being delivered, or,  *)
(* for the types in LossyTypes, by being lost as it is sent (it takes no  *)
(* slot of MaxMsgs).                                                        *)
(* Repair (`conclaved --repair`): Repair(n) is a crash whose    *)
(* restart keeps any prefix of the log, even one missing durable and       *)
(* committed entries (the corruption), and sets the repaired marker R.     *)
(* While marked (NonVoting) the node answers no SyncRequest, its acks say  *)
(* non_voting and count for no commit, and as leader it counts itself in  *)
(* no quorum; MaybeClearRepaired removes the marker (see there).            *)
(* CONCLAVE_CHECKs become Check(...): a failed one is recorded in the      *)
(* node's `failed` set, which the invariant ChecksHold requires empty.     *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    Node,           \* the nodes of the cluster
    Nil,            \* "no node" (std::nullopt)
    Quorum,         \* LogConfig::effective_quorum()
    MaxBatch,       \* LogConfig::max_batch_entries (appends and fetches)
    PlantedBug,     \* LogConfig::planted_bug: "None", "SkipSync", "CommitWithoutQuorum",
                    \* "CountRepaired"
    \* Model bounds.
    MaxTerm,        \* largest term a leader is given
    MaxProposals,   \* proposals accepted in a behaviour
    MaxMsgs,        \* largest number of messages in flight explored
    MaxCrashes,     \* crashes (restart from storage) in a behaviour
    MaxRepairs,     \* Repair steps (crash, corruption, conclaved --repair) in a behaviour
    Duplication,    \* the network may deliver a message more than once
    LossyTypes,     \* message types that may be lost as they are sent
    Paced,          \* random runs (LogDeep.cfg): term t + 1 is led only after t proposals
                    \* or when no node leads, the leader of term t steps down only after t
                    \* proposals, crash k + 1 only after k + 1 proposals. A random walk would
                    \* otherwise spend every term and crash in its first steps. It only
                    \* removes behaviours; the exhaustive models run with Paced = FALSE.
    CrashLosesTail, \* a crash keeps exactly the durable prefix (else any longer prefix too)
    StepDowns,      \* the elector may depose a leader without a higher term (OnLeadershipLost)
    FlushEachStep   \* the driver's persisted(storage.flush()) ends every step (no Persisted step)

VARIABLES
    node,       \* node[n]: the log core of n (a record, see Fresh)
    msgs,       \* messages in flight
    lastTerm,   \* the last term whose leader has been named (one leader each)
    proposed,   \* proposals accepted so far (model bound)
    crashes,    \* crashes so far (model bound)
    repairs,    \* Repair steps so far (model bound)
    \* History variable, written by Step only, read only by the invariants:
    \* <<index, entry, term>> for every entry a leader counted committed
    \* (SetCommit in AdvanceCommit), with the lowest term it was committed in.
    \* The entries acknowledged with ProposeResult::None are a subset.
    acked

vars == <<node, msgs, lastTerm, proposed, crashes, repairs, acked>>

-----------------------------------------------------------------------------
(* Values                                                                   *)

Roles == {"follower", "passive", "active"}   \* LogRole: Follower, LeaderPassive, LeaderActive
MsgTypes == {"SyncRequest", "SyncResponse", "Append", "AppendAck",
             "FetchRequest", "FetchResponse"}
Requests == {"SyncRequest", "Append", "FetchRequest"}

NoLsn == [term |-> 0, counter |-> 0]         \* kNoLsn
LsnLess(a, b) == a.term < b.term \/ (a.term = b.term /\ a.counter < b.counter)
LsnLeq(a, b) == LsnLess(a, b) \/ a = b
LsnMin(a, b) == IF LsnLess(a, b) THEN a ELSE b
SetMax(S) == CHOOSE x \in S : \A y \in S : y <= x
Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b

NoMatch == [p \in Node |-> 0]
NoMarker == -1                               \* LogMeta::repaired = std::nullopt
\* SyncProgress (commit_lsn[] is left out: only FinishSync's choice of next_len reads it).
NoSync == [responded |-> {}, last_lsn |-> [p \in Node |-> NoLsn], source |-> Nil,
           target |-> NoLsn, fetch_after |-> NoLsn, done |-> FALSE]

\* A freshly constructed core with an empty store.
Fresh == [role |-> "follower", term |-> 0, leader |-> Nil, entries |-> <<>>,
          commit_len |-> 0, durable_len |-> 0, matched_len |-> 0,
          sync_index |-> 0, sync |-> NoSync, match_len |-> NoMatch,
          meta_commit |-> NoLsn, repaired |-> NoMarker, nv |-> {}, failed |-> {}]

(* Messages: one record type with every body field; unused fields keep a    *)
(* default. Field names as in messages.hpp.                                 *)
Msg(type, f, to, t) ==
    [type |-> type, from |-> f, to |-> to, term |-> t, last_lsn |-> NoLsn,
     commit_lsn |-> NoLsn, prev_lsn |-> NoLsn, entries |-> <<>>, ok |-> FALSE,
     after_lsn |-> NoLsn, up_to_lsn |-> NoLsn, non_voting |-> FALSE]

SyncRequestMsg(f, to, t) == Msg("SyncRequest", f, to, t)
SyncResponseMsg(f, to, t, last) == [Msg("SyncResponse", f, to, t) EXCEPT !.last_lsn = last]
AppendMsg(f, to, t, prev, es, commit) ==
    [Msg("Append", f, to, t) EXCEPT !.prev_lsn = prev, !.entries = es, !.commit_lsn = commit]
AppendAckMsg(f, to, t, ok, last) == [Msg("AppendAck", f, to, t) EXCEPT !.ok = ok, !.last_lsn = last]
VotingAckMsg(f, to, t, last, nv) == [AppendAckMsg(f, to, t, TRUE, last) EXCEPT !.non_voting = nv]
FetchRequestMsg(f, to, t, after, upto) ==
    [Msg("FetchRequest", f, to, t) EXCEPT !.after_lsn = after, !.up_to_lsn = upto]
FetchResponseMsg(f, to, t, after, es) ==
    [Msg("FetchResponse", f, to, t) EXCEPT !.after_lsn = after, !.entries = es]

\* The result of a handler: the new state and the messages it sent.
R(s, out) == [st |-> s, out |-> out]
Same(s) == R(s, {})
Send(r, m) == [r EXCEPT !.out = @ \cup {m}]

-----------------------------------------------------------------------------
(* Observation (log.hpp)                                                    *)

LsnAt(s, len) == IF len = 0 THEN NoLsn ELSE s.entries[len]   \* lsn_at
LastLsn(s) == LsnAt(s, Len(s.entries))                          \* last_lsn()
CommitLsn(s) == LsnAt(s, s.commit_len)                          \* commit_lsn()
\* length_through: -1 stands for std::nullopt.
LenThrough(s, lsn) ==
    IF lsn = NoLsn THEN 0
    ELSE IF \E i \in 1..Len(s.entries) : s.entries[i] = lsn
         THEN CHOOSE i \in 1..Len(s.entries) : s.entries[i] = lsn
         ELSE -1
IsLeader(s) == s.role # "follower"
\* NonVoting(): repaired and acting on it (the planted CountRepaired ignores the marker).
NonVoting(s) == s.repaired # NoMarker /\ PlantedBug # "CountRepaired"

\* CONCLAVE_CHECK(cond, what).
Check(s, cond, what) == IF cond THEN s ELSE [s EXCEPT !.failed = @ \cup {what}]

StrictlyIncreasing(after, es) ==
    \A i \in 1..Len(es) : LsnLess(IF i = 1 THEN after ELSE es[i - 1], es[i])

\* ValidBatch (sync-point shape holds by construction: an entry is its LSN).
ValidBatch(s, after, es) ==
    StrictlyIncreasing(after, es) /\ \A i \in 1..Len(es) : es[i].term <= s.term

-----------------------------------------------------------------------------
(* Transitions (log.cpp, "Transitions")                                     *)

\* PersistMeta{term, commit_lsn()} is part of the step (durable before the sends).
AdoptTerm(s, t, ldr) ==
    Check([s EXCEPT !.term = t, !.leader = ldr, !.matched_len = 0,
                    !.meta_commit = CommitLsn(s)],
          t > s.term, "terms only grow")

\* FailPending and the timer cancels have no state here. Fields a follower
\* never reads (sync_, progress_, sync_index) are reset to fixed values.
StepDown(s) ==
    [s EXCEPT !.role = "follower", !.leader = Nil, !.sync = NoSync,
              !.match_len = NoMatch, !.nv = {}, !.sync_index = 0]

SetCommit(s, len) ==
    Check(Check([s EXCEPT !.commit_len = len],
                len >= s.commit_len, "the commit point never moves back"),
          len <= Len(s.entries), "only held entries commit")

Truncate(s, len) ==
    Check(Check([s EXCEPT !.entries = SubSeq(@, 1, len),
                          !.durable_len = Min(@, len),
                          !.matched_len = Min(@, len)],
                len >= s.commit_len, "a committed entry is never truncated"),
          ~(IsLeader(s) /\ s.sync.done), "a leader's log is append-only once it serves")

\* Merge(pos, es): skip entries already held, truncate the first conflicting
\* suffix, append the rest. Returns [st, end]: end = position after the last
\* of `es` (entries_.size() once something was appended).
RECURSIVE MergeFrom(_, _, _, _)
MergeFrom(s, pos, es, i) ==
    IF i > Len(es) THEN [st |-> s, end |-> pos]
    ELSE IF pos < Len(s.entries) /\ s.entries[pos + 1] = es[i]
         THEN MergeFrom(s, pos + 1, es, i + 1)
    ELSE LET s1 == IF pos < Len(s.entries) THEN Truncate(s, pos) ELSE s
             s2 == [s1 EXCEPT !.entries = @ \o SubSeq(es, i, Len(es))]
         IN [st |-> s2, end |-> Len(s2.entries)]
Merge(s, pos, es) == MergeFrom(s, pos, es, 1)

\* Largest prefix durable on `q` nodes: the leader's durable_len, the
\* followers' match_len (nth_element in AdvanceCommit). A repaired node
\* (the leader itself, or a follower whose last ok ack said non_voting)
\* counts 0.
StoredOn(n, s, q) ==
    LET lens == [p \in Node |->
                   IF p = n THEN (IF NonVoting(s) THEN 0 ELSE s.durable_len)
                   ELSE IF p \in s.nv /\ PlantedBug # "CountRepaired" THEN 0
                   ELSE s.match_len[p]]
    IN SetMax({k \in 0..Len(s.entries) : Cardinality({p \in Node : lens[p] >= k}) >= q})

AdvanceCommit(n, s) ==
    IF ~IsLeader(s) \/ ~s.sync.done THEN s
    ELSE LET q == IF PlantedBug = "CommitWithoutQuorum" /\ Quorum > 1 THEN Quorum - 1
                  ELSE Quorum
             stored == StoredOn(n, s, q)
             \* The leader's commit point is durable before a writer hears "committed"
             \* (the C++ SetCommit's PersistMeta while a proposal completes; the spec,
             \* which has no writers, persists every commit of a leader).
             sc == SetCommit(s, stored)
             s1 == IF stored > s.sync_index /\ stored > s.commit_len
                   THEN [sc EXCEPT !.meta_commit = CommitLsn(sc)] ELSE s
         IN IF s1.role = "passive" /\ s1.commit_len > s1.sync_index
            THEN [s1 EXCEPT !.role = "active"] ELSE s1

\* Appends the sync point (T, 0). The Appends FinishSync sends are the
\* Replicate steps that may follow it at once (see Replicate).
FinishSync(n, r) ==
    LET s == r.st
        sp == [term |-> s.term, counter |-> 0]
        s1 == Check(Check(s, s.role = "passive" /\ ~s.sync.done, "sync finishes once"),
                    LsnLess(LastLsn(s), sp), "no entry of a term above the leader's")
        \* sync_ is not read once done: its other fields are reset to fixed values.
        s2 == [s1 EXCEPT !.entries = Append(@, sp), !.sync_index = Len(s.entries),
                         !.sync = [NoSync EXCEPT !.done = TRUE], !.match_len = NoMatch,
                         !.nv = {}]
    IN [r EXCEPT !.st = AdvanceCommit(n, s2)]

SendFetch(n, r) ==
    Send(r, FetchRequestMsg(n, r.st.sync.source, r.st.term, r.st.sync.fetch_after,
                            r.st.sync.target))

\* With answers from a quorum (self included), adopt the most advanced log.
\* The C++ keeps itself on a tie with its own last LSN and otherwise takes
\* the lowest node index among the tied; the spec allows any tied node.
EvaluateSync(n, r) ==
    LET s == r.st IN
    IF s.sync.done \/ s.sync.source # Nil THEN {r}
    ELSE IF PlantedBug = "SkipSync" THEN {FinishSync(n, r)}
    ELSE IF Cardinality(s.sync.responded) < Quorum THEN {r}
    ELSE IF NonVoting(s)
    THEN \* Repaired: our log may lack committed entries and still end higher.
         \* Adopt the most advanced log among the others; ours only if it holds
         \* that log's last entry.
         LET s1 == [s EXCEPT !.sync.last_lsn[n] = LastLsn(s)]
             others == s1.sync.responded \ {n}
             lasts == {s1.sync.last_lsn[p] : p \in others}
             best == CHOOSE l \in lasts : \A l2 \in lasts : LsnLeq(l2, l)
             s2 == Check(s1, others # {}, "a repaired leader's sync quorum holds others")
         IN IF LenThrough(s2, best) >= 0
            THEN {FinishSync(n, [r EXCEPT !.st = s2])}
            ELSE {SendFetch(n, [r EXCEPT !.st = [s2 EXCEPT !.sync.source = b,
                                                           !.sync.target = best,
                                                           !.sync.fetch_after = CommitLsn(s2)]])
                  : b \in {p \in others : s2.sync.last_lsn[p] = best}}
    ELSE LET s1 == [s EXCEPT !.sync.last_lsn[n] = LastLsn(s)]
             lasts == {s1.sync.last_lsn[p] : p \in s1.sync.responded}
             best == CHOOSE l \in lasts : \A l2 \in lasts : LsnLeq(l2, l)
         IN IF LsnLeq(best, LastLsn(s1))
            THEN {FinishSync(n, [r EXCEPT !.st = s1])}   \* equal last LSNs mean equal logs
            ELSE {SendFetch(n, [r EXCEPT !.st = [s1 EXCEPT !.sync.source = b,
                                                           !.sync.target = best,
                                                           !.sync.fetch_after = CommitLsn(s1)]])
                  : b \in {p \in s1.sync.responded : s1.sync.last_lsn[p] = best}}

AbandonSource(n, r) ==
    LET src == r.st.sync.source
        s1 == [r.st EXCEPT !.sync.responded = @ \ {src}, !.sync.source = Nil]
    IN EvaluateSync(n, Send([r EXCEPT !.st = s1], SyncRequestMsg(n, src, s1.term)))

BecomeLeader(n, s, t) ==
    LET s0 == IF IsLeader(s) THEN StepDown(s) ELSE s
        s1 == AdoptTerm(s0, t, n)
        \* a repaired leader's own log is no answer
        s2 == [s1 EXCEPT !.role = "passive", !.match_len = NoMatch, !.nv = {},
                         !.sync = [NoSync EXCEPT !.responded = IF NonVoting(s1) THEN {}
                                                                ELSE {n},
                                                 !.last_lsn[n] = LastLsn(s1)]]
    IN EvaluateSync(n, R(s2, {SyncRequestMsg(n, p, t) : p \in Node \ {n}}))

\* Follower: acknowledge the durable part of what matches the leader. The C++
\* skips the ack when it would repeat the last one (acked_len) unless
\* `force`d; the spec always sends it (a repeat is a duplicate), so acked_len
\* is left out.
MaybeAck(n, r, force) ==
    LET s == r.st
        ack_len == Min(s.durable_len, s.matched_len)
    IN IF IsLeader(s) \/ s.leader = Nil THEN r
       ELSE Send(r, VotingAckMsg(n, s.leader, s.term, LsnAt(s, ack_len), NonVoting(s)))

\* A request from a leader of an older term: answer in our term.
RejectStale(n, s, m) ==
    CASE m.type = "SyncRequest" -> R(s, {SyncResponseMsg(n, m.from, s.term, LastLsn(s))})
      [] m.type = "Append" -> R(s, {AppendAckMsg(n, m.from, s.term, FALSE, NoLsn)})
      [] m.type = "FetchRequest" -> R(s, {FetchResponseMsg(n, m.from, s.term, m.after_lsn, <<>>)})

-----------------------------------------------------------------------------
(* Message handlers (log.cpp, "Message handlers")                          *)

\* The promise (term) was made durable by AdoptTerm before this answer leaves.
\* Repaired: no answer at all (its position must count in no sync quorum).
HandleSyncRequestR(n, s, m) ==
    IF NonVoting(s) THEN {Same(s)}
    ELSE {R(s, {SyncResponseMsg(n, s.leader, s.term, LastLsn(s))})}

HandleSyncResponseR(n, s, m) ==
    IF s.role # "passive" \/ s.sync.done THEN {Same(s)}
    ELSE EvaluateSync(n, Same([s EXCEPT !.sync.responded = @ \cup {m.from},
                                        !.sync.last_lsn[m.from] = m.last_lsn]))

HandleAppendR(n, s, m) ==
    LET start == LenThrough(s, m.prev_lsn) IN
    IF start < 0
    THEN {R(s, {AppendAckMsg(n, m.from, s.term, FALSE, NoLsn)})}   \* appends_rejected
    ELSE IF ~ValidBatch(s, m.prev_lsn, m.entries) THEN {Same(s)}  \* messages_dropped
    ELSE LET mg == Merge(s, start, m.entries)
             s1 == [mg.st EXCEPT !.matched_len = Max(@, mg.end)]
             \* Commit only what is known to match the leader.
             upto == LsnMin(m.commit_lsn, LsnAt(s1, s1.matched_len))
             len == LenThrough(s1, upto)
             s2 == IF ~LsnLess(CommitLsn(s1), m.commit_lsn) THEN s1
                   ELSE LET s1c == Check(s1, len >= 0,
                                         "the leader's commit point lies in the matched prefix")
                        IN IF len > s1.commit_len THEN SetCommit(s1c, len) ELSE s1c
         IN {MaybeAck(n, Same(s2), m.entries = <<>>)}

\* A refusal only moves next_len (Rewind) and re-sends: flow control, which
\* the spec's Replicate covers. It is consumed and changes nothing here.
\* An ok ack sets progress_[from].non_voting (the set nv) from its flag.
HandleAppendAckR(n, s, m) ==
    IF ~IsLeader(s) \/ ~s.sync.done \/ ~m.ok THEN {Same(s)}
    ELSE LET s0 == [s EXCEPT !.nv = IF m.non_voting THEN @ \cup {m.from} ELSE @ \ {m.from}]
             len == LenThrough(s0, m.last_lsn) IN
         IF len < 0 THEN {Same(s0)}   \* never sent in this term: messages_dropped
         ELSE {Same(AdvanceCommit(n, [s0 EXCEPT !.match_len[m.from] = Max(@, len)]))}

HandleFetchRequestR(n, s, m) ==
    LET start == LenThrough(s, m.after_lsn)
        count == IF start < 0 THEN 0
                 ELSE Cardinality({i \in start + 1 .. Min(Len(s.entries), start + MaxBatch) :
                                     LsnLeq(s.entries[i], m.up_to_lsn)})
        es == IF start < 0 THEN <<>> ELSE SubSeq(s.entries, start + 1, start + count)
    IN {R(s, {FetchResponseMsg(n, m.from, s.term, m.after_lsn, es)})}

HandleFetchResponseR(n, s, m) ==
    IF s.role # "passive" \/ s.sync.done \/ s.sync.source # m.from
       \/ m.after_lsn # s.sync.fetch_after
    THEN {Same(s)}   \* duplicate or late
    ELSE LET start == LenThrough(s, m.after_lsn) IN
         IF m.entries = <<>> \/ start < 0 \/ ~ValidBatch(s, m.after_lsn, m.entries)
            \/ LsnLess(s.sync.target, m.entries[Len(m.entries)])
         THEN AbandonSource(n, Same(s))   \* the source lost what it reported
         ELSE LET s1 == [Merge(s, start, m.entries).st
                             EXCEPT !.sync.fetch_after = m.entries[Len(m.entries)]]
              IN IF s1.sync.fetch_after = s1.sync.target
                 THEN {FinishSync(n, Same(Check(s1, LastLsn(s1) = s1.sync.target,
                                                "the adopted log ends at the sync target")))}
                 ELSE {SendFetch(n, Same(s1))}

-----------------------------------------------------------------------------
(* receive(): the common rules, then dispatch on the body (std::visit).    *)

Dispatch(n, s, m) ==
    CASE m.type = "SyncRequest" -> HandleSyncRequestR(n, s, m)
      [] m.type = "SyncResponse" -> HandleSyncResponseR(n, s, m)
      [] m.type = "Append" -> HandleAppendR(n, s, m)
      [] m.type = "AppendAck" -> HandleAppendAckR(n, s, m)
      [] m.type = "FetchRequest" -> HandleFetchRequestR(n, s, m)
      [] m.type = "FetchResponse" -> HandleFetchResponseR(n, s, m)

ReceiveR(n, s, m) ==
    LET request == m.type \in Requests IN
    IF m.term < s.term
    THEN IF request THEN {RejectStale(n, s, m)} ELSE {Same(s)}
    ELSE IF m.term > s.term
         THEN Dispatch(n, AdoptTerm(IF IsLeader(s) THEN StepDown(s) ELSE s, m.term,
                                    IF request THEN m.from ELSE Nil), m)
    ELSE IF request
         THEN IF IsLeader(s) \/ (s.leader # Nil /\ s.leader # m.from)
              THEN {Same(s)}   \* two_leader_alarms: never obey it
              ELSE Dispatch(n, [s EXCEPT !.leader = m.from], m)
    ELSE Dispatch(n, s, m)

-----------------------------------------------------------------------------
(* Steps. Step(n, r, consumed) installs the result r of a handler run by n, *)
(* removes the consumed messages, adds the sent ones, and records in       *)
(* `acked` what a leader newly counted committed.                          *)

RecordCommits(old, new) ==
    IF new.role = "follower" \/ new.commit_len <= old.commit_len THEN acked
    ELSE LET t == new.term
             fresh == {<<i, new.entries[i]>> : i \in old.commit_len + 1 .. new.commit_len}
             known(p) == \E x \in acked : x[1] = p[1] /\ x[2] = p[2] /\ x[3] <= t
         IN {x \in acked : <<x[1], x[2]>> \notin fresh \/ x[3] <= t}
            \cup {<<p[1], p[2], t>> : p \in {q \in fresh : ~known(q)}}

\* persisted(lsn) -> AdvanceCommit (leader) / MaybeAck (follower).
PersistedR(n, r) ==
    LET s1 == [r.st EXCEPT !.durable_len = Len(r.st.entries)]
    IN IF IsLeader(s1) THEN [r EXCEPT !.st = AdvanceCommit(n, s1)]
       ELSE MaybeAck(n, [r EXCEPT !.st = s1], FALSE)

\* With FlushEachStep, the driver calls persisted(storage.flush()) after
\* performing the actions of every input, as replication/README.md asks.
Flushed(n, r) ==
    IF FlushEachStep /\ r.st.durable_len < Len(r.st.entries) THEN PersistedR(n, r) ELSE r

\* Loss at send: the subsets of out that may reach the network.
Kept(out) ==
    LET lossy == {m \in out : m.type \in LossyTypes}
    IN {(out \ lossy) \cup k : k \in SUBSET lossy}

\* MaybeClearRepaired (run by Finish() at the end of every input, so also
\* after the driver's persisted(flush())): the marker goes once this node
\* holds, durably, a prefix of the log of the leader of its term T > R up to
\* that leader's commit point, of term T (a follower: matched with that
\* leader; a leader: synced). The new meta (without the marker) is durable
\* before the voting ack (or the commit counting itself) that follows.
MaybeClearRepaired(n, r) ==
    LET s == r.st IN
    IF s.repaired = NoMarker \/ s.term <= s.repaired \/ s.commit_len = 0
       \/ CommitLsn(s).term # s.term \/ s.durable_len < s.commit_len
    THEN r
    ELSE IF IF IsLeader(s) THEN ~s.sync.done
            ELSE s.leader = Nil \/ s.matched_len < s.commit_len
    THEN r
    ELSE LET s1 == [s EXCEPT !.repaired = NoMarker] IN
         IF IsLeader(s1) THEN [r EXCEPT !.st = AdvanceCommit(n, s1)]
         ELSE MaybeAck(n, [r EXCEPT !.st = s1], TRUE)

Step(n, r0, consumed) ==
    LET r == MaybeClearRepaired(n, Flushed(n, MaybeClearRepaired(n, r0))) IN
    /\ node' = [node EXCEPT ![n] = r.st]
    /\ \E kept \in Kept(r.out) : msgs' = (msgs \ consumed) \cup kept
    /\ acked' = RecordCommits(node[n], r.st)

Receive(m, keep) ==
    LET n == m.to IN
    /\ \E r \in ReceiveR(n, node[n], m) : Step(n, r, IF keep THEN {} ELSE {m})
    /\ UNCHANGED <<lastTerm, proposed, crashes, repairs>>

HandleSyncRequest(m, keep) == m.type = "SyncRequest" /\ Receive(m, keep)
HandleSyncResponse(m, keep) == m.type = "SyncResponse" /\ Receive(m, keep)
HandleAppend(m, keep) == m.type = "Append" /\ Receive(m, keep)
HandleAppendAck(m, keep) == m.type = "AppendAck" /\ Receive(m, keep)
HandleFetchRequest(m, keep) == m.type = "FetchRequest" /\ Receive(m, keep)
HandleFetchResponse(m, keep) == m.type = "FetchResponse" /\ Receive(m, keep)

\* on_leadership(snapshot naming n leader of t), t the next term: no node has
\* led t. Terms are named in increasing order: a node told late that it
\* leads an older term t (elections of t and t+1 overlapping) has received
\* nothing of a term >= t (else the snapshot is stale, a no-op), so nothing
\* it did depends on the later steps, and the same behaviour with its
\* OnLeadership moved before them is one of these.
OnLeadership(n) ==
    LET t == lastTerm + 1 IN
    /\ t <= MaxTerm
    /\ Paced => lastTerm <= proposed \/ \A p \in Node : ~IsLeader(node[p])
    /\ \E r \in BecomeLeader(n, node[n], t) : Step(n, r, {})
    /\ lastTerm' = t
    /\ UNCHANGED <<proposed, crashes, repairs>>

\* on_leadership(snapshot not naming n) while n leads: StepDown(LeadershipLost).
OnLeadershipLost(n) ==
    /\ IsLeader(node[n])
    /\ Paced => proposed >= lastTerm
    /\ Step(n, Same(StepDown(node[n])), {})
    /\ UNCHANGED <<lastTerm, proposed, crashes, repairs>>

\* propose(lsn from Elector::issue_lsn()): ACTIVE leader only (refusals
\* change nothing). The Appends it sends are Replicate steps.
Propose(n) ==
    LET s == node[n]
        lsn == [term |-> s.term, counter |-> LastLsn(s).counter + 1]
    IN /\ s.role = "active"
       /\ proposed < MaxProposals
       /\ Step(n, Same([s EXCEPT !.entries = Append(@, lsn)]), {})
       /\ proposed' = proposed + 1
       /\ UNCHANGED <<lastTerm, crashes, repairs>>

\* Replicate() / SendHeartbeat(): a synced leader sends the entries after
\* position `from` up to position `to` (1 to MaxBatch of them), or an empty
\* heartbeat after the follower's match_len, with its commit point. Any
\* slice starting at or after match_len (the C++ keeps next_len >= match_len),
\* at any moment: every choice flow control makes (FinishSync, propose,
\* HandleAppendAck, HeartbeatFired, peer_up, Rewind) is one of these.
Replicate(n, p, from, to) ==
    LET s == node[n] IN
    /\ IsLeader(s) /\ s.sync.done
    /\ p # n
    /\ 0 <= from /\ from <= to /\ to <= Len(s.entries) /\ to - from <= MaxBatch
    /\ from >= s.match_len[p]              \* next_len >= match_len
    /\ to = from => from = s.match_len[p]   \* SendHeartbeat
    /\ Step(n, R(s, {AppendMsg(n, p, s.term, LsnAt(s, from), SubSeq(s.entries, from + 1, to),
                               CommitLsn(s))}), {})
    /\ UNCHANGED <<lastTerm, proposed, crashes, repairs>>

\* SyncRetry timer (armed while PASSIVE and not synced): ask again.
SyncRetryFired(n) ==
    LET s == node[n]
        r0 == R(s, {SyncRequestMsg(n, p, s.term) : p \in Node \ (s.sync.responded \cup {n})})
    IN /\ s.role = "passive" /\ ~s.sync.done
       /\ Step(n, IF s.sync.source # Nil THEN SendFetch(n, r0) ELSE r0, {})
       /\ UNCHANGED <<lastTerm, proposed, crashes, repairs>>

\* persisted(storage.flush()) as a step of its own: a flush may lag the
\* sends of the batch before it (and a crash may fall in between).
Persisted(n) ==
    /\ ~FlushEachStep
    /\ node[n].durable_len < Len(node[n].entries)
    /\ Step(n, PersistedR(n, Same(node[n])), {})
       /\ UNCHANGED <<lastTerm, proposed, crashes, repairs>>

\* peer_down(p): while fetching from p, AbandonSource; once synced, the leader
\* stops counting p's acknowledgements (match_len[p] := 0): p may
\* have crashed and lost, in a repair, entries it acknowledged, and the
\* leader must not complete a commit quorum with them after it could know.
\* The reset is taken only once a Repair happened: before it no
\* acknowledged (durable) copy is ever lost, so a reset only delays commits
\* the acks already justify. (The other peer_up/peer_down effects move
\* flow-control state only; peer_up's reset is this one's after a reconnect.)
PeerDown(n, p) ==
    LET s == node[n] IN
    /\ \/ /\ s.role = "passive" /\ ~s.sync.done /\ s.sync.source = p
          /\ \E r \in AbandonSource(n, Same(s)) : Step(n, r, {})
       \/ /\ repairs > 0 /\ IsLeader(s) /\ s.sync.done /\ p # n /\ s.match_len[p] > 0
          /\ Step(n, Same([s EXCEPT !.match_len[p] = 0]), {})
    /\ UNCHANGED <<lastTerm, proposed, crashes, repairs>>

\* The process dies; a new core is built from storage.recover() (a prefix of
\* the log of at least durable_len entries, and the meta) and started.
Crash(n) ==
    LET s == node[n] IN
    /\ crashes < MaxCrashes
    /\ Paced => crashes < proposed
    /\ \E k \in IF CrashLosesTail THEN {s.durable_len} ELSE s.durable_len .. Len(s.entries) :
        LET es == SubSeq(s.entries, 1, k)
            t == IF k = 0 THEN s.term ELSE Max(s.term, es[k].term)
            c == Cardinality({i \in 1..k : LsnLeq(es[i], s.meta_commit)})
        IN Step(n, Same([Fresh EXCEPT !.term = t, !.entries = es, !.commit_len = c,
                                      !.durable_len = k, !.meta_commit = s.meta_commit,
                                      !.repaired = s.repaired, !.failed = s.failed]), {})
    /\ crashes' = crashes + 1
    /\ UNCHANGED <<lastTerm, proposed, repairs>>

\* The process dies, its log is found corrupt, `conclaved --repair` runs and
\* the node starts again (FileStorage::repair, node/src/repair.cpp). The
\* first bad record may be anywhere: the repair keeps any prefix of the
\* log, even one without entries that were durable, acknowledged and
\* committed. R = the highest term this node may have promised: its durable
\* term (>= every kept entry's term and any older marker) or above it, up
\* to the last term named (the elector's durable term, or --min-term); the
\* meta's term is raised to R, its commit point cut to the kept log.
Repair(n) ==
    LET s == node[n] IN
    /\ repairs < MaxRepairs
    /\ Paced => repairs < proposed
    /\ \E k \in 0..Len(s.entries), rt \in s.term..Max(s.term, lastTerm) :
        LET es == SubSeq(s.entries, 1, k)
            mc == LsnMin(s.meta_commit, LsnAt(s, k))
            c == Cardinality({i \in 1..k : LsnLeq(es[i], mc)})
        IN Step(n, Same([Fresh EXCEPT !.term = rt, !.entries = es, !.commit_len = c,
                                      !.durable_len = k, !.meta_commit = mc,
                                      !.repaired = rt, !.failed = s.failed]), {})
    /\ repairs' = repairs + 1
    /\ UNCHANGED <<lastTerm, proposed, crashes>>

-----------------------------------------------------------------------------
(* Specification                                                            *)

Init ==
    /\ node = [n \in Node |-> Fresh]
    /\ msgs = {}
    /\ lastTerm = 0
    /\ proposed = 0
    /\ crashes = 0
    /\ repairs = 0
    /\ acked = {}

Deliver(m, keep) ==
    \/ HandleSyncRequest(m, keep)
    \/ HandleSyncResponse(m, keep)
    \/ HandleAppend(m, keep)
    \/ HandleAppendAck(m, keep)
    \/ HandleFetchRequest(m, keep)
    \/ HandleFetchResponse(m, keep)

(* Next with one named operator per action, so that TLC's coverage report  *)
(* names each one (it cannot expand \E m \in msgs); tla/check.sh's coverage *)
(* gate strips the "Any" suffix. The same relation as Deliver + the rest.   *)
Keeps == IF Duplication THEN BOOLEAN ELSE {FALSE}
HandleSyncRequestAny == \E m \in msgs : \E keep \in Keeps : HandleSyncRequest(m, keep)
HandleSyncResponseAny == \E m \in msgs : \E keep \in Keeps : HandleSyncResponse(m, keep)
HandleAppendAny == \E m \in msgs : \E keep \in Keeps : HandleAppend(m, keep)
HandleAppendAckAny == \E m \in msgs : \E keep \in Keeps : HandleAppendAck(m, keep)
HandleFetchRequestAny == \E m \in msgs : \E keep \in Keeps : HandleFetchRequest(m, keep)
HandleFetchResponseAny == \E m \in msgs : \E keep \in Keeps : HandleFetchResponse(m, keep)
OnLeadershipLostAny(n) == StepDowns /\ OnLeadershipLost(n)
ReplicateAny(n, p) == \E from, to \in 0..Len(node[n].entries) : Replicate(n, p, from, to)

Next ==
    \/ HandleSyncRequestAny
    \/ HandleSyncResponseAny
    \/ HandleAppendAny
    \/ HandleAppendAckAny
    \/ HandleFetchRequestAny
    \/ HandleFetchResponseAny
    \/ \E n \in Node :
        \/ OnLeadership(n)
        \/ OnLeadershipLostAny(n)
        \/ Propose(n)
        \/ \E p \in Node : ReplicateAny(n, p)
        \/ SyncRetryFired(n)
        \/ Persisted(n)
        \/ \E p \in Node : PeerDown(n, p)
        \/ Crash(n)
        \/ Repair(n)

Spec == Init /\ [][Next]_vars

\* Model bound (state constraint).
Bounds == Cardinality(msgs) <= MaxMsgs

-----------------------------------------------------------------------------
(* Invariants                                                               *)

NodeOrNil == Node \cup {Nil}
LsnType == [term : 0..MaxTerm, counter : Nat]
IsLsn(l) == l \in LsnType

TypeOK ==
    /\ \A n \in Node :
        LET s == node[n] IN
        /\ s.role \in Roles
        /\ s.term \in 0..MaxTerm
        /\ s.leader \in NodeOrNil
        /\ \A i \in 1..Len(s.entries) : IsLsn(s.entries[i]) /\ s.entries[i].term <= s.term
        /\ StrictlyIncreasing(NoLsn, s.entries)
        /\ s.commit_len \in 0..Len(s.entries)
        /\ s.durable_len \in 0..Len(s.entries)
        /\ s.matched_len \in 0..Len(s.entries)
        /\ s.sync.responded \subseteq Node
        /\ s.sync.source \in NodeOrNil
        /\ \A p \in Node : s.match_len[p] \in 0..Len(s.entries)
        /\ IsLsn(s.meta_commit)
        /\ s.repaired \in {NoMarker} \cup 0..s.term   \* R <= the durable promise
        /\ s.nv \subseteq Node \ {n}
        /\ IsLeader(s) => s.leader = n
        /\ s.sync.done => IsLeader(s) /\ s.sync_index < Len(s.entries)
    /\ \A m \in msgs :
        /\ m.type \in MsgTypes
        /\ m.from \in Node /\ m.to \in Node /\ m.from # m.to
        /\ m.term \in 1..MaxTerm
        /\ m.non_voting \in BOOLEAN
        /\ m.non_voting => m.type = "AppendAck" /\ m.ok
    /\ lastTerm \in 0..MaxTerm
    /\ proposed \in 0..MaxProposals
    /\ crashes \in 0..MaxCrashes
    /\ repairs \in 0..MaxRepairs

\* The CONCLAVE_CHECKs mirrored above never fail.
ChecksHold == \A n \in Node : node[n].failed = {}

\* Log Matching: two logs holding one LSN hold it at the same index, after
\* the same prefix. Written as: no log holds an LSN twice, and an LSN of a's log
\* that b's log holds is at the same index of b's, after the same entries (for
\* TLC, one pass over a's log per pair instead of every pair of indices). The
\* two say the same: if A[i] = B[j], B holds A[i], so B[i] = A[i] = B[j], and B
\* holds no LSN twice, so i = j.
LogMatching ==
    \A a \in Node :
        LET A == node[a].entries IN
        /\ Cardinality({A[i] : i \in 1..Len(A)}) = Len(A)
        /\ \A b \in Node \ {a} :
               LET B == node[b].entries
                   inB == {B[j] : j \in 1..Len(B)}
               IN \A i \in 1..Len(A) :
                      A[i] \in inB => i <= Len(B) /\ \A k \in 1..i : A[k] = B[k]

\* Logs match up to the commit point: the committed prefixes of any two
\* nodes are prefixes of one history.
CommittedPrefixesAgree ==
    \A a, b \in Node :
        \A i \in 1..Min(node[a].commit_len, node[b].commit_len) :
            node[a].entries[i] = node[b].entries[i]

\* Everything ever committed is one history: one entry per index.
AckedIsOneHistory ==
    \A x, y \in acked : x[1] = y[1] => x[2] = y[2]

\* A committed entry is never lost or changed: any node whose commit point
\* reaches it holds it there.
AckedNeverLost ==
    \A x \in acked : \A n \in Node :
        node[n].commit_len >= x[1] =>
            x[1] <= Len(node[n].entries) /\ node[n].entries[x[1]] = x[2]

\* Leader Completeness: an ACTIVE leader's log holds every entry committed
\* in its term or before. (An ACTIVE leader of an older term, deposed
\* without knowing it, lacks what its successors commit.)
LeaderCompleteness ==
    \A x \in acked : \A n \in Node :
        node[n].role = "active" /\ node[n].term >= x[3] =>
            x[1] <= Len(node[n].entries) /\ node[n].entries[x[1]] = x[2]

\* check_invariants(): an ACTIVE leader's sync point is committed.
ActiveSyncPointCommitted ==
    \A n \in Node :
        LET s == node[n] IN
        s.role = "active" =>
            /\ s.sync.done
            /\ s.sync_index < s.commit_len
            /\ s.entries[s.sync_index + 1] = [term |-> s.term, counter |-> 0]

-----------------------------------------------------------------------------
(* Action properties                                                        *)

TermsNeverDecrease == [][\A n \in Node : node'[n].term >= node[n].term]_vars

\* The commit point never moves back while the process lives (a restarted
\* or repaired core starts from the meta's lower bound).
CommitNeverGoesBack ==
    [][crashes' = crashes /\ repairs' = repairs => \A n \in Node : node'[n].commit_len >= node[n].commit_len]_vars

\* A leader's log is append-only once it has started replicating in its term.
LeaderAppendOnly ==
    [][\A n \in Node :
        LET s == node[n]  s1 == node'[n] IN
        (IsLeader(s) /\ s.sync.done /\ IsLeader(s1) /\ s1.term = s.term) =>
            /\ Len(s.entries) <= Len(s1.entries)
            /\ SubSeq(s1.entries, 1, Len(s.entries)) = s.entries]_vars

=============================================================================
