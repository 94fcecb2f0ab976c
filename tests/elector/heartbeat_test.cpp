// SPDX-License-Identifier: Apache-2.0
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
// Cells: every state x LeaderHeartbeat, HeartbeatAck, HeartbeatResponse, LeadershipCession.
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

TEST_CASE("F-none x LeaderHeartbeat", "[cell]") {
    Node n = follower_no_leader();  // t=5
    SECTION("lower term: tell the stale leader our term") {
        check_reply_only(
            n, [](Node& x) { return x.recv(B, 4, heartbeat(4)); },
            Actions{send(B, 5, HeartbeatResponse{})});
    }
    SECTION("equal term: adopt the leader, unsolicited support (see builders_test)") {
        n.recv(B, 5, heartbeat(5, 3));
        CHECK(n.view().leader == B);
    }
    SECTION("higher term: adopt term (persisted, no vote) and leader, unsolicited support") {
        CHECK(n.recv(B, 6, heartbeat(6, 2)) ==
              Actions{persist(6, kNone), cancel(TimerId::InitialWait),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, B, Reason::LeaderDiscovered),
                      send(B, 6, grant(6))});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               kNone,
                               B,
                               kNone,
                               Reason::LeaderDiscovered,
                               {TimerId::HeartbeatCheck}});
        CHECK(n.e.state().lsn == Lsn{Term{6}, 2});
    }
}

TEST_CASE("F-leader x LeaderHeartbeat", "[cell]") {
    Node n = follower_with_leader();  // t=5, leader B, lsn 5.3
    SECTION("lower term: tell the stale leader our term") {
        check_reply_only(
            n, [](Node& x) { return x.recv(C, 4, heartbeat(4)); },
            Actions{send(C, 5, HeartbeatResponse{})});
    }
    SECTION("equal term from our leader: acknowledge, reset the miss count") {
        n.fire(TimerId::HeartbeatCheck);
        CHECK(n.e.state().missed_checks == 1);
        CHECK(n.recv(B, 5, heartbeat(5, 4)) == Actions{send(B, 5, HeartbeatAck{})});
        CHECK(n.e.state().missed_checks == 0);
        CHECK(n.e.state().lsn == Lsn{Term{5}, 4});
        CHECK(n.view() == View{Role::Follower,
                               5,
                               kNone,
                               B,
                               kNone,
                               Reason::LeaderDiscovered,
                               {TimerId::HeartbeatCheck}});
    }
    SECTION("equal term from another node: two leaders in one term, alarm (departure 6)") {
        check_reply_only(
            n, [](Node& x) { return x.recv(C, 5, heartbeat(5)); }, Actions{alarm(C, 5)});
        CHECK(n.e.counters().two_leader_alarms == 1);
    }
    SECTION("higher term from another node: follow it") {
        CHECK(n.recv(C, 6, heartbeat(6)) ==
              Actions{persist(6, kNone), cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, C, Reason::LeaderDiscovered),
                      send(C, 6, grant(6))});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               kNone,
                               C,
                               kNone,
                               Reason::LeaderDiscovered,
                               {TimerId::HeartbeatCheck}});
    }
    SECTION("higher term from the same leader: new fencing token") {
        CHECK(n.recv(B, 6, heartbeat(6)) ==
              Actions{persist(6, kNone), cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, B, Reason::LeaderDiscovered),
                      send(B, 6, grant(6))});
        CHECK(n.e.snapshot().fencing_token == 6);
    }
}

TEST_CASE("F-tentative x LeaderHeartbeat", "[cell]") {
    Node n = follower_tentative();  // t=6, voted B, tentative B
    SECTION("lower term: tell the stale leader our term") {
        check_reply_only(
            n, [](Node& x) { return x.recv(C, 5, heartbeat(5)); },
            Actions{send(C, 6, HeartbeatResponse{})});
    }
    SECTION("equal term from the tentative leader: confirmed, acknowledge") {
        CHECK(n.recv(B, 6, heartbeat(6)) ==
              Actions{cancel(TimerId::HeartbeatCheck), arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, B, Reason::LeaderDiscovered),
                      send(B, 6, HeartbeatAck{})});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               B,
                               B,
                               kNone,
                               Reason::LeaderDiscovered,
                               {TimerId::HeartbeatCheck}});
    }
    SECTION("equal term from another node: it won without us, follow it") {
        CHECK(n.recv(C, 6, heartbeat(6)) ==
              Actions{cancel(TimerId::HeartbeatCheck), arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, C, Reason::LeaderDiscovered),
                      send(C, 6, grant(6))});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               B,
                               C,
                               kNone,
                               Reason::LeaderDiscovered,
                               {TimerId::HeartbeatCheck}});
    }
    SECTION("higher term from the tentative leader: adopt term, support") {
        CHECK(n.recv(B, 7, heartbeat(7)) ==
              Actions{persist(7, kNone), cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 7, B, Reason::LeaderDiscovered),
                      send(B, 7, grant(7))});
    }
}

TEST_CASE("F-scouting x LeaderHeartbeat", "[cell]") {
    Node n = follower_scouting();  // t=5, round 1
    SECTION("lower term: tell the stale leader our term, keep scouting") {
        check_reply_only(
            n, [](Node& x) { return x.recv(B, 4, heartbeat(4)); },
            Actions{send(B, 5, HeartbeatResponse{})});
    }
    SECTION("equal term: a leader exists, abandon the round and follow") {
        CHECK(n.recv(B, 5, heartbeat(5)) ==
              Actions{cancel(TimerId::ScoutingResult), arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 5, B, Reason::LeaderDiscovered),
                      send(B, 5, grant(5))});
        CHECK(n.e.state().round == ScoutingRound{});
    }
    SECTION("higher term: adopt term, follow") {
        CHECK(n.recv(B, 6, heartbeat(6)) ==
              Actions{persist(6, kNone), cancel(TimerId::ScoutingResult),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, B, Reason::LeaderDiscovered),
                      send(B, 6, grant(6))});
    }
}

TEST_CASE("Candidate x LeaderHeartbeat", "[cell]") {
    Node n = candidate();  // t=6
    SECTION("lower term: tell the stale leader our term") {
        check_reply_only(
            n, [](Node& x) { return x.recv(B, 5, heartbeat(5)); },
            Actions{send(B, 6, HeartbeatResponse{})});
    }
    SECTION("equal term: another node won this term, follow it") {
        CHECK(n.recv(B, 6, heartbeat(6)) ==
              Actions{cancel(TimerId::ElectionResult), arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, B, Reason::ElectionPreempted),
                      send(B, 6, grant(6))});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               A,
                               B,
                               kNone,
                               Reason::ElectionPreempted,
                               {TimerId::HeartbeatCheck}});
    }
    SECTION("higher term: adopt term, follow") {
        CHECK(n.recv(B, 7, heartbeat(7)) ==
              Actions{persist(7, kNone), cancel(TimerId::ElectionResult),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 7, B, Reason::ElectionPreempted),
                      send(B, 7, grant(7))});
    }
}

TEST_CASE("Leader x LeaderHeartbeat", "[cell]") {
    Node n = leader();  // t=6, lsn 6.0
    SECTION("lower term: answer with our own heartbeat") {
        check_reply_only(
            n, [](Node& x) { return x.recv(B, 5, heartbeat(5, 9)); },
            Actions{send(B, 6, heartbeat(6, 0))});
    }
    SECTION("equal term: two leaders in one term, alarm and assert ourselves") {
        CHECK(n.recv(B, 6, heartbeat(6)) == Actions{alarm(B, 6), send(B, 6, heartbeat(6, 0))});
        CHECK(n.view().role == Role::Leader);
    }
    SECTION("higher term: cede, follow") {
        CHECK(n.recv(B, 7, heartbeat(7)) ==
              Actions{persist(7, kNone), bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                      cancel(TimerId::CheckQuorum), arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 7, B, Reason::LeaderPreempted), send(B, 7, grant(7))});
        CHECK(n.view() == View{Role::Follower,
                               7,
                               kNone,
                               B,
                               kNone,
                               Reason::LeaderPreempted,
                               {TimerId::HeartbeatCheck}});
    }
}

TEST_CASE("every state x HeartbeatAck", "[cell]") {
    SECTION("Leader, its term: the sender is a supporter heard from (departure 3)") {
        Node n = leader();
        CHECK(n.recv(C, 6, HeartbeatAck{}) == Actions{});
        CHECK(n.e.state().supporters == NodeSet{0b111});
        CHECK(n.e.state().heard_since_check == NodeSet{0b100});
    }
    SECTION("Leader, another term: ignored") {
        Node n = leader();
        check_ignored(n, [](Node& x) { return x.recv(C, 5, HeartbeatAck{}); });
        check_ignored(n, [](Node& x) { return x.recv(C, 7, HeartbeatAck{}); });
    }
    SECTION("every other state, any term: ignored") {
        for (const auto& s : started_states()) {
            Node n = s.build(fast3());
            if (n.view().role == Role::Leader) {
                continue;
            }
            CAPTURE(s.name);
            for (std::uint64_t term : {4U, 5U, 6U, 7U}) {
                check_ignored(n, [&](Node& x) { return x.recv(C, term, HeartbeatAck{}); });
            }
        }
    }
}

TEST_CASE("every state x HeartbeatResponse", "[cell]") {
    SECTION("Leader, higher term: step down (preempted), cede") {
        Node n = leader();
        CHECK(n.recv(C, 7, HeartbeatResponse{}) ==
              Actions{persist(7, kNone), bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                      cancel(TimerId::CheckQuorum), arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 7, kNone, Reason::LeaderPreempted)});
        CHECK(n.view() == View{Role::Follower,
                               7,
                               kNone,
                               kNone,
                               kNone,
                               Reason::LeaderPreempted,
                               {TimerId::RandomWait}});
    }
    SECTION("Leader, lower or equal term: ignored") {
        Node n = leader();
        check_ignored(n, [](Node& x) { return x.recv(C, 5, HeartbeatResponse{}); });
        check_ignored(n, [](Node& x) { return x.recv(C, 6, HeartbeatResponse{}); });
    }
    SECTION("every other state, any term: ignored") {
        for (const auto& s : started_states()) {
            Node n = s.build(fast3());
            if (n.view().role == Role::Leader) {
                continue;
            }
            CAPTURE(s.name);
            for (std::uint64_t term : {4U, 5U, 6U, 7U, 8U}) {
                check_ignored(n, [&](Node& x) { return x.recv(C, term, HeartbeatResponse{}); });
            }
        }
    }
}

TEST_CASE("F-leader x LeadershipCession", "[cell]") {
    Node n = follower_with_leader();  // t=5, leader B
    SECTION("from the leader, its term: drop it, back off") {
        CHECK(n.recv(B, 5, cession()) ==
              Actions{cancel(TimerId::HeartbeatCheck), arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 5, kNone, Reason::LeaderCeded)});
        CHECK(n.view() == View{Role::Follower,
                               5,
                               kNone,
                               kNone,
                               kNone,
                               Reason::LeaderCeded,
                               {TimerId::RandomWait}});
    }
    SECTION("from the leader naming another successor: give it an election timeout first") {
        CHECK(n.recv(B, 5, cession(C)) ==
              Actions{cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::RandomWait, Millis{200} + kBackoff),
                      notify(Role::Follower, 5, kNone, Reason::LeaderCeded)});
    }
    SECTION("from the leader naming us: stand for election at once (departure 5)") {
        CHECK(n.recv(B, 5, cession(A)) ==
              Actions{cancel(TimerId::HeartbeatCheck), persist(6, A),
                      notify(Role::Candidate, 6, kNone, Reason::ElectionStarted),
                      bcast(6, ElectionProposal{true}), arm(TimerId::ElectionResult, Millis{200})});
        CHECK(n.view() == View{Role::Candidate,
                               6,
                               A,
                               kNone,
                               kNone,
                               Reason::ElectionStarted,
                               {TimerId::ElectionResult}});
    }
    SECTION("from another node, or for another term: ignored") {
        check_ignored(n, [](Node& x) { return x.recv(C, 5, cession()); });
        check_ignored(n, [](Node& x) { return x.recv(B, 4, cession()); });
        check_ignored(n, [](Node& x) { return x.recv(B, 6, cession()); });
    }
}

TEST_CASE("F-tentative x LeadershipCession", "[cell]") {
    Node n = follower_tentative();  // t=6, tentative B
    SECTION("from the tentative leader: drop it, back off, no notification") {
        CHECK(n.recv(B, 6, cession()) ==
              Actions{cancel(TimerId::HeartbeatCheck), arm(TimerId::RandomWait, kBackoff)});
        CHECK(n.view() ==
              View{Role::Follower, 6, B, kNone, kNone, Reason::Started, {TimerId::RandomWait}});
    }
    SECTION("from another node, or for another term: ignored") {
        check_ignored(n, [](Node& x) { return x.recv(C, 6, cession()); });
        check_ignored(n, [](Node& x) { return x.recv(B, 5, cession()); });
        check_ignored(n, [](Node& x) { return x.recv(B, 7, cession()); });
    }
}

TEST_CASE("F-none, F-scouting, Candidate, Leader x LeadershipCession: ignored", "[cell]") {
    for (const auto& s : started_states()) {
        const std::string_view name = s.name;
        if (name == "F-leader" || name == "F-tentative") {
            continue;
        }
        CAPTURE(s.name);
        Node n = s.build(fast3());
        for (std::uint64_t term : {4U, 5U, 6U, 7U}) {
            for (auto successor : {kNone, std::optional{A}, std::optional{C}}) {
                check_ignored(n, [&](Node& x) { return x.recv(B, term, cession(successor)); });
            }
        }
    }
}

TEST_CASE("a term no node can reach is dropped, never adopted") {
    Node n = follower_no_leader();  // t=5
    // The frame that wedged elections: a heartbeat of term 2^64-1 (the codec refuses it too).
    CHECK(n.recv(B, ~std::uint64_t{0}, heartbeat(5)).empty());
    CHECK(n.recv(B, kTermLimit, heartbeat(5)).empty());
    CHECK(n.recv(B, 6, ElectionResponse{false, Refusal::StaleTerm, Term{kTermLimit}}).empty());
    CHECK(n.recv(B, 6, LeaderHeartbeat{Lsn{Term{kTermLimit}, 1}}).empty());
    CHECK(n.e.state().term == Term{5});
    CHECK(n.e.counters().messages_dropped == 4);
}

namespace {
[[noreturn]] void ThrowCheck(const char* what) {
    throw std::logic_error(what);
}
}  // namespace

TEST_CASE("Term::next() cannot wrap: an always-on check") {
    const ScopedInvariantHandler handler(&ThrowCheck);
    CHECK(Term{kTermLimit - 2}.next() == Term{kTermLimit - 1});
    CHECK_THROWS_AS(Term{kTermLimit - 1}.next(), std::logic_error);
    CHECK_THROWS_AS(Term{~std::uint64_t{0}}.next(), std::logic_error);
}

TEST_CASE("at the last term below 2^63 no election starts: no abort, no wrap") {
    Node n = follower_no_leader();
    n.recv(B, kTermLimit - 1, heartbeat(kTermLimit - 1));  // a forged, decodable term
    CHECK(n.e.state().leader == B);
    SECTION("the leader goes silent: the random wait fires, no scouting round starts") {
        for (int i = 0; i < 10; ++i) {
            n.now += Millis{50};
            n.fire(TimerId::HeartbeatCheck);
        }
        CHECK(n.e.state().timer_armed(TimerId::RandomWait));
        CHECK(n.fire(TimerId::RandomWait).empty());
    }
    SECTION("the leader hands over to this node: no election starts") {
        n.recv(B, kTermLimit - 1, LeadershipCession{A});
    }
    CHECK(n.e.counters().term_space_exhausted == 1);
    CHECK(n.e.state().term == Term{kTermLimit - 1});
    CHECK(n.e.state().role == Role::Follower);
}
