// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "conclave/sim/explorer.hpp"

using namespace conclave;
using namespace conclave::sim;

TEST_CASE("bounded exhaustive exploration of 3 nodes finds no violation", "[.][explore]") {
    ExploreOptions o;  // defaults: max term 1, 2 in flight, 1 crash, 1 scouting round
#ifdef SIM_TEST_LIGHT
    o.max_states = 20'000;
#endif
    const ExploreResult r = explore(o);
    INFO("states " << r.states << " transitions " << r.transitions << " depth " << r.max_depth
                   << " time " << r.seconds << " s");
    REQUIRE_FALSE(r.violation);
    CHECK(r.states > 10'000);
    CHECK(r.max_depth > 20);
#ifndef SIM_TEST_LIGHT
    CHECK(r.complete);
#endif
}

TEST_CASE("exploration without scouting and with duplication finds no violation",
          "[explorer-quick]") {
    ExploreOptions o;
    o.scouting = false;
    o.max_crashes = 0;
    o.max_duplications = 1;
#ifdef SIM_TEST_LIGHT
    o.max_states = 5'000;
#else
    o.max_states = 30'000;
#endif
    const ExploreResult r = explore(o);
    REQUIRE_FALSE(r.violation);
    CHECK(r.states >= o.max_states);
}

TEST_CASE("explorer rejects an unsupported cluster size", "[explorer-quick]") {
    ExploreOptions o;
    o.nodes = 9;
    CHECK_THROWS_WITH(explore(o), Catch::Contains("nodes"));
}
