// SPDX-License-Identifier: Apache-2.0
// Exhaustive explorer: every interleaving of deliveries, drops, duplications, timer firings (any
// armed timer may fire, in any order: time is abstracted away, as in the TLA+ spec) and
// crash/restart of a small cluster of real elector cores, within bounds, with state hashing.
//
// A state is every node's ElectorState (or, for a crashed node, its durable state), the multiset
// of messages in flight, the History variables the invariants need (leader of each term, votes of
// each node in each term, highest term of each node) and the fault budget used. Search is
// depth-first with a visited set of 64-bit state hashes (a hash collision could hide a state; with
// 64-bit hashes and at most a few million states the chance is below 1e-6). Successors that break
// a bound (a term above max_term, more scouting rounds than max_rounds, more messages in flight
// than max_in_flight) are checked for violations and then not expanded.
//
// Connection events are folded into crash and restart: a crash resets the crashed node's
// connections (its in-flight messages are lost) and every live peer handles peer_down at once; a
// restart brings the connections back and both ends handle peer_up.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "conclave/elector/config.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/sim/invariants.hpp"

namespace conclave::sim {

struct ExploreOptions {
    std::size_t nodes = 3;
    // Defaults: the bounded configuration CI runs (about 480,000 states, seconds in a release
    // build).
    std::uint64_t max_term = 1;
    std::size_t max_in_flight = 2;
    std::size_t max_crashes = 1;
    std::uint64_t max_rounds = 1;  // scouting rounds per node incarnation
    std::size_t max_duplications = 0;
    bool scouting = true;
    bool check_quorum = true;
    elector::PlantedBug planted_bug = elector::PlantedBug::None;
    bool lose_durable_state = false;
    HistoryOptions history;
    /// Stop after this many distinct states (0: no limit); the result then says incomplete.
    std::uint64_t max_states = 0;
};

struct ExploreResult {
    std::uint64_t states = 0;       // distinct states reached
    std::uint64_t transitions = 0;  // successors computed
    std::uint64_t max_depth = 0;    // longest path explored
    double seconds = 0;
    bool complete = true;
    std::optional<Violation> violation;
    /// The steps from the initial state to the violation, one line each.
    std::vector<std::string> counterexample;
};

/// The elector config the explorer uses: fast profile, heartbeat checks that decide in one miss
/// (fewer states, same transitions), and the options' switches.
elector::Config explorer_config(const ExploreOptions& options);

ExploreResult explore(const ExploreOptions& options);

/// One transition of a random walk through the explorer's step function, and the world after it
/// (explorer_walk). The explorer interprets the cores' actions itself instead of running them in
/// runtime::ElectorRuntime (HACKING.md, "Who interprets the cores' actions"); a test replays the
/// walk on ElectorRuntime and compares, so that the two interpreters cannot drift apart unseen.
struct WalkStep {
    enum class Kind : std::uint8_t { Start, Fire, Crash, Restart, Deliver, Drop, Duplicate };
    Kind kind = Kind::Start;
    NodeId node{};             // Fire, Crash, Restart; Deliver/Drop/Duplicate: recipient
    elector::TimerId timer{};  // Fire
    std::optional<elector::Message> message;  // Deliver, Drop, Duplicate
    // The world after the transition:
    std::vector<std::optional<elector::ElectorState>> states;  // nullopt: crashed
    std::vector<elector::DurableState> durable;
    std::vector<std::pair<NodeId, elector::Message>> in_flight;  // the explorer's canonical order
};

/// Walks `steps` random transitions (chosen from `seed`) from the explorer's initial state,
/// calling `observe` with the initial world (Kind::Start) and after every transition. Stops
/// early when no transition is left or the invariants are violated.
void explorer_walk(const ExploreOptions& options, std::uint64_t seed, std::size_t steps,
                   const std::function<void(const WalkStep&)>& observe);

}  // namespace conclave::sim
