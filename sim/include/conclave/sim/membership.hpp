// Membership runs (issue 18, the elector's slice): a 4-node cluster whose voter set changes the
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

#include "conclave/sim/simulator.hpp"
#include "conclave/sim/stability.hpp"

namespace conclave::sim {

struct MembershipRunOptions {
    std::uint64_t seed = 1;
    PlantedBug planted_bug = PlantedBug::None;
    /// Configuration changes after C1 (alternately: promote the non-voter, remove a voter).
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
};

MembershipRunResult run_membership_seed(const MembershipRunOptions& options);

}  // namespace conclave::sim
