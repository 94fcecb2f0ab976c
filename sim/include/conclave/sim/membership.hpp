// SPDX-License-Identifier: Apache-2.0
// Membership runs (the elector's slice): a 4-node cluster whose voter set changes the
// way the replicated log would change it (docs/membership.md), under faults, with the History
// invariants checked after every step (one leader per term, votes, quorums over the leader's own
// voters).
//
// The log is not simulated; a small model of it drives Elector::set_voters (Simulator::
// set_voters), keeping the properties of the design the elector's safety relies on:
//   - configurations C1, C2, ... are adjacent (one voter added or removed) and numbered by
//     version; C1 is every node but one (a learner);
//   - only an ACTIVE leader (one that led its term for a sync delay with a quorum of its voters
//     following it) appends the next change, only once the previous one is committed (R2, R3);
//     on becoming ACTIVE its version becomes the highest committed one (its sync commits it);
//   - a follower of the leader's term "receives" the pending entry at a random moment and then
//     knows the previous configuration committed (lemma L, R4); the change commits when a quorum
//     of the previous configuration holds it (R1), and takes effect on the leader at once;
//   - followers of an ACTIVE leader learn its configuration at random later moments (commit
//     points travel with heartbeats; one random node, the laggard, learns much later), so nodes
//     hold different versions for a while; a crashed
//     node restarts with the one it had (its own log, R9); a leader that loses its term drops
//     the pending change (a later leader appends it again).
// The operator asks for the next change 200-900 ms after a commit, so changes spread over the
// faults, and for none after `fault_window`: the tail is calm, and every run must end with a
// leader followed by a majority (liveness, asserted by tests/sim/membership_test.cpp). The fault
// schedule (partitions, two-against-two ones favoured, crashes, pauses, cut links) ends by
// `fault_window`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "conclave/replication/config.hpp"
#include "conclave/sim/simulator.hpp"
#include "conclave/sim/stability.hpp"

namespace conclave::sim {

struct MembershipRunOptions {
    std::uint64_t seed = 1;
    elector::PlantedBug planted_bug = elector::PlantedBug::None;
    /// Membership through the log (run_log_membership_seed) only: the cluster size (4 or 5) and
    /// a bug planted in the log core.
    std::size_t nodes = 4;
    replication::PlantedLogBug log_bug = replication::PlantedLogBug::None;
    /// Through the log only: the deferred commit point (LogSimOptions::defer_meta).
    bool defer_meta = true;
    /// Through the log only: node-table growth (docs/membership.md §8). The last of the `nodes`
    /// nodes is in nobody's table at the start (the others' tables, logs and electors hold
    /// nodes - 1; C0 is those nodes) and is not started; the operator's first change after C0
    /// adds it as a learner with a configuration whose table names all `nodes`, and once that
    /// has committed somewhere the node joins (Simulator::join, as `conclaved --join`). From
    /// then on it takes part in the cycle like any other node (promoted, removed, added back).
    bool joiner = false;
    /// The node-table check's canary (SimOptions::skip_elector_growth).
    bool skip_elector_growth = false;
    /// The operator's next request comes [gap_min, gap_max] after a commit: changes spread over
    /// the faults.
    Millis gap_min{200};
    Millis gap_max{900};
    /// Configuration changes after C1 (alternately: promote the non-voter, remove a voter;
    /// through the log: after C0, remove a voter, add it back as a learner, promote it).
    std::uint32_t changes = 6;
    /// Faults happen in [settle, fault_window); the run ends at fault_window + tail.
    Millis settle{800};
    Millis fault_window{6000};
    Millis tail{2000};
    std::size_t episodes = 8;
    /// Chance, per 10 ms tick, that a follower of an ACTIVE leader learns its configuration (or
    /// receives the pending change). Low: versions spread out.
    std::uint32_t catch_up_ppm = 60'000;
    /// The same for one random node of the run (a laggard: a slow disk or a lossy link), so
    /// that a node is often versions behind when elections happen.
    std::uint32_t laggard_catch_up_ppm = 1'000;
    std::ostream* trace = nullptr;
};

struct MembershipRunResult {
    std::uint64_t seed = 0;
    std::optional<Violation> violation;
    Millis violation_at{};
    std::uint64_t committed_version = 0;      // highest version committed by the end
    std::uint64_t set_voters_calls = 0;       // configurations given to nodes
    std::uint64_t stale_config_refusals = 0;  // StaleConfig answers (votes and scouting) sent
    std::uint64_t not_a_voter_refusals = 0;   // NotAVoter answers sent
    /// The leader a majority of the nodes follows at the end (faults over for `tail`), if any.
    std::optional<NodeId> leader_at_end;
    /// Every node at the end: role, term, leader, configuration version and voters (diagnosis).
    std::string end_state;
    SimStats stats;
    // Membership through the log only.
    std::uint64_t config_proposals = 0;  // configuration entries appended by ACTIVE leaders
    /// A fresh client entry proposed at the end (at the leader of leader_at_end, once its log is
    /// ACTIVE) was acknowledged within log_liveness_ms.
    bool fresh_committed = false;
    Millis fresh_committed_after{};
    // Node-table growth (MembershipRunOptions::joiner).
    std::optional<Millis> joined_at;  // when the new node was started (Simulator::join)
    /// Committed configurations that made the new node a voter (seen by the operator: the
    /// highest active configuration of the live logs, every 10 ms).
    std::uint64_t joiner_promotions = 0;
};

MembershipRunResult run_membership_seed(const MembershipRunOptions& options);

/// Membership through the real log core: `nodes` nodes each running the elector and
/// replication::ReplicatedLog (SimOptions::log, membership on: LogConfig::decode_configuration),
/// the simulator handing every NotifyMembership to the node's elector (set_voters). The first
/// ACTIVE leader writes the bootstrap configuration C0 (every node a voter); then an operator,
/// on whichever node is the ACTIVE leader, proposes the next single change with propose_config,
/// in a cycle: remove a random voter (the leader too), add it back as a learner, promote it;
/// `changes` changes after C0, 200-900 ms after the previous one committed, none after
/// `fault_window`. The client workload runs throughout; the fault schedule is the model runs'.
/// With `joiner` (the default options' choice) the table grows: C0 is every node but the last,
/// the first change adds the last as a learner with the whole table, and once that committed it
/// joins (Simulator::join) and takes part in the cycle.
/// Checked after every step: History (one leader per term, votes and quorums over the leader's
/// own voters, ...), LogHistory (committed entries never lost, prefixes agree, the cores'
/// check_invariants(), ...), and that no elector refuses a configuration its log made active
/// (MembershipRefused), and that each node's elector and log core hold its table (NodeTable). At
/// the end (faults over for `tail`): leader_at_end (a leader followed by
/// a majority of its voters) and fresh_committed (a fresh entry commits within 3 s).
MembershipRunResult run_log_membership_seed(const MembershipRunOptions& options);

/// The options membership runs through the log use by default (conclave-sim --membership --log,
/// tests/sim/membership_log_test.cpp): 18 changes, 20-200 ms apart, with a joiner (the table
/// grows from nodes - 1 to nodes at the first change after C0). A version-fence bug needs a
/// node several versions behind when an election happens; the real log spreads commits within a
/// heartbeat, so changes must come faster than in the model runs (with 6 changes 200-900 ms
/// apart the planted IgnoreConfigVersion was caught in 3 of 1,000 seeds; with these, ~4 %).
MembershipRunOptions log_membership_options(std::uint64_t seed);

}  // namespace conclave::sim
