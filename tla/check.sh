#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the TLC models of the specs and checks each gives the expected result.
#   tla/check.sh             the CI set, then the action-coverage gate
#   tla/check.sh --all       the CI set and the bigger models (times in tla/README.md)
#   tla/check.sh --group G [--group H] [--coverage-out FILE]
#                            the CI entries of these groups (CTest tla_models_<group>); FILE gets
#                            their coverage rows when every result is the expected one
#   tla/check.sh --gate FILE...  the coverage gate over the rows of the group runs (CTest
#                            tla_models_coverage)
#   tla/check.sh MODEL...    only these entries (no coverage gate)
# An entry is CFG[+CANARY]; CFG+CANARY runs CFG with the extra invariant CANARY, which TLC must
# violate (or, when CFG runs in the same invocation as a must-pass exhaustive entry, CFG's run must
# reach a state that violates CANARY: the canary is folded into it, see below). Prints distinct
# states, depth, time and CPU time per model, then a coverage table: for
# every action of Elector.tla, ReplicatedLog.tla, Membership.tla, Identity.tla, Lease.tla and
# StoreLease.tla, the model that reached the most new (distinct) states through it, counting only
# the must-pass models of coverage_models below (canary and planted-bug runs prove that a check
# bites, never that an action is explored).
# Exit 0 when every result is the expected one (and, for the gate, every action was taken), 1
# otherwise, 77 when TLC is not installed (CTest reports the test as skipped).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/tlc-env.sh"

# entry : module : expected result : TLC mode
#   expected: "ok", or the invariant / action property TLC must report violated, or
#             "temporal" (a liveness property must be violated)
#   mode:     "bfs" (exhaustive) or "sim:NUM:DEPTH" (TLC -simulate num=NUM -depth DEPTH)
ci_models=(
  # safety, exhaustive: elections from Init (no leader is expanded at these bounds)
  "ElectorSafety.cfg:MCElector:ok:bfs"
  "ElectorLoss.cfg:MCElector:ok:bfs"
  "ElectorStopPeerDown.cfg:MCElector:ok:bfs"
  # the leader half, exhaustive, from an established leader (MCElector!LeaderSpec): its term
  # (heartbeats, acks, LSNs, check-quorum, transfers begun), then the next term (transfers
  # completed, a stale leader beside the newer one, HeartbeatResponse, higher-term step-down)
  "ElectorLeaderLife.cfg:MCElector:ok:bfs"
  "ElectorTransfer.cfg:MCElector:ok:bfs"
  # two scouting rounds in one process life: late replies to the older round change nothing
  "ElectorRounds.cfg:MCElector:ok:bfs"
  # canaries of the leader half: the exhaustive models above must reach each of these. A canary
  # found deep (ElectorTransfer's) runs as random behaviours of the same model with a fixed seed:
  # TLC stops at the first violation, after a few thousand states where a breadth-first search
  # explores every state above the canary's depth (README.md, "Canaries by simulation")
  "ElectorLeaderLife.cfg+CanaryLsnBelow2:MCElector:CanaryLsnBelow2:bfs"
  "ElectorLeaderLife.cfg+CanaryNoCheckQuorumStepDown:MCElector:CanaryNoCheckQuorumStepDown:bfs"
  "ElectorTransfer.cfg+CanaryNoTransfer:MCElector:CanaryNoTransfer:sim:2000:30"
  "ElectorTransfer.cfg+CanaryNoTerm1BesideNewer:MCElector:CanaryNoTerm1BesideNewer:sim:8000:40"
  "ElectorTransfer.cfg+CanaryNoNewerHeartbeatAtStaleLeader:MCElector:CanaryNoNewerHeartbeatAtStaleLeader:sim:8000:40"
  "ElectorTransfer.cfg+CanaryNoHigherTermStepDown:MCElector:CanaryNoHigherTermStepDown:sim:2000:30"
  # the leader's own term with LeaseSteps (the leader lease's clock decisions as
  # nondeterminism), exhaustive, and its canary: the lease check steps a leader down
  "ElectorLeaseLeaderLife.cfg:MCElector:ok:bfs"
  "ElectorLeaseLeaderLife.cfg+CanaryNoLeaseExpiry:MCElector:CanaryNoLeaseExpiry:bfs"
  # ---- Elector.tla with the leader lease (LeaseSteps; docs/tla-elector.md, "The leader
  # lease") ----
  # elections from Init, and an established leader through its failure, exhaustive: every
  # lease decision (Elector.tla's named actions) reaches new states; a canary per decision
  "ElectorLeaseSafety.cfg:MCElector:ok:bfs"
  "ElectorLeaseCrash.cfg:MCElector:ok:bfs"
  "ElectorLeaseLinkLoss.cfg:MCElector:ok:bfs"
  "ElectorLeaseSafety.cfg+CanaryNoPromiseRefusal:MCElector:CanaryNoPromiseRefusal:bfs"
  "ElectorLeaseSafety.cfg+CanaryNoLeaseExpiry:MCElector:CanaryNoLeaseExpiry:bfs"
  # (with cessions lost at send, a cession reaches only states that a follower's heartbeat check
  # reaches first: the leader's own term without that loss takes the step)
  "ElectorLeaseLeaderLife.cfg+CanaryNoPromiseEndedByCession:MCElector:CanaryNoPromiseEndedByCession:bfs"
  "ElectorLeaseCrash.cfg+CanaryNoStartPromiseRefusal:MCElector:CanaryNoStartPromiseRefusal:bfs"
  "ElectorLeaseCrash.cfg+CanaryNoStartPromiseWait:MCElector:CanaryNoStartPromiseWait:bfs"
  "ElectorLeaseLinkLoss.cfg+CanaryNoPromiseEndedByLink:MCElector:CanaryNoPromiseEndedByLink:bfs"
  # planted (the C++'s names): a follower supports a newer term within its promise (Lease.tla's
  # VoteInsidePromise); a follower's own closure of its leader's link ends its promise (Lease.tla's
  # EndPromiseOnLocalClose)
  "ElectorLeaseSkipStickyLeader.cfg:MCElector:PromiseKept:bfs"
  "ElectorLeasePromiseEndsOnLocalClose.cfg:MCElector:PromiseKept:bfs"
  # ---- end of Elector.tla with the leader lease ----
  # a leader's whole life with faults: random behaviours of a fixed budget (the exhaustive
  # runs are in --all and do not finish in CI time, see README.md)
  "ElectorLeaderFaults.cfg:MCElector:ok:sim:1000:60"
  "ElectorCorroborate.cfg:MCElector:ok:sim:1000:60"
  "ElectorLiveness.cfg:MCElectorLive:ok:bfs"
  # liveness mutant: TLC must find a fair behaviour (a lasso) that never gets one leader after
  # the fault (MCElectorLive bounds by guards, so a livelock at the bound is a lasso)
  "ElectorLiveNeverDropLeader.cfg:MCElectorLive:temporal:bfs"
  # liveness from an established leader that crashes and stays down, with split votes
  # (MCElectorLive, EstablishedInit); its start state is reachable from Init (canary)
  "ElectorLiveLeader.cfg:MCElectorLive:ok:bfs"
  # the same with a priority-0 survivor: the other one leads; and its liveness mutant
  "ElectorLiveLeaderPriority.cfg:MCElectorLive:ok:bfs"
  "ElectorLivePriorityNeverDropLeader.cfg:MCElectorLive:temporal:bfs"
  "ElectorLiveReachable.cfg:MCElectorLive:CanaryNoEstablishedLeader:bfs"
  # liveness mutants found only when the leader stays down and an election can be lost
  "ElectorLiveRefuseWhileRemembering.cfg:MCElectorLive:temporal:bfs"
  "ElectorLiveNoRetry.cfg:MCElectorLive:temporal:bfs"
  # liveness after a partition that isolates the established leader, then heals once
  # (MCElectorLive, Partition): a blackhole (nobody is told); the kind where both sides see
  # PeerDown is in --all (too big for CI, README.md); the mutants run on the blackhole kind
  "ElectorLivePartitionBlackhole.cfg:MCElectorLive:ok:bfs"
  "ElectorLivePartitionNeverDropLeader.cfg:MCElectorLive:temporal:bfs"
  "ElectorLivePartitionRefuseWhileRemembering.cfg:MCElectorLive:temporal:bfs"
  "LogSafety.cfg:MCReplicatedLog:ok:bfs"
  "LogSafety.cfg+CanaryNoClientEntryTerm2Committed:MCReplicatedLog:CanaryNoClientEntryTerm2Committed:sim:2000:50"
  "LogStaleLeader.cfg:MCReplicatedLog:ok:bfs"
  "LogStaleLeader.cfg+CanaryNoStaleActiveBesideNewer:MCReplicatedLog:CanaryNoStaleActiveBesideNewer:bfs"
  # the log at 3 terms with crashes, loss, duplication, step-downs and flush lag: random
  # behaviours of a fixed budget (the exhaustive model does not finish, see README.md)
  "LogDeep.cfg:MCReplicatedLog:ok:sim:300:60"
  # the same with up to 2 Repair steps (conclaved --repair), and its canaries: the
  # runs reach a repaired node lacking a committed entry, and a cleared marker
  # (MaybeClearRepaired taken: depth 120, which half as many behaviours keep at the old cost;
  # at depth 60 no run cleared one, README.md, "Repair")
  "LogRepairDeep.cfg:MCReplicatedLog:ok:sim:150:120"
  "LogRepairDeep.cfg+CanaryRepairedHoldsAllCommitted:MCReplicatedLog:CanaryRepairedHoldsAllCommitted:sim:300:60"
  "LogRepairDeep.cfg+CanaryMarkerNeverCleared:MCReplicatedLog:CanaryMarkerNeverCleared:sim:300:120"
  # canaries: the leader-life model must reach each of these
  # (random behaviours with a fixed seed: TLC stops at the first violation)
  "ElectorLeaderFaults.cfg+CanaryRestartedNeverLeads:MCElector:CanaryRestartedNeverLeads:sim:1000:60"
  "ElectorCorroborate.cfg+CanaryNoCorroboration:MCElector:CanaryNoCorroboration:sim:1000:60"
  # negative models and planted bugs: TLC must find each
  "ElectorDurableLost.cfg:MCElector:OneLeaderPerTerm:bfs"
  "ElectorDoubleVote.cfg:MCElector:OneVotePerTerm:bfs"
  "ElectorMinorityQuorum.cfg:MCElector:LeaderHadQuorum:bfs"
  "ElectorSkipStickyLeader.cfg:MCElector:StickyLeaderHonoured:bfs"
  "ElectorCountStaleScoutingReplies.cfg:MCElector:ScoutingRepliesFromThisRound:bfs"
  # priorities: a priority-0 node never stands nor leads (transfers included); the planted
  # IgnorePriority must be found
  "ElectorPriority.cfg:MCElector:ok:bfs"
  "ElectorIgnorePriority.cfg:MCElector:PriorityZeroNeverLeads:bfs"
  # leader mutants of the spec (ElectorTransfer.cfg with the bug): two nodes act as leader
  # with the same fencing token
  "ElectorKeepLeadingOnHeartbeatResponse.cfg:MCElector:FencingTokensUnique:bfs"
  "ElectorKeepLeadingOnNewerHeartbeat.cfg:MCElector:FencingTokensUnique:bfs"
  "LogCommitWithoutQuorum.cfg:MCReplicatedLog:LeaderCompleteness:bfs"
  # (random behaviours, seed 1: found within 3,568 states, where the search takes 27 k)
  "LogSkipSync.cfg:MCReplicatedLog:LeaderCompleteness:sim:3000:50"
  # repair (conclaved --repair): the planted CountRepaired (a repaired node counts in
  # quorums) must be found
  "LogCountRepaired.cfg:MCReplicatedLog:LeaderCompleteness:bfs"
  # membership (docs/membership.md): the 2-change model (a learner promoted, a voter
  # removed) by random behaviours (exhaustive, and shrink 4 -> 3: --all); canaries; the
  # version-fence mutation
  "MembershipSafety.cfg:MCMembership:ok:sim:300:30"
  # the join model must pass too: it is the must-pass model that takes ProposeAddLearner
  "MembershipJoin.cfg:MCMembership:ok:bfs"
  "MembershipJoin.cfg+CanaryNoPromotion:MCMembership:CanaryNoPromotion:bfs"
  "MembershipShrink.cfg+CanaryNoConfigCommitted:MCMembership:CanaryNoConfigCommitted:bfs"
  "MembershipShrink.cfg+CanaryNoLeaderAfterRemoval:MCMembership:CanaryNoLeaderAfterRemoval:bfs"
  "MembershipIgnoreConfigVersion.cfg:MCMembership:OneLeaderPerTerm:bfs"
  # the planted SkipOwnTermCommit (not a bug in this design, no violation: --all) is reached: a
  # leader appends a change before its sync point commits (docs/membership.md, 7.4)
  "MembershipSkipOwnTermCommit.cfg+CanaryNoChangeBeforeOwnTermCommit:MCMembership:CanaryNoChangeBeforeOwnTermCommit:bfs"
  # membership in Elector.tla itself (the C++ elector's slice): 4 nodes, the history
  # C0 -> learner promoted -> a voter removed, learnt late or never; random behaviours of the
  # whole model (terms <= 2, scouting, check-quorum); the section 7.2 shape scripted, then every
  # election (exhaustive), its canaries and the planted IgnoreConfigVersion (two leaders)
  "ElectorMembership.cfg:MCElectorMembership:ok:sim:100:60"
  # one change removing the leader (3 nodes): it steps down (VotersChanged), BFS to the canary
  # CatchesUpTerm taken (a leaderless follower takes a stale candidate's term; TLC seed 1:
  # found in the 178th behaviour)
  "ElectorMembership.cfg+CanaryNoTermCatchUp:MCElectorMembership:CanaryNoTermCatchUp:sim:300:60"
  "ElectorMembershipRemove.cfg+CanaryNoVotersChangedStepDown:MCElectorMembership:CanaryNoVotersChangedStepDown:bfs"
  "ElectorMembershipScripted.cfg:MCElectorMembership:ok:bfs"
  "ElectorMembershipScripted.cfg+CanaryNoStaleConfigRefusal:MCElectorMembership:CanaryNoStaleConfigRefusal:bfs"
  "ElectorMembershipScripted.cfg+CanaryPromotedNeverLeads:MCElectorMembership:CanaryPromotedNeverLeads:bfs"
  "ElectorIgnoreConfigVersion.cfg:MCElectorMembership:OneLeaderPerTerm:bfs"
  # ---- node identity (Identity.tla; README.md, "Node identity (Identity.tla)") ----
  # the guard plus quarantine (FreshNeedsMajority), as the C++ builds them: exhaustive, canaries
  "IdentitySafety.cfg:Identity:ok:bfs"
  "IdentitySafety.cfg+CanaryNoRefusal:Identity:CanaryNoRefusal:bfs"
  "IdentitySafety.cfg+CanaryNoReadmission:Identity:CanaryNoReadmission:bfs"
  "IdentitySafety.cfg+CanaryWipedNeverVotes:Identity:CanaryWipedNeverVotes:bfs"
  # planted: the guard without quarantine, peers that admit any incarnation, a repair without a
  # running quorum
  "IdentityResidual.cfg:Identity:OneLeaderPerTerm:bfs"
  "IdentityNoGuard.cfg:Identity:OneLeaderPerTerm:bfs"
  "IdentityRepairNoQuorum.cfg:Identity:OneLeaderPerTerm:bfs"
  # ---- end of node identity ----
  # ---- leader lease (Lease.tla; docs/tla-lease.md) ----
  # the lease under the drift bound, from a just-elected leader: exhaustive, canaries
  "LeaseSafety.cfg:Lease:ok:bfs"
  "LeaseSafety.cfg+CanaryNoLease:Lease:CanaryNoLease:bfs"
  "LeaseSafety.cfg+CanaryNoSecondLease:Lease:CanaryNoSecondLease:sim:2000:30"
  "LeaseSafety.cfg+CanaryNoTransferLease:Lease:CanaryNoTransferLease:sim:2000:30"
  # the state where the equivalent mutant GrantAnyTransfer grants is reached, and with it
  # LeaseExclusive holds with it (LeaseGrantAnyTransfer.cfg, --all and scripts/mutation-check.py;
  # docs/tla-lease.md, "Transfer proposals inside a promise")
  "LeaseSafety.cfg+CanaryNoForeignTransferInsidePromise:Lease:CanaryNoForeignTransferInsidePromise:sim:2000:30"
  # planted: a lease not shortened by the drift, a vote inside the promise, a promise kept by
  # the leader after the connection closed, a promise ended by a connection the follower closed
  # itself, a promise forgotten on restart
  "LeaseIgnoreDrift.cfg:Lease:LeaseExclusive:bfs"
  "LeaseVoteInsidePromise.cfg:Lease:LeaseExclusive:bfs"
  "LeaseKeepPromiseOnPeerDown.cfg:Lease:LeaseExclusive:bfs"
  "LeaseEndPromiseOnLocalClose.cfg:Lease:LeaseExclusive:bfs"
  "LeaseForgetPromiseOnRestart.cfg:Lease:LeaseExclusive:bfs"
  # outside the stated model: clocks beyond the drift bound break the correct spec
  "LeaseDriftBeyond.cfg:Lease:LeaseExclusive:bfs"
  # ---- end of leader lease ----
  # ---- a holder's lease on a TTL store (StoreLease.tla; README.md, "Store lease") ----
  # exhaustive, its canaries, and the planted NoFlight (the lease counted from the answer's
  # receipt, not from the renewal's send)
  "StoreLeaseSafety.cfg:StoreLease:ok:bfs"
  "StoreLeaseSafety.cfg+CanaryNoLease:StoreLease:CanaryNoLease:bfs"
  "StoreLeaseSafety.cfg+CanaryNoSecondHolder:StoreLease:CanaryNoSecondHolder:bfs"
  "StoreLeaseNoFlight.cfg:StoreLease:LeaseExclusive:bfs"
  # ---- end of store lease ----
)
extra_models=(
  # the random leader-life canaries that the exhaustive ElectorLeaderLife / ElectorTransfer
  # canaries of the CI set now show
  "ElectorLeaderFaults.cfg+CanaryNoTransfer:MCElector:CanaryNoTransfer:sim:1000:60"
  "ElectorLeaderFaults.cfg+CanaryLsnBelow2:MCElector:CanaryLsnBelow2:sim:1000:60"
  "ElectorLeaderFaults.cfg+CanaryNoCheckQuorumStepDown:MCElector:CanaryNoCheckQuorumStepDown:sim:1000:60"
  # LogSafety plus one Repair step, exhaustive (does not finish in CI time: README.md, "Repair")
  "LogRepair.cfg:MCReplicatedLog:ok:bfs"
  "LogRepair.cfg+CanaryMarkerNeverCleared:MCReplicatedLog:CanaryMarkerNeverCleared:bfs"
  "ElectorLivePartitionPeerDown.cfg:MCElectorLive:ok:bfs"
  "ElectorLeader.cfg:MCElector:ok:bfs"
  "ElectorLeader.cfg+CanaryNoStaleLeader:MCElector:CanaryNoStaleLeader:bfs"
  "ElectorLeaderFaults.cfg:MCElector:ok:bfs"
  "MembershipSafety.cfg:MCMembership:ok:bfs"
  "MembershipShrink.cfg:MCMembership:ok:bfs"
  # membership: a rule TLC shows redundant in the committed-configuration design (no
  # violation; docs/membership.md, section 7); kept runnable so that the finding can be re-checked
  "MembershipSkipOwnTermCommit.cfg:MCMembership:ok:bfs"
  # membership in Elector.tla: the leader-removal model, random behaviours (exhaustive: does
  # not finish, README.md "Membership in Elector.tla")
  "ElectorMembershipRemove.cfg:MCElectorMembership:ok:sim:300:60"
  # the leader lease with two real ticks, and from Init, exhaustive (README.md, "Leader lease
  # (Lease.tla)")
  "LeaseDeep.cfg:Lease:ok:bfs"
  "LeaseInit.cfg:Lease:ok:bfs"
  # the equivalent mutant GrantAnyTransfer: LeaseSafety's bounds, must pass (docs/tla-lease.md)
  "LeaseGrantAnyTransfer.cfg:Lease:ok:bfs"
  # Elector.tla with LeaseSteps and the spec-only ForgetPromiseOnRestart: no invariant can break
  # (the clock may always answer that a start promise ended), but the start-promise canaries that
  # ElectorLeaseCrash must violate hold (docs/tla-elector.md, "The leader lease")
  "ElectorLeaseForgetPromiseOnRestart.cfg+CanaryNoStartPromiseWait:MCElector:ok:bfs"
  "ElectorLeaseForgetPromiseOnRestart.cfg+CanaryNoStartPromiseRefusal:MCElector:ok:bfs"
)
# Every action of each spec's Next, by name (the "Any" wrappers are credited to the action).
elector_actions=(HandleScoutingRequest HandleScoutingResponse HandleElectionProposal
  HandleElectionResponse HandleLeaderHeartbeat HandleHeartbeatAck HandleHeartbeatResponse
  HandleLeadershipCession InitialWaitFired RandomWaitFired ScoutingResultFired ElectionResultFired
  HeartbeatBroadcastFired HeartbeatCheckFired CheckQuorumFired PeerUp TransferLeadership IssueLsn
  Restart Start Crash Stop PeerDown LocalClose SetVoters HandleAppend
  # the lease's decisions, named (LeaseSteps; taken by the ElectorLease* models)
  LeaseExpiry PromiseRefusal StartPromiseRefusal StartPromiseWait PromiseEndedByCession
  PromiseEndedByLink)
membership_actions=(HandleElectionResponse HandleSyncResponse HandleAppend ProposeAddLearner
  ProposePromote ProposeRemove)
log_actions=(HandleSyncRequest HandleSyncResponse HandleAppend HandleAppendAck HandleFetchRequest
  HandleFetchResponse OnLeadership OnLeadershipLost Propose Replicate SyncRetryFired Persisted
  PeerDown Crash Repair)
# ---- node identity: the actions of Identity.tla's Next (its own gate, below) ----
identity_actions=(Handshake Timeout Grant AdoptTerm BecomeLeader Crash Restart Wipe
  RepairWithMinTerm)
# ---- end of node identity ----
# ---- leader lease: the actions of Lease.tla's Next (its own gate, below) ----
lease_actions=(Tick Stand Vote BecomeLeader HeartbeatSend HeartbeatAck LeaseExpireStepDown
  TransferBegin HandleTransfer PeerDown LocalClose Crash Restart)
# ---- end of leader lease ----
# ---- store lease: the actions of StoreLease.tla's Next ----
store_actions=(Tick Send StoreReceive StoreExpire HolderReceive LoseStep)

# Action coverage is counted only in these must-pass models, which together take every action of
# every spec's Next (exhaustively where a model does, else in random behaviours). Counting costs
# about half again a plain run's CPU, and many times it in a liveness model's temporal check, so
# the other models run plain. When a change leaves an action to none of them, the gate fails:
# then add a must-pass model that takes it.
coverage_models=(
  ElectorLeaseLinkLoss.cfg ElectorLeaseCrash.cfg ElectorStopPeerDown.cfg
  ElectorMembershipScripted.cfg ElectorLeaderFaults.cfg LogRepairDeep.cfg MembershipSafety.cfg
  MembershipJoin.cfg IdentitySafety.cfg LeaseSafety.cfg StoreLeaseSafety.cfg)
counts_coverage() { [[ " ${coverage_models[*]} " == *" $1 "* ]]; }

# JIT: a canary or planted-bug run mostly ends within seconds, before the JVM's optimizing
# compiler pays back the CPU it spends: those runs use the quick compiler alone
# (-XX:TieredStopAtLevel=1, about half the CPU of a 4-second run), except the ones below, which
# run long enough for the optimizing compiler to win (a 20-second run takes a quarter more CPU
# without it). Must-pass runs keep the full JIT, except the short ones below.
long_negative_runs=(
  IdentityRepairNoQuorum.cfg IdentityResidual.cfg IdentityNoGuard.cfg LogCountRepaired.cfg
  MembershipIgnoreConfigVersion.cfg ElectorKeepLeadingOnHeartbeatResponse.cfg
  ElectorDurableLost.cfg ElectorLiveNeverDropLeader.cfg LeaseForgetPromiseOnRestart.cfg
  LeaseKeepPromiseOnPeerDown.cfg LogStaleLeader.cfg+CanaryNoStaleActiveBesideNewer
  ElectorTransfer.cfg+CanaryNoTerm1BesideNewer ElectorTransfer.cfg+CanaryNoNewerHeartbeatAtStaleLeader)
# Must-pass runs that end within about 8 CPU seconds gain too (ElectorRounds 6.6 -> 5.6 CPU s).
short_must_pass_runs=(
  ElectorRounds.cfg ElectorPriority.cfg ElectorLiveLeader.cfg ElectorLiveLeaderPriority.cfg
  ElectorLeaderFaults.cfg ElectorCorroborate.cfg ElectorMembership.cfg LogDeep.cfg
  LogRepairDeep.cfg MembershipSafety.cfg StoreLeaseSafety.cfg)
quick_jit() {  # quick_jit NAME EXPECT
  if [[ "$2" == ok ]]; then
    [[ " ${short_must_pass_runs[*]} " == *" $1 "* ]]
  else
    [[ " ${long_negative_runs[*]} " != *" $1 "* ]]
  fi
}

# The CI set is run in groups, each a CTest of its own (tla_models_<group>) that ctest -j can run
# beside the others; the coverage gate (CTest tla_models_coverage) reads the rows they leave.
groups=(elector leader live log membership identity lease store)
group_of() {  # group_of CFG MODULE
  local cfg=$1 module=$2
  case "$module:$cfg" in
    Identity:*) echo identity ;;
    Lease:*) echo lease ;;
    StoreLease:*) echo store ;;
    MCReplicatedLog:*) echo log ;;
    MCElectorLive:*) echo live ;;
    MCMembership:* | MCElectorMembership:*) echo membership ;;
    *:ElectorLease*) echo lease ;;
    *:ElectorLeaderLife* | *:ElectorTransfer* | *:ElectorKeepLeading* \
      | *:ElectorLeaderFaults* | *:ElectorCorroborate*) echo leader ;;
    *) echo elector ;;
  esac
}

usage() {
  echo "usage: check.sh [--all | --group G... [--coverage-out FILE] | --gate FILE... | MODEL...]" >&2
  echo "  groups: ${groups[*]}" >&2
  exit 2
}
gate=0
models=()
cov_out=""
gate_files=()
if [[ $# -eq 0 ]]; then
  models=("${ci_models[@]}"); gate=1
elif [[ $# -eq 1 && "$1" == --all ]]; then
  models=("${ci_models[@]}" "${extra_models[@]}"); gate=1
elif [[ "$1" == --gate ]]; then
  shift; gate_files=("$@"); [[ ${#gate_files[@]} -gt 0 ]] || usage; gate=1
elif [[ "$1" == --group ]]; then
  want_groups=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --group) [[ $# -ge 2 && " ${groups[*]} " == *" $2 "* ]] || usage; want_groups+=("$2"); shift 2 ;;
      --coverage-out) [[ $# -ge 2 ]] || usage; cov_out=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  for entry in "${ci_models[@]}"; do
    IFS=: read -r name module _ <<<"$entry"
    [[ " ${want_groups[*]} " == *" $(group_of "${name%%+*}" "$module") "* ]] && models+=("$entry")
  done
else
  for want in "$@"; do
    found=0
    for entry in "${ci_models[@]}" "${extra_models[@]}"; do
      [[ "${entry%%:*}" == "$(basename "$want")" ]] && { models+=("$entry"); found=1; }
    done
    [[ $found -eq 1 ]] || { echo "check.sh: unknown model: $want" >&2; exit 2; }
  done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/conclave-tlc.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$here"/*.tla "$here"/*.cfg "$work/"

# Class-data sharing: a run dumps the classes it loaded into an archive, which every later run
# (of this invocation, of the other groups, of later invocations) maps instead of loading the
# jar's classes again: each JVM start costs less CPU. The archive is kept beside the other
# temporary files, named by the jar's size and time; it is moved into place whole, so that
# groups starting together never read a half-written one (they just do without it).
tlc_cmd=("${TLC_CMD[@]}")
cds=""
if [[ "$(basename "${TLC_CMD[0]}")" == java && -n "${TLA2TOOLS_JAR:-}" ]]; then
  cds="${TMPDIR:-/tmp}/conclave-tlc-$(id -u)-$(stat -c %s-%Y "$TLA2TOOLS_JAR").jsa"
fi
jvm_archive() {
  tlc_cmd=("${TLC_CMD[@]}")
  [[ -n "$cds" ]] || return 0
  if [[ -s "$cds" ]]; then
    tlc_cmd=("${TLC_CMD[0]}" -XX:SharedArchiveFile="$cds" "${TLC_CMD[@]:1}")
  elif [[ ! -e "$work/tlc.jsa" ]]; then
    tlc_cmd=("${TLC_CMD[0]}" -XX:ArchiveClassesAtExit="$work/tlc.jsa" "${TLC_CMD[@]:1}")
  fi
}
jvm_archive_done() {
  [[ -n "$cds" && -s "$work/tlc.jsa" && ! -e "$cds" ]] && mv "$work/tlc.jsa" "$cds" 2>/dev/null
  return 0
}

# wrapper_module NAME MODULE CFG COUNT [CANARY...]: the wrapper module of a must-pass run that
# counts action coverage (COUNT=1) or reaches canaries for their own entries (see the loop
# below), or both. Registers are per worker; ASSUME, evaluated before the workers start, sets
# every worker's. Coverage: 0 per action; a state beyond a CONSTRAINT of CFG is checked but not
# explored, so it is not counted. Canaries: FALSE until a state TLC checks violates the canary.
wrapper_module() {
  local name=$1 module=$2 cfg=$3 count=$4 constraint c
  shift 4
  constraint=$(awk '/^CONSTRAINTS?([ \t]|$)/ { f = 1; sub(/^CONSTRAINTS?/, ""); print; next }
                    /^[^ \t]/ { f = 0 } f' "$cfg" | tr -s ' \t\n' ' ' | sed 's/^ *//; s/ *$//; s/ \+/ \/\\ /g')
  printf '%s\n' "---- MODULE $name ----" "EXTENDS $module, TLC, Naturals, Sequences"
  if [[ $count -eq 1 ]]; then
    printf '%s\n' \
      "CoverageKey(a) == \"s:\" \\o a.location.module \\o \"!\" \\o a.name \\o \"!\"" \
      "                  \\o ToString(a.location.beginLine) \\o \"!\" \\o ToString(a.location.beginColumn)" \
      "ASSUME \\A a \\in TLCGet(\"spec\").actions \\cup TLCGet(\"spec\").inits : TLCSet(CoverageKey(a), 0)" \
      "CoverageCount ==" \
      "    IF ~(${constraint:-TRUE}) THEN TRUE" \
      "    ELSE LET k == CoverageKey(TLCGet(\"action\")) IN TLCSet(k, TLCGet(k) + 1)" \
      "CoverageSum(f) == LET S[i \\in 0..Len(f)] == IF i = 0 THEN 0 ELSE S[i - 1] + f[i] IN S[Len(f)]" \
      "CoverageRows ==" \
      "    LET all == TLCGet(\"all:named\") IN" \
      "    \\A r \\in {[m |-> a.location.module, n |-> a.name, k |-> CoverageKey(a)] : a \\in TLCGet(\"spec\").actions} :" \
      "        PrintT(<<\"action-coverage\", r.m, r.n, CoverageSum(all[r.k])>>)"
  else
    printf '%s\n' "CoverageRows == TRUE"
  fi
  printf '%s\n' "Reached(k) == \\E w \\in DOMAIN TLCGet(\"all:named\")[k] : TLCGet(\"all:named\")[k][w]"
  for c in "$@"; do
    printf '%s\n' "ASSUME TLCSet(\"s:canary!$c\", FALSE)" \
      "CanaryWitness_$c == IF TLCGet(\"s:canary!$c\") \\/ $c THEN TRUE ELSE TLCSet(\"s:canary!$c\", TRUE)"
  done
  printf '%s\n' "CanaryRows == TRUE"
  for c in "$@"; do
    printf '%s\n' "    /\\ PrintT(<<\"canary-reached\", \"$c\", Reached(\"s:canary!$c\")>>)"
  done
  printf '%s\n' "WrapperRows == CoverageRows /\\ CanaryRows" "===="
}

# Canaries folded into their model's run: a canary entry CFG+CANARY whose CFG runs in this
# invocation as a must-pass exhaustive entry of the same module is not a TLC run of its own. The
# must-pass run checks every state the canary's run would (same model, every state, where the
# canary's run stops at its first violation) and records, per canary, whether a state it checked
# violates it (wrapper_module); the canary's entry passes when one did. That saves a JVM, a
# parse and a search per canary. With a tlc command other than java, every canary runs alone.
declare -A folded_into=() fold_base=() fold_of=()
if [[ -n "$cds" ]]; then
  for entry in "${models[@]}"; do
    IFS=: read -r name module expect mode _ <<<"$entry"
    [[ "$expect" == ok && "$mode" == bfs && "$name" != *+* ]] && fold_base["$name:$module"]=1
  done
  for entry in "${models[@]}"; do
    IFS=: read -r name module expect _ <<<"$entry"
    base=${name%%+*}
    if [[ "$name" == *+* && -n "${fold_base[$base:$module]:-}" ]]; then
      folded_into[$base]="${folded_into[$base]:-} ${name#*+}"
      fold_of[$name]=$base
    fi
  done
fi

failed=0
: >"$work/coverage.txt"
total_start=$(date +%s)
total_cpu=0
TIMEFORMAT='%U %S'
for entry in "${models[@]}"; do
  IFS=: read -r name module expect mode num depth_bound <<<"$entry"
  [[ -n "${fold_of[$name]:-}" ]] && continue  # reported after the loop
  cfg=${name%%+*}
  run=${name//+/-}
  run=${run%.cfg}
  if [[ "$name" == *+* ]]; then  # a canary: the model plus one invariant that must break
    canary=${name#*+}
    { cat "$work/$cfg"; printf '\nINVARIANT %s\n' "$canary"; } >"$work/$run.cfg"
    cfg="$run.cfg"
  fi
  log="$work/$run.log"
  workers=$(tlc_workers)
  args=(-workers "$workers" -noGenerateSpecTE -metadir "$work/states-$run" -config "$cfg")
  # random behaviours: one worker, so that the fixed seed gives the same behaviours every run
  [[ "$mode" == sim ]] && args=(-workers 1 "${args[@]:2}" -simulate "num=$num" -depth "$depth_bound" -seed 1)
  jvm_archive
  if [[ "$(basename "${tlc_cmd[0]}")" == java ]] && quick_jit "$name" "$expect"; then
    tlc_cmd=("${tlc_cmd[0]}" -XX:TieredStopAtLevel=1 "${tlc_cmd[@]:1}")
  fi
  # Action coverage (the gate's rows) only where it counts: a model that must pass. With java, a
  # wrapper module counts, per action, the new states it reached: an invariant of its own reads
  # the action that produced each state TLC checks (TLCGet("action"), which needs TLC's extended
  # state) and adds one to that action's register, states beyond the model's CONSTRAINT left out;
  # a postcondition prints the sums over the workers. That costs a fraction of TLC's own
  # per-action counters (tlc2.TLCGlobals.coverage=1) and of -coverage, which counts every
  # expression (bench/README.md, "TLC"). With another tlc command, -coverage prints the counts.
  # The same wrapper reaches the canaries folded into this run (above the loop).
  folded=${folded_into[$name]:-}
  count=0
  [[ "$expect" == ok && -n "$cds" ]] && counts_coverage "$name" && count=1
  if [[ $count -eq 1 || -n "$folded" ]]; then
    cov_module="Wrapper$run"
    # shellcheck disable=SC2086  # the folded canaries, one word each
    wrapper_module "$cov_module" "$module" "$work/$cfg" "$count" $folded >"$work/$cov_module.tla"
    {
      cat "$work/$cfg"
      printf '\n'
      [[ $count -eq 1 ]] && printf 'INVARIANT CoverageCount\n'
      for c in $folded; do printf 'INVARIANT CanaryWitness_%s\n' "$c"; done
      printf 'POSTCONDITION WrapperRows\n'
    } >"$work/$run-wrapped.cfg"
    args=("${args[@]/#$cfg/$run-wrapped.cfg}")
    [[ $count -eq 1 ]] && tlc_cmd=("${tlc_cmd[0]}" -Dtlc2.tool.impl.Tool.TLCStateMutExt=true "${tlc_cmd[@]:1}")
    module=$cov_module
  elif [[ "$expect" == ok ]] && counts_coverage "$name"; then
    args+=(-coverage 60)
  fi
  start=$(date +%s)
  # CPU seconds (user + system) of the run, which a busy machine hardly changes
  cpu=$( { time (cd "$work" && "${tlc_cmd[@]}" "${args[@]}" "$module.tla" >"$log" 2>&1; \
                 echo $? >"$work/rc") ; } 2>&1 | awk '{ printf "%.0f", $1 + $2 }')
  rc=$(cat "$work/rc")
  jvm_archive_done
  secs=$(( $(date +%s) - start ))
  total_cpu=$(( total_cpu + cpu ))
  rm -rf "$work/states-$run"
  distinct=$(grep -o '[0-9,]* distinct states found' "$log" | tail -1 | cut -d' ' -f1)
  depth=$(grep -o 'depth of the complete state graph search is [0-9]*' "$log" | grep -o '[0-9]*$')
  if [[ "$mode" == sim ]]; then
    # simulation: states checked (not distinct) and behaviours (traces) generated
    distinct="$(grep -o '[0-9,]* states checked' "$log" | tail -1 | cut -d' ' -f1)chk"
    depth="$(grep -o '[0-9,]* traces generated' "$log" | tail -1 | cut -d' ' -f1)beh"
  fi
  violated=$(grep -o -m1 '\(Invariant\|Temporal property\|Action property\|Property\) [A-Za-z_0-9]* is violated' "$log" \
             | head -1)
  # a liveness violation: "Temporal property P was violated." (or, older TLC, "Temporal
  # properties were violated."); TLC has then printed a lasso (a prefix and a loop or stuttering)
  [[ -z "$violated" ]] && grep -q 'Temporal propert[a-z]* [A-Za-z_0-9]* *w[a-z]* violated' "$log" \
      && violated="Temporal properties were violated"
  if [[ "$expect" == ok ]]; then
    if [[ $rc -eq 0 ]] && grep -q 'No error has been found\|Finished in' "$log" && [[ -z "$violated" ]] \
        && ! grep -q '^Error:' "$log"; then
      result="ok"
    else
      result="UNEXPECTED: ${violated:-TLC exit $rc}"
    fi
  else
    want_line="$expect is violated"
    [[ "$expect" == temporal ]] && want_line="Temporal properties were violated"
    if [[ "$violated" == *"$want_line"* ]]; then
      result="ok (expected violation: $expect)"
      depth="trace$(grep -c '^State [0-9]*:' "$log")"  # length of the counterexample
    else
      result="UNEXPECTED: expected $expect to be violated, got ${violated:-no violation (TLC exit $rc)}"
    fi
  fi
  [[ "$mode" == sim ]] && workers=1
  printf '%-58s distinct=%-9s depth=%-7s time=%4ss cpu=%4ss w=%s  %s\n' "$name" "${distinct:-?}" \
      "${depth:-?}" "$secs" "$cpu" "$workers" "$result"
  if [[ "$result" != ok* ]]; then
    failed=1
    grep -E 'Error|violated|Exception' "$log" | head -5
    cp "$log" "${TMPDIR:-/tmp}/conclave-tlc-$run.log"
    echo "  full log: ${TMPDIR:-/tmp}/conclave-tlc-$run.log"
  fi
  # The coverage lines of the final report: "<Action line .. of module M>: distinct:generated".
  # Only a model that must pass counts: a canary or planted-bug run stops at its first
  # violation and proves that the check bites, not that an action is explored.
  [[ "$expect" == ok ]] && awk -v run="$name" -v mode="$mode" '
    /^The coverage statistics/ { n = 0; delete rows; next }
    /^<[A-Za-z_0-9]+ line [0-9]+, col 1 to .* of module (Elector|ReplicatedLog|Membership|Identity|Lease|StoreLease)( \([0-9 ]+\))?>: [0-9]+:[0-9]+$/ {
      act = substr($1, 2); mod = $0; sub(/.* of module /, "", mod); sub(/[ >].*/, "", mod)
      cnt = $NF; split(cnt, c, ":"); sub(/Any$/, "", act)
      rows[++n] = mod " " act " " run " " c[2] " " c[1] " " (mode == "bfs" ? "exhaustive" : "random")
    }
    END { for (i = 1; i <= n; i++) print rows[i] }' "$log" >>"$work/coverage.txt"
  # the postcondition's lines: <<"action-coverage", "Module", "Action", new states>>, one per
  # action (its parameter contexts share a register), summed per action; TLC's generated steps
  # are not counted that way ("-" in the table's "taken")
  [[ "$expect" == ok ]] && awk -v run="$name" -v mode="$mode" '
    /^<<"action-coverage", "(Elector|ReplicatedLog|Membership|Identity|Lease|StoreLease)", / {
      line = $0; gsub(/[<>",]/, " ", line); split(line, f, " ")
      act = f[3]; sub(/Any$/, "", act); key = f[2] " " act
      if (!(key in d)) order[++n] = key
      d[key] += f[4]
    }
    END { for (i = 1; i <= n; i++) { split(order[i], k, " ")
            print k[1] " " k[2] " " run " - " d[order[i]] " " (mode == "bfs" ? "exhaustive" : "random") } }' \
    "$log" >>"$work/coverage.txt"
done
# the folded canaries: each passes when its model's run reached it
for entry in "${models[@]}"; do
  IFS=: read -r name _ expect _ <<<"$entry"
  base=${fold_of[$name]:-}
  [[ -n "$base" ]] || continue
  base_log="$work/${base%.cfg}.log"
  if grep -q "^<<\"canary-reached\", \"$expect\", TRUE>>" "$base_log" 2>/dev/null; then
    result="ok (reached in the run of $base)"
  else
    result="UNEXPECTED: the run of $base never reached a state violating $expect"
    failed=1
  fi
  printf '%-58s distinct=%-9s depth=%-7s time=%4ss cpu=%4ss w=-  %s\n' "$name" - folded 0 0 "$result"
done
if [[ ${#models[@]} -gt 0 ]]; then
  # wall-clock start and end (UTC, seconds), so that the span of CTest's groups running side by
  # side can be read from their logs
  echo "total time: $(( $(date +%s) - total_start ))s, cpu ${total_cpu}s, $(( ${#models[@]} - ${#fold_of[@]} )) runs, ${#fold_of[@]} canaries folded into them (from $(date -u -d "@$total_start" +%T) to $(date -u +%T) UTC)"
fi
if [[ -n "$cov_out" ]]; then
  # a group run of CTest: its coverage rows for the gate, or none when a result was unexpected
  if [[ $failed -eq 0 ]]; then cp "$work/coverage.txt" "$cov_out"; else rm -f "$cov_out"; fi
fi
[[ $gate -eq 1 ]] || exit $failed

# Coverage: per action, the model with the most distinct states reached through it. The gate
# reads the rows of this run, or (--gate) those the group runs left: every group's must be there.
if [[ ${#gate_files[@]} -gt 0 ]]; then
  for f in "${gate_files[@]}"; do
    [[ -f "$f" ]] || { echo "coverage gate: no rows in $f (its group failed or did not run)"; failed=1; }
  done
  cat "${gate_files[@]}" >"$work/coverage.txt" 2>/dev/null
fi
echo
printf '%-14s %-26s %-52s %10s %9s\n' spec action "model (most distinct states)" taken distinct
cov_failed=0
check_spec() {
  local mod=$1; shift
  local act best
  for act in "$@"; do
    # all models: sum nothing, pick the model where the action reached most distinct states
    best=$(awk -v m="$mod" -v a="$act" '$1 == m && $2 == a' "$work/coverage.txt" \
           | sort -k5,5nr -k4,4nr | head -1)
    if [[ -z "$best" ]]; then
      printf '%-14s %-26s %-52s %10s %9s  %s\n' "$mod" "$act" "-" 0 0 "NOT IN ANY MODEL RUN"
      cov_failed=1
      continue
    fi
    read -r _ _ model taken distinct kind <<<"$best"
    note=""
    if [[ "$distinct" -eq 0 ]]; then
      note="NEVER TAKEN"
      cov_failed=1
    fi
    printf '%-14s %-26s %-52s %10s %9s  %s\n' "$mod" "$act" "$model ($kind)" "$taken" "$distinct" "$note"
  done
}
check_spec Elector "${elector_actions[@]}"
check_spec ReplicatedLog "${log_actions[@]}"
check_spec Membership "${membership_actions[@]}"
check_spec Identity "${identity_actions[@]}"
check_spec Lease "${lease_actions[@]}"
check_spec StoreLease "${store_actions[@]}"
# An action the lists above do not know (a new one) is a failure too: add it to the list.
unknown=$(awk '{print $1 " " $2}' "$work/coverage.txt" | sort -u | while read -r mod act; do
  case "$mod" in
    ReplicatedLog) list="${log_actions[*]}" ;;
    Membership) list="${membership_actions[*]}" ;;
    Identity) list="${identity_actions[*]}" ;;
    Lease) list="${lease_actions[*]}" ;;
    StoreLease) list="${store_actions[*]}" ;;
    *) list="${elector_actions[*]}" ;;
  esac
  [[ " $list " == *" $act "* ]] || echo "$mod $act"
done)
for ignore in Init LeaderInit; do unknown=$(grep -v " $ignore\$" <<<"$unknown"); done
if [[ -n "$unknown" ]]; then
  echo "actions not in check.sh's lists (add them): $unknown"
  cov_failed=1
fi
if [[ $cov_failed -eq 1 ]]; then
  echo "COVERAGE GATE FAILED: an action of Next was not taken by any model of this run"
  failed=1
else
  echo "coverage gate: every action of each spec's Next taken (Elector, ReplicatedLog, Membership,"
  echo "  Identity, Lease, StoreLease)"
fi
exit $failed
