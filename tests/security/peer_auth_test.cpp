// SPDX-License-Identifier: Apache-2.0
// Mesh attacks against the fixes: impersonation (finding 1), idle-socket floods
// (finding 6), reconnect storms and channel mismatches (finding 7). Real loopback sockets.
#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "net/fixture.hpp"

using namespace conclave;
using namespace conclave::net;
using namespace conclave::net::test;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef-cluster-secret";

MeshOptions secret_options(const std::string& secret = kSecret) {
    auto o = test_mesh_options();
    o.secret = secret;
    return o;
}

}  // namespace

TEST_CASE("handshake MACs depend on role, ids and both nonces, never equal across them") {
    const auto nd = random_nonce();
    const auto na = random_nonce();
    REQUIRE(nd.size() == kNonceBytes);
    CHECK(nd != na);
    const auto mac = handshake_mac(kSecret, HandshakeRole::Dialer, "c", "n1", "n2", nd, na);
    CHECK(mac.size() == kMacBytes);
    CHECK(mac_equal(mac, handshake_mac(kSecret, HandshakeRole::Dialer, "c", "n1", "n2", nd, na)));
    CHECK_FALSE(
        mac_equal(mac, handshake_mac(kSecret, HandshakeRole::Acceptor, "c", "n1", "n2", nd, na)));
    CHECK_FALSE(
        mac_equal(mac, handshake_mac(kSecret, HandshakeRole::Dialer, "c", "n2", "n1", nd, na)));
    CHECK_FALSE(mac_equal(
        mac, handshake_mac(kSecret, HandshakeRole::Dialer, "c", "n1", "n2", nd, random_nonce())));
    CHECK_FALSE(mac_equal(
        mac, handshake_mac(kSecret + "x", HandshakeRole::Dialer, "c", "n1", "n2", nd, na)));
    CHECK_FALSE(mac_equal({}, {}));
}

TEST_CASE("finding 1: without the cluster secret nobody logs in as another node") {
    // n1 is absent; the attacker claims to be n1 at n3, which would then refuse the real n1.
    TestCluster cluster(3, [](NodeId) { return secret_options(); });
    cluster.nodes[1]->start();
    cluster.nodes[2]->start();
    REQUIRE(cluster.wait_for_leader());
    auto& n3 = *cluster.nodes[2];
    const auto port = n3.mesh->local_port();
    const auto auth_failed = [&] {
        return n3.mesh->counters().refusal(HandshakeRefusal::AuthFailed);
    };

    // The attacker runs on a thread of its own; the cluster keeps running on this one.
    std::atomic<int> phase{0};
    std::atomic<bool> attacker_closed_plain{false};
    std::atomic<bool> attacker_closed_forged{false};
    std::atomic<bool> canary_established{false};
    std::thread attacker([&] {
        asio::io_context aio;
        {
            // 1. A plain hello, as before the fix: no nonce -> refused at once.
            RawPeer p(aio, port);
            p.send(encode_hello(Hello{kProtocolVersion, "test", "n1"}));
            attacker_closed_plain = !p.read_frame().has_value();
        }
        {
            // 2. A nonce, then a forged confirmation (no secret, so a guessed MAC).
            RawPeer p(aio, port);
            Hello h{kProtocolVersion, "test", "n1"};
            h.nonce = random_nonce();
            p.send(encode_hello(h));
            const auto answer = p.read_frame();
            if (answer) {
                p.send(encode_confirmation(std::vector<std::uint8_t>(kMacBytes, 0x42)));
                // Told why (a Refused frame naming auth_failed, nothing more), then closed.
                const auto told = p.read_frame();
                const bool refusal = told &&
                                     decode_control_kind(told->payload) == ControlKind::Refused &&
                                     decode_refusal(told->payload).reason == "auth_failed";
                attacker_closed_forged = (!told || refusal) && !p.read_frame().has_value();
            }
        }
        {
            // 3. Canary: the same raw protocol WITH the secret is accepted (so 1 and 2 were
            //    refused for the MAC, not for a mistake in the raw client).
            RawPeer p(aio, port);
            Hello h{kProtocolVersion, "test", "n1"};
            h.nonce = random_nonce();
            p.send(encode_hello(h));
            const auto answer = p.read_frame();
            if (answer) {
                const Hello theirs = decode_hello(answer->payload);
                const bool acceptor_proven =
                    mac_equal(theirs.mac, handshake_mac(kSecret, HandshakeRole::Acceptor, "test",
                                                        "n3", "n1", h.nonce, theirs.nonce));
                p.send(encode_confirmation(handshake_mac(kSecret, HandshakeRole::Dialer, "test",
                                                         "n1", "n3", h.nonce, theirs.nonce)));
                phase = 3;
                while (phase == 3) {
                    std::this_thread::yield();  // n3 reports n1 up; then we drop it
                }
                canary_established = acceptor_proven;
            }
        }
        phase = 5;
    });
    const bool canary_up = run_until(
        cluster.io, [&] { return phase == 3 && n3.mesh->is_up(NodeId{0}); }, 5000ms);
    phase = 4;
    REQUIRE(run_until(
        cluster.io, [&] { return phase == 5; }, 5000ms));
    attacker.join();
    CHECK(attacker_closed_plain);
    CHECK(attacker_closed_forged);
    CHECK(auth_failed() == 2);
    CHECK(canary_up);
    CHECK(canary_established);

    // The real n1 joins (the canary connection is gone) and the cluster keeps a leader.
    REQUIRE(run_until(
        cluster.io, [&] { return !n3.mesh->is_up(NodeId{0}); }, 3000ms));
    cluster.nodes[0]->start();
    REQUIRE(run_until(
        cluster.io, [&] { return n3.mesh->is_up(NodeId{0}) && cluster.agreed_leader(); }, 5000ms));
}

TEST_CASE("finding 1: a node with a different secret is refused on both sides of the handshake") {
    TestCluster cluster(
        3, [](NodeId id) { return secret_options(id.value == 1 ? kSecret + "-wrong" : kSecret); });
    cluster.start_all();
    // n1 and n3 elect (2 of 3); n2 never comes up anywhere.
    REQUIRE((cluster.nodes[0]->mesh && cluster.nodes[2]->mesh));
    REQUIRE(run_until(
        cluster.io,
        [&] {
            return cluster.nodes[0]->mesh->is_up(NodeId{2}) &&
                   cluster.nodes[0]->mesh->counters().refusal(HandshakeRefusal::AuthFailed) > 0 &&
                   cluster.nodes[1]->mesh->counters().refusal(HandshakeRefusal::AuthFailed) > 0;
        },
        5000ms));
    run_for(cluster.io, 300ms);
    for (std::size_t i : {std::size_t{0}, std::size_t{2}}) {
        CHECK_FALSE(cluster.nodes[i]->mesh->is_up(NodeId{1}));
        CHECK(cluster.nodes[i]->mesh->counters().handshakes_completed ==
              cluster.nodes[i]->mesh->counters().peer_ups);
    }
    CHECK(cluster.nodes[1]->mesh->counters().peer_ups == 0);
}

TEST_CASE("finding 6: idle sockets from one source do not lock a restarted peer out") {
    // A long handshake deadline: only the per-source limit can let n1 in within the bound.
    TestCluster cluster(3, [](NodeId) {
        auto o = secret_options();
        o.handshake_timeout = 10'000ms;
        return o;
    });
    cluster.nodes[1]->start();
    cluster.nodes[2]->start();
    REQUIRE(cluster.wait_for_leader());
    // 64 idle connections (the old global limit) to each of n2 and n3, from 127.0.0.2.
    std::vector<std::unique_ptr<tcp::socket>> idle;
    for (std::size_t target : {std::size_t{1}, std::size_t{2}}) {
        const auto port = cluster.nodes[target]->mesh->local_port();
        for (int i = 0; i < 64; ++i) {
            auto s = std::make_unique<tcp::socket>(cluster.io);
            s->open(tcp::v4());
            s->bind(tcp::endpoint(asio::ip::make_address("127.0.0.2"), 0));
            s->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
            idle.push_back(std::move(s));
        }
    }
    const auto from_source = [&](std::uint16_t i) {
        return cluster.nodes[i]->mesh->counters().refusal(
            HandshakeRefusal::TooManyPendingFromSource);
    };
    REQUIRE(run_until(
        cluster.io, [&] { return from_source(1) == 56 && from_source(2) == 56; }, 3000ms));
    cluster.nodes[0]->start();
    REQUIRE(run_until(
        cluster.io,
        [&] {
            return cluster.nodes[1]->mesh->is_up(NodeId{0}) &&
                   cluster.nodes[2]->mesh->is_up(NodeId{0}) && cluster.agreed_leader();
        },
        3000ms));
}

TEST_CASE("silent sockets from the peers' own address and from everywhere never keep a peer out") {
    // A long handshake deadline: the node must make room itself, not wait for the sockets to time
    // out. The attacker connects from 127.0.0.1, the address every peer dials from here, holds the
    // per-source limit, and fills the global limit from 127.0.0.2-9; it reopens what is closed.
    TestCluster cluster(3, [](NodeId) {
        auto o = secret_options();
        o.handshake_timeout = 10'000ms;
        return o;
    });
    cluster.nodes[1]->start();
    cluster.nodes[2]->start();
    REQUIRE(cluster.wait_for_leader());
    std::vector<std::unique_ptr<SilentHolder>> holders;
    for (std::size_t target : {std::size_t{1}, std::size_t{2}}) {
        const auto port = cluster.nodes[target]->mesh->local_port();
        for (int source = 1; source <= 9; ++source) {
            holders.push_back(std::make_unique<SilentHolder>(
                cluster.io, "127.0.0." + std::to_string(source), port, 8));
        }
    }
    run_for(cluster.io, 300ms);
    const auto started = std::chrono::steady_clock::now();
    cluster.nodes[0]->start();
    REQUIRE(run_until(
        cluster.io,
        [&] {
            return cluster.nodes[1]->mesh->is_up(NodeId{0}) &&
                   cluster.nodes[2]->mesh->is_up(NodeId{0});
        },
        2000ms));
    INFO("n1 linked in " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - started)
                                .count()
                         << " ms");
    // The attacker's sockets were the ones closed to make room.
    CHECK(cluster.nodes[1]->mesh->counters().refusal(HandshakeRefusal::TooManyPendingFromSource) +
              cluster.nodes[1]->mesh->counters().refusal(HandshakeRefusal::TooManyPending) >
          0);
}

TEST_CASE("finding 7: a peer that drops every frame after the handshake is redialed with backoff") {
    const auto ports = free_ports(2);
    const Membership membership = make_membership(ports);
    asio::io_context io;
    MeshOptions options;  // defaults: backoff 50 ms .. 2 s
    options.secret = kSecret;
    options.seed = 1;
    Mesh a(io, membership, NodeId{0}, options);
    options.seed = 2;
    Mesh b(io, membership, NodeId{1}, options);
    a.set_frame_handler(Channel::Elector, [](NodeId, std::span<const std::uint8_t>) {
        return std::optional<FrameRejection>{};
    });
    // b rejects everything (as a node did with max_value_bytes above the frame limit).
    b.set_frame_handler(Channel::Elector, [](NodeId, std::span<const std::uint8_t>) {
        return std::optional<FrameRejection>{FrameRejection{BadFrameKind::Undecodable, "no"}};
    });
    const std::vector<std::uint8_t> payload{1, 2, 3};
    a.add_peer_handler([&](NodeId peer, bool up, LinkLoss) {
        if (up) {
            a.send(peer, Channel::Elector, payload);
        }
    });
    a.start();
    b.start();
    run_for(io, 3000ms);
    // Before the fix the backoff reset on every handshake: one redial per ~50 ms (~60 here).
    // Now: 25-50, 50-100, ... doubling to 2 s, so at most ~8 in 3 s.
    INFO("reconnects " << a.counters().reconnects);
    CHECK(a.counters().peer_ups >= 2);
    CHECK(a.counters().reconnects <= 8);
    CHECK(b.counters().bad_frame(BadFrameKind::Undecodable) >= 2);
}

TEST_CASE(
    "finding 7: a channel mismatch (metadata on/off) is refused at the handshake, both sides") {
    const auto ports = free_ports(2);
    const Membership membership = make_membership(ports);
    asio::io_context io;
    MeshOptions options;
    options.seed = 1;
    Mesh a(io, membership, NodeId{0}, options);
    options.seed = 2;
    Mesh b(io, membership, NodeId{1}, options);
    const auto accept_all = [](NodeId, std::span<const std::uint8_t>) {
        return std::optional<FrameRejection>{};
    };
    a.set_frame_handler(Channel::Elector, accept_all);
    a.set_frame_handler(Channel::Replication, accept_all);  // "metadata on"
    b.set_frame_handler(Channel::Elector, accept_all);      // "metadata off"
    a.start();
    b.start();
    run_for(io, 2000ms);
    CHECK(a.counters().peer_ups == 0);
    CHECK(b.counters().peer_ups == 0);
    // Both sides see it: b (acceptor) when a's hello arrives, a (dialer) in b's answer.
    CHECK(a.counters().refusal(HandshakeRefusal::ChannelMismatch) >= 1);
    CHECK(b.counters().refusal(HandshakeRefusal::ChannelMismatch) >= 1);
    // No storm: a refused handshake never resets the backoff.
    CHECK(a.counters().reconnects <= 7);
}

TEST_CASE("an advisory channel served at one side only: connected, sent only where announced") {
    const auto ports = free_ports(3);
    const Membership membership = make_membership(ports);
    asio::io_context io;
    MeshOptions options;
    options.seed = 1;
    Mesh a(io, membership, NodeId{0}, options);
    options.seed = 2;
    Mesh b(io, membership, NodeId{1}, options);  // serves the broadcast channel too
    options.seed = 3;
    Mesh c(io, membership, NodeId{2}, options);  // an older node: no broadcast channel
    const auto accept_all = [](NodeId, std::span<const std::uint8_t>) {
        return std::optional<FrameRejection>{};
    };
    int received = 0;
    const auto count = [&](NodeId, std::span<const std::uint8_t>) {
        ++received;
        return std::optional<FrameRejection>{};
    };
    for (Mesh* m : {&a, &b, &c}) {
        m->set_frame_handler(Channel::Elector, accept_all);
    }
    a.set_frame_handler(Channel::Broadcast, accept_all);
    b.set_frame_handler(Channel::Broadcast, count);
    for (Mesh* m : {&a, &b, &c}) {
        m->start();
    }
    REQUIRE(run_until(
        io, [&] { return a.is_up(NodeId{1}) && a.is_up(NodeId{2}); }, 5000ms));
    const std::vector<std::uint8_t> payload{0xa0};
    CHECK(a.send(NodeId{1}, Channel::Broadcast, payload));
    CHECK_FALSE(a.send(NodeId{2}, Channel::Broadcast, payload));  // c would close on it
    CHECK(a.counters().sends_dropped == 1);
    REQUIRE(run_until(
        io, [&] { return received == 1; }, 5000ms));
    run_for(io, 200ms);
    CHECK(a.is_up(NodeId{2}));
    CHECK(c.counters().bad_frame(BadFrameKind::UnknownChannel) == 0);
    CHECK(a.counters().refusal(HandshakeRefusal::ChannelMismatch) == 0);
}

TEST_CASE("idle sockets are evicted before a peer that is in the middle of its handshake") {
    // n2 alone, at most 4 handshakes in progress, a long deadline: only eviction makes room.
    const auto ports = free_ports(2);
    asio::io_context io;
    MeshOptions options = secret_options();
    options.max_pending_inbound = 4;
    options.handshake_timeout = 10'000ms;
    Mesh n2(io, make_membership(ports), NodeId{1}, options);
    n2.start();
    // n1 (raw) dials and sends its hello: it speaks, and waits for n2's answer.
    asio::io_context raw_io;
    RawPeer n1(raw_io, n2.local_port());
    Hello hello{kProtocolVersion, "test", "n1"};
    hello.nonce = random_nonce();
    n1.send(encode_hello(hello));
    run_for(io, 200ms);
    // Then 12 idle sockets from 3 addresses (4 each, below the per-source limit): each beyond
    // the fourth evicts the oldest handshake in progress.
    std::vector<std::unique_ptr<tcp::socket>> idle;
    for (int i = 0; i < 12; ++i) {
        auto s = std::make_unique<tcp::socket>(io);
        s->open(tcp::v4());
        s->bind(tcp::endpoint(asio::ip::make_address("127.0.0." + std::to_string(2 + i / 4)), 0));
        s->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), n2.local_port()));
        idle.push_back(std::move(s));
    }
    REQUIRE(run_until(
        io, [&] { return n2.counters().refusal(HandshakeRefusal::TooManyPending) >= 9; }, 5000ms));
    // n1's handshake survived every eviction: it confirms, and n2 reports it up.
    const auto answer = n1.read_frame();
    REQUIRE(answer);
    const Hello theirs = decode_hello(answer->payload);
    n1.send(encode_confirmation(handshake_mac(kSecret, HandshakeRole::Dialer, "test", "n1", "n2",
                                              hello.nonce, theirs.nonce)));
    CHECK(run_until(
        io, [&] { return n2.is_up(NodeId{0}); }, 5000ms));
    n2.stop();
}
