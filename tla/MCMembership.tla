\* SPDX-License-Identifier: Apache-2.0
---------------------------- MODULE MCMembership ----------------------------
(* Model-checking wrapper for Membership: symmetry over the initial voters  *)
(* (configuration 0 treats them alike, and any voter may be removed), the   *)
(* state constraint, and a VIEW that leaves out a leader's `match` while    *)
(* the node does not lead: no action reads it then, and winning an election  *)
(* resets it.                                                                *)
EXTENDS Membership, TLC

Symmetry == Permutations(InitVoters)

Constraint == Bounds

View == <<term, votedFor, role, lst, log, commit,
          [n \in Node |-> IF role[n] = "L" THEN match[n] ELSE [m \in Node |-> 0]],
          elected, committed>>
=============================================================================
