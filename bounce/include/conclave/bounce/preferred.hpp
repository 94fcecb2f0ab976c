// SPDX-License-Identifier: Apache-2.0
// The `preferred` scenario's figures: one node has a higher priority; each round SIGKILLs it
// while it leads, restarts it, and watches a bounded window for leadership to come back to it
// (the hand-back after timing.preferred_stability_ms, docs/design.md "Priorities").
//
// Pure: the scenario records when it killed and restarted the preferred node and when the watch
// ended; the figures come from the run's leader changes (analysis.hpp), so they use the same
// definitions as the summary: a leader change is a new (leader, term) pair, at the poll that
// first showed it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "conclave/bounce/analysis.hpp"

namespace conclave::bounce {

/// One round as the scenario ran it (ms since the run began; -1: did not happen).
struct PreferredRound {
    std::int64_t killed_ms = -1;     // SIGKILL of the preferred node while it led
    std::int64_t restarted_ms = -1;  // the preferred node started again
    std::int64_t watch_end_ms = -1;  // end of the window after the restart
};

/// What one round shows.
struct PreferredRoundFigures {
    /// From the SIGKILL to the first poll that showed another leader; nullopt: none came.
    std::optional<std::int64_t> failover_ms;
    std::optional<NodeIndex> interim_leader;  // the node that took over after the kill
    /// From the restart to the first poll that showed the preferred node leading again.
    std::optional<std::int64_t> handback_ms;
    std::size_t changes_after_restart = 0;  // leader changes in (restart, watch end]
    std::size_t handbacks = 0;              // of them, to the preferred node
    bool returned = false;  // the preferred node led at the end of the window, by a hand-back

    /// Leadership came back exactly once and nothing else changed in the window.
    bool single_handback() const {
        return returned && handbacks == 1 && changes_after_restart == 1;
    }
};

struct PreferredSummary {
    NodeIndex preferred = 0;
    std::uint32_t priority = 0;     // the preferred node's priority (the others have 1)
    std::int64_t stability_ms = 0;  // timing.preferred_stability_ms in the configs
    std::int64_t window_ms = 0;     // how long each round watched after the restart
    std::size_t rounds_planned = 0;
    std::vector<PreferredRound> rounds;
    std::vector<PreferredRoundFigures> figures;  // one per round, computed by preferred_figures

    std::size_t rounds_returned() const;
    std::size_t rounds_single_handback() const;
    /// Every planned round ran, and in each leadership came back to the preferred node.
    bool every_round_returned() const;
    /// Every planned round ran, and in each it came back exactly once with no other change.
    bool every_round_single_handback() const;
    std::vector<std::int64_t> failovers_ms() const;
    std::vector<std::int64_t> handbacks_ms() const;
};

/// The figures of `round` from the run's leader changes (`changes` in time order).
PreferredRoundFigures preferred_figures(NodeIndex preferred, const PreferredRound& round,
                                        const std::vector<LeaderChange>& changes);

}  // namespace conclave::bounce
