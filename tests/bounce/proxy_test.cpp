// SPDX-License-Identifier: Apache-2.0
// The fault proxy's modes, each against a loopback echo server.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "conclave/bounce/proxy.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace conclave::bounce;

namespace {

/// Runs the io_context until `done` holds, for at most `limit`.
bool run_until(asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        io.restart();
        io.run_for(std::chrono::milliseconds(5));
    }
    return true;
}

/// Accepts connections on 127.0.0.1, records what it receives, echoes it back.
struct EchoServer {
    explicit EchoServer(asio::io_context& io)
        : acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
        accept();
    }
    tcp::endpoint endpoint() const { return acceptor.local_endpoint(); }
    void accept() {
        acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
            if (ec) {
                return;
            }
            auto sock = std::make_shared<tcp::socket>(std::move(s));
            accepted += 1;
            read(sock);
            accept();
        });
    }
    void read(std::shared_ptr<tcp::socket> sock) {
        auto buf = std::make_shared<std::array<char, 4096>>();
        sock->async_read_some(
            asio::buffer(*buf), [this, sock, buf](boost::system::error_code ec, std::size_t n) {
                if (ec) {
                    return;
                }
                received.append(buf->data(), n);
                auto copy = std::make_shared<std::string>(buf->data(), n);
                asio::async_write(*sock, asio::buffer(*copy),
                                  [copy](boost::system::error_code, std::size_t) {});
                read(sock);
            });
    }
    tcp::acceptor acceptor;
    std::string received;
    int accepted = 0;
};

/// A client that connects to `to`, records what it receives and the first error.
struct Client {
    Client(asio::io_context& io, tcp::endpoint to) : socket(io) {
        socket.async_connect(to, [this](boost::system::error_code ec) {
            if (ec) {
                error = ec;
                return;
            }
            connected = true;
            read();
        });
    }
    void read() {
        socket.async_read_some(asio::buffer(buf),
                               [this](boost::system::error_code ec, std::size_t n) {
                                   if (ec) {
                                       error = ec;
                                       return;
                                   }
                                   received.append(buf.data(), n);
                                   read();
                               });
    }
    void send(const std::string& text) {
        auto copy = std::make_shared<std::string>(text);
        asio::async_write(socket, asio::buffer(*copy),
                          [copy](boost::system::error_code, std::size_t) {});
    }
    tcp::socket socket;
    std::array<char, 4096> buf{};
    std::string received;
    bool connected = false;
    boost::system::error_code error;
};

constexpr DirectedLink kAB{0, 1};
constexpr DirectedLink kBA{1, 0};
constexpr DirectedLink kAC{0, 2};

}  // namespace

TEST_CASE("pass forwards bytes both ways") {
    asio::io_context io;
    EchoServer b(io);
    FaultProxy proxy(io, 3, 1);
    Client a(io, proxy.add_route(kAB, b.endpoint()));
    REQUIRE(run_until(io, [&] { return a.connected; }));
    a.send("hello");
    REQUIRE(run_until(io, [&] { return a.received == "hello"; }));
    CHECK(b.received == "hello");
    CHECK(proxy.counters(kAB).bytes_forwarded == 5);
    CHECK(proxy.counters(kBA).bytes_forwarded == 5);
    CHECK(proxy.open_connections(kAB) == 1);
    CHECK(proxy.open_connections(kBA) == 1);  // the same connection carries B->A
}

TEST_CASE("cut resets open connections, refuses new ones, and spares other links") {
    asio::io_context io;
    EchoServer b(io);
    EchoServer c(io);
    FaultProxy proxy(io, 3, 1);
    const tcp::endpoint ab = proxy.add_route(kAB, b.endpoint());
    const tcp::endpoint ac = proxy.add_route(kAC, c.endpoint());
    Client a_to_b(io, ab);
    Client a_to_c(io, ac);
    a_to_b.send("1");
    a_to_c.send("1");
    REQUIRE(run_until(io, [&] { return a_to_b.received == "1" && a_to_c.received == "1"; }));

    SECTION("cutting one direction drops the connection that carries it") {
        proxy.set_mode(kBA, Cut{});  // the connection was dialed A->B; it carries B->A bytes
        REQUIRE(run_until(io, [&] { return bool(a_to_b.error); }));
        CHECK(a_to_b.error != asio::error::eof);  // a reset, not a clean close
        CHECK(proxy.counters(kAB).connections_reset == 1);
        CHECK(proxy.open_connections(kAB) == 0);

        Client again(io, ab);  // refused: accepted by the kernel, then reset by the proxy
        REQUIRE(run_until(io, [&] { return bool(again.error); }));
        CHECK(again.received.empty());
        CHECK(proxy.counters(kAB).connections_refused == 1);

        a_to_c.send("2");  // A-C is untouched
        REQUIRE(run_until(io, [&] { return a_to_c.received == "12"; }));
        CHECK(!a_to_c.error);

        proxy.set_mode(kBA, Pass{});
        Client healed(io, ab);
        healed.send("3");
        REQUIRE(run_until(io, [&] { return healed.received == "3"; }));
    }
}

TEST_CASE("blackhole A->B drops the bytes A sends and keeps the connection") {
    asio::io_context io;
    EchoServer b(io);
    FaultProxy proxy(io, 2, 1);
    Client a(io, proxy.add_route(kAB, b.endpoint()));
    REQUIRE(run_until(io, [&] { return a.connected && b.accepted == 1; }));
    proxy.set_mode(kAB, Blackhole{});
    a.send("first");
    REQUIRE(run_until(io, [&] { return proxy.counters(kAB).bytes_dropped == 5; }));
    CHECK(b.received.empty());
    CHECK(!a.error);
    proxy.set_mode(kAB, Pass{});
    a.send("second");
    REQUIRE(run_until(io, [&] { return a.received == "second"; }));
    CHECK(b.received == "second");  // "first" never arrived
}

TEST_CASE("blackhole B->A drops only the bytes flowing back") {
    asio::io_context io;
    EchoServer b(io);
    FaultProxy proxy(io, 2, 1);
    Client a(io, proxy.add_route(kAB, b.endpoint()));
    REQUIRE(run_until(io, [&] { return a.connected && b.accepted == 1; }));
    proxy.set_mode(kBA, Blackhole{});
    a.send("ping");
    REQUIRE(run_until(
        io, [&] { return b.received == "ping" && proxy.counters(kBA).bytes_dropped == 4; }));
    CHECK(a.received.empty());
    proxy.set_mode(kBA, Pass{});
    a.send("x");
    REQUIRE(run_until(io, [&] { return a.received == "x"; }));  // the echo of "ping" was dropped
    CHECK(b.received == "pingx");
}

TEST_CASE("delay holds bytes back and keeps their order") {
    asio::io_context io;
    EchoServer b(io);
    FaultProxy proxy(io, 2, 7);
    Client a(io, proxy.add_route(kAB, b.endpoint()));
    REQUIRE(run_until(io, [&] { return a.connected && b.accepted == 1; }));
    proxy.set_mode(kAB, Delay{40, 30});
    std::string expected;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 30; ++i) {
        const std::string piece = std::to_string(i) + ",";
        expected += piece;
        a.send(piece);
        io.restart();
        io.run_for(std::chrono::milliseconds(1));  // pacing, so that the proxy reads many chunks
    }
    REQUIRE(run_until(io, [&] { return a.received.size() == expected.size(); }));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(a.received == expected);
    CHECK(b.received == expected);
    CHECK(elapsed >= std::chrono::milliseconds(10));  // lower bound of latency - jitter
    CHECK(to_string(proxy.mode(kAB)) == "delay 40+-30ms");
}
