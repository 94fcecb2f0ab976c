\* SPDX-License-Identifier: Apache-2.0
--------------------------- MODULE MCReplicatedLog ---------------------------
(* Model-checking wrapper for ReplicatedLog: symmetry and the state         *)
(* constraint.                                                               *)
EXTENDS ReplicatedLog, TLC

Symmetry == Permutations(Node)

Constraint == Bounds

\* Canaries of the repair models (tla/check.sh runs CFG+CANARY: TLC must VIOLATE each, which
\* shows the model reaches what the repair gates are for):
\* a repaired node lacks an entry a leader counted committed (its repair lost it) ...
CanaryRepairedHoldsAllCommitted ==
    \A n \in Node : node[n].repaired # NoMarker =>
        \A x \in acked : x[1] <= Len(node[n].entries) /\ node[n].entries[x[1]] = x[2]
\* ... and every marker is cleared again (MaybeClearRepaired) after a repair.
CanaryMarkerNeverCleared == repairs > 0 => \E n \in Node : node[n].repaired # NoMarker

\* Canaries of the leader half (must be VIOLATED by LogSafety.cfg and LogDeep.cfg): an ACTIVE
\* leader of an older term still acts beside an ACTIVE leader of a newer one ...
CanaryNoStaleActiveBesideNewer ==
    ~\E a, b \in Node : /\ node[a].role = "active" /\ node[b].role = "active"
                        /\ node[a].term < node[b].term
\* ... and a client entry (counter >= 1; a sync point has counter 0) of a term >= 2 is
\* committed.
CanaryNoClientEntryTerm2Committed ==
    ~\E x \in acked : x[2].term >= 2 /\ x[2].counter >= 1
=============================================================================
