#include <catch2/catch.hpp>

#include "conclave/elector/elector.hpp"

using namespace conclave;

TEST_CASE("a single-node cluster elects itself after the initial wait") {
    Elector e(Config::fast(1, NodeId{0}), DurableState{}, [] { return std::uint64_t{0}; });
    auto started = e.start(Millis{0});
    REQUIRE(e.state().role == Role::Follower);
    auto fired = e.timer_fired(Millis{300}, TimerId::InitialWait);
    REQUIRE(e.state().role == Role::Leader);
    REQUIRE(e.state().term == Term{1});
    REQUIRE(e.snapshot().fencing_token == 1);
}
