// SPDX-License-Identifier: Apache-2.0
// The two disruptions of BlazingMQ's elector article (seed 002), 4 nodes, fast profile, a minute of
// simulated time each, in the deterministic router:
//   (a) non-sticky leader: B is isolated from everyone, then the network heals;
//   (b) leader ping-pong: only the link between the leader A and B is cut.
// With ElectionScouting (scouting=true) the leader never changes; without it the article's
// disruption is reproduced: terms climb and leadership moves (and, in (b), keeps bouncing).
#include "router.hpp"

#include <set>

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

namespace {

constexpr std::size_t kNodes = 4;

struct Established {
    NodeId a;  // the leader before the fault
    NodeId b;  // the node the fault is about
    Term term;
    std::size_t elections;  // elections won so far
};

Established establish(Router& r) {
    r.start_all();
    r.run_until(Millis{3000});
    const auto leader = r.sole_leader();
    REQUIRE(leader.has_value());
    const Term term = r.node(*leader).state().term;
    for (std::uint16_t i = 0; i < kNodes; ++i) {
        CHECK(r.node(NodeId{i}).snapshot().leader == leader);
        CHECK(r.node(NodeId{i}).state().term == term);
    }
    const NodeId b{static_cast<std::uint16_t>((leader->value + 1) % kNodes)};
    return Established{*leader, b, term, r.elections_won().size()};
}

std::uint64_t max_term(const Router& r) {
    std::uint64_t t = 0;
    for (std::uint16_t i = 0; i < kNodes; ++i) {
        t = std::max(t, r.node(NodeId{i}).state().term.value);
    }
    return t;
}

void check_everyone_follows(const Router& r, NodeId leader, std::optional<NodeId> except = {}) {
    for (std::uint16_t i = 0; i < kNodes; ++i) {
        if (NodeId{i} != except) {
            CAPTURE(i);
            CHECK(r.node(NodeId{i}).snapshot().leader == leader);
        }
    }
}

}  // namespace

TEST_CASE("article scenario (a), non-sticky leader, with scouting: A stays leader", "[scenario]") {
    for (std::uint64_t seed : {1U, 2U, 3U}) {
        CAPTURE(seed);
        Router r = Router::fast_cluster(kNodes, /*scouting=*/true, seed);
        const Established e = establish(r);

        r.isolate(e.b);
        r.run_until(Millis{33'000});
        CHECK(r.sole_leader() == e.a);
        CHECK(r.node(e.a).state().term == e.term);
        CHECK(r.node(e.b).state().term == e.term);  // scouting never bumps B's own term
        CHECK(r.node(e.b).snapshot().leader == std::nullopt);
        CHECK(r.node(e.b).counters().scouting_rounds_started > 20);
        check_everyone_follows(r, e.a, e.b);

        r.rejoin(e.b);
        r.run_until(Millis{63'000});
        CHECK(r.sole_leader() == e.a);
        CHECK(max_term(r) == e.term.value);
        check_everyone_follows(r, e.a);
        CHECK(r.elections_won().size() == e.elections);  // no leadership change at all
        CHECK(r.alarms() == 0);
    }
}

TEST_CASE("article scenario (a), non-sticky leader, without scouting: B's term forces a change",
          "[scenario]") {
    for (std::uint64_t seed : {1U, 2U, 3U}) {
        CAPTURE(seed);
        Router r = Router::fast_cluster(kNodes, /*scouting=*/false, seed);
        const Established e = establish(r);

        r.isolate(e.b);
        r.run_until(Millis{33'000});
        // The majority keeps A; isolated B bumps its term with every failed election.
        CHECK(r.sole_leader() == e.a);
        CHECK(r.node(e.a).state().term == e.term);
        const std::uint64_t b_term = r.node(e.b).state().term.value;
        CHECK(b_term > e.term.value + 20);

        r.rejoin(e.b);
        r.run_until(Millis{63'000});
        // B's term wins: A is deposed and a new leader is elected above B's term.
        CHECK(r.elections_won().size() > e.elections);
        const auto leader = r.sole_leader();
        REQUIRE(leader.has_value());
        CHECK(r.node(*leader).state().term.value > b_term);
        check_everyone_follows(r, *leader);
        CHECK(r.alarms() == 0);
    }
}

TEST_CASE("article scenario (b), leader ping-pong, with scouting: A stays leader", "[scenario]") {
    for (std::uint64_t seed : {1U, 2U, 3U}) {
        CAPTURE(seed);
        Router r = Router::fast_cluster(kNodes, /*scouting=*/true, seed);
        const Established e = establish(r);

        const std::uint64_t b_elections = r.node(e.b).counters().elections_started;
        r.cut(e.a, e.b);
        r.run_until(Millis{63'000});
        CHECK(r.sole_leader() == e.a);
        CHECK(max_term(r) == e.term.value);
        CHECK(r.elections_won().size() == e.elections);
        // C and D refuse B's scouting because they know A; B never gets to propose.
        CHECK(r.node(e.b).counters().elections_started == b_elections);
        CHECK(r.node(e.b).counters().scouting_rounds_started > 20);
        check_everyone_follows(r, e.a, e.b);
        CHECK(r.alarms() == 0);
    }
}

TEST_CASE("article scenario (b), leader ping-pong, without scouting: leadership bounces",
          "[scenario]") {
    for (std::uint64_t seed : {1U, 2U, 3U}) {
        CAPTURE(seed);
        Router r = Router::fast_cluster(kNodes, /*scouting=*/false, seed);
        const Established e = establish(r);

        r.cut(e.a, e.b);
        r.run_until(Millis{63'000});
        const auto& won = r.elections_won();
        REQUIRE(won.size() > e.elections);
        std::size_t changes = 0;
        std::set<std::uint16_t> leaders;
        NodeId previous = e.a;
        for (std::size_t i = e.elections; i < won.size(); ++i) {
            leaders.insert(won[i].node.value);
            changes += won[i].node != previous ? 1U : 0U;
            previous = won[i].node;
        }
        CAPTURE(changes, won.size() - e.elections, max_term(r));
        CHECK(changes >= 10);                     // several leader changes ...
        CHECK(leaders.count(e.a.value) == 1);     // ... between A
        CHECK(leaders.count(e.b.value) == 1);     // ... and B
        CHECK(max_term(r) >= e.term.value + 10);  // terms climb with every bounce
        CHECK(r.alarms() == 0);
    }
}
