// SPDX-License-Identifier: Apache-2.0
// Membership, the elector's slice (docs/membership.md R5, R7, R8): set_voters(), the
// version fence in HandleScoutingRequest / HandleElectionProposal, counting over the voters, and a
// non-voter that never stands. Simulated time; the conventions of harness.hpp.
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

namespace {

constexpr NodeId D{3};

NodeSet set_of(std::initializer_list<NodeId> nodes) {
    NodeSet s;
    for (NodeId n : nodes) {
        s.insert(n);
    }
    return s;
}

Config fast4() {
    return Config::fast(4, A);
}

/// A 4-node cluster's node A, following nobody, with voters {A, B, C} at version 1 (D a learner).
Node four_with_learner() {
    Node n = follower_no_leader(fast4());
    n.up(D);
    n.e.set_voters(n.now, set_of({A, B, C}), 1);
    return n;
}

}  // namespace

TEST_CASE("default configuration: every member votes at version 0, nothing changes") {
    Node n = follower_no_leader();
    CHECK(n.e.state().voters == set_of({A, B, C}));
    CHECK(n.e.state().config_version == 0);
    CHECK(n.e.quorum() == 2);
    // Setting the default again is a no-op: no actions, no counter.
    check_ignored(n, [](Node& x) { return x.e.set_voters(x.now, set_of({A, B, C}), 0); });
    CHECK(n.e.counters().voter_set_changes == 0);
}

TEST_CASE("set_voters refuses configurations no log can commit, and counts them") {
    Node n = follower_no_leader(fast4());
    REQUIRE(n.e.set_voters(n.now, set_of({A, B, C}), 2) == Actions{});
    CHECK(n.e.counters().voter_set_changes == 1);
    CHECK(n.e.quorum() == 2);
    const ElectorState before = n.e.state();
    auto refused = [&](NodeSet voters, std::uint64_t version, const char* why) {
        INFO(why);
        REQUIRE(n.e.voters_error(voters, version));
        CHECK(n.e.set_voters(n.now, voters, version) == Actions{});
        CHECK(n.e.state() == before);
    };
    refused(NodeSet{}, 3, "empty");
    refused(NodeSet{std::uint64_t{1} << 4}, 3, "a node outside the 4-node cluster");
    refused(set_of({A, B}), 1, "an older version");
    refused(set_of({A, B}), 2, "the active version with other voters");
    refused(set_of({A, B}), kConfigVersionLimit, "a version >= 2^63");
    CHECK(n.e.counters().voter_set_refused == 5);
    CHECK_FALSE(n.e.voters_error(set_of({A, B, C, D}), 3));
}

TEST_CASE("quorum, proposals and votes count over the voters only") {
    Node n = four_with_learner();
    CHECK(n.e.quorum() == 2);  // a majority of 3 voters, not of 4 members
    n.fire(TimerId::InitialWait);
    SECTION("scouting asks the voters, with the version; the learner's yes is not counted") {
        // (the round was started by InitialWait above)
        REQUIRE(n.e.state().round.id == 1);
        CHECK(n.recv(D, 6, ScoutingResponse{1, true}) == Actions{});
        CHECK(n.e.state().role == Role::Follower);
        const Actions a = n.recv(B, 6, ScoutingResponse{1, true});
        CHECK(a ==
              Actions{cancel(TimerId::ScoutingResult), persist(6, A),
                      notify(Role::Candidate, 6, kNone, Reason::ElectionStarted),
                      send(B, 6, ElectionProposal{false, 1}),
                      send(C, 6, ElectionProposal{false, 1}),
                      arm(TimerId::ElectionResult, Config::fast(4, A).election_result_timeout)});
        SECTION("a learner's vote is not counted, a voter's is") {
            CHECK(n.recv(D, 6, grant(6)) == Actions{});
            CHECK(n.e.state().role == Role::Candidate);
            n.recv(C, 6, grant(6));
            CHECK(n.e.state().role == Role::Leader);
            CHECK(n.e.state().supporters == set_of({A, C}));
        }
        SECTION("refusals from voters end it; a learner's refusal does not") {
            n.recv(D, 6, refuse(Refusal::NotAVoter, 6));
            n.recv(B, 6, refuse(Refusal::HasLeader, 6));
            CHECK(n.e.state().role == Role::Candidate);
            n.recv(C, 6, refuse(Refusal::StaleConfig, 6));
            CHECK(n.e.state().role == Role::Follower);
            CHECK(n.e.snapshot().reason == Reason::ElectionRefused);
        }
    }
}

TEST_CASE("check-quorum counts the voters only; heartbeats still reach the learner") {
    Node n = four_with_learner();
    n.fire(TimerId::InitialWait);
    n.recv(B, 6, ScoutingResponse{1, true});
    n.recv(B, 6, grant(6));
    REQUIRE(n.e.state().role == Role::Leader);
    // Heartbeats go to every member (learners follow the leader too) and carry the version.
    CHECK(n.fire(TimerId::HeartbeatBroadcast) ==
          Actions{bcast(6, LeaderHeartbeat{Lsn{Term{6}, 0}, 1, 1}),
                  arm(TimerId::HeartbeatBroadcast, Config::fast(4, A).heartbeat_period)});
    n.recv(D, 6, HeartbeatAck{});  // the learner's ack
    SECTION("only the learner heard: a minority of the voters") {
        n.fire(TimerId::CheckQuorum);
        CHECK(n.e.state().role == Role::Follower);
        CHECK(n.e.snapshot().reason == Reason::CheckQuorumFailed);
    }
    SECTION("a voter heard: the leader stays") {
        n.recv(C, 6, HeartbeatAck{});
        n.fire(TimerId::CheckQuorum);
        CHECK(n.e.state().role == Role::Leader);
    }
    SECTION("leadership is never transferred to a learner") {
        REQUIRE(n.e.transfer_error(D));
        CHECK(*n.e.transfer_error(D) == "node #3 is not a voter (configuration version 1)");
        CHECK(n.transfer(D) == Actions{});
        CHECK(n.e.state().role == Role::Leader);
        CHECK_FALSE(n.e.transfer_error(C));
    }
}

TEST_CASE("R5, the version fence: no support and no vote for an older configuration") {
    Config config = fast3();
    SECTION("production core") {}
    SECTION("planted IgnoreConfigVersion: the fence is gone") {
        config.planted_bug = PlantedBug::IgnoreConfigVersion;
    }
    const bool fenced = config.planted_bug == PlantedBug::None;
    Node n = follower_no_leader(config);
    n.e.set_voters(n.now, set_of({A, B, C}), 2);
    SECTION("HandleScoutingRequest") {
        const Actions older = n.recv(B, 6, ScoutingRequest{4, 1});
        if (fenced) {
            CHECK(older ==
                  Actions{send(B, 6, ScoutingResponse{4, false, Refusal::StaleConfig, 2})});
        } else {
            CHECK(older == Actions{send(B, 6, ScoutingResponse{4, true, Refusal::None, 2})});
        }
        CHECK(n.recv(B, 6, ScoutingRequest{5, 2}) ==
              Actions{send(B, 6, ScoutingResponse{5, true, Refusal::None, 2})});
        CHECK(n.recv(B, 6, ScoutingRequest{6, 3}) ==
              Actions{send(B, 6, ScoutingResponse{6, true, Refusal::None, 2})});
    }
    SECTION("a leaderless follower takes the term of a stale candidate that is ahead") {
        // B holds term 7 (it asks about 8) at version 1; we are at term 5, version 2. Our own
        // rounds would propose term 6, which B and its like already hold: take 7, wait, and
        // propose 8 next time (membership liveness, CatchesUpTerm).
        const Actions a = n.recv(B, 8, ScoutingRequest{4, 1});
        if (fenced) {
            // (Still a follower without a leader: the application sees no change.)
            CHECK(a == Actions{persist(7, kNone), cancel(TimerId::InitialWait),
                               arm(TimerId::RandomWait, kBackoff),
                               send(B, 8, ScoutingResponse{4, false, Refusal::StaleConfig, 2})});
            CHECK(n.e.state().term == Term{7});
            CHECK(n.e.state().voted_for == kNone);
        } else {  // no fence, no refusal: nothing to learn from
            CHECK(n.e.state().term == Term{5});
        }
        // A term it holds already, or a request it supports: the term is left alone.
        CHECK(n.recv(C, 8, ScoutingRequest{5, 1}).size() == 1);
        CHECK(n.recv(C, 9, ScoutingRequest{6, 2}).size() == 1);
        CHECK(n.e.state().term == Term{fenced ? 7U : 5U});
    }
    SECTION("a follower with a leader keeps its term when it refuses a stale candidate") {
        n.recv(C, 5, heartbeat(5));
        REQUIRE(n.e.state().leader == C);
        CHECK(n.recv(B, 8, ScoutingRequest{4, 1}).size() == 1);
        CHECK(n.e.state().term == Term{5});
    }
    SECTION("HandleElectionProposal: refused before the vote, the term left alone") {
        const Actions older = n.recv(B, 6, ElectionProposal{false, 1});
        if (fenced) {
            CHECK(older ==
                  Actions{send(B, 6, ElectionResponse{false, Refusal::StaleConfig, Term{5}, 2})});
            CHECK(n.e.state().term == Term{5});
            CHECK(n.e.state().voted_for == kNone);
            CHECK(n.e.counters()
                      .votes_refused_by_reason[static_cast<std::size_t>(Refusal::StaleConfig)] ==
                  1);
            // The same or a newer configuration gets the vote.
            CHECK(n.recv(C, 6, ElectionProposal{false, 3}).back() ==
                  send(C, 6, ElectionResponse{true, Refusal::None, Term{6}, 2}));
            CHECK(n.e.state().voted_for == C);
        } else {
            CHECK(older.back() == send(B, 6, ElectionResponse{true, Refusal::None, Term{6}, 2}));
            CHECK(n.e.state().voted_for == B);
        }
    }
}

TEST_CASE("a non-voter never votes, never waits to stand, never stands (R7, R8)") {
    SECTION("started as a learner: no InitialWait") {
        Node n(fast3(), DurableState{Term{5}, std::nullopt});
        n.e.set_voters(n.now, set_of({B, C}), 1);
        CHECK(n.start() == Actions{notify(Role::Follower, 5, kNone, Reason::Started, Millis{0})});
    }
    Node n = follower_no_leader();
    SECTION("a follower that learns it is not a voter drops its wait") {
        CHECK(n.e.set_voters(n.now, set_of({B, C}), 1) == Actions{cancel(TimerId::InitialWait)});
        CHECK(n.e.quorum() == 2);
        CHECK(n.recv(B, 6, ScoutingRequest{1, 1}) ==
              Actions{send(B, 6, ScoutingResponse{1, false, Refusal::NotAVoter, 1})});
        CHECK(n.recv(B, 6, ElectionProposal{false, 1}) ==
              Actions{send(B, 6, ElectionResponse{false, Refusal::NotAVoter, Term{5}, 1})});
        // It follows a leader like anyone; losing it arms nothing.
        n.recv(B, 6, heartbeat(6));
        CHECK(n.e.state().leader == B);
        const Actions lost = n.down(B);
        CHECK(n.view().armed.empty());
        CHECK(lost.back() == notify(Role::Follower, 6, kNone, Reason::LeaderUnavailable));
        SECTION("named successor, it still does not stand") {
            n.up(B);
            n.recv(B, 6, heartbeat(6));
            n.recv(B, 6, cession(A));
            CHECK(n.e.state().role == Role::Follower);
            CHECK(n.view().armed.empty());
        }
        SECTION("promoted back, it waits to stand again") {
            CHECK(n.e.set_voters(n.now, set_of({A, B, C}), 2) ==
                  Actions{arm(TimerId::RandomWait, kBackoff)});
            n.fire(TimerId::RandomWait);
            CHECK(n.e.state().round.id != 0);
        }
    }
    SECTION("a learner promoted without knowing it votes for a candidate of the newer version") {
        // Version 1 makes this node a learner; B stands at version 2, which (only B knows yet)
        // promoted it. Refusing would leave B without a quorum until this node learns of its
        // promotion, which only a leader can tell it (the membership runs' deadlock).
        CHECK(n.e.set_voters(n.now, set_of({B, C}), 1) == Actions{cancel(TimerId::InitialWait)});
        CHECK(n.recv(B, 6, ScoutingRequest{1, 2}) ==
              Actions{send(B, 6, ScoutingResponse{1, true, Refusal::None, 1})});
        CHECK(n.recv(B, 6, ElectionProposal{false, 2}).back() ==
              send(B, 6, ElectionResponse{true, Refusal::None, Term{6}, 1}));
        CHECK(n.e.state().voted_for == B);
        CHECK(n.e.state().role == Role::Follower);
        // It watches for the candidate's heartbeats; still not a voter here, it waits to stand
        // for nothing.
        CHECK(n.view().armed == std::vector<TimerId>{TimerId::HeartbeatCheck});
        // Of its own version or an older one, it still refuses.
        CHECK(n.recv(C, 7, ScoutingRequest{2, 1}) ==
              Actions{send(C, 7, ScoutingResponse{2, false, Refusal::NotAVoter, 1})});
        CHECK(n.recv(C, 7, ScoutingRequest{3, 0}) ==
              Actions{send(C, 7, ScoutingResponse{3, false, Refusal::StaleConfig, 1})});
    }
    SECTION("a scouting follower that is removed ends its round") {
        n.fire(TimerId::InitialWait);
        REQUIRE(n.e.state().round.id != 0);
        CHECK(n.e.set_voters(n.now, set_of({B, C}), 1) == Actions{cancel(TimerId::ScoutingResult)});
        CHECK(n.e.state().round.id == 0);
    }
}

TEST_CASE("a leader removed from the voters steps down and cedes; a candidate abandons") {
    SECTION("leader") {
        Node n = leader();
        const Actions a = n.e.set_voters(n.now, set_of({B, C}), 1);
        CHECK(a == Actions{bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                           cancel(TimerId::CheckQuorum),
                           notify(Role::Follower, 6, kNone, Reason::VotersChanged)});
        CHECK(n.view().armed.empty());
    }
    SECTION("leader still a voter keeps leading, over the new quorum") {
        Node n = four_with_learner();
        n.fire(TimerId::InitialWait);
        n.recv(B, 6, ScoutingResponse{1, true});
        n.recv(B, 6, grant(6));
        REQUIRE(n.e.state().role == Role::Leader);
        CHECK(n.e.set_voters(n.now, set_of({A, B, C, D}), 2) == Actions{});
        CHECK(n.e.state().role == Role::Leader);
        CHECK(n.e.quorum() == 3);
        // Check-quorum now needs two followers of the four voters.
        n.recv(D, 6, HeartbeatAck{});
        n.fire(TimerId::CheckQuorum);
        CHECK(n.e.state().role == Role::Follower);
    }
    SECTION("candidate whose configuration changed") {
        Node n = candidate();
        CHECK(n.e.set_voters(n.now, set_of({A, B, C}), 1) ==
              Actions{cancel(TimerId::ElectionResult), arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 6, kNone, Reason::VotersChanged)});
    }
}

TEST_CASE("a follower follows a leader of an older configuration, and counts it") {
    Node n = follower_no_leader();
    n.e.set_voters(n.now, set_of({A, B, C}), 3);
    n.recv(B, 6, LeaderHeartbeat{Lsn{Term{6}, 0}, 2});
    CHECK(n.e.state().leader == B);
    CHECK(n.e.counters().stale_config_heartbeats == 1);
}

TEST_CASE("membership §8: the node table grows; the new node is heard, the voters unchanged") {
    Node n = follower_no_leader();  // 3 nodes, every one a voter, version 0
    const Actions unheard = n.recv(D, 6, ScoutingRequest{1, 1});
    CHECK(unheard == Actions{});
    CHECK(n.e.counters().dropped_not_a_peer == 1);

    REQUIRE_FALSE(n.e.grow_table(4));
    CHECK(n.e.config().cluster_size == 4);
    CHECK(n.e.state().voters == set_of({A, B, C}));  // D is not a voter until promoted
    CHECK(n.e.quorum() == 2);
    // D's messages are heard now (here: a newer configuration's candidate is supported).
    CHECK(n.recv(D, 6, ScoutingRequest{1, 1}) ==
          Actions{send(D, 6, ScoutingResponse{1, true, Refusal::None, 0})});
    // Promoted by a configuration: a majority of 4 voters.
    n.e.set_voters(n.now, set_of({A, B, C, D}), 1);
    CHECK(n.e.quorum() == 3);

    // The table never shrinks nor exceeds the limit; a refusal changes nothing.
    CHECK(n.e.grow_table(3));
    CHECK(n.e.grow_table(kMaxClusterSize + 1));
    CHECK(n.e.config().cluster_size == 4);
    CHECK_FALSE(n.e.grow_table(4));  // the same size: nothing to do
}
