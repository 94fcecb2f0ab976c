// SPDX-License-Identifier: Apache-2.0
// Helpers for the loopback tests: free ports, temp dirs, in-process nodes, bounded run loops.
#pragma once

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "conclave/drivers/driver.hpp"
#include "conclave/drivers/state_file.hpp"
#include "conclave/net/mesh.hpp"
#include "support/loopback.hpp"

namespace conclave::net::test {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

/// Runs `io` until `done()` or the deadline; returns done(). Never sleeps: waits on the io.
inline bool run_until(asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= end) {
            return false;
        }
        if (io.stopped()) {
            io.restart();
        }
        io.run_for(5ms);
    }
    return true;
}

/// Runs `io` for a fixed time (to observe that something does NOT happen).
inline void run_for(asio::io_context& io, std::chrono::milliseconds duration) {
    run_until(
        io, [] { return false; }, duration);
}

/// N distinct free ports on 127.0.0.1, below the ephemeral range (support/loopback.hpp).
inline std::vector<std::uint16_t> free_ports(std::size_t n) {
    asio::io_context io;
    return conclave::test::free_ports(io, n);
}

/// A hand-driven peer speaking the handshake frame by frame (synchronously).
struct RawPeer {
    RawPeer(asio::io_context& io, std::uint16_t port, const std::string& source = "127.0.0.1")
        : socket(io) {
        socket.open(tcp::v4());
        socket.bind(tcp::endpoint(asio::ip::make_address(source), 0));
        socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    }
    void send(const std::vector<std::uint8_t>& payload) {
        asio::write(socket, asio::buffer(encode_frame(Channel::Control, payload)));
    }
    /// Reads one frame (blocking; the node under test runs on another thread).
    std::optional<Frame> read_frame() {
        FrameDecoder decoder(kMaxHandshakeFrameBytes);
        std::array<std::uint8_t, 4096> buffer{};
        while (true) {
            if (auto f = decoder.next()) {
                return f;
            }
            boost::system::error_code ec;
            const auto n = socket.read_some(asio::buffer(buffer), ec);
            if (ec) {
                return std::nullopt;
            }
            decoder.feed(std::span<const std::uint8_t>(buffer.data(), n));
        }
    }
    tcp::socket socket;
};

/// A temporary directory removed at scope exit.
/// Holds `count` silent connections from `source` to `port` on `io`, and opens a new one as
/// soon as the node closes one (what an attacker keeping its sockets does).
class SilentHolder {
  public:
    SilentHolder(asio::io_context& io, std::string source, std::uint16_t port, int count)
        : io_(io), source_(std::move(source)), port_(port) {
        for (int i = 0; i < count; ++i) {
            open();
        }
    }
    int closed_by_node() const { return *closed_; }

  private:
    void open() {
        auto s = std::make_shared<tcp::socket>(io_);
        s->open(tcp::v4());
        s->bind(tcp::endpoint(asio::ip::make_address(source_), 0));
        boost::system::error_code ec;
        s->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
        auto buffer = std::make_shared<std::array<std::uint8_t, 256>>();
        // Reads until the node closes the socket, then reconnects (the held count never drops).
        s->async_read_some(asio::buffer(*buffer),
                           [this, s, buffer, closed = closed_, stopped = stopped_](
                               boost::system::error_code read_ec, std::size_t) {
                               if (read_ec == asio::error::operation_aborted || *stopped) {
                                   return;  // `this` may be gone
                               }
                               ++*closed;
                               open();
                           });
        sockets_.push_back(s);
    }

    asio::io_context& io_;
    std::string source_;
    std::uint16_t port_;
    std::shared_ptr<int> closed_ = std::make_shared<int>(0);
    std::shared_ptr<bool> stopped_ = std::make_shared<bool>(false);
    std::vector<std::shared_ptr<tcp::socket>> sockets_;

  public:
    ~SilentHolder() {
        *stopped_ = true;
        for (auto& s : sockets_) {
            boost::system::error_code ec;
            s->close(ec);
        }
    }
};

struct TempDir {
    TempDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "conclave-net-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    std::filesystem::path path;
};

inline Membership make_membership(const std::vector<std::uint16_t>& ports,
                                  std::string cluster = "test") {
    Membership m;
    m.cluster = std::move(cluster);
    for (std::size_t i = 0; i < ports.size(); ++i) {
        m.nodes.push_back(NodeAddress{"n" + std::to_string(i + 1), "127.0.0.1", ports[i]});
    }
    return m;
}

/// Test timing: the fast profile, but with a long heartbeat inactivity interval (2 s), so that
/// a failover within it can only come from connection loss.
inline elector::Config test_config(std::size_t n, NodeId self) {
    elector::Config c = elector::Config::fast(n, self);
    c.heartbeat_miss_count = 20;
    return c;
}

inline MeshOptions test_mesh_options() {
    MeshOptions o;
    o.reconnect_initial = 20ms;
    o.reconnect_max = 200ms;
    o.handshake_timeout = 1000ms;
    return o;
}

/// One in-process node: a mesh and an elector driver on a shared io_context.
struct TestNode {
    TestNode(asio::io_context& io_, Membership membership_, NodeId self_,
             std::filesystem::path data_dir_, MeshOptions mesh_options_ = test_mesh_options())
        : io(io_),
          membership(std::move(membership_)),
          self(self_),
          data_dir(std::move(data_dir_)),
          mesh_options(std::move(mesh_options_)) {}

    void start() {
        mesh_options.seed = 1000 + self.value;
        mesh = std::make_unique<Mesh>(io, membership, self, mesh_options);
        drivers::DriverOptions options{data_dir, 7 + self.value};
        options.trace_file = trace_file;
        driver = std::make_unique<drivers::ElectorDriver>(
            io, *mesh, test_config(membership.size(), self), std::move(options));
        driver->subscribe([this](const elector::LeadershipSnapshot& s) { history.push_back(s); });
        mesh->start();
        driver->start();
    }
    /// Abrupt loss: sockets close without a LeadershipCession (like a crashed process).
    void kill() {
        driver.reset();
        mesh.reset();
    }
    bool alive() const { return driver != nullptr; }
    bool is_leader() const { return alive() && driver->snapshot().role == elector::Role::Leader; }
    std::optional<NodeId> leader() const {
        return alive() ? driver->snapshot().leader : std::nullopt;
    }
    bool saw_reason(elector::Reason r) const {
        for (const auto& s : history) {
            if (s.reason == r) {
                return true;
            }
        }
        return false;
    }

    asio::io_context& io;
    Membership membership;
    NodeId self;
    std::filesystem::path data_dir;
    MeshOptions mesh_options;
    std::filesystem::path trace_file;  // the driver's trace mode; empty: off
    std::unique_ptr<Mesh> mesh;
    std::unique_ptr<drivers::ElectorDriver> driver;
    std::vector<elector::LeadershipSnapshot> history;
};

struct TestCluster {
    TestCluster(std::size_t n, std::function<MeshOptions(NodeId)> options = {}) {
        const auto ports = free_ports(n);
        membership = make_membership(ports);
        for (std::uint16_t i = 0; i < n; ++i) {
            auto opts = options ? options(NodeId{i}) : test_mesh_options();
            nodes.push_back(std::make_unique<TestNode>(
                io, membership, NodeId{i}, dir.path / ("n" + std::to_string(i + 1)), opts));
        }
    }
    ~TestCluster() {
        for (auto& n : nodes) {
            n->kill();
        }
    }
    void start_all() {
        for (auto& n : nodes) {
            n->start();
        }
    }
    /// The leader every live node agrees on, if any.
    std::optional<NodeId> agreed_leader() const {
        std::optional<NodeId> leader;
        for (const auto& n : nodes) {
            if (!n->alive()) {
                continue;
            }
            const auto l = n->leader();
            if (!l || (leader && *leader != *l)) {
                return std::nullopt;
            }
            leader = l;
        }
        if (!leader || !nodes[leader->value]->is_leader()) {
            return std::nullopt;
        }
        return leader;
    }
    std::size_t leader_count() const {
        std::size_t count = 0;
        for (const auto& n : nodes) {
            count += n->is_leader() ? 1U : 0U;
        }
        return count;
    }
    bool wait_for_leader(std::chrono::milliseconds deadline = 5000ms) {
        return run_until(
            io, [this] { return agreed_leader().has_value(); }, deadline);
    }

    asio::io_context io;
    TempDir dir;
    Membership membership;
    std::vector<std::unique_ptr<TestNode>> nodes;
};

/// A seed and a joiner on one io_context: the seed is n2 of a started bare mesh whose table is
/// {n1, n2} (n2 dials nobody, so the seed is quiet); the joiner's mesh holds only itself and is
/// not started (request_join needs no listener). Options are adjusted before the meshes exist.
struct JoinSetup {
    explicit JoinSetup(
        std::string joiner_id = "n4",
        const std::function<void(MeshOptions& seed, MeshOptions& joiner)>& adjust = {}) {
        MeshOptions seed_options = test_mesh_options();
        MeshOptions joiner_options = test_mesh_options();
        if (adjust) {
            adjust(seed_options, joiner_options);
        }
        const auto ports = free_ports(3);
        seed = std::make_unique<Mesh>(io, make_membership({ports[0], ports[1]}), NodeId{1},
                                      seed_options);
        seed->start();
        joiner = std::make_unique<Mesh>(
            io, Membership{"test", {{std::move(joiner_id), "127.0.0.1", ports[2]}}}, NodeId{0},
            joiner_options);
    }
    /// Asks the node at 127.0.0.1:`port` (the seed by default); `done` records its result.
    void ask(std::optional<std::uint16_t> port = std::nullopt) {
        joiner->request_join("127.0.0.1", port ? *port : seed->local_port(), request,
                             [this](std::optional<JoinAnswer> a, std::string e) {
                                 ++done_calls;
                                 answer = std::move(a);
                                 error = std::move(e);
                             });
    }
    /// Asks the seed and runs until `done` has run (at most 5 s).
    void join() {
        ask();
        REQUIRE(run_until(
            io, [this] { return done_calls > 0; }, 5000ms));
    }

    asio::io_context io;
    // What `done` records; declared before the meshes, so that a join still pending when the
    // joiner's mesh is destroyed ("mesh stopped") writes into live members.
    int done_calls = 0;
    std::optional<JoinAnswer> answer;
    std::string error;
    JoinRequest request{"127.0.0.1:7004", "127.0.0.1:8004"};
    std::unique_ptr<Mesh> seed;
    std::unique_ptr<Mesh> joiner;
};

}  // namespace conclave::net::test
