// SPDX-License-Identifier: Apache-2.0
// The paths the state builders of harness.hpp take, step by step, with every emitted action.
// These are also the cells "Stopped x start", "F-none x InitialWait", "F-scouting x
// ScoutingResponse(yes)", "F-none x ElectionProposal(higher)", "F-none x LeaderHeartbeat(equal)",
// "F-leader x peer down(leader)" and "Candidate x ElectionResponse(granted, quorum)".
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

TEST_CASE("builder transcript: start, then follow, lose and re-find a leader", "[builder]") {
    Node n(fast3(), DurableState{Term{5}, std::nullopt});
    CHECK(n.view() == View{Role::Stopped, 5, kNone, kNone, kNone, Reason::Stopped, {}});

    // Stopped x start
    CHECK(n.start() == Actions{arm(TimerId::InitialWait, Millis{300}),
                               notify(Role::Follower, 5, kNone, Reason::Started, Millis{0})});
    CHECK(n.up(B) == Actions{});
    CHECK(n.up(C) == Actions{});
    CHECK(n.view() ==
          View{Role::Follower, 5, kNone, kNone, kNone, Reason::Started, {TimerId::InitialWait}});

    // F-none x LeaderHeartbeat(equal term): adopt B, tell it we support it.
    n.now = Millis{900};
    CHECK(n.recv(B, 5, heartbeat(5, 3)) ==
          Actions{cancel(TimerId::InitialWait), arm(TimerId::HeartbeatCheck, Millis{50}),
                  notify(Role::Follower, 5, B, Reason::LeaderDiscovered, Millis{900}),
                  send(B, 5, grant(5))});
    CHECK(n.view() == View{Role::Follower,
                           5,
                           kNone,
                           B,
                           kNone,
                           Reason::LeaderDiscovered,
                           {TimerId::HeartbeatCheck}});
    CHECK(n.e.state().lsn == Lsn{Term{5}, 3});
    CHECK(n.e.snapshot().fencing_token == 5);

    // F-leader x peer down(leader)
    n.now = Millis{950};
    CHECK(n.down(B) ==
          Actions{cancel(TimerId::HeartbeatCheck), arm(TimerId::RandomWait, kBackoff),
                  notify(Role::Follower, 5, kNone, Reason::LeaderUnavailable, Millis{950})});
    CHECK(n.up(B) == Actions{});
    CHECK(n.view() == View{Role::Follower,
                           5,
                           kNone,
                           kNone,
                           kNone,
                           Reason::LeaderUnavailable,
                           {TimerId::RandomWait}});
    n.now = kNow;
    CHECK(follower_leader_lost().view() == n.view());
}

TEST_CASE("builder transcript: vote for a proposal (tentative leader)", "[builder]") {
    Node n = follower_no_leader();
    n.now = Millis{500};
    // F-none x ElectionProposal(higher term): durable vote first, then the grant.
    CHECK(n.recv(B, 6, ElectionProposal{}) == Actions{persist(6, B), cancel(TimerId::InitialWait),
                                                      arm(TimerId::HeartbeatCheck, Millis{50}),
                                                      send(B, 6, grant(6))});
    CHECK(n.view() ==
          View{Role::Follower, 6, B, kNone, B, Reason::Started, {TimerId::HeartbeatCheck}});
    CHECK(follower_tentative().view() == n.view());
}

TEST_CASE("builder transcript: scout, stand, win", "[builder]") {
    Node n = follower_no_leader();
    n.now = Millis{300};
    // F-none x InitialWait(armed): scouting round 1 asks about term 6; own term stays 5.
    CHECK(n.fire(TimerId::InitialWait) ==
          Actions{bcast(6, ScoutingRequest{1}), arm(TimerId::ScoutingResult, Millis{200})});
    CHECK(n.view() ==
          View{Role::Follower, 5, kNone, kNone, kNone, Reason::Started, {TimerId::ScoutingResult}});
    CHECK(n.e.state().round == ScoutingRound{1, Term{6}, NodeSet{0b001}, NodeSet{}});

    // F-scouting x ScoutingResponse(yes, quorum reached): become candidate for term 6.
    n.now = Millis{400};
    CHECK(n.recv(B, 6, ScoutingResponse{1, true}) ==
          Actions{cancel(TimerId::ScoutingResult), persist(6, A),
                  notify(Role::Candidate, 6, kNone, Reason::ElectionStarted, Millis{400}),
                  bcast(6, ElectionProposal{false}), arm(TimerId::ElectionResult, Millis{200})});
    CHECK(n.view() == View{Role::Candidate,
                           6,
                           A,
                           kNone,
                           kNone,
                           Reason::ElectionStarted,
                           {TimerId::ElectionResult}});
    CHECK(n.e.state().supporters == NodeSet{0b001});

    // Candidate x ElectionResponse(granted, quorum reached): leader, heartbeat at once.
    n.now = Millis{450};
    CHECK(n.recv(B, 6, grant(6)) ==
          Actions{cancel(TimerId::ElectionResult), bcast(6, heartbeat(6, 0)),
                  arm(TimerId::HeartbeatBroadcast, Millis{100}),
                  arm(TimerId::CheckQuorum, Millis{300}),
                  notify(Role::Leader, 6, A, Reason::ElectionWon, Millis{450})});
    CHECK(n.view() == View{Role::Leader,
                           6,
                           A,
                           A,
                           kNone,
                           Reason::ElectionWon,
                           {TimerId::HeartbeatBroadcast, TimerId::CheckQuorum}});
    CHECK(n.e.state().supporters == NodeSet{0b011});
    CHECK(n.e.snapshot().fencing_token == 6);

    n.now = kNow;
    CHECK(follower_scouting().view() ==
          View{Role::Follower, 5, kNone, kNone, kNone, Reason::Started, {TimerId::ScoutingResult}});
    CHECK(candidate().view() == View{Role::Candidate,
                                     6,
                                     A,
                                     kNone,
                                     kNone,
                                     Reason::ElectionStarted,
                                     {TimerId::ElectionResult}});
    CHECK(leader().e.state() == n.e.state());
}

TEST_CASE("a single-node cluster elects itself after the initial wait", "[builder]") {
    Config config = Config::fast(1, A);
    config.backoff = Backoff::Uniform;  // the ranked start would add its jitter (3 ms here)
    Node n(config);
    CHECK(n.start() == Actions{arm(TimerId::InitialWait, Millis{300}),
                               notify(Role::Follower, 0, kNone, Reason::Started, Millis{0})});
    n.now = Millis{300};
    // Alone, self is a quorum: no scouting messages, no proposal, no broadcast (no peers).
    CHECK(n.fire(TimerId::InitialWait) ==
          Actions{persist(1, A),
                  notify(Role::Candidate, 1, kNone, Reason::ElectionStarted, Millis{300}),
                  arm(TimerId::HeartbeatBroadcast, Millis{100}),
                  arm(TimerId::CheckQuorum, Millis{300}),
                  notify(Role::Leader, 1, A, Reason::ElectionWon, Millis{300})});
    CHECK(n.e.snapshot().fencing_token == 1);
    n.now = Millis{400};
    CHECK(n.fire(TimerId::HeartbeatBroadcast) ==
          Actions{arm(TimerId::HeartbeatBroadcast, Millis{100})});
    n.now = Millis{600};
    // Self alone is a quorum for check-quorum too.
    CHECK(n.fire(TimerId::CheckQuorum) == Actions{arm(TimerId::CheckQuorum, Millis{300})});
}
