// SPDX-License-Identifier: Apache-2.0
// The leader lease (docs/design.md): the follower's promise (exact time, P = 250 ms in the fast
// profile: E = 300 ms less one 50 ms check period), the leader's lease P(1-rho)/(1+rho) after the
// send time of a quorum-acknowledged heartbeat round (226 ms with rho = 5 %), its expiry,
// peer_down and transfer.
#include "harness.hpp"

#include "conclave/elector/fencing.hpp"

using namespace conclave::elector;

namespace conclave::test {
namespace {

constexpr Millis kElected{1000};
constexpr Millis kLease{226};  // floor(250 x 950 / 1050)

/// Leader in term 6 elected at 1000 ms (heartbeat round 0 sent then), no ack yet.
Node leader_at_1000(Config config = fast3()) {
    Node n = candidate(config);
    n.now = kElected;
    n.recv(B, 6, grant(6));
    REQUIRE(n.e.state().role == Role::Leader);
    return n;
}

}  // namespace

TEST_CASE("a new leader has no lease until a quorum acknowledges a heartbeat round") {
    Node n = leader_at_1000();
    CHECK_FALSE(n.e.lease_end());
    CHECK_FALSE(n.e.snapshot().valid_at(n.now));
    n.now = Millis{1005};
    n.recv(B, 6, HeartbeatAck{0});
    REQUIRE(n.e.lease_end());
    CHECK(*n.e.lease_end() == kElected + kLease);
    CHECK(n.e.snapshot().lease_end == n.e.lease_end());
    CHECK(n.e.snapshot().valid_at(Millis{1225}));
    CHECK_FALSE(n.e.snapshot().valid_at(Millis{1226}));
    SECTION("renewed by the next acknowledged round, from that round's send time") {
        n.now = Millis{1100};
        CHECK(n.fire(TimerId::HeartbeatBroadcast) ==
              Actions{bcast(6, heartbeat(6, 0, 1)), arm(TimerId::HeartbeatBroadcast, Millis{100})});
        n.now = Millis{1150};
        n.recv(C, 6, HeartbeatAck{1});
        CHECK(*n.e.lease_end() == Millis{1100} + kLease);
    }
    SECTION("an ack of a round never sent, or of an older round, renews nothing") {
        n.recv(C, 6, HeartbeatAck{7});
        CHECK(*n.e.lease_end() == kElected + kLease);
        n.now = Millis{1100};
        n.fire(TimerId::HeartbeatBroadcast);
        n.recv(B, 6, HeartbeatAck{1});
        n.recv(B, 6, HeartbeatAck{0});
        CHECK(n.e.lease().promise_until[B.value] == Millis{1100} + kLease);
    }
}

TEST_CASE("the lease is shortened by the drift bound rho") {
    for (const auto& [permille, lease] :
         {std::pair{0U, Millis{250}}, std::pair{50U, kLease}, std::pair{200U, Millis{166}}}) {
        Config config = fast3();
        config.lease_drift_permille = permille;
        CHECK(config.lease_duration() == lease);
        Node n = leader_at_1000(config);
        n.recv(B, 6, HeartbeatAck{0});
        CHECK(*n.e.lease_end() == kElected + lease);
    }
    SECTION("planted LeaseIgnoresDrift: the leader relies on the whole promise P") {
        Config config = fast3();
        config.planted_bug = PlantedBug::LeaseIgnoresDrift;
        Node n = leader_at_1000(config);
        n.recv(B, 6, HeartbeatAck{0});
        CHECK(*n.e.lease_end() == kElected + Millis{250});
    }
    CHECK(Config::fast(3, A).validate() == std::nullopt);
    Config bad = fast3();
    bad.lease_drift_permille = 201;
    REQUIRE(bad.validate());
    CHECK(bad.validate()->starts_with("lease_drift_permille:"));
}

TEST_CASE("peer_down of a follower drops its promise: the lease shrinks at once") {
    auto with_two_acks = [](Config config) {
        Node n = leader_at_1000(config);
        n.recv(C, 6, HeartbeatAck{0});  // C: 1226
        n.now = Millis{1100};
        n.fire(TimerId::HeartbeatBroadcast);
        n.recv(B, 6, HeartbeatAck{1});  // B (and the leader): 1326
        REQUIRE(*n.e.lease_end() == Millis{1100} + kLease);
        return n;
    };
    SECTION("B's link goes down: only C's older promise is left besides the leader's") {
        Node n = with_two_acks(fast3());
        n.down(B);
        CHECK(n.e.state().role == Role::Leader);
        CHECK(*n.e.lease_end() == kElected + kLease);
        SECTION("and C's too: no lease left, the leader steps down") {
            n.down(C);
            CHECK(n.e.state().role == Role::Follower);
            CHECK_FALSE(n.e.lease_end());
        }
    }
    SECTION("planted LeaseKeptOnPeerDown: the lease stays") {
        Config config = fast3();
        config.planted_bug = PlantedBug::LeaseKeptOnPeerDown;
        Node n = with_two_acks(config);
        n.down(B);
        CHECK(*n.e.lease_end() == Millis{1100} + kLease);
    }
}

TEST_CASE("an ack of a round sent before the follower's peer_down renews nothing") {
    // C acknowledges round 0 (C: 1226); round 1 goes out at 1100, then B's link goes down before
    // B's ack of round 1 arrives. The promise B made for round 1 ended with the link (B's side saw
    // the same peer_down and may vote for another candidate), so the late ack, or B acknowledging
    // round 1 again when the leader resends it at peer_up, must not give the leader B's promise.
    Node n = leader_at_1000();
    n.recv(C, 6, HeartbeatAck{0});
    n.now = Millis{1100};
    n.fire(TimerId::HeartbeatBroadcast);
    n.now = Millis{1150};
    n.down(B);
    REQUIRE(n.e.state().role == Role::Leader);
    REQUIRE(*n.e.lease_end() == kElected + kLease);
    SECTION("a late ack of round 1 on the closed link") {
        n.now = Millis{1160};
        n.recv(B, 6, HeartbeatAck{1});
    }
    SECTION("B reconnects and acknowledges round 1, which peer_up resends") {
        n.now = Millis{1160};
        CHECK(n.up(B) == Actions{send(B, 6, heartbeat(6, 0, 1))});
        n.recv(B, 6, HeartbeatAck{1});
    }
    CHECK(*n.e.lease_end() == kElected + kLease);
    CHECK_FALSE(n.e.lease().promise_until[B.value]);
    // The lease ends at C's promise, not at the 1326 ms that B's ended promise would give.
    n.now = kElected + kLease;
    n.recv(C, 6, HeartbeatAck{5});
    CHECK(n.e.state().role == Role::Follower);
    CHECK(n.e.snapshot().reason == Reason::LeaseExpired);
}

TEST_CASE("after a follower's peer_down, a round sent later renews its promise") {
    Node n = leader_at_1000();
    n.recv(C, 6, HeartbeatAck{0});
    n.now = Millis{1150};
    n.down(B);
    n.up(B);
    n.now = Millis{1200};
    n.fire(TimerId::HeartbeatBroadcast);  // round 1, sent after the peer_down
    n.now = Millis{1210};
    n.recv(B, 6, HeartbeatAck{1});
    CHECK(n.e.lease().promise_until[B.value] == Millis{1200} + kLease);
    CHECK(*n.e.lease_end() == Millis{1200} + kLease);
}

TEST_CASE("an expired lease: invalid at once, the first input steps down") {
    Node n = leader_at_1000();
    n.recv(B, 6, HeartbeatAck{0});
    const LeadershipSnapshot held = n.e.snapshot();
    // A pause: the next input comes long after the lease ended.
    n.now = Millis{5000};
    CHECK_FALSE(held.valid_at(n.now));  // before the elector runs
    CHECK(n.fire(TimerId::HeartbeatBroadcast) ==
          Actions{bcast(6, cession()), cancel(TimerId::CheckQuorum),
                  arm(TimerId::RandomWait, kBackoff),
                  notify(Role::Follower, 6, kNone, Reason::LeaseExpired, n.now)});
    CHECK_FALSE(n.e.lease_end());
    SECTION("any input sees it, exactly at lease_end") {
        Node m = leader_at_1000();
        m.recv(B, 6, HeartbeatAck{0});
        m.now = kElected + kLease - Millis{1};
        m.recv(C, 6, HeartbeatAck{5});
        CHECK(m.e.state().role == Role::Leader);
        m.now = kElected + kLease;
        m.recv(C, 6, HeartbeatAck{5});
        CHECK(m.e.state().role == Role::Follower);
        CHECK(m.e.snapshot().reason == Reason::LeaseExpired);
    }
}

TEST_CASE("the follower's promise: P on its clock, exactly") {
    Node n = follower_with_leader();  // B heard at 900 ms: promise until 1150 ms
    SECTION("a proposal inside the promise is refused, after it granted") {
        n.now = Millis{1149};
        CHECK(n.recv(C, 6, ElectionProposal{}) ==
              Actions{send(C, 6, refuse(Refusal::HasLeader, 5))});
        n.now = Millis{1150};
        CHECK(n.recv(C, 6, ElectionProposal{}) ==
              Actions{persist(6, C), cancel(TimerId::HeartbeatCheck),
                      arm(TimerId::HeartbeatCheck, Millis{50}),
                      notify(Role::Follower, 6, kNone, Reason::ElectionPreempted, n.now),
                      send(C, 6, grant(6))});
    }
    SECTION("a heartbeat renews it from the time it is heard") {
        n.now = Millis{1100};
        CHECK(n.recv(B, 5, heartbeat(5, 3, 4)) == Actions{send(B, 5, HeartbeatAck{4})});
        n.now = Millis{1349};
        CHECK(n.recv(C, 6, ElectionProposal{}) ==
              Actions{send(C, 6, refuse(Refusal::HasLeader, 5))});
    }
    SECTION("the last heartbeat check re-arms for the rest of the promise") {
        for (int i = 0; i < 5; ++i) {
            n.fire(TimerId::HeartbeatCheck);
        }
        CHECK(n.fire(TimerId::HeartbeatCheck) ==
              Actions{arm(TimerId::HeartbeatCheck, Millis{150})});
        n.now = Millis{1150};
        CHECK(n.fire(TimerId::HeartbeatCheck) ==
              Actions{arm(TimerId::RandomWait, kBackoff),
                      notify(Role::Follower, 5, kNone, Reason::LeaderNoHeartbeat, n.now)});
    }
    SECTION("the leader's link closing ends the promise at once") {
        n.down(B);
        CHECK(n.recv(C, 6, ElectionProposal{}).back() == send(C, 6, grant(6)));
    }
    SECTION("the leader's chosen successor is granted inside the promise") {
        CHECK(n.recv(C, 6, ElectionProposal{true}).back() == send(C, 6, grant(6)));
    }
}

// Only proof ends a promise (docs/design.md, assumption 3): the leader's process closing the link
// or a newer incarnation of it proving itself. A link the follower closed itself (a duplicate
// hello, a keepalive or user timeout, a full queue) is a silent leader.
TEST_CASE("a link to the leader that the follower closed itself ends no promise") {
    auto check_promise_kept = [](Node& n) {
        CHECK(n.e.state().leader == B);
        CHECK_FALSE(n.e.state().peers_up.contains(B));
        CHECK(n.recv(C, 6, ElectionProposal{}) ==
              Actions{send(C, 6, refuse(Refusal::HasLeader, 5))});
    };
    SECTION("a local closure: the follower keeps its leader and its promise") {
        Node n = follower_with_leader();  // B heard at 900 ms: promise until 1150 ms
        CHECK(n.down(B, LinkLoss::Local).empty());
        check_promise_kept(n);
        SECTION("its promise and its checks run out on its clock, as over a silent link") {
            n.now = Millis{1149};
            CHECK(n.recv(C, 6, ElectionProposal{}) ==
                  Actions{send(C, 6, refuse(Refusal::HasLeader, 5))});
            for (int i = 0; i < 5; ++i) {
                n.fire(TimerId::HeartbeatCheck);
            }
            CHECK(n.fire(TimerId::HeartbeatCheck) ==
                  Actions{arm(TimerId::HeartbeatCheck, Millis{1})});
            n.now = Millis{1150};
            CHECK(n.fire(TimerId::HeartbeatCheck) ==
                  Actions{arm(TimerId::RandomWait, kBackoff),
                          notify(Role::Follower, 5, kNone, Reason::LeaderNoHeartbeat, n.now)});
        }
        SECTION("the link comes back: the leader's heartbeats renew the promise") {
            n.up(B);
            n.now = Millis{1100};
            CHECK(n.recv(B, 5, heartbeat(5, 3, 4)) == Actions{send(B, 5, HeartbeatAck{4})});
            n.now = Millis{1349};
            CHECK(n.recv(C, 6, ElectionProposal{}) ==
                  Actions{send(C, 6, refuse(Refusal::HasLeader, 5))});
        }
    }
    SECTION("proof: the leader's process closed the link, or restarted") {
        for (const LinkLoss proof : {LinkLoss::PeerClosed, LinkLoss::PeerRestarted}) {
            Node n = follower_with_leader();
            n.down(B, proof);
            CHECK_FALSE(n.e.state().leader);
            CHECK(n.recv(C, 6, ElectionProposal{}).back() == send(C, 6, grant(6)));
        }
    }
    SECTION("a candidate's link carries no promise: the follower stops waiting for it") {
        Node n = follower_tentative();
        n.down(B, LinkLoss::Local);
        CHECK_FALSE(n.e.state().tentative_leader);
    }
    SECTION("planted PromiseEndsOnLocalClose: the promise ends with the follower's own closure") {
        Config config = fast3();
        config.planted_bug = PlantedBug::PromiseEndsOnLocalClose;
        Node n = follower_with_leader(config);
        n.down(B, LinkLoss::Local);
        CHECK_FALSE(n.e.state().leader);
        n.now = Millis{1149};
        CHECK(n.recv(C, 6, ElectionProposal{}).back() == send(C, 6, grant(6)));
    }
}

TEST_CASE("a leader drops a follower's promise on every closure, local ones too") {
    for (const LinkLoss loss : {LinkLoss::PeerClosed, LinkLoss::PeerRestarted, LinkLoss::Local}) {
        Node n = leader_at_1000();
        n.recv(C, 6, HeartbeatAck{0});  // C: 1226
        n.now = Millis{1100};
        n.fire(TimerId::HeartbeatBroadcast);
        n.recv(B, 6, HeartbeatAck{1});  // B (and the leader): 1326
        n.down(B, loss);
        CHECK(*n.e.lease_end() == kElected + kLease);
        n.recv(B, 6, HeartbeatAck{1});  // an ack of a round sent before the closure
        CHECK(*n.e.lease_end() == kElected + kLease);
    }
}

TEST_CASE("a transfer ends the lease before the cession goes out") {
    Node n = leader_at_1000();
    n.recv(B, 6, HeartbeatAck{0});
    REQUIRE(n.e.lease_end());
    const Actions out = n.transfer(B);
    REQUIRE_FALSE(out.empty());
    CHECK(out.front() == bcast(6, cession(B)));
    CHECK_FALSE(n.e.lease_end());
    CHECK_FALSE(n.e.snapshot().valid_at(n.now));
    CHECK(n.e.state().role == Role::Follower);
}

TEST_CASE("FencingGate refuses work after the lease ends", "[fencing]") {
    Node n = leader_at_1000();
    FencingGate gate;
    CHECK_FALSE(gate.admit(n.e.snapshot(), n.now));  // lease pending
    n.recv(B, 6, HeartbeatAck{0});
    const LeadershipSnapshot held = n.e.snapshot();
    CHECK(gate.admit(held, Millis{1225}));
    CHECK_FALSE(gate.admit(held, Millis{1226}));  // the same token, its lease over
    CHECK(gate.highest() == 6);
}

}  // namespace conclave::test
