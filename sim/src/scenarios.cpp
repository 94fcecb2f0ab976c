// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/scenarios.hpp"

namespace conclave::sim {

std::string_view to_string(Scenario s) {
    switch (s) {
        case Scenario::PingPong:
            return "leader ping-pong (only A-B cut)";
        case Scenario::NonStickyLeader:
            return "non-sticky leader (B isolated, then healed)";
        case Scenario::Transfer:
            return "leadership transfer (A hands over to B)";
    }
    return "?";
}

ScenarioResult run_scenario(const ScenarioOptions& o) {
    constexpr std::size_t kNodes = 4;
    SimOptions so;
    so.nodes = kNodes;
    so.seed = o.seed;
    so.elector = elector::Config::fast(kNodes, NodeId{0});
    so.elector.scouting = o.scouting;
    so.elector.backoff =
        elector::Backoff::Uniform;  // the article's blind wait, whatever the profile's
    so.elector.planted_bug = o.planted_bug;
    Simulator sim(so);

    ScenarioResult result;
    result.name = std::string(to_string(o.scenario)) + ", scouting " + (o.scouting ? "on" : "off");
    LeadershipTracker tracker(kNodes, /*keep_timeline=*/true);
    sim.on_step = [&](const Simulator& s, const StepRecord& step) { tracker.observe(s, step); };
    sim.start_all();
    sim.run_until(o.settle);

    const std::optional<NodeId> a = majority_leader(sim);
    if (a && !sim.violation()) {
        const NodeId b{static_cast<std::uint16_t>((a->value + 1) % kNodes)};
        result.a = a;
        result.b = b;
        const std::string names =
            " (A = n" + std::to_string(a->value) + ", B = n" + std::to_string(b.value) + ")";
        FaultAction start;
        FaultAction stop;
        if (o.scenario == Scenario::PingPong) {
            start = FaultAction{FaultKind::Cut, *a, b, 0, 0};
            stop = FaultAction{FaultKind::Heal, *a, b, 0, 0};
        } else if (o.scenario == Scenario::Transfer) {
            start = FaultAction{FaultKind::Transfer, {}, b, 0, 0};
            stop = FaultAction{FaultKind::HealAll, {}, {}, 0, 0};  // nothing to heal: a no-op
        } else {
            const std::uint64_t mask = std::uint64_t{1} << b.value;
            start = FaultAction{FaultKind::Partition, {}, {}, mask, 0};
            stop = FaultAction{FaultKind::Unpartition, {}, {}, mask, 0};
        }
        tracker.note(sim.now(), "FAULT: " + describe(start) + names);
        sim.apply(start);
        sim.run_until(o.settle + o.fault_length);
        tracker.note(sim.now(), "FAULT ENDS: " + describe(stop));
        sim.apply(stop);
        sim.run_until(o.settle + o.fault_length + o.after_heal);
    }
    tracker.finish(sim.now());
    result.leader_at_end = majority_leader(sim);
    result.timeline = tracker.timeline();
    result.summary = tracker.summary();
    result.end = sim.now();
    result.violation = sim.violation();
    return result;
}

}  // namespace conclave::sim
