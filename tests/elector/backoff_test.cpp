// SPDX-License-Identifier: Apache-2.0
// Ranked candidacy: the order every node computes, and the waits the core arms with
// `"backoff": "ranked"` (the fast profile's 25 ms slot; the random source returns 7, so the
// jitter is 7 mod (25 / 8 + 1) = 3 ms).
#include <set>

#include "conclave/core/enum_names.hpp"
#include "conclave/elector/backoff.hpp"
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

namespace {

Config ranked3(NodeId self = A) {
    Config c = Config::fast(3, self);
    c.backoff = Backoff::Ranked;
    return c;
}

constexpr Millis kJitter{3};
constexpr Millis kSlot{25};

}  // namespace

TEST_CASE("candidacy rank: nodes rotated by term, the lost leader left out") {
    // Term 5, 3 nodes: the order starts at (5 + 1) mod 3 = 0.
    CHECK(candidacy_rank(3, A, Term{5}, kNone) == 0);
    CHECK(candidacy_rank(3, B, Term{5}, kNone) == 1);
    CHECK(candidacy_rank(3, C, Term{5}, kNone) == 2);
    // Losing the first in the order moves everyone after it up one rank.
    CHECK(candidacy_rank(3, B, Term{5}, A) == 0);
    CHECK(candidacy_rank(3, C, Term{5}, A) == 1);
    // Losing a later one changes nothing before it.
    CHECK(candidacy_rank(3, A, Term{5}, C) == 0);
    CHECK(candidacy_rank(3, B, Term{5}, C) == 1);

    // For every term and every lost leader, the survivors' ranks are 0..N-2, all distinct, and
    // every node is first in turn as the term advances.
    for (std::size_t n : {3U, 5U, 7U}) {
        std::set<std::uint16_t> ever_first;
        for (std::uint64_t term = 0; term < 2 * n; ++term) {
            for (std::uint16_t lost = 0; lost < n; ++lost) {
                std::set<std::size_t> ranks;
                for (std::uint16_t i = 0; i < n; ++i) {
                    if (i == lost) {
                        continue;
                    }
                    const std::size_t r = candidacy_rank(n, NodeId{i}, Term{term}, NodeId{lost});
                    ranks.insert(r);
                    if (r == 0) {
                        ever_first.insert(i);
                    }
                }
                CHECK(ranks.size() == n - 1);
                CHECK(*ranks.rbegin() == n - 2);
            }
        }
        CHECK(ever_first.size() == n);
    }
}

TEST_CASE("ranked: a follower that loses its leader waits rank x slot + jitter") {
    SECTION("rank 0 (term 5, leader B lost): scouts after the jitter only") {
        Node n = follower_with_leader(ranked3());
        CHECK(n.down(B) == Actions{cancel(TimerId::HeartbeatCheck),
                                   arm(TimerId::RandomWait, kJitter),
                                   notify(Role::Follower, 5, kNone, Reason::LeaderUnavailable)});
    }
    SECTION("rank 1 (term 5, leader A lost, seen from C): one slot later") {
        Node n = follower_with_leader(ranked3(C));
        // C follows B here (the builder's leader); B's order in term 5 is A, B, C: with B lost,
        // C is rank 1.
        CHECK(n.down(B) == Actions{cancel(TimerId::HeartbeatCheck),
                                   arm(TimerId::RandomWait, kSlot + kJitter),
                                   notify(Role::Follower, 5, kNone, Reason::LeaderUnavailable)});
    }
    SECTION("missed heartbeats and a cession rank the same way") {
        Node n = follower_with_leader(ranked3(C));
        CHECK(n.recv(B, 5, cession()) ==
              Actions{cancel(TimerId::HeartbeatCheck), arm(TimerId::RandomWait, kSlot + kJitter),
                      notify(Role::Follower, 5, kNone, Reason::LeaderCeded)});
    }
    SECTION("uniform (the profile's default) keeps the random draw") {
        Node n = follower_with_leader();
        CHECK(n.down(B) == Actions{cancel(TimerId::HeartbeatCheck),
                                   arm(TimerId::RandomWait, kBackoff),
                                   notify(Role::Follower, 5, kNone, Reason::LeaderUnavailable)});
    }
}

TEST_CASE("ranked: after a failed round the node falls back to the uniform backoff") {
    SECTION("scouting round timed out") {
        Node n = follower_scouting(ranked3());
        CHECK(n.fire(TimerId::ScoutingResult) == Actions{arm(TimerId::RandomWait, kBackoff)});
    }
    SECTION("election timed out") {
        Node n = candidate(ranked3());
        CHECK(n.fire(TimerId::ElectionResult) ==
              Actions{arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 6, kNone, Reason::QuorumNotAchieved)});
    }
}

TEST_CASE("ranked: cold start looks for a leader as long, then scouts one slot apart") {
    // Durable term 0: the order starts at node 1 (B), then C, then A.
    auto start_wait = [](NodeId self) {
        Node n(ranked3(self));
        return n.start();
    };
    const Millis initial = Config::fast(3, A).initial_wait;
    CHECK(start_wait(B) == Actions{arm(TimerId::InitialWait, initial + kJitter),
                                   notify(Role::Follower, 0, kNone, Reason::Started, Millis{0})});
    CHECK(start_wait(C) == Actions{arm(TimerId::InitialWait, initial + kSlot + kJitter),
                                   notify(Role::Follower, 0, kNone, Reason::Started, Millis{0})});
    CHECK(start_wait(A) == Actions{arm(TimerId::InitialWait, initial + 2 * kSlot + kJitter),
                                   notify(Role::Follower, 0, kNone, Reason::Started, Millis{0})});
}

TEST_CASE("config: backoff names and the rank slot's floor and ceiling") {
    CHECK(parse_enum<Backoff>("uniform") == Backoff::Uniform);
    CHECK(parse_enum<Backoff>("ranked") == Backoff::Ranked);
    CHECK_FALSE(parse_enum<Backoff>("Ranked").has_value());
    CHECK(to_string(Backoff::Ranked) == "ranked");
    CHECK(enum_choices<Backoff>() == "uniform or ranked");
    CHECK(enum_name(PlantedBug::CountStaleScoutingReplies) == "count-stale-scouting-replies");
    CHECK(parse_enum<PlantedBug>("lease-kept-on-peer-down") == PlantedBug::LeaseKeptOnPeerDown);
    CHECK(enum_choices<PlantedBug>().starts_with("none, double-vote, "));
    CHECK(enum_name(static_cast<Backoff>(7)) == "?");
    CHECK(Config::reference(3, A).backoff == Backoff::Uniform);
    CHECK(Config::reference(3, A).max_random_wait == Millis{3000});

    Config c = ranked3();
    CHECK_FALSE(c.validate().has_value());
    c.rank_slot = Millis{0};
    REQUIRE(c.validate().has_value());
    CHECK(c.validate()->rfind("rank_slot:", 0) == 0);
    c.rank_slot = Config::kMaxRankSlot + Millis{1};
    CHECK(c.validate().has_value());
    c.rank_slot = Config::kMaxRankSlot;
    CHECK(c.validate()->rfind("rank_slot:", 0) == 0);  // above the fast profile's ceiling
    c.rank_slot_max = Config::kMaxRankSlot;
    CHECK_FALSE(c.validate().has_value());

    // Floor and ceiling: kMinRankSlot <= min <= slot <= max <= kMaxRankSlot.
    c = ranked3();
    CHECK(c.rank_slot_min == Millis{25});
    CHECK(c.rank_slot_max == Millis{500});
    c.rank_slot_min = Millis{0};
    CHECK(c.validate()->rfind("rank_slot_min:", 0) == 0);
    c.rank_slot_min = Millis{30};  // above the initial slot (25)
    CHECK(c.validate()->rfind("rank_slot:", 0) == 0);
    c = ranked3();
    c.rank_slot_max = Millis{20};  // below the floor
    CHECK(c.validate()->rfind("rank_slot_max:", 0) == 0);
    c = ranked3();
    c.rank_slot_rtt_multiple = Config::kMaxRankSlotRttMultiple + 1;
    CHECK(c.validate()->rfind("rank_slot_rtt_multiple:", 0) == 0);
    c.rank_slot_rtt_multiple = 0;
    CHECK_FALSE(c.validate().has_value());
}

TEST_CASE("adaptive rank slot: a multiple of the round trip between the floor and the ceiling") {
    using std::chrono::microseconds;
    const Config c = ranked3();  // x4, floor 25 ms, ceiling 500 ms
    CHECK(adaptive_rank_slot(c, microseconds{80}) == Millis{25});        // loopback: the floor
    CHECK(adaptive_rank_slot(c, microseconds{10'000}) == Millis{40});    // LAN-ish: 4 x 10 ms
    CHECK(adaptive_rank_slot(c, microseconds{10'001}) == Millis{41});    // rounded up
    CHECK(adaptive_rank_slot(c, microseconds{150'000}) == Millis{500});  // WAN: the ceiling
    CHECK(adaptive_rank_slot(c, microseconds{-5}) == Millis{25});
    CHECK(adaptive_rank_slot(c, microseconds::max()) == Millis{500});  // no overflow
    Config fixed = c;
    fixed.rank_slot_rtt_multiple = 0;
    fixed.rank_slot = Millis{60};
    fixed.rank_slot_max = Millis{500};
    CHECK(adaptive_rank_slot(fixed, microseconds{150'000}) == Millis{60});
}

TEST_CASE("ranked: the measured round trip sets the slot of the next wait") {
    // C is rank 1 after losing B in term 5 (see above). With a 20 ms round trip the slot is
    // 4 x 20 = 80 ms and the jitter 7 mod (80 / 8 + 1) = 7 ms.
    Node n = follower_with_leader(ranked3(C));
    n.e.observe_round_trip(std::chrono::microseconds{20'000});
    CHECK(n.e.config().rank_slot == Millis{80});
    CHECK(n.down(B) == Actions{cancel(TimerId::HeartbeatCheck),
                               arm(TimerId::RandomWait, Millis{80 + 7}),
                               notify(Role::Follower, 5, kNone, Reason::LeaderUnavailable)});
    // A faster link later brings it back to the floor; the protocol state never changes.
    Node m = follower_with_leader(ranked3(C));
    const ElectorState before = m.e.state();
    m.e.observe_round_trip(std::chrono::microseconds{20'000});
    m.e.observe_round_trip(std::chrono::microseconds{100});
    CHECK(m.e.state() == before);
    CHECK(m.down(B) == Actions{cancel(TimerId::HeartbeatCheck),
                               arm(TimerId::RandomWait, kSlot + kJitter),
                               notify(Role::Follower, 5, kNone, Reason::LeaderUnavailable)});
}

TEST_CASE("candidacy rank with priorities: higher first, equal ones rotated, priority 0 left out") {
    Priorities p = Config::default_priorities();
    p[0] = 1;
    p[1] = 3;
    p[2] = 0;
    p[3] = 2;
    p[4] = 2;
    // Term 5, 5 nodes: the rotation starts at (5 + 1) mod 5 = 1: 1, 2, 3, 4, 0.
    CHECK(candidacy_rank(5, NodeId{1}, Term{5}, kNone, p) == 0);
    CHECK(candidacy_rank(5, NodeId{3}, Term{5}, kNone, p) == 1);
    CHECK(candidacy_rank(5, NodeId{4}, Term{5}, kNone, p) == 2);
    CHECK(candidacy_rank(5, NodeId{0}, Term{5}, kNone, p) == 3);
    // The lost leader (the highest) is left out; a node known down counts for nobody above.
    CHECK(candidacy_rank(5, NodeId{3}, Term{5}, NodeId{1}, p) == 0);
    NodeSet up;
    up.insert(NodeId{4});
    const CandidacyRank r = candidacy_ranks(5, NodeId{0}, Term{5}, kNone, p, up);
    CHECK(r.above == 1);  // only node 4 of the three above is connected
    CHECK(r.level == 0);
    // Equal priorities: the rotation alone, as without priorities.
    for (std::uint16_t i = 0; i < 5; ++i) {
        CHECK(candidacy_rank(5, NodeId{i}, Term{7}, kNone, Config::default_priorities()) ==
              candidacy_rank(5, NodeId{i}, Term{7}, kNone));
    }
}

TEST_CASE("priorities: a node of priority 0 never waits to stand and takes no transfer") {
    Config c = ranked3(C);
    c.priorities[C.value] = 0;
    Node n = follower_with_leader(c);
    const Actions down = n.down(B);
    for (const Action& a : down) {
        const auto* arm = std::get_if<ArmTimer>(&a);
        CHECK((arm == nullptr || arm->timer != TimerId::RandomWait));
    }
    Config all_zero = ranked3();
    all_zero.priorities[0] = all_zero.priorities[1] = all_zero.priorities[2] = 0;
    CHECK(all_zero.validate());
}
