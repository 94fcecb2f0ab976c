------------------------------ MODULE MCElector ------------------------------
(* Model-checking wrapper for Elector: symmetry and the state constraint.  *)
EXTENDS Elector, TLC

Symmetry == Permutations(Node)

Constraint == Bounds
=============================================================================
