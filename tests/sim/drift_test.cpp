// SPDX-License-Identifier: Apache-2.0
// Clock drift in the simulator (SimOptions::clock_drift_ppm, RunOptions::drift): the leader lease
// holds while every clock stays within the bound rho, and LeaseExclusive finds the overlap when
// clocks drift beyond it or the lease ignores the drift (docs/design.md, the leader lease).
#include <catch2/catch.hpp>

#include <algorithm>

#include "conclave/sim/run.hpp"

using namespace conclave;
using namespace conclave::sim;

namespace {

std::optional<NodeId> leader_of(const Simulator& sim) {
    for (std::uint16_t i = 0; i < sim.size(); ++i) {
        const elector::ElectorState* s = sim.state(NodeId{i});
        if (s != nullptr && s->role == elector::Role::Leader) {
            return NodeId{i};
        }
    }
    return std::nullopt;
}

/// The case the lease's drift factor is for, on 3 nodes with the default profile (E = 3 s) and
/// the clocks `RunOptions::drift` draws for `seed`: the node with the slowest clock leads; its
/// link to the third node closes (both drop each other: the third node scouts from then on, and
/// the fastest clock's node, still promised, refuses); then the link between the leader and the
/// fastest node goes silent without closing. The fastest node's promise ends on its own clock,
/// the third node is elected with its support, and the old leader must have given its lease up
/// by then on its own clock. Returns the run's violation.
std::optional<Violation> silent_leader(std::uint64_t seed, ClockDrift drift,
                                       elector::PlantedBug bug) {
    RunOptions ro;
    ro.seed = seed;
    ro.drift = drift;
    SimOptions o;
    o.seed = seed;
    o.elector = elector::Config::defaults(3, NodeId{0});
    o.elector.planted_bug = bug;
    o.clock_drift_ppm = draw_clock_drift(ro);
    std::vector<std::int32_t> rates = o.clock_drift_ppm;
    rates.resize(3, 0);
    const auto slow =
        static_cast<std::uint16_t>(std::min_element(rates.begin(), rates.end()) - rates.begin());
    const auto fast =
        static_cast<std::uint16_t>(std::max_element(rates.begin(), rates.end()) - rates.begin());
    const auto third = static_cast<std::uint16_t>(fast != slow ? 3 - slow - fast : (slow + 1) % 3);
    Simulator sim(o);
    sim.start_all();
    sim.run_until(Millis{8000});
    if (leader_of(sim) != NodeId{slow}) {
        sim.apply(FaultAction{FaultKind::Transfer, {}, NodeId{slow}, 0, 0});
        sim.run_until(Millis{12000});
    }
    REQUIRE(leader_of(sim) == NodeId{slow});
    sim.apply(FaultAction{FaultKind::Cut, NodeId{slow}, NodeId{third}, 0, 0});
    sim.run_until(Millis{15000});
    sim.apply(FaultAction{FaultKind::Blackhole, NodeId{slow}, NodeId{fast}, 0, 0});
    sim.apply(FaultAction{FaultKind::Blackhole, NodeId{fast}, NodeId{slow}, 0, 0});
    sim.run_until(Millis{25000});
    return sim.violation();
}

/// How many of seeds 1..seeds violate LeaseExclusive in silent_leader (any other violation
/// fails the test).
int lease_violations(std::uint64_t seeds, ClockDrift drift, elector::PlantedBug bug,
                     std::string* first = nullptr) {
    int found = 0;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
        const std::optional<Violation> v = silent_leader(seed, drift, bug);
        if (v) {
            INFO("seed " << seed << ": " << v->detail);
            REQUIRE(v->kind == ViolationKind::LeaseExclusive);
            if (first != nullptr && found == 0) {
                *first = v->detail;
            }
            ++found;
        }
    }
    return found;
}

constexpr std::uint64_t kScenarioSeeds = 60;

}  // namespace

TEST_CASE("a drifting clock reads its own time and its timers fire at the matching real time",
          "[drift]") {
    SimOptions o;
    o.clock_drift_ppm = {50000, -50000, 0};
    Simulator sim(o);
    sim.start_all();
    sim.run_until(Millis{1000});
    CHECK(sim.local_now(NodeId{0}) == Millis{1050});
    CHECK(sim.local_now(NodeId{1}) == Millis{950});
    CHECK(sim.local_now(NodeId{2}) == Millis{1000});
    CHECK(sim.clock_drift_ppm(NodeId{1}) == -50000);
    o.clock_drift_ppm = {2000000};
    CHECK_THROWS_AS(Simulator(o), std::invalid_argument);
}

TEST_CASE("drift is drawn per node per seed within rho, and beyond it on two nodes", "[drift]") {
    RunOptions o;
    o.nodes = 5;
    CHECK(draw_clock_drift(o).empty());
    o.drift = ClockDrift::Within;
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        o.seed = seed;
        for (const std::int32_t d : draw_clock_drift(o)) {
            CHECK(std::abs(d) <= 50000);
        }
    }
    o.drift = ClockDrift::Beyond;
    const std::vector<std::int32_t> d = draw_clock_drift(o);
    CHECK(std::count(d.begin(), d.end(), -150000) == 1);
    CHECK(std::count(d.begin(), d.end(), 150000) == 1);
    CHECK(draw_clock_drift(o) == d);  // the same seed, the same clocks
}

TEST_CASE("the leader lease holds against a silent leader with every clock within rho", "[drift]") {
    CHECK(lease_violations(kScenarioSeeds, ClockDrift::Within, elector::PlantedBug::None) == 0);
}

TEST_CASE("a lease that ignores the drift is caught once clocks drift within rho",
          "[drift][planted]") {
    // Without drift the planted bug's longer lease still ends before any promise does.
    CHECK(lease_violations(kScenarioSeeds, ClockDrift::None,
                           elector::PlantedBug::LeaseIgnoresDrift) == 0);
    CHECK(lease_violations(kScenarioSeeds, ClockDrift::Within,
                           elector::PlantedBug::LeaseIgnoresDrift) > 0);
}

TEST_CASE("clocks drifting beyond rho break the lease, and the report says so",
          "[drift][planted]") {
    std::string first;
    CHECK(lease_violations(kScenarioSeeds, ClockDrift::Beyond, elector::PlantedBug::None, &first) >
          0);
    CHECK(first.find("BEYOND the stated bound rho = 50 permille") != std::string::npos);
}

TEST_CASE("random schedules with every clock drifting within rho: no violation",
          "[.][drift-seeds]") {
#ifdef SIM_TEST_LIGHT
    constexpr std::uint64_t kDriftSeeds = 20;
#else
    constexpr std::uint64_t kDriftSeeds = 600;
#endif
    RunOptions o;
    o.drift = ClockDrift::Within;
    std::string error;
    o.faults = *FaultMix::parse("all,isolate", &error);
    for (const std::size_t nodes : {std::size_t{3}, std::size_t{5}}) {
        o.nodes = nodes;
        for (std::uint64_t seed = 1; seed <= kDriftSeeds / nodes; ++seed) {
            o.seed = seed;
            const RunResult r = run_seed(o);
            if (r.violation) {
                FAIL("seed " << seed << ": " << to_string(r.violation->kind) << ": "
                             << r.violation->detail << "\nreplay: "
                             << replay_command("build/release/sim/conclave-sim", o));
            }
        }
    }
}
