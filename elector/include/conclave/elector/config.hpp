// SPDX-License-Identifier: Apache-2.0
// Elector configuration: timing profiles and validation.
#pragma once

#include <array>
#include <boost/describe/enum.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "conclave/core/types.hpp"

namespace conclave::elector {

/// Deliberately wrong behaviours, switched on only by tests, the simulator and the explorer to
/// prove that their invariant checks can fail. `None` in every real configuration: the code paths
/// exist only in conclave_elector_planted (built with CONCLAVE_PLANTED_BUGS, linked by the
/// simulator and the tests); the production core (conclave_elector, which `conclaved` links)
/// refuses any other value.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    PlantedBug, std::uint8_t,
    None,            // the correct behaviour
    DoubleVote,      // grant a proposal in the current term even after voting for another
    MinorityQuorum,  // count N/2 supporters as a quorum
    CountStaleScoutingReplies,  // count scouting replies from older rounds (reference behaviour)
    SkipStickyLeader,           // say yes to scouting and proposals while following a live leader
    IgnoreConfigVersion,        // membership: grant scouting support and votes to a candidate of an
                                // older configuration (no R5 version fence; docs/membership.md)
    LeaseIgnoresDrift,        // leader lease: promise_until = s + E instead of s + E(1-rho)/(1+rho)
    LeaseKeptOnPeerDown,      // leader lease: keep a follower's promise after its link went down
    PromiseEndsOnLocalClose,  // leader lease: a follower ends its promise when a link to its
                              // leader that it closed itself goes down (no proof of the leader)
    IgnorePriority            // node priorities: rank the candidacy without them, and let a
                              // priority-0 node stand
)

/// How a follower that has no leader chooses when to start scouting (see elector/README.md).
BOOST_DEFINE_FIXED_ENUM_CLASS(Backoff, std::uint8_t,
                              Uniform,  // BlazingMQ: uniform in [0, max_random_wait]
                              Ranked    // rank x rank_slot (+ jitter) after losing a leader or at
                                        // start; uniform after a failed round
)

struct Config {
    /// Number of nodes in the cluster (1..kMaxClusterSize) and this node's index in it.
    std::size_t cluster_size = 1;
    NodeId self{};
    /// Votes needed to win; 0 means a majority (`majority(cluster_size)`). Must be a majority.
    std::size_t quorum = 0;

    /// After start, how long to look for an existing leader before the first scouting round.
    Millis initial_wait{8000};
    /// Backoff before (re)trying an election: uniform in [0, max_random_wait].
    Millis max_random_wait{3000};
    /// Wait before scouting after losing the leader (and at start): see Backoff.
    Backoff backoff = Backoff::Uniform;
    /// Ranked backoff: the wait between consecutive ranks. `rank_slot` is used until a round
    /// trip is measured; then the slot is rank_slot_rtt_multiple x the measured peer round trip
    /// (Elector::observe_round_trip), clamped to [rank_slot_min, rank_slot_max] (the floor
    /// covers what the round trip does not show: the candidate's and voter's persists). A
    /// multiple of 0 keeps `rank_slot` fixed. Validated: kMinRankSlot <= rank_slot_min <=
    /// rank_slot <= rank_slot_max <= kMaxRankSlot, multiple <= kMaxRankSlotRttMultiple.
    Millis rank_slot{100};
    Millis rank_slot_min{100};
    Millis rank_slot_max{10000};
    std::uint32_t rank_slot_rtt_multiple = 4;
    static constexpr Millis kMinRankSlot{1};
    static constexpr Millis kMaxRankSlot{10000};
    static constexpr std::uint32_t kMaxRankSlotRttMultiple = 100;
    /// How long a scouting round waits for replies.
    Millis scouting_result_timeout{4000};
    /// How long a candidate waits for votes.
    Millis election_result_timeout{4000};
    /// Leader heartbeat period.
    Millis heartbeat_period{2000};
    /// Follower liveness check period.
    Millis heartbeat_check_period{1000};
    /// The leader is presumed gone after heartbeat_miss_count * heartbeat_period without a
    /// heartbeat.
    std::uint32_t heartbeat_miss_count = 10;
    /// The leader lease (docs/design.md): the bound rho on every node's clock drift, in permille
    /// (a monotonic clock runs at a rate within [1 - rho, 1 + rho] of real time). A follower
    /// promises for promise_duration() P; the leader holds its lease for P(1-rho)/(1+rho)
    /// after the send time of the heartbeat round a quorum acknowledged. Validated: <= 200.
    std::uint32_t lease_drift_permille = 50;
    static constexpr std::uint32_t kMaxLeaseDriftPermille = 200;

    /// Node priorities (docs/design.md, "Priorities"), by node index: a higher one stands first
    /// in the ranked candidacy and is handed leadership back once stable; 0 never stands
    /// (it still votes and acknowledges). Default 1 for every node. Validated: some member of
    /// the cluster has a priority above 0.
    std::array<std::uint32_t, kMaxClusterSize> priorities = default_priorities();
    static constexpr std::array<std::uint32_t, kMaxClusterSize> default_priorities() {
        std::array<std::uint32_t, kMaxClusterSize> p{};
        p.fill(1);
        return p;
    }
    static constexpr std::uint32_t kMaxPriority = 1'000'000;
    /// The preferred leader's hand-back: a leader hands leadership (the transfer) to a voter of
    /// higher priority once that node has been connected and has acknowledged every heartbeat
    /// round for this long, and this leadership has lasted as long. 0 switches the hand-back off.
    Millis preferred_stability{0};
    std::uint32_t priority(NodeId n) const {
        return n.value < priorities.size() ? priorities[n.value] : 1;
    }

    /// ElectionScouting (PreVote). Switched off only to demonstrate what it prevents.
    bool scouting = true;
    /// Leader steps down when it has not heard from a quorum within the inactivity interval.
    bool check_quorum = true;

    PlantedBug planted_bug = PlantedBug::None;

    /// BlazingMQ's reference defaults: 20 s to notice a silent leader.
    static Config reference(std::size_t cluster_size, NodeId self);
    /// Conclave's default profile: a silent leader is noticed after 3 s.
    static Config defaults(std::size_t cluster_size, NodeId self);
    /// Fast profile for loopback and LAN clusters: heartbeat 100 ms, miss count 3, random wait
    /// 0-300 ms (a silent leader is noticed after 300 ms).
    static Config fast(std::size_t cluster_size, NodeId self);
    /// Profile by name: "reference", "default" or "fast".
    static std::optional<Config> profile(std::string_view name, std::size_t cluster_size,
                                         NodeId self);

    /// Inactivity interval: heartbeat_miss_count * heartbeat_period.
    Millis inactivity_interval() const { return heartbeat_period * heartbeat_miss_count; }
    /// How long a follower promises its leader after hearing it, P: the inactivity interval E less
    /// one heartbeat check period (at most E / 2). The promise ends before the follower's own
    /// check can find the leader silent, so every follower that heard the last heartbeat at about
    /// the same time has ended its promise when the first of them scouts (docs/design.md).
    Millis promise_duration() const;
    /// How long after sending a heartbeat round the leader may rely on the promises of the
    /// followers that acknowledged it, on its own clock: floor(P x (1000 - rho) / (1000 + rho)).
    Millis lease_duration() const;
    /// Effective quorum (resolves 0 to a majority).
    std::size_t effective_quorum() const;
    /// Number of consecutive heartbeat checks without a heartbeat after which the leader is
    /// presumed gone: ceil(inactivity_interval / heartbeat_check_period).
    std::uint32_t heartbeat_check_misses() const;

    /// Empty when consistent; otherwise a message that names the offending field.
    std::optional<std::string> validate() const;
};

/// Defined only in conclave_elector_planted (the simulator and tests).
std::string_view to_string(PlantedBug b);
std::string_view to_string(Backoff b);
/// "uniform" or "ranked".

}  // namespace conclave::elector
