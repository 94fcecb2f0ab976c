--------------------------- MODULE MCReplicatedLog ---------------------------
(* Model-checking wrapper for ReplicatedLog: symmetry and the state         *)
(* constraint.                                                               *)
EXTENDS ReplicatedLog, TLC

Symmetry == Permutations(Node)

Constraint == Bounds
=============================================================================
