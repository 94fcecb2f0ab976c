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
=============================================================================
