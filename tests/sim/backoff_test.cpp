// SPDX-License-Identifier: Apache-2.0
// Ranked candidacy in the simulator: safety and liveness under faults that hit the
// node ranked first, every node ranked first in turn, random schedules with the ranked backoff,
// and cold starts that are not contested. Split votes are counted and printed per case.
#include <catch2/catch.hpp>

#include <iostream>
#include <set>

#include "conclave/elector/backoff.hpp"
#include "conclave/sim/run.hpp"
#include "conclave/sim/stability.hpp"

using namespace conclave;
using namespace conclave::sim;

namespace {

elector::Config ranked_fast(std::size_t nodes) {
    elector::Config c = elector::Config::fast(nodes, NodeId{0});
    c.backoff = elector::Backoff::Ranked;
    return c;
}

enum class RankedFault { Crash, Partition, Pause, Slow };

const char* name(RankedFault f) {
    switch (f) {
        case RankedFault::Crash:
            return "crashed";
        case RankedFault::Partition:
            return "partitioned";
        case RankedFault::Pause:
            return "paused";
        case RankedFault::Slow:
            return "slow";
    }
    return "?";
}

/// Runs `sim` until every node agrees on a leader or `limit` passes; the agreed leader.
std::optional<NodeId> await_agreement(Simulator& sim, Millis limit) {
    const Millis deadline = sim.now() + limit;
    while (sim.now() < deadline) {
        if (auto l = agreed_leader(sim)) {
            return l;
        }
        if (!sim.run_until(sim.now() + Millis{5})) {
            return std::nullopt;
        }
    }
    return agreed_leader(sim);
}

}  // namespace

TEST_CASE(
    "ranked: the leader crashes and the node ranked first is crashed, partitioned, "
    "paused or slow; every node ranked first in turn") {
    constexpr std::size_t kNodes = 5;
    for (RankedFault fault :
         {RankedFault::Crash, RankedFault::Partition, RankedFault::Pause, RankedFault::Slow}) {
        SimOptions o;
        o.nodes = kNodes;
        o.seed = 17 + static_cast<std::uint64_t>(fault);
        o.elector = ranked_fast(kNodes);
        Simulator sim(o);
        LeadershipTracker tracker(kNodes);
        sim.on_step = [&](const Simulator& s, const StepRecord& r) { tracker.observe(s, r); };
        sim.start_all();
        const Millis bound = liveness_bound(o.elector, o.latency_max_ms + o.jitter_ms);
        std::set<std::uint16_t> ranked_first;
        for (int episode = 0; episode < 12 && ranked_first.size() < kNodes; ++episode) {
            const auto leader = await_agreement(sim, bound);
            REQUIRE(leader);
            const Term term = sim.state(*leader)->term;
            // The node every survivor ranks first once the leader is gone.
            NodeId first{};
            for (std::uint16_t i = 0; i < kNodes; ++i) {
                if (NodeId{i} != *leader &&
                    elector::candidacy_rank(kNodes, NodeId{i}, term, leader) == 0) {
                    first = NodeId{i};
                }
            }
            ranked_first.insert(first.value);
            const Millis at = sim.now() + Millis{1};
            sim.schedule(at, FaultAction{FaultKind::Crash, *leader, {}, 0, 0});
            switch (fault) {
                case RankedFault::Crash:
                    sim.schedule(at, FaultAction{FaultKind::Crash, first, {}, 0, 0});
                    break;
                case RankedFault::Partition:
                    sim.schedule(
                        at, FaultAction{
                                FaultKind::Partition, {}, {}, std::uint64_t{1} << first.value, 0});
                    break;
                case RankedFault::Pause:
                    sim.schedule(at, FaultAction{FaultKind::Pause, first, {}, 0, 1500});
                    break;
                case RankedFault::Slow:
                    for (std::uint16_t i = 0; i < kNodes; ++i) {
                        if (NodeId{i} != first) {
                            sim.schedule(
                                at, FaultAction{FaultKind::SlowLink, first, NodeId{i}, 0, 150});
                        }
                    }
                    break;
            }
            REQUIRE(sim.run_until(at + Millis{1}));
            // The three others elect a leader among themselves (not the crashed one).
            Millis waited{0};
            std::optional<NodeId> next;
            while (waited < bound && !next) {
                REQUIRE(sim.run_until(sim.now() + Millis{5}));
                waited += Millis{5};
                next = majority_leader(sim);
            }
            CAPTURE(name(fault), episode, first.value, waited.count());
            REQUIRE(next);
            CHECK(*next != *leader);
            if (fault == RankedFault::Crash) {
                CHECK(*next != first);
            }
            REQUIRE_FALSE(sim.violation());
            sim.apply(FaultAction{FaultKind::HealAll, {}, {}, 0, 0});
        }
        tracker.finish(sim.now());
        REQUIRE_FALSE(sim.violation());
        CAPTURE(name(fault));
        CHECK(ranked_first.size() == kNodes);  // every node was ranked first in turn
        std::cout << "ranked, first-ranked node " << name(fault) << ": "
                  << tracker.summary().elections_won << " elections, "
                  << tracker.summary().contested_terms << " contested terms, "
                  << tracker.summary().split_votes << " split votes\n";
    }
}

TEST_CASE("ranked: random schedules with every fault stay safe and live; split votes counted") {
    for (std::size_t nodes : {3U, 5U}) {
        std::uint64_t split = 0;
        std::uint64_t contested = 0;
        std::uint64_t won = 0;
        const std::uint64_t seeds = nodes == 3 ? 60 : 30;
        for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
            RunOptions o;
            o.seed = seed;
            o.nodes = nodes;
            o.backoff = elector::Backoff::Ranked;
            const RunResult r = run_seed(o);
            if (r.violation) {
                FAIL("seed " << seed << ": " << to_string(r.violation->kind) << ": "
                             << r.violation->detail << "\nreplay: "
                             << replay_command("build/release/sim/conclave-sim", o));
            }
            REQUIRE(r.converged_after);
            REQUIRE(*r.converged_after <= r.liveness_bound);
            split += r.leadership.split_votes;
            contested += r.leadership.contested_terms;
            won += r.leadership.elections_won;
        }
        std::cout << "ranked, " << nodes << " nodes, " << seeds << " seeds, every fault: " << won
                  << " elections, " << contested << " contested terms, " << split
                  << " split votes\n";
    }
}

TEST_CASE("cold start: ranked nodes started together elect in the first term, uncontested") {
    std::uint64_t uniform_contested = 0;
    for (std::size_t nodes : {3U, 5U, 7U}) {
        for (std::uint64_t seed = 1; seed <= 10; ++seed) {
            for (elector::Backoff backoff : {elector::Backoff::Ranked, elector::Backoff::Uniform}) {
                SimOptions o;
                o.nodes = nodes;
                o.seed = seed;
                o.elector = elector::Config::fast(nodes, NodeId{0});
                o.elector.backoff = backoff;
                Simulator sim(o);
                LeadershipTracker tracker(nodes);
                sim.on_step = [&](const Simulator& s, const StepRecord& r) {
                    tracker.observe(s, r);
                };
                sim.start_all();
                REQUIRE(await_agreement(sim, liveness_bound(o.elector, 15)));
                tracker.finish(sim.now());
                if (backoff == elector::Backoff::Ranked) {
                    CAPTURE(nodes, seed);
                    CHECK(tracker.summary().highest_term == Term{1});
                    CHECK(tracker.summary().contested_terms == 0);
                } else {
                    uniform_contested += tracker.summary().contested_terms;
                }
            }
        }
    }
    // The check bites: the uniform backoff's nodes all scout when the initial wait ends.
    std::cout << "cold start, uniform: " << uniform_contested << " contested terms in 30 starts\n";
    CHECK(uniform_contested > 0);
}

TEST_CASE("ranked: the slot follows the measured round trip; slow links give a bigger slot") {
    SimOptions o;
    o.nodes = 3;
    o.seed = 5;
    o.elector = ranked_fast(3);  // x4 the round trip, floor 25 ms, ceiling 500 ms
    Simulator sim(o);
    sim.start_all();
    const Millis bound = liveness_bound(o.elector, o.latency_max_ms + o.jitter_ms);
    REQUIRE(await_agreement(sim, bound));
    // Healthy links: each node's slot is 4 x its largest round trip, within the clamp.
    for (std::uint16_t i = 0; i < 3; ++i) {
        const auto rtt = sim.round_trip(i);
        REQUIRE(rtt);
        CHECK(sim.rank_slot(NodeId{i}) == elector::adaptive_rank_slot(o.elector, *rtt));
        CHECK(*sim.rank_slot(NodeId{i}) < Millis{200});
    }
    // Slow every link of node 2 by 60 ms each way: its round trips exceed 125 ms (x4 > 500), so
    // its slot reaches the ceiling; safety holds and, the leader crashed, the others still
    // elect. (Not slower: the fast profile's 200 ms scouting and election timeouts must exceed
    // the round trip, or no round can complete.)
    const Millis at = sim.now() + Millis{1};
    for (std::uint16_t i = 0; i < 2; ++i) {
        sim.schedule(at, FaultAction{FaultKind::SlowLink, NodeId{2}, NodeId{i}, 0, 60});
    }
    REQUIRE(sim.run_until(at + Millis{400}));  // node 2 handles a message: the slot is updated
    CHECK(sim.rank_slot(NodeId{2}) == Millis{500});
    const auto leader = await_agreement(sim, bound);
    REQUIRE(leader);
    sim.apply(FaultAction{FaultKind::Crash, *leader, {}, 0, 0});
    Millis waited{0};
    std::optional<NodeId> next;
    while (waited < 2 * bound && !next) {
        REQUIRE(sim.run_until(sim.now() + Millis{5}));
        waited += Millis{5};
        next = majority_leader(sim);
    }
    REQUIRE(next);
    CHECK(*next != *leader);
    REQUIRE_FALSE(sim.violation());
    // Healed: back to the fast links' slot at the next input.
    sim.apply(FaultAction{FaultKind::HealAll, {}, {}, 0, 0});
    REQUIRE(sim.run_until(sim.now() + Millis{1000}));
    for (std::uint16_t i = 0; i < 3; ++i) {
        if (const auto slot = sim.rank_slot(NodeId{i})) {
            CHECK(*slot < Millis{200});
        }
    }
    REQUIRE_FALSE(sim.violation());
}
