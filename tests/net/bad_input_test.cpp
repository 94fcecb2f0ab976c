// SPDX-License-Identifier: Apache-2.0
// Bad input never hurts a node: each case closes only the offending connection, is counted, and
// the cluster keeps its leader. Also: a stalled peer overflows its own queue only.
#include <nlohmann/json.hpp>

#include "conclave/codec/json.hpp"
#include "fixture.hpp"

using namespace conclave;
using namespace conclave::net;
using namespace conclave::net::test;

namespace {

/// A hand-driven TCP client on the test's io_context.
struct RawClient {
    RawClient(asio::io_context& io, std::uint16_t port) : socket(io) {
        socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    }
    void write(const std::vector<std::uint8_t>& bytes) { asio::write(socket, asio::buffer(bytes)); }
    void hello(const std::string& cluster, const std::string& node,
               std::uint64_t version = kProtocolVersion) {
        write(encode_frame(Channel::Control, encode_hello(Hello{version, cluster, node})));
        write(encode_frame(Channel::Control, encode_ping()));  // confirms the node's hello
    }
    /// Reads (and discards) until the node closes the connection.
    void watch_for_close() {
        socket.async_read_some(asio::buffer(buffer),
                               [this](const boost::system::error_code& ec, std::size_t) {
                                   if (ec) {
                                       closed = true;
                                       return;
                                   }
                                   watch_for_close();
                               });
    }
    tcp::socket socket;
    std::array<std::uint8_t, 4096> buffer{};
    bool closed = false;
};

std::vector<std::uint8_t> frame(Channel c, const std::vector<std::uint8_t>& payload) {
    return encode_frame(c, payload);
}

std::vector<std::uint8_t> concat(std::vector<std::uint8_t> a, const std::vector<std::uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("bad input closes only the offending connection and the cluster keeps electing") {
    // n1 is never started: the test impersonates it. n2 and n3 form a quorum (2 of 3).
    TestCluster cluster(3, [](NodeId) {
        auto o = test_mesh_options();
        o.handshake_timeout = 300ms;
        return o;
    });
    cluster.nodes[1]->start();
    cluster.nodes[2]->start();
    REQUIRE(run_until(
        cluster.io,
        [&] {
            return cluster.leader_count() == 1 && cluster.nodes[1]->leader() &&
                   cluster.nodes[1]->leader() == cluster.nodes[2]->leader();
        },
        5000ms));
    const NodeId leader = *cluster.nodes[1]->leader();
    const Term term = cluster.nodes[leader.value]->driver->snapshot().term;

    auto& target = *cluster.nodes[2];  // n3
    const auto port = target.mesh->local_port();
    const auto& counters = target.mesh->counters();

    // Sends `bytes` on a fresh connection (optionally closing it right after) and waits until
    // the node closed it and `counter()` went up by one.
    const auto expect_closed = [&](const std::vector<std::uint8_t>& bytes,
                                   const std::function<std::uint64_t()>& counter,
                                   bool close_after_write = false) {
        const std::uint64_t before = counter();
        RawClient client(cluster.io, port);
        if (!bytes.empty()) {
            client.write(bytes);
        }
        if (close_after_write) {
            client.socket.shutdown(tcp::socket::shutdown_send);
        }
        client.watch_for_close();
        REQUIRE(run_until(
            cluster.io, [&] { return client.closed && counter() == before + 1; }, 3000ms));
    };
    const auto bad = [&](BadFrameKind k) { return [&, k] { return counters.bad_frame(k); }; };
    const auto refused = [&](HandshakeRefusal r) { return [&, r] { return counters.refusal(r); }; };
    // A hello plus the confirming ping: a complete handshake for an acceptable id.
    const auto hello_as = [&](const std::string& node) {
        return concat(
            encode_frame(Channel::Control, encode_hello(Hello{kProtocolVersion, "test", node})),
            encode_frame(Channel::Control, encode_ping()));
    };

    {
        // Before the handshake.
        const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        expect_closed(std::vector<std::uint8_t>(http.begin(), http.end()),
                      bad(BadFrameKind::Oversized));
        expect_closed({0x00, 0x00, 0x00, 0x08, 0xab, 0x13, 0x37, 0x00, 0xff, 0x10, 0x20, 0x30},
                      bad(BadFrameKind::BadHandshake));
        expect_closed({0xff, 0xff, 0xff, 0xff}, bad(BadFrameKind::Oversized));
        expect_closed({0x00, 0x00, 0x00, 0x00}, bad(BadFrameKind::Empty));
        expect_closed({0x00, 0x00, 0x00, 0x64, 0x00, 0x01, 0x02}, bad(BadFrameKind::Truncated),
                      /*close_after_write=*/true);
        expect_closed(frame(Channel::Control, {0xff, 0xfe, 0x00}), bad(BadFrameKind::BadHandshake));
        // Slowloris: nothing at all, or a few bytes of a header, never a hello.
        expect_closed({}, refused(HandshakeRefusal::Timeout));
        expect_closed({0x00, 0x00}, refused(HandshakeRefusal::Timeout));
        // Handshake refusals.
        expect_closed(frame(Channel::Control, encode_hello(Hello{kProtocolVersion, "other", "n1"})),
                      refused(HandshakeRefusal::WrongCluster));
        expect_closed(hello_as("n9"), refused(HandshakeRefusal::UnknownNode));
        expect_closed(
            frame(Channel::Control, encode_hello(Hello{kProtocolVersion + 1, "test", "n1"})),
            refused(HandshakeRefusal::UnsupportedVersion));
        expect_closed(hello_as("n2"), refused(HandshakeRefusal::DuplicateNode));
        expect_closed(hello_as("n3"), refused(HandshakeRefusal::WrongDirection));

        // After a valid handshake as n1.
        expect_closed(concat(hello_as("n1"), frame(Channel::Elector, {0xff, 0x00, 0x13})),
                      bad(BadFrameKind::Undecodable));
        const auto nested = std::vector<std::uint8_t>(2000, 0x81);
        expect_closed(concat(hello_as("n1"), frame(Channel::Elector, nested)),
                      bad(BadFrameKind::Undecodable));
        const auto unknown_type = nlohmann::json::to_cbor(
            nlohmann::json{{"v", 1}, {"type", "Bogus"}, {"from", 0}, {"term", 1}});
        expect_closed(concat(hello_as("n1"), frame(Channel::Elector, unknown_type)),
                      bad(BadFrameKind::Undecodable));
        expect_closed(concat(hello_as("n1"), frame(static_cast<Channel>(9), {1, 2, 3})),
                      bad(BadFrameKind::UnknownChannel));
        expect_closed(concat(hello_as("n1"), frame(Channel::Replication, {1, 2, 3})),
                      bad(BadFrameKind::UnknownChannel));
        const auto spoofed =
            codec::encode_cbor(elector::Message{NodeId{1}, Term{1}, elector::HeartbeatAck{}});
        expect_closed(concat(hello_as("n1"), frame(Channel::Elector, spoofed)),
                      bad(BadFrameKind::WrongSender));
        expect_closed(concat(hello_as("n1"), hello_as("n1")), bad(BadFrameKind::UnexpectedControl));
        // A hello that is never confirmed, followed by anything but the ping.
        expect_closed(
            concat(frame(Channel::Control, encode_hello(Hello{kProtocolVersion, "test", "n1"})),
                   frame(Channel::Elector, {0xa0})),
            bad(BadFrameKind::BadHandshake));
        expect_closed(concat(hello_as("n1"), {0x00, 0x20, 0x00, 0x00, 0x01}),
                      bad(BadFrameKind::Oversized));
    }

    {
        // Joiners: the node takes joins but its handler never answers; whatever a
        // joiner sends besides one JoinRequest after its handshake closes only its connection.
        std::vector<std::function<void(JoinAnswer)>> unanswered;
        target.mesh->set_join_handler(
            [&](std::string, JoinRequest, std::function<void(JoinAnswer)> respond) {
                unanswered.push_back(std::move(respond));
            });
        const auto joiner = [&](const std::string& node) {
            Hello h{kProtocolVersion, "test", node};
            h.join = true;
            return concat(encode_frame(Channel::Control, encode_hello(h)),
                          encode_frame(Channel::Control, encode_ping()));
        };
        const auto request = encode_frame(Channel::Control, encode_join_request({"a:1", "a:2"}));
        expect_closed(joiner(""), refused(HandshakeRefusal::JoinRefused));  // an empty id
        expect_closed(concat(joiner("n9"), frame(Channel::Elector, {0xa0})),
                      bad(BadFrameKind::UnexpectedControl));
        expect_closed(concat(joiner("n9"), frame(Channel::Control, encode_ping())),
                      bad(BadFrameKind::Undecodable));
        expect_closed(concat(joiner("n9"), frame(Channel::Control,
                                                 encode_join_answer({JoinStatus::Accepted, ""}))),
                      bad(BadFrameKind::Undecodable));
        // Deeper than the control bound, within the joiner's frame limit.
        expect_closed(
            concat(joiner("n9"), frame(Channel::Control, std::vector<std::uint8_t>(1000, 0x81))),
            bad(BadFrameKind::Undecodable));
        expect_closed(
            concat(joiner("n9"), frame(Channel::Control, std::vector<std::uint8_t>(60000, 0x81))),
            bad(BadFrameKind::Oversized));
        expect_closed(concat(concat(joiner("n9"), request), request),
                      bad(BadFrameKind::UnexpectedControl));
        CHECK(counters.join_requests == 1);
        for (const auto& respond : unanswered) {
            respond(JoinAnswer{JoinStatus::Accepted, "after the close"});  // does nothing
        }
        target.mesh->set_join_handler(nullptr);
    }

    // The node kept its peer and the cluster its leader, in the same term.
    CHECK(target.mesh->is_up(NodeId{1}));
    const auto heartbeats_before = cluster.nodes[leader.value]->driver->counters().messages_out[4];
    CHECK(run_until(
        cluster.io,
        [&] {
            return cluster.nodes[leader.value]->driver->counters().messages_out[4] >
                   heartbeats_before;
        },
        5000ms));
    CHECK(cluster.nodes[leader.value]->is_leader());
    CHECK(cluster.nodes[leader.value]->driver->snapshot().term == term);
    CHECK(cluster.nodes[1]->leader() == leader);
    CHECK(cluster.nodes[2]->leader() == leader);
}

namespace {

/// A hostile seed: accepts one connection and, once the joiner's hello arrived, writes `reply`
/// (then reads nothing more and keeps the connection open).
struct FakeSeed {
    FakeSeed(asio::io_context& io, std::vector<std::uint8_t> reply_bytes)
        : acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
          socket(io),
          reply(std::move(reply_bytes)) {
        acceptor.async_accept(socket, [this](const boost::system::error_code& ec) {
            if (ec) {
                return;
            }
            socket.async_read_some(
                asio::buffer(buffer), [this](const boost::system::error_code& ec2, std::size_t) {
                    if (!ec2) {
                        asio::async_write(socket, asio::buffer(reply), [](auto&&...) {});
                    }
                });
        });
    }
    std::uint16_t port() const { return acceptor.local_endpoint().port(); }

    tcp::acceptor acceptor;
    tcp::socket socket;
    std::vector<std::uint8_t> reply;
    std::array<std::uint8_t, 4096> buffer{};
};

}  // namespace

TEST_CASE("a hostile seed's answer ends the join with an error, never a crash") {
    const auto seed_hello =
        encode_frame(Channel::Control, encode_hello(Hello{kProtocolVersion, "test", "n2"}));
    const auto answer_frame = [](const std::vector<std::uint8_t>& payload) {
        return encode_frame(Channel::Control, payload);
    };
    JoinSetup s;
    const auto expect_error = [&](const std::vector<std::uint8_t>& reply, BadFrameKind kind) {
        FakeSeed seed(s.io, reply);
        const auto before = s.joiner->counters().bad_frame(kind);
        s.done_calls = 0;
        s.ask(seed.port());
        REQUIRE(run_until(
            s.io, [&] { return s.done_calls == 1; }, 5000ms));
        CHECK_FALSE(s.answer.has_value());
        CHECK_THAT(s.error, Catch::Contains(std::string(to_string(kind))));
        CHECK(s.joiner->counters().bad_frame(kind) == before + 1);
    };
    // 60,000 nested arrays: refused by the nesting pre-pass, not by a stack overflow.
    std::vector<std::uint8_t> deep(60000, 0x81);
    deep.push_back(0x00);
    expect_error(concat(seed_hello, answer_frame(deep)), BadFrameKind::Undecodable);
    // Above the answer's bound.
    expect_error(
        concat(seed_hello, answer_frame(std::vector<std::uint8_t>(kMaxJoinAnswerBytes + 1, 0x60))),
        BadFrameKind::Oversized);
    // An "accepted" before the seed proved anything is not believed.
    expect_error(answer_frame(encode_join_answer({JoinStatus::Accepted, "{}"})),
                 BadFrameKind::BadHandshake);
    // Something else than the answer after the handshake.
    expect_error(concat(seed_hello, answer_frame(encode_ping())), BadFrameKind::Undecodable);
}

TEST_CASE("a stalled peer overflows its own queue and is reset; other peers are unaffected") {
    // Mesh only (no elector): n2 sends to a fake n1 that never reads, and to a real n3.
    asio::io_context io;
    const auto membership = make_membership(free_ports(3));
    MeshOptions options = test_mesh_options();
    options.max_queue_bytes = std::size_t{1} << 20;
    Mesh n2(io, membership, NodeId{1}, options);
    Mesh n3(io, membership, NodeId{2}, options);
    std::uint64_t received_by_n3 = 0;
    n2.set_frame_handler(Channel::Elector, [](NodeId, std::span<const std::uint8_t>) {
        return std::optional<FrameRejection>{};
    });
    n3.set_frame_handler(Channel::Elector, [&](NodeId, std::span<const std::uint8_t>) {
        ++received_by_n3;
        return std::optional<FrameRejection>{};
    });
    n2.start();
    n3.start();
    REQUIRE(run_until(
        io, [&] { return n2.is_up(NodeId{2}); }, 3000ms));

    RawClient stalled(io, n2.local_port());
    stalled.hello("test", "n1");  // completes the handshake, then never reads
    REQUIRE(run_until(
        io, [&] { return n2.is_up(NodeId{0}); }, 3000ms));

    const std::vector<std::uint8_t> big(64 * 1024, 0x42);
    const std::vector<std::uint8_t> small(16, 0x01);
    std::uint64_t sent_to_n3 = 0;
    asio::steady_timer pump(io);
    std::function<void()> tick = [&] {
        if (n2.is_up(NodeId{0})) {
            for (int i = 0; i < 16; ++i) {
                n2.send(NodeId{0}, Channel::Elector, big);
            }
        }
        if (n2.send(NodeId{2}, Channel::Elector, small)) {
            ++sent_to_n3;
        }
        pump.expires_after(1ms);
        pump.async_wait([&](const boost::system::error_code& ec) {
            if (!ec) {
                tick();
            }
        });
    };
    tick();
    REQUIRE(run_until(
        io, [&] { return n2.counters().queue_overflows >= 1; }, 10000ms));
    pump.cancel();
    CHECK_FALSE(n2.is_up(NodeId{0}));
    CHECK(n2.is_up(NodeId{2}));
    REQUIRE(run_until(
        io, [&] { return received_by_n3 == sent_to_n3; }, 3000ms));
    CHECK(sent_to_n3 > 0);
    CHECK(n3.counters().peer_downs == 0);
}
