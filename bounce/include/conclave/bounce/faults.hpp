// SPDX-License-Identifier: Apache-2.0
// The faults a run injected, as a time-ordered event list, and the state they add up to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conclave/bounce/proxy.hpp"
#include "conclave/core/quorum.hpp"

namespace conclave::bounce {

enum class FaultKind : std::uint8_t {
    SetLink,   // proxy mode of `link` set to `mode`
    Kill,      // SIGKILL `node`
    Stop,      // graceful stop (SIGTERM) of `node`
    Start,     // (re)start `node`
    Pause,     // SIGSTOP `node`
    Resume,    // SIGCONT `node`
    DiskFull,  // `node`'s disk fills (its files may grow no more; it keeps running until it exits)
    Remove,    // `node` removed from the cluster's configuration (rolling-replace; it runs until
               // stopped, but a leader steps down: the change it causes is forced, not needless)
};

struct FaultEvent {
    std::int64_t at_ms = 0;
    FaultKind kind = FaultKind::SetLink;
    NodeIndex node = 0;   // process events
    DirectedLink link{};  // LinkMode
    LinkMode mode = Pass{};
};

enum class ProcessState : std::uint8_t { Running, Down, Paused, Removed };

/// Proxy modes and process states at one instant. All nodes start Running, all links Pass.
struct FaultState {
    explicit FaultState(std::size_t node_count_);
    void apply(const FaultEvent& e);

    std::size_t node_count;
    std::vector<LinkMode> modes;  // from * node_count + to
    std::vector<ProcessState> processes;

    const LinkMode& mode(DirectedLink l) const { return modes[l.from * node_count + l.to]; }
    bool alive(NodeIndex i) const { return processes[i] == ProcessState::Running; }
    /// Bytes flow both ways between a and b (pass or delay in each direction).
    bool connected(NodeIndex a, NodeIndex b) const;
    /// Nodes (including i) that are alive and connected to i; 0 when i itself is not alive.
    std::size_t reachable_count(NodeIndex i) const;
    bool has_quorum(NodeIndex i) const { return is_majority(reachable_count(i), node_count); }
    /// Compact text for the timeline, e.g. "cut n1-n2, n2>n3 blackhole, n4 paused"; "" if none.
    std::string describe() const;
};

/// The state after every event with at_ms <= t (events must be sorted by time).
FaultState fault_state_at(std::size_t node_count, const std::vector<FaultEvent>& events,
                          std::int64_t t_ms);

/// True when `node` was alive with a quorum reachable at every instant of [from_ms, to_ms].
bool healthy_throughout(std::size_t node_count, const std::vector<FaultEvent>& events,
                        NodeIndex node, std::int64_t from_ms, std::int64_t to_ms);

/// An interval during which a fault was in force, for the picture.
struct FaultInterval {
    std::int64_t begin_ms = 0;
    std::int64_t end_ms = 0;
    std::string label;             // "cut n1-n2", "n3 killed", ...
    std::vector<NodeIndex> nodes;  // lanes to shade
};
std::vector<FaultInterval> fault_intervals(std::size_t node_count,
                                           const std::vector<FaultEvent>& events,
                                           std::int64_t end_ms);

}  // namespace conclave::bounce
