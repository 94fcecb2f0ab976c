// SPDX-License-Identifier: Apache-2.0
// Config profiles and validation; FencingGate.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "conclave/elector/config.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/elector/fencing.hpp"

using namespace conclave;
using namespace conclave::elector;

namespace {

/// The validation message for `config`, which must be rejected.
std::string rejection(const Config& config) {
    const auto error = config.validate();
    REQUIRE(error.has_value());
    return *error;
}

bool starts_with(const std::string& s, std::string_view prefix) {
    return s.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE("the three profiles validate for every cluster size", "[config]") {
    for (const char* name : {"reference", "default", "fast"}) {
        for (std::size_t size : {1U, 2U, 3U, 4U, 5U, 7U, 64U}) {
            CAPTURE(name, size);
            const auto config = Config::profile(name, size, NodeId{0});
            REQUIRE(config.has_value());
            CHECK(config->validate() == std::nullopt);
            CHECK(config->cluster_size == size);
            CHECK(config->effective_quorum() == size / 2 + 1);
            CHECK(config->scouting);
            CHECK(config->check_quorum);
            CHECK(config->planted_bug == PlantedBug::None);
            // The last node is a valid self too.
            const NodeId last{static_cast<std::uint16_t>(size - 1)};
            CHECK(Config::profile(name, size, last)->validate() == std::nullopt);
        }
    }
    CHECK_FALSE(Config::profile("turbo", 3, NodeId{0}).has_value());
}

TEST_CASE("profile timings", "[config]") {
    const Config reference = Config::reference(3, NodeId{0});
    CHECK(reference.inactivity_interval() == Millis{20000});
    CHECK(reference.heartbeat_check_misses() == 20);
    CHECK(Config::defaults(3, NodeId{0}).inactivity_interval() == Millis{3000});
    const Config fast = Config::fast(3, NodeId{0});
    CHECK(fast.inactivity_interval() == Millis{300});
    CHECK(fast.heartbeat_check_misses() == 6);
    CHECK(fast.max_random_wait == Millis{300});
}

TEST_CASE("validate() rejects each inconsistent value, naming the field", "[config]") {
    const Config good = Config::fast(5, NodeId{0});
    REQUIRE(good.validate() == std::nullopt);

    SECTION("cluster_size 0 or above 64") {
        Config c = good;
        c.cluster_size = 0;
        CHECK(starts_with(rejection(c), "cluster_size:"));
        c.cluster_size = 65;
        CHECK(starts_with(rejection(c), "cluster_size:"));
        c.cluster_size = 64;
        CHECK(c.validate() == std::nullopt);
    }
    SECTION("self out of range") {
        Config c = good;
        c.self = NodeId{5};
        CHECK(starts_with(rejection(c), "self:"));
    }
    SECTION("quorum not a majority") {
        Config c = good;
        for (std::size_t q : {1U, 2U, 6U}) {
            CAPTURE(q);
            c.quorum = q;
            CHECK(starts_with(rejection(c), "quorum:"));
        }
        for (std::size_t q : {0U, 3U, 4U, 5U}) {
            CAPTURE(q);
            c.quorum = q;
            CHECK(c.validate() == std::nullopt);
        }
        c.cluster_size = 4;
        c.quorum = 2;  // half of 4 is not a majority: two disjoint halves could both elect
        CHECK(starts_with(rejection(c), "quorum:"));
    }
    SECTION("zero periods") {
        auto check_zero = [&](Millis Config::*field, std::string_view name) {
            CAPTURE(name);
            Config c = good;
            c.*field = Millis{0};
            CHECK(starts_with(rejection(c), std::string(name) + ":"));
        };
        check_zero(&Config::scouting_result_timeout, "scouting_result_timeout");
        check_zero(&Config::election_result_timeout, "election_result_timeout");
        check_zero(&Config::heartbeat_period, "heartbeat_period");
        check_zero(&Config::heartbeat_check_period, "heartbeat_check_period");
    }
    SECTION("negative waits; zero waits are allowed") {
        Config c = good;
        c.initial_wait = Millis{-1};
        CHECK(starts_with(rejection(c), "initial_wait:"));
        c = good;
        c.max_random_wait = Millis{-1};
        CHECK(starts_with(rejection(c), "max_random_wait:"));
        c = good;
        c.initial_wait = Millis{0};
        c.max_random_wait = Millis{0};
        CHECK(c.validate() == std::nullopt);
    }
    SECTION("miss count below 2") {
        Config c = good;
        for (std::uint32_t misses : {0U, 1U}) {
            c.heartbeat_miss_count = misses;
            CHECK(starts_with(rejection(c), "heartbeat_miss_count:"));
        }
    }
    SECTION("check period above the inactivity interval") {
        Config c = good;  // inactivity 300 ms
        c.heartbeat_check_period = Millis{301};
        const std::string error = rejection(c);
        CHECK(starts_with(error, "heartbeat_check_period:"));
        CHECK(error.find("300 ms") != std::string::npos);
        c.heartbeat_check_period = Millis{300};
        CHECK(c.validate() == std::nullopt);
    }
    SECTION("absurdly long timings") {
        Config c = good;
        c.heartbeat_period = Millis{3'600'001};
        CHECK(starts_with(rejection(c), "timing:"));
    }
}

TEST_CASE("the Elector refuses an invalid config or durable state", "[config]") {
    auto random = [] { return std::uint64_t{0}; };
    Config bad = Config::fast(3, NodeId{0});
    bad.heartbeat_miss_count = 1;
    CHECK_THROWS_WITH(Elector(bad, DurableState{}, random),
                      Catch::Contains("heartbeat_miss_count"));
    CHECK_THROWS_AS(Elector(Config::fast(3, NodeId{0}), DurableState{}, RandomSource{}),
                    std::invalid_argument);
    CHECK_THROWS_WITH(Elector(Config::fast(3, NodeId{0}), DurableState{Term{2}, NodeId{3}}, random),
                      Catch::Contains("voted_for"));
}

TEST_CASE("FencingGate admits non-decreasing tokens, rejects older ones and 0", "[fencing]") {
    FencingGate gate;
    CHECK(gate.highest() == 0);
    CHECK_FALSE(gate.admit(0));
    CHECK(gate.admit(3));
    CHECK(gate.admit(3));  // the same leadership keeps writing
    CHECK(gate.admit(7));
    CHECK_FALSE(gate.admit(6));  // a deposed leader
    CHECK_FALSE(gate.admit(3));
    CHECK_FALSE(gate.admit(0));  // "no leader" is never admitted, even first
    CHECK(gate.highest() == 7);
    CHECK(gate.admit(7));
    CHECK(gate.admit(8));
    CHECK(gate.highest() == 8);
}
