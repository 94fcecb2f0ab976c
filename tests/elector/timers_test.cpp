// SPDX-License-Identifier: Apache-2.0
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
// Cells: every state x each of the 7 timers, armed and not armed.
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

TEST_CASE("every state x a timer that is not armed: ignored", "[cell][timer]") {
    // The builders' armed sets are asserted in builders_test.cpp; every other timer's firing is a
    // stale or replaced instance and must change nothing.
    std::vector<NamedState> states = started_states();
    states.push_back({"F-none (leader lost)", follower_leader_lost});
    for (const auto& s : states) {
        Node n = s.build(fast3());
        for (std::size_t i = 0; i < kTimerCount; ++i) {
            const auto timer = static_cast<TimerId>(i);
            if (n.e.state().timer_armed(timer)) {
                continue;
            }
            CAPTURE(s.name, to_string(timer));
            check_ignored(n, [&](Node& x) { return x.fire(timer); });
        }
    }
}

TEST_CASE("F-none x InitialWait / RandomWait (armed)", "[cell][timer]") {
    SECTION("InitialWait: scouting round (see builders_test)") {
        Node n = follower_no_leader();
        n.fire(TimerId::InitialWait);
        CHECK(n.e.state().round.id == 1);
    }
    SECTION("InitialWait, scouting off: stand for election at once") {
        Config config = fast3();
        config.scouting = false;
        Node n = follower_no_leader(config);
        CHECK(n.fire(TimerId::InitialWait) ==
              Actions{persist(6, A), notify(Role::Candidate, 6, kNone, Reason::ElectionStarted),
                      bcast(6, ElectionProposal{false}),
                      arm(TimerId::ElectionResult, Millis{200})});
        CHECK(n.view() == View{Role::Candidate,
                               6,
                               A,
                               kNone,
                               kNone,
                               Reason::ElectionStarted,
                               {TimerId::ElectionResult}});
    }
    SECTION("RandomWait after losing the leader: scouting round") {
        Node n = follower_leader_lost();
        CHECK(n.fire(TimerId::RandomWait) ==
              Actions{bcast(6, ScoutingRequest{1}), arm(TimerId::ScoutingResult, Millis{200})});
        CHECK(n.view() == View{Role::Follower,
                               5,
                               kNone,
                               kNone,
                               kNone,
                               Reason::LeaderUnavailable,
                               {TimerId::ScoutingResult}});
    }
}

TEST_CASE("F-scouting x ScoutingResult (armed): end the round, back off, scout again",
          "[cell][timer]") {
    Node n = follower_scouting();
    CHECK(n.fire(TimerId::ScoutingResult) == Actions{arm(TimerId::RandomWait, kBackoff)});
    CHECK(n.view() ==
          View{Role::Follower, 5, kNone, kNone, kNone, Reason::Started, {TimerId::RandomWait}});
    CHECK(n.e.state().round == ScoutingRound{});
    CHECK(n.fire(TimerId::RandomWait) ==
          Actions{bcast(6, ScoutingRequest{2}), arm(TimerId::ScoutingResult, Millis{200})});
}

TEST_CASE("F-leader / F-tentative x HeartbeatCheck (armed)", "[cell][timer]") {
    // Fast profile: inactivity 3 x 100 ms, check period 50 ms: the 6th silent check gives up.
    SECTION("F-leader: five silent checks re-arm, the sixth drops the leader") {
        Node n = follower_with_leader();  // B heard at 900 ms
        for (std::uint32_t i = 1; i <= 5; ++i) {
            n.now += Millis{50};
            CHECK(n.fire(TimerId::HeartbeatCheck) ==
                  Actions{arm(TimerId::HeartbeatCheck, Millis{50})});
            CHECK(n.e.state().missed_checks == i);
        }
        n.now += Millis{50};  // 1300 ms: the promise (900 + 300 ms) is over
        CHECK(n.fire(TimerId::HeartbeatCheck) ==
              Actions{arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 5, kNone, Reason::LeaderNoHeartbeat, n.now)});
        CHECK(n.view() == View{Role::Follower,
                               5,
                               kNone,
                               kNone,
                               kNone,
                               Reason::LeaderNoHeartbeat,
                               {TimerId::RandomWait}});
    }
    SECTION("F-tentative: the sixth silent check drops the tentative leader, no notification") {
        Node n = follower_tentative();
        for (int i = 0; i < 5; ++i) {
            CHECK(n.fire(TimerId::HeartbeatCheck) ==
                  Actions{arm(TimerId::HeartbeatCheck, Millis{50})});
        }
        CHECK(n.fire(TimerId::HeartbeatCheck) == Actions{arm(TimerId::RandomWait, kBackoff)});
        CHECK(n.view() ==
              View{Role::Follower, 6, B, kNone, kNone, Reason::Started, {TimerId::RandomWait}});
    }
}

TEST_CASE("Candidate x ElectionResult (armed): quorum not achieved, keep the term and vote",
          "[cell][timer]") {
    Node n = candidate();
    CHECK(n.fire(TimerId::ElectionResult) ==
          Actions{arm(TimerId::RandomWait, kBackoff),
                  notify(Role::Follower, 6, kNone, Reason::QuorumNotAchieved)});
    CHECK(
        n.view() ==
        View{Role::Follower, 6, A, kNone, kNone, Reason::QuorumNotAchieved, {TimerId::RandomWait}});
}

TEST_CASE("Leader x HeartbeatBroadcast (armed): heartbeat with the latest LSN, re-arm",
          "[cell][timer]") {
    Node n = leader();
    CHECK(n.fire(TimerId::HeartbeatBroadcast) ==
          Actions{bcast(6, heartbeat(6, 0, 1)), arm(TimerId::HeartbeatBroadcast, Millis{100})});
    CHECK(n.e.issue_lsn() == Lsn{Term{6}, 1});
    CHECK(n.e.issue_lsn() == Lsn{Term{6}, 2});
    CHECK(n.fire(TimerId::HeartbeatBroadcast) ==
          Actions{bcast(6, heartbeat(6, 2, 2)), arm(TimerId::HeartbeatBroadcast, Millis{100})});
    CHECK(n.view() == View{Role::Leader,
                           6,
                           A,
                           A,
                           kNone,
                           Reason::ElectionWon,
                           {TimerId::HeartbeatBroadcast, TimerId::CheckQuorum}});
}

TEST_CASE("Leader x CheckQuorum (armed)", "[cell][timer]") {
    SECTION("heard from a quorum since the last check: clear, re-arm") {
        Node n = leader();
        n.recv(B, 6, HeartbeatAck{});
        CHECK(n.fire(TimerId::CheckQuorum) == Actions{arm(TimerId::CheckQuorum, Millis{300})});
        CHECK(n.e.state().heard_since_check.empty());
        CHECK(n.view().role == Role::Leader);
    }
    SECTION("heard from less than a quorum: step down (departure 3), cede") {
        Node n = leader();  // B's vote is not a heartbeat acknowledgement
        CHECK(n.fire(TimerId::CheckQuorum) ==
              Actions{bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                      arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 6, kNone, Reason::CheckQuorumFailed)});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               A,
                               kNone,
                               kNone,
                               Reason::CheckQuorumFailed,
                               {TimerId::RandomWait}});
    }
    SECTION("check_quorum off: the timer is never armed") {
        Config config = fast3();
        config.check_quorum = false;
        Node n = leader(config);
        CHECK(n.view().armed == std::vector<TimerId>{TimerId::HeartbeatBroadcast});
        check_ignored(n, [](Node& x) { return x.fire(TimerId::CheckQuorum); });
    }
}
