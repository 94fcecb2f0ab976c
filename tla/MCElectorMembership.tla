\* SPDX-License-Identifier: Apache-2.0
-------------------------- MODULE MCElectorMembership --------------------------
(***************************************************************************)
(* Model-checking wrapper for the membership slice of Elector.tla (issue   *)
(* 18): MCElector's schedule, constraint and view, and a history of three   *)
(* configurations in the shape of docs/membership.md, section 7.2:         *)
(*   C0 = Node \ {Learner}   (Learner is a learner)                         *)
(*   C1 = Node               (Learner promoted)                            *)
(*   C2 = Node \ {Removed}   (Removed removed)                              *)
(* (A .cfg file cannot write a sequence, hence the two constants.)         *)
(***************************************************************************)
EXTENDS MCElector

CONSTANTS
    Learner,  \* the learner of C0, promoted by C1
    Removed   \* the voter C2 removes

PromoteRemoveConfigs == <<Node \ {Learner}, Node, Node \ {Removed}>>

\* ElectorMembershipRemove.cfg: one change, Removed removed (the leader, when it leads).
RemoveConfigs == <<Node, Node \ {Removed}>>

\* Membership models: only the nodes that vote in every configuration of the history are
\* interchangeable.
StableVoters == {n \in Node : \A k \in 1..Len(Configs) : n \in Configs[k]}
MembershipSymmetry == Permutations(StableVoters)

\* Membership models: the view keeps the VotersChanged step-downs (read by a canary).
MembershipView == <<View, {e \in events : e[1] = "voterschanged"}>>

\* The mutation model's schedule (ElectorIgnoreConfigVersion.cfg): the configuration steps
\* are scripted to the shape of docs/membership.md section 7.2 and come first; the elections
\* are then explored exhaustively. Every node but Removed takes C1 (committed by a quorum of
\* C0) and activates it; every node but Removed takes C2 (committed by a quorum of C1), which
\* only Learner activates; Removed never learns anything. Until Learner is at the last
\* version every step is a configuration step, after it none is. (Without a script the 4-node
\* model grows past 230 k states at BFS depth 12, with or without the configurations first.)
ConfigStep == held' # held \/ \E n \in Node : node'[n].config_version # node[n].config_version
Section72Schedule ==
    /\ Schedule
    /\ held'[Removed] = held[Removed]
    /\ node'[Removed].config_version = node[Removed].config_version
    /\ \A n \in Node \ {Learner} : node'[n].config_version <= MaxVersion - 1
    /\ IF node[Learner].config_version < MaxVersion THEN ConfigStep ELSE ~ConfigStep

\* Membership (ElectorMembership.cfg): a voter at a newer configuration version refused a
\* candidate (StaleConfig), in scouting or in an election.
CanaryNoStaleConfigRefusal == ~\E m \in msgs : m.refusal = "stale-config"
\* A learner or removed node refused to support or vote (NotAVoter).
CanaryNoNotAVoterRefusal == ~\E m \in msgs : m.refusal = "not-a-voter"
\* A leader stepped down because it is no longer a voter (Reason::VotersChanged).
CanaryNoVotersChangedStepDown == ~\E e \in events : e[1] = "voterschanged"
\* CatchesUpTerm is taken: a leaderless follower took a stale candidate's term.
CanaryNoTermCatchUp == ~\E e \in events : e[1] = "catchup"
\* A node that is not a voter of the first configuration (a promoted learner) won.
CanaryPromotedNeverLeads == \A e \in elected : e[2] \in CfgVoters(0)
\* A leader was elected over the last configuration of the history.
CanaryNoLeaderOfLastConfig ==
    ~\E n \in Node : node[n].role = "leader" /\ node[n].config_version = MaxVersion
=============================================================================
