// SPDX-License-Identifier: Apache-2.0
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
// Cells: every state x ElectionProposal, every state x ElectionResponse.
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

namespace {

Config no_scouting() {
    Config c = fast3();
    c.scouting = false;
    return c;
}

/// Leader in term 6 without scouting: InitialWait -> candidate at once -> B's vote.
Node leader_without_scouting() {
    Node n = follower_no_leader(no_scouting());
    n.fire(TimerId::InitialWait);
    n.recv(B, 6, grant(6));
    REQUIRE(n.view().role == Role::Leader);
    return n;
}

void check_refusal(Node& n, std::uint64_t term, Refusal why, std::uint64_t voter_term) {
    CAPTURE(term, to_string(why));
    check_reply_only(
        n, [&](Node& x) { return x.recv(C, term, ElectionProposal{}); },
        Actions{send(C, term, refuse(why, voter_term))});
}

}  // namespace

TEST_CASE("F-none x ElectionProposal", "[cell]") {
    Node n = follower_no_leader();  // t=5, no vote
    SECTION("lower term: refused, stale") {
        check_refusal(n, 4, Refusal::StaleTerm, 5);
    }
    SECTION("equal term, no vote cast in it: refused, stale") {
        check_refusal(n, 5, Refusal::StaleTerm, 5);
    }
    SECTION("higher term: vote (persisted first), tentative leader, no notification") {
        CHECK(n.recv(C, 6, ElectionProposal{}) ==
              Actions{persist(6, C), cancel(TimerId::InitialWait),
                      arm(TimerId::HeartbeatCheck, Millis{50}), send(C, 6, grant(6))});
        CHECK(n.view() ==
              View{Role::Follower, 6, C, kNone, C, Reason::Started, {TimerId::HeartbeatCheck}});
    }
}

TEST_CASE("F-leader x ElectionProposal", "[cell]") {
    SECTION("lower term: refused, stale") {
        Node n = follower_with_leader();  // t=5, leader B
        check_refusal(n, 4, Refusal::StaleTerm, 5);
    }
    SECTION("equal and higher term: refused, has a leader (sticky)") {
        Node n = follower_with_leader();
        check_refusal(n, 5, Refusal::HasLeader, 5);
        check_refusal(n, 6, Refusal::HasLeader, 5);
    }
    SECTION("higher term, transfer flag: vote, drop the leader") {
        Node n = follower_with_leader();
        CHECK(n.recv(C, 6, ElectionProposal{true}) ==
              Actions{persist(6, C), cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, kNone, Reason::ElectionPreempted),
                      send(C, 6, grant(6))});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               C,
                               kNone,
                               C,
                               Reason::ElectionPreempted,
                               {TimerId::HeartbeatCheck}});
    }
    SECTION("higher term, scouting off: not sticky, vote (the article's first algorithm)") {
        Node n = follower_with_leader(no_scouting());
        CHECK(n.recv(C, 6, ElectionProposal{}) ==
              Actions{persist(6, C), cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, kNone, Reason::ElectionPreempted),
                      send(C, 6, grant(6))});
    }
}

TEST_CASE("F-tentative x ElectionProposal", "[cell]") {
    Node n = follower_tentative();  // t=6, voted B
    SECTION("lower term: refused, stale") {
        check_refusal(n, 5, Refusal::StaleTerm, 6);
    }
    SECTION("equal term from another node: refused, already voted") {
        check_refusal(n, 6, Refusal::AlreadyVoted, 6);
    }
    SECTION("equal term from the node voted for: granted again, nothing else") {
        check_reply_only(
            n, [](Node& x) { return x.recv(B, 6, ElectionProposal{}); },
            Actions{send(B, 6, grant(6))});
    }
    SECTION("higher term: vote for the new candidate") {
        CHECK(n.recv(C, 7, ElectionProposal{}) ==
              Actions{persist(7, C), cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::HeartbeatCheck, Millis{50}), send(C, 7, grant(7))});
        CHECK(n.view() ==
              View{Role::Follower, 7, C, kNone, C, Reason::Started, {TimerId::HeartbeatCheck}});
    }
    SECTION("equal term with PlantedBug::DoubleVote: votes twice") {
        Node m = follower_tentative([] {
            Config c = fast3();
            c.planted_bug = PlantedBug::DoubleVote;
            return c;
        }());
        CHECK(m.recv(C, 6, ElectionProposal{}) == Actions{persist(6, C), send(C, 6, grant(6))});
    }
}

TEST_CASE("F-scouting x ElectionProposal", "[cell]") {
    Node n = follower_scouting();  // t=5, round 1 for term 6
    SECTION("lower and equal term: refused, stale; the round goes on") {
        check_refusal(n, 4, Refusal::StaleTerm, 5);
        check_refusal(n, 5, Refusal::StaleTerm, 5);
    }
    SECTION("higher term: vote, abandon the round") {
        CHECK(n.recv(C, 6, ElectionProposal{}) ==
              Actions{persist(6, C), cancel(TimerId::ScoutingResult),
                      arm(TimerId::HeartbeatCheck, Millis{50}), send(C, 6, grant(6))});
        CHECK(n.view() ==
              View{Role::Follower, 6, C, kNone, C, Reason::Started, {TimerId::HeartbeatCheck}});
        CHECK(n.e.state().round == ScoutingRound{});
    }
}

TEST_CASE("Candidate x ElectionProposal", "[cell]") {
    Node n = candidate();  // t=6, voted self
    SECTION("lower term: refused, stale") {
        check_refusal(n, 5, Refusal::StaleTerm, 6);
    }
    SECTION("equal term: refused, already voted (for itself)") {
        check_refusal(n, 6, Refusal::AlreadyVoted, 6);
    }
    SECTION("higher term: preempted, back to follower, vote") {
        CHECK(n.recv(C, 7, ElectionProposal{}) ==
              Actions{persist(7, C), cancel(TimerId::ElectionResult),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 7, kNone, Reason::ElectionPreempted),
                      send(C, 7, grant(7))});
        CHECK(n.view() == View{Role::Follower,
                               7,
                               C,
                               kNone,
                               C,
                               Reason::ElectionPreempted,
                               {TimerId::HeartbeatCheck}});
    }
}

TEST_CASE("Leader x ElectionProposal", "[cell]") {
    SECTION("lower term: refused, stale") {
        Node n = leader();  // t=6
        check_refusal(n, 5, Refusal::StaleTerm, 6);
    }
    SECTION("equal and higher term: refused, I am the leader") {
        Node n = leader();
        check_refusal(n, 6, Refusal::IAmLeader, 6);
        check_refusal(n, 7, Refusal::IAmLeader, 6);
    }
    SECTION("higher term, transfer flag: cede, vote") {
        Node n = leader();
        CHECK(n.recv(C, 7, ElectionProposal{true}) ==
              Actions{persist(7, C), bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                      cancel(TimerId::CheckQuorum), arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 7, kNone, Reason::LeaderPreempted),
                      send(C, 7, grant(7))});
        CHECK(n.view() == View{Role::Follower,
                               7,
                               C,
                               kNone,
                               C,
                               Reason::LeaderPreempted,
                               {TimerId::HeartbeatCheck}});
    }
    SECTION("higher term, scouting off: cede, vote") {
        Node n = leader_without_scouting();
        CHECK(n.recv(C, 7, ElectionProposal{}) ==
              Actions{persist(7, C), bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                      cancel(TimerId::CheckQuorum), arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 7, kNone, Reason::LeaderPreempted),
                      send(C, 7, grant(7))});
    }
}

TEST_CASE("Candidate x ElectionResponse", "[cell]") {
    Node n = candidate();  // t=6, supporters {A}, quorum 2
    SECTION("granted for this election: leader (see builders_test)") {
        n.recv(C, 6, grant(6));
        CHECK(n.view().role == Role::Leader);
        CHECK(n.e.state().supporters == NodeSet{0b101});
    }
    SECTION("for another election (lower or higher envelope term): ignored") {
        check_ignored(n, [](Node& x) { return x.recv(B, 5, grant(5)); });
        check_ignored(n, [](Node& x) { return x.recv(B, 7, grant(7)); });
        check_ignored(n, [](Node& x) { return x.recv(B, 5, refuse(Refusal::HasLeader, 9)); });
    }
    SECTION("refusals: a quorum can no longer be reached, give up at once (departure 4)") {
        CHECK(n.recv(B, 6, refuse(Refusal::HasLeader, 6)) == Actions{});
        CHECK(n.e.state().refusals == NodeSet{0b010});
        CHECK(n.recv(C, 6, refuse(Refusal::AlreadyVoted, 6)) ==
              Actions{cancel(TimerId::ElectionResult), arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 6, kNone, Reason::ElectionRefused)});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               A,
                               kNone,
                               kNone,
                               Reason::ElectionRefused,
                               {TimerId::RandomWait}});
    }
    SECTION("refusal from a voter at a higher term: adopt it, back to follower") {
        CHECK(n.recv(B, 6, refuse(Refusal::StaleTerm, 8)) ==
              Actions{persist(8, kNone), cancel(TimerId::ElectionResult),
                      arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 8, kNone, Reason::ElectionPreempted)});
        CHECK(n.view() == View{Role::Follower,
                               8,
                               kNone,
                               kNone,
                               kNone,
                               Reason::ElectionPreempted,
                               {TimerId::RandomWait}});
    }
}

TEST_CASE("Leader x ElectionResponse", "[cell]") {
    Node n = leader();  // t=6, supporters {A, B}
    SECTION("late vote or unsolicited support in its term: counted as a supporter") {
        CHECK(n.recv(C, 6, grant(6)) == Actions{});
        CHECK(n.e.state().supporters == NodeSet{0b111});
        CHECK(n.e.state().heard_since_check == NodeSet{0b100});
    }
    SECTION("refusal in its term, any response for another term: ignored") {
        check_ignored(n, [](Node& x) { return x.recv(C, 6, refuse(Refusal::StaleTerm, 6)); });
        check_ignored(n, [](Node& x) { return x.recv(C, 5, grant(5)); });
        // The reference steps down here; in Conclave the envelope term is the proposal's term, so
        // a response in a higher term is not addressed to this leader (see README.md).
        check_ignored(n, [](Node& x) { return x.recv(C, 7, grant(7)); });
    }
}

TEST_CASE("every follower state x ElectionResponse: ignored", "[cell]") {
    for (const auto& s : started_states()) {
        Node n = s.build(fast3());
        if (n.view().role != Role::Follower) {
            continue;
        }
        CAPTURE(s.name);
        for (std::uint64_t term : {4U, 5U, 6U, 7U}) {
            check_ignored(n, [&](Node& x) { return x.recv(C, term, grant(term)); });
            check_ignored(n, [&](Node& x) {
                return x.recv(C, term, refuse(Refusal::AlreadyVoted, term + 1));
            });
        }
    }
}
