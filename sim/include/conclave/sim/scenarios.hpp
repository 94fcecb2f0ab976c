// SPDX-License-Identifier: Apache-2.0
// The two 4-node scenarios of the BlazingMQ elector article, run in the simulator (fast profile):
//   non-sticky leader: the leader is A; B is isolated from everybody, then the network heals;
//   leader ping-pong:  the leader is A; only the A-B link is cut (and healed much later).
// With ElectionScouting the leader never changes needlessly; without it, B takes over (non-sticky)
// or the leadership bounces between A and B (ping-pong).
// A third scenario is not from the article: leadership transfer, the operator asks the leader A
// to hand over to B (transfer_leadership); B must lead the next term and everyone follow it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "conclave/sim/stability.hpp"

namespace conclave::sim {

enum class Scenario : std::uint8_t { NonStickyLeader, PingPong, Transfer };
std::string_view to_string(Scenario s);

struct ScenarioOptions {
    Scenario scenario = Scenario::PingPong;
    bool scouting = true;
    std::uint64_t seed = 7;
    elector::PlantedBug planted_bug = elector::PlantedBug::None;
    Millis settle{1500};  // time for the first leader to be elected and known
    Millis fault_length{5000};
    Millis after_heal{3000};  // observed after the fault ends
};

struct ScenarioResult {
    std::string name;
    std::vector<TimelineEntry> timeline;
    LeadershipSummary summary;
    Millis end{};
    std::optional<Violation> violation;
    std::optional<NodeId> a;  // the leader when the fault started
    std::optional<NodeId> b;
    std::optional<NodeId> leader_at_end;  // the leader a majority follows at the end, if any
};

ScenarioResult run_scenario(const ScenarioOptions& options);

}  // namespace conclave::sim
