// SPDX-License-Identifier: Apache-2.0
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
// Cells: every state x ScoutingRequest, every state x ScoutingResponse.
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

namespace {

// A ScoutingRequest never changes state: the answer is will_vote = (no confirmed leader) && T > t,
// echoing the request's term and round.
void check_scouting_answer(Node& n, std::uint64_t term, bool will_vote) {
    CAPTURE(term, will_vote);
    check_reply_only(
        n, [&](Node& x) { return x.recv(C, term, ScoutingRequest{9}); },
        Actions{send(C, term, ScoutingResponse{9, will_vote})});
}

}  // namespace

TEST_CASE("every state x ScoutingRequest: answer, change nothing", "[cell]") {
    SECTION("F-none (t=5): yes only for a higher term") {
        Node n = follower_no_leader();
        check_scouting_answer(n, 4, false);
        check_scouting_answer(n, 5, false);
        check_scouting_answer(n, 6, true);
    }
    SECTION("F-leader (t=5): no even for a higher term (sticky leader)") {
        Node n = follower_with_leader();
        check_scouting_answer(n, 4, false);
        check_scouting_answer(n, 5, false);
        check_scouting_answer(n, 6, false);
    }
    SECTION("F-leader with PlantedBug::SkipStickyLeader: yes for a higher term") {
        Config config = fast3();
        config.planted_bug = PlantedBug::SkipStickyLeader;
        Node n = follower_with_leader(config);
        check_scouting_answer(n, 6, true);
    }
    SECTION("F-tentative (t=6): a tentative leader is not a known leader") {
        Node n = follower_tentative();
        check_scouting_answer(n, 5, false);
        check_scouting_answer(n, 6, false);
        check_scouting_answer(n, 7, true);
    }
    SECTION("F-scouting (t=5): a scouting node answers too") {
        Node n = follower_scouting();
        check_scouting_answer(n, 5, false);
        check_scouting_answer(n, 6, true);
    }
    SECTION("Candidate (t=6)") {
        Node n = candidate();
        check_scouting_answer(n, 6, false);
        check_scouting_answer(n, 7, true);
    }
    SECTION("Leader (t=6): always no") {
        Node n = leader();
        check_scouting_answer(n, 5, false);
        check_scouting_answer(n, 6, false);
        check_scouting_answer(n, 7, false);
    }
}

TEST_CASE("F-scouting x ScoutingResponse", "[cell]") {
    Node n = follower_scouting();  // round 1 for term 6, yes = {A}
    SECTION("yes for the current round reaching a quorum: candidate (see builders_test)") {
        n.recv(B, 6, ScoutingResponse{1, true});
        CHECK(n.view().role == Role::Candidate);
    }
    SECTION("a no is recorded; a later yes from the same node replaces it") {
        CHECK(n.recv(B, 6, ScoutingResponse{1, false}) == Actions{});
        CHECK(n.e.state().round == ScoutingRound{1, Term{6}, NodeSet{0b001}, NodeSet{0b010}});
        CHECK(n.view() == View{Role::Follower,
                               5,
                               kNone,
                               kNone,
                               kNone,
                               Reason::Started,
                               {TimerId::ScoutingResult}});
        CHECK(n.recv(B, 6, ScoutingResponse{1, true}) ==
              Actions{cancel(TimerId::ScoutingResult), persist(6, A),
                      notify(Role::Candidate, 6, kNone, Reason::ElectionStarted),
                      bcast(6, ElectionProposal{false}),
                      arm(TimerId::ElectionResult, Millis{200})});
    }
    SECTION("a quorum can no longer say yes: give up the round at once, back off") {
        CHECK(n.recv(B, 6, ScoutingResponse{1, false}) == Actions{});
        CHECK(n.recv(C, 6, ScoutingResponse{1, false}) ==
              Actions{cancel(TimerId::ScoutingResult), arm(TimerId::RandomWait, kBackoff)});
        CHECK(n.view() ==
              View{Role::Follower, 5, kNone, kNone, kNone, Reason::Started, {TimerId::RandomWait}});
        CHECK(n.e.state().round == ScoutingRound{});
    }
    SECTION("a reply for another term is ignored") {
        check_ignored(n, [](Node& x) { return x.recv(B, 5, ScoutingResponse{1, true}); });
        check_ignored(n, [](Node& x) { return x.recv(B, 7, ScoutingResponse{1, true}); });
    }
    SECTION("a reply for an older round of the same term is ignored (departure 2)") {
        // Round 1 fails, round 2 asks about the same term 6; B's late yes to round 1 arrives.
        n.fire(TimerId::ScoutingResult);
        n.fire(TimerId::RandomWait);
        CHECK(n.e.state().round == ScoutingRound{2, Term{6}, NodeSet{0b001}, NodeSet{}});
        check_ignored(n, [](Node& x) { return x.recv(B, 6, ScoutingResponse{1, true}); });
    }
    SECTION("with PlantedBug::CountStaleScoutingReplies the late reply is counted") {
        Config config = fast3();
        config.planted_bug = PlantedBug::CountStaleScoutingReplies;
        Node m = follower_scouting(config);
        m.fire(TimerId::ScoutingResult);
        m.fire(TimerId::RandomWait);
        m.recv(B, 6, ScoutingResponse{1, true});
        CHECK(m.view().role == Role::Candidate);
    }
}

TEST_CASE("every state but F-scouting x ScoutingResponse: ignored", "[cell]") {
    for (const auto& s : started_states()) {
        if (std::string_view(s.name) == "F-scouting") {
            continue;
        }
        CAPTURE(s.name);
        Node n = s.build(fast3());
        for (std::uint64_t term : {5U, 6U, 7U}) {
            for (bool yes : {true, false}) {
                check_ignored(n, [&](Node& x) {
                    return x.recv(C, term, ScoutingResponse{1, yes});
                });
            }
        }
    }
    SECTION("F-none after a finished round: the round's late replies are ignored") {
        Node n = follower_scouting();
        n.fire(TimerId::ScoutingResult);
        check_ignored(n, [](Node& x) { return x.recv(B, 6, ScoutingResponse{1, true}); });
    }
}

// Corroboration (elector.cpp, HandleScoutingRequest): the follower's promise to its leader lasts
// P = 250 ms (E = 300 ms less one 50 ms check period) from the heartbeat heard at 900 ms; a request
// for a newer term arriving after it ran out, before the heartbeat check that would drop the leader
// fires, stands in for that check.
TEST_CASE("F-leader whose promise ran out x ScoutingRequest: corroboration", "[cell]") {
    Node n = follower_with_leader();  // leader B, term 5, heard at 900 ms
    const std::uint32_t misses = n.e.config().heartbeat_check_misses();
    REQUIRE(misses == 6);
    SECTION("inside the promise, whatever the checks counted: still sticky, nothing changes") {
        for (std::uint32_t k = 0; k + 1 < misses; ++k) {
            n.fire(TimerId::HeartbeatCheck);
        }
        n.now = Millis{1149};
        check_scouting_answer(n, 6, false);
    }
    SECTION("promise over: an equal or older term changes nothing") {
        n.now = Millis{1150};
        check_scouting_answer(n, 5, false);
        check_scouting_answer(n, 4, false);
    }
    SECTION("promise over, newer term: drop the leader, say yes, let the asker go first") {
        n.now = Millis{1150};
        CHECK(n.recv(C, 6, ScoutingRequest{9}) ==
              Actions{cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::RandomWait, Millis{200} + kBackoff),
                      notify(Role::Follower, 5, kNone, Reason::LeaderNoHeartbeat, n.now),
                      send(C, 6, ScoutingResponse{9, true})});
        CHECK(n.view() == View{Role::Follower,
                               5,
                               kNone,
                               kNone,
                               kNone,
                               Reason::LeaderNoHeartbeat,
                               {TimerId::RandomWait}});
        CHECK(n.e.counters().silences_corroborated == 1);
    }
}
