// SPDX-License-Identifier: Apache-2.0
// Cells: every state x start, every state x stop, and Stopped x every other input.
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

namespace {

std::vector<MessageBody> every_body() {
    return {ScoutingRequest{1},
            ScoutingResponse{1, true},
            ElectionProposal{false},
            grant(6),
            heartbeat(6),
            HeartbeatAck{},
            HeartbeatResponse{},
            cession()};
}

void check_stopped_ignores_everything(Node& n) {
    for (const MessageBody& body : every_body()) {
        for (std::uint64_t term : {4U, 5U, 6U, 7U}) {
            CAPTURE(message_name(body), term);
            check_ignored(n, [&](Node& x) { return x.recv(B, term, body); });
        }
    }
    for (std::size_t i = 0; i < kTimerCount; ++i) {
        CAPTURE(to_string(static_cast<TimerId>(i)));
        check_ignored(n, [&](Node& x) { return x.fire(static_cast<TimerId>(i)); });
    }
    CHECK(n.e.transfer_error(B) == "this node is not the leader");
    check_ignored(n, [](Node& x) { return x.transfer(B); });
    check_ignored(n, [](Node& x) { return x.stop(); });

    // Connection state is still recorded (a restart needs it), but nothing is emitted.
    const View before = n.view();
    CHECK(n.down(C) == Actions{});
    CHECK_FALSE(n.e.state().peers_up.contains(C));
    CHECK(n.up(C) == Actions{});
    CHECK(n.e.state().peers_up.contains(C));
    CHECK(n.view() == before);
}

}  // namespace

TEST_CASE("Stopped x every input except start: ignored", "[cell][stopped]") {
    SECTION("never started") {
        Node n = stopped_node();
        CHECK(n.view() == View{Role::Stopped, 5, kNone, kNone, kNone, Reason::Stopped, {}});
        check_stopped_ignores_everything(n);
    }
    SECTION("stopped after leading") {
        Node n = leader();
        n.stop();
        CHECK(n.view() == View{Role::Stopped, 6, A, kNone, kNone, Reason::Stopped, {}});
        check_stopped_ignores_everything(n);
    }
}

TEST_CASE("Stopped x start: follower, InitialWait armed", "[cell][stopped]") {
    Node n = stopped_node();
    CHECK(n.start() == Actions{arm(TimerId::InitialWait, Millis{300}),
                               notify(Role::Follower, 5, kNone, Reason::Started)});
    CHECK(n.view() ==
          View{Role::Follower, 5, kNone, kNone, kNone, Reason::Started, {TimerId::InitialWait}});
}

TEST_CASE("every started state x start: ignored", "[cell]") {
    for (const auto& s : started_states()) {
        CAPTURE(s.name);
        Node n = s.build(fast3());
        check_ignored(n, [](Node& x) { return x.start(); });
    }
}

TEST_CASE("every started state x stop: cancel timers, keep term and vote", "[cell]") {
    SECTION("F-none") {
        Node n = follower_no_leader();
        CHECK(n.stop() == Actions{cancel(TimerId::InitialWait),
                                  notify(Role::Stopped, 5, kNone, Reason::Stopped)});
        CHECK(n.view() == View{Role::Stopped, 5, kNone, kNone, kNone, Reason::Stopped, {}});
    }
    SECTION("F-leader") {
        Node n = follower_with_leader();
        CHECK(n.stop() == Actions{cancel(TimerId::HeartbeatCheck),
                                  notify(Role::Stopped, 5, kNone, Reason::Stopped)});
        CHECK(n.view() == View{Role::Stopped, 5, kNone, kNone, kNone, Reason::Stopped, {}});
    }
    SECTION("F-tentative") {
        Node n = follower_tentative();
        CHECK(n.stop() == Actions{cancel(TimerId::HeartbeatCheck),
                                  notify(Role::Stopped, 6, kNone, Reason::Stopped)});
        CHECK(n.view() == View{Role::Stopped, 6, B, kNone, kNone, Reason::Stopped, {}});
    }
    SECTION("F-scouting") {
        Node n = follower_scouting();
        CHECK(n.stop() == Actions{cancel(TimerId::ScoutingResult),
                                  notify(Role::Stopped, 5, kNone, Reason::Stopped)});
        CHECK(n.view() == View{Role::Stopped, 5, kNone, kNone, kNone, Reason::Stopped, {}});
        CHECK(n.e.state().round == ScoutingRound{});
    }
    SECTION("Candidate") {
        Node n = candidate();
        CHECK(n.stop() == Actions{cancel(TimerId::ElectionResult),
                                  notify(Role::Stopped, 6, kNone, Reason::Stopped)});
        CHECK(n.view() == View{Role::Stopped, 6, A, kNone, kNone, Reason::Stopped, {}});
    }
    SECTION("Leader: cedes leadership of its term first") {
        Node n = leader();
        CHECK(n.stop() == Actions{bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                                  cancel(TimerId::CheckQuorum),
                                  notify(Role::Stopped, 6, kNone, Reason::Stopped)});
        CHECK(n.view() == View{Role::Stopped, 6, A, kNone, kNone, Reason::Stopped, {}});
        CHECK(n.e.state().supporters.empty());
        // Restart in place: a leaderless follower again, same term and vote.
        n.now = Millis{2000};
        CHECK(n.start() ==
              Actions{arm(TimerId::InitialWait, Millis{300}),
                      notify(Role::Follower, 6, kNone, Reason::Started, Millis{2000})});
        CHECK(n.view() ==
              View{Role::Follower, 6, A, kNone, kNone, Reason::Started, {TimerId::InitialWait}});
    }
}
