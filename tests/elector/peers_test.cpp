// SPDX-License-Identifier: Apache-2.0
// Cells: every state x peer up, peer down (leader / other), transfer_leadership (accepted and each
// refusal), and messages from nodes outside the cluster.
#include "harness.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

TEST_CASE("every state x peer up", "[cell][peer]") {
    SECTION("Leader: heartbeat the peer at once") {
        Node n = leader();
        n.down(C);
        CHECK(n.up(C) == Actions{send(C, 6, heartbeat(6, 0))});
        CHECK(n.e.state().peers_up.contains(C));
        CHECK(n.view().role == Role::Leader);
    }
    SECTION("every other state: record it, emit nothing") {
        for (const auto& s : started_states()) {
            Node n = s.build(fast3());
            if (n.view().role == Role::Leader) {
                continue;
            }
            CAPTURE(s.name);
            n.down(C);
            const View before = n.view();
            CHECK(n.up(C) == Actions{});
            CHECK(n.e.state().peers_up.contains(C));
            CHECK(n.view() == before);
        }
    }
}

TEST_CASE("F-leader / F-tentative x peer down", "[cell][peer]") {
    SECTION("F-leader, the leader: leader unavailable, back off") {
        Node n = follower_with_leader();
        CHECK(n.down(B) == Actions{cancel(TimerId::HeartbeatCheck),
                                   arm(TimerId::RandomWait, kBackoff),
                                   notify(Role::Follower, 5, kNone, Reason::LeaderUnavailable)});
    }
    SECTION("F-tentative, the tentative leader: drop it, back off, no notification") {
        Node n = follower_tentative();
        CHECK(n.down(B) ==
              Actions{cancel(TimerId::HeartbeatCheck), arm(TimerId::RandomWait, kBackoff)});
        CHECK(n.view() ==
              View{Role::Follower, 6, B, kNone, kNone, Reason::Started, {TimerId::RandomWait}});
    }
}

TEST_CASE("every non-leader state x peer down (other node): record it only", "[cell][peer]") {
    for (const auto& s : started_states()) {
        Node n = s.build(fast3());
        if (n.view().role == Role::Leader) {
            continue;
        }
        CAPTURE(s.name);
        const View before = n.view();
        CHECK(n.down(C) == Actions{});
        CHECK_FALSE(n.e.state().peers_up.contains(C));
        CHECK(n.view() == before);
        if (n.view().leader != B && n.view().tentative != B) {
            // B is neither leader nor tentative leader here: also just recorded.
            CHECK(n.down(B) == Actions{});
            CHECK(n.view() == before);
        }
    }
}

TEST_CASE("Leader x peer down", "[cell][peer]") {
    Node n = leader();  // supporters {A, B}, quorum 2
    SECTION("a non-supporter: still a quorum of supporters") {
        CHECK(n.down(C) == Actions{});
        CHECK(n.view().role == Role::Leader);
    }
    SECTION("a supporter, below quorum: step down, cede") {
        CHECK(n.down(B) == Actions{bcast(6, cession()), cancel(TimerId::HeartbeatBroadcast),
                                   cancel(TimerId::CheckQuorum), arm(TimerId::RandomWait, kBackoff),
                                   notify(Role::Follower, 6, kNone, Reason::QuorumNotAchieved)});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               A,
                               kNone,
                               kNone,
                               Reason::QuorumNotAchieved,
                               {TimerId::RandomWait}});
    }
}

TEST_CASE("Leader x transfer_leadership", "[cell][transfer]") {
    Node n = leader();
    SECTION("accepted: cede naming the successor, wait an election timeout before competing") {
        CHECK(n.e.transfer_error(B) == std::nullopt);
        CHECK(n.transfer(B) ==
              Actions{bcast(6, cession(B)), cancel(TimerId::HeartbeatBroadcast),
                      cancel(TimerId::CheckQuorum),
                      arm(TimerId::RandomWait, Millis{200} + kBackoff),
                      notify(Role::Follower, 6, kNone, Reason::LeadershipTransferred)});
        CHECK(n.view() == View{Role::Follower,
                               6,
                               A,
                               kNone,
                               kNone,
                               Reason::LeadershipTransferred,
                               {TimerId::RandomWait}});
    }
    SECTION("refused: target not a member") {
        CHECK(n.e.transfer_error(NodeId{3}) == "node #3 is not a member of the cluster");
        check_ignored(n, [](Node& x) { return x.transfer(NodeId{3}); });
    }
    SECTION("refused: target is this node") {
        CHECK(n.e.transfer_error(A) == "this node is already the leader");
        check_ignored(n, [](Node& x) { return x.transfer(A); });
    }
    SECTION("refused: target not connected") {
        n.down(C);
        CHECK(n.e.transfer_error(C) == "node #2 is not connected");
        check_ignored(n, [](Node& x) { return x.transfer(C); });
    }
}

TEST_CASE("every non-leader state x transfer_leadership: refused, not the leader",
          "[cell][transfer]") {
    for (const auto& s : started_states()) {
        Node n = s.build(fast3());
        if (n.view().role == Role::Leader) {
            continue;
        }
        CAPTURE(s.name);
        CHECK(n.e.transfer_error(B) == "this node is not the leader");
        check_ignored(n, [](Node& x) { return x.transfer(B); });
        check_ignored(n, [](Node& x) { return x.transfer(C); });
    }
}

TEST_CASE("every state x input naming a node outside the cluster or self: ignored", "[cell]") {
    for (const auto& s : started_states()) {
        CAPTURE(s.name);
        Node n = s.build(fast3());
        for (NodeId bad : {A, NodeId{3}, NodeId{64}, NodeId{65535}}) {
            check_ignored(n, [&](Node& x) { return x.recv(bad, 9, heartbeat(9)); });
            check_ignored(n, [&](Node& x) { return x.recv(bad, 9, ElectionProposal{true}); });
            check_ignored(n, [&](Node& x) { return x.up(bad); });
            check_ignored(n, [&](Node& x) { return x.down(bad); });
        }
    }
}
