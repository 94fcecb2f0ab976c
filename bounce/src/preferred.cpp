// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/preferred.hpp"

#include <algorithm>

namespace conclave::bounce {

PreferredRoundFigures preferred_figures(NodeIndex preferred, const PreferredRound& round,
                                        const std::vector<LeaderChange>& changes) {
    PreferredRoundFigures f;
    if (round.killed_ms < 0) {
        return f;
    }
    const std::int64_t down_until =
        round.restarted_ms >= 0 ? round.restarted_ms : round.watch_end_ms;
    for (const LeaderChange& c : changes) {
        if (c.at_ms >= round.killed_ms && (down_until < 0 || c.at_ms <= down_until) &&
            c.to != preferred) {
            f.failover_ms = c.at_ms - round.killed_ms;
            f.interim_leader = c.to;
            break;
        }
    }
    if (round.restarted_ms < 0 || round.watch_end_ms < 0) {
        return f;
    }
    const LeaderChange* last = nullptr;
    for (const LeaderChange& c : changes) {
        if (c.at_ms <= round.restarted_ms || c.at_ms > round.watch_end_ms) {
            continue;
        }
        f.changes_after_restart += 1;
        last = &c;
        if (c.to == preferred) {
            f.handbacks += 1;
            if (!f.handback_ms) {
                f.handback_ms = c.at_ms - round.restarted_ms;
            }
        }
    }
    f.returned = last != nullptr && last->to == preferred;
    return f;
}

namespace {

std::size_t count_rounds(const std::vector<PreferredRoundFigures>& figures,
                         bool (*holds)(const PreferredRoundFigures&)) {
    return static_cast<std::size_t>(std::count_if(figures.begin(), figures.end(), holds));
}

std::vector<std::int64_t> present_values(
    const std::vector<PreferredRoundFigures>& figures,
    std::optional<std::int64_t> PreferredRoundFigures::*field) {
    std::vector<std::int64_t> out;
    for (const PreferredRoundFigures& f : figures) {
        if (f.*field) {
            out.push_back(*(f.*field));
        }
    }
    return out;
}

}  // namespace

std::size_t PreferredSummary::rounds_returned() const {
    return count_rounds(figures, [](const PreferredRoundFigures& f) { return f.returned; });
}

std::size_t PreferredSummary::rounds_single_handback() const {
    return count_rounds(figures,
                        [](const PreferredRoundFigures& f) { return f.single_handback(); });
}

bool PreferredSummary::every_round_returned() const {
    return rounds_planned > 0 && figures.size() == rounds_planned &&
           rounds_returned() == rounds_planned;
}

bool PreferredSummary::every_round_single_handback() const {
    return rounds_planned > 0 && figures.size() == rounds_planned &&
           rounds_single_handback() == rounds_planned;
}

std::vector<std::int64_t> PreferredSummary::failovers_ms() const {
    return present_values(figures, &PreferredRoundFigures::failover_ms);
}

std::vector<std::int64_t> PreferredSummary::handbacks_ms() const {
    return present_values(figures, &PreferredRoundFigures::handback_ms);
}

}  // namespace conclave::bounce
