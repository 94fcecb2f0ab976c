// SPDX-License-Identifier: Apache-2.0
// Loopback clusters over real TCP: election, failover through connection loss, rejoin.
#include <spdlog/sinks/null_sink.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "conclave/drivers/elector_trace.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "fixture.hpp"

using namespace conclave;
using namespace conclave::net;
using namespace conclave::drivers;
using namespace conclave::net::test;

TEST_CASE("a 3-node loopback cluster elects exactly one leader") {
    TestCluster cluster(3);
    cluster.start_all();
    REQUIRE(cluster.wait_for_leader());
    CHECK(cluster.leader_count() == 1);
    for (const auto& n : cluster.nodes) {
        CHECK(n->driver->counters().state_writes >= 1);
        CHECK(n->driver->counters().alarms == 0);
        for (std::uint16_t p = 0; p < 3; ++p) {
            if (NodeId{p} != n->self) {
                CHECK(n->mesh->peer_status(NodeId{p}).up);
                CHECK(n->mesh->peer_status(NodeId{p}).last_contact.has_value());
            }
        }
    }
    const auto leader = *cluster.agreed_leader();
    const auto& lc = cluster.nodes[leader.value]->driver->counters();
    CHECK(lc.messages_out[4] > 0);  // LeaderHeartbeat
}

TEST_CASE("a 5-node loopback cluster elects exactly one leader") {
    TestCluster cluster(5);
    cluster.start_all();
    REQUIRE(cluster.wait_for_leader());
    CHECK(cluster.leader_count() == 1);
    // The mesh is full: every node sees its 4 peers.
    for (const auto& n : cluster.nodes) {
        CHECK(n->mesh->counters().peer_ups == 4);
        CHECK(n->mesh->counters().handshake_refusals == std::array<std::uint64_t, kRefusalCount>{});
    }
}

TEST_CASE("losing the leader's node fails over through connection loss; it rejoins as follower") {
    TestCluster cluster(3);
    cluster.start_all();
    REQUIRE(cluster.wait_for_leader());
    const NodeId old_leader = *cluster.agreed_leader();
    const Term old_term = cluster.nodes[old_leader.value]->driver->snapshot().term;

    cluster.nodes[old_leader.value]->kill();
    REQUIRE(cluster.wait_for_leader());
    const NodeId new_leader = *cluster.agreed_leader();
    CHECK(new_leader != old_leader);
    // The followers dropped the old leader because its connection closed, not because its
    // heartbeats stopped (the inactivity interval is 2 s here).
    for (const auto& n : cluster.nodes) {
        if (n->alive()) {
            CHECK(n->saw_reason(elector::Reason::LeaderUnavailable));
            CHECK_FALSE(n->saw_reason(elector::Reason::LeaderNoHeartbeat));
        }
    }
    const Term new_term = cluster.nodes[new_leader.value]->driver->snapshot().term;
    CHECK(new_term > old_term);

    // Restart the old leader on the same port and data directory.
    auto& restarted = *cluster.nodes[old_leader.value];
    restarted.history.clear();
    restarted.start();
    CHECK(restarted.driver->elector().state().term >= old_term);  // restored from disk
    REQUIRE(run_until(
        cluster.io, [&] { return restarted.leader() == new_leader; }, 5000ms));
    // It follows without deposing the current leader.
    run_for(cluster.io, 300ms);
    CHECK(cluster.agreed_leader() == new_leader);
    CHECK(cluster.nodes[new_leader.value]->driver->snapshot().term == new_term);
    CHECK(cluster.leader_count() == 1);
}

TEST_CASE("a corrupt state file stops the node from starting; a missing one is a new node") {
    TempDir dir;
    asio::io_context io;
    const auto ports = free_ports(1);
    const auto membership = make_membership(ports);
    Mesh mesh(io, membership, NodeId{0});
    {
        ElectorDriver fresh(io, mesh, test_config(1, NodeId{0}), DriverOptions{dir.path, 1});
        CHECK(fresh.elector().state().term == Term{0});
    }
    std::filesystem::create_directories(dir.path);
    { std::ofstream(dir.path / kStateFileName) << "{\"format\": 1, \"term\": \"seven\"}"; }
    try {
        ElectorDriver broken(io, mesh, test_config(1, NodeId{0}), DriverOptions{dir.path, 1});
        FAIL("a corrupt state file was accepted");
    } catch (const StateFileError& e) {
        CHECK(std::string(e.what()).find("term") != std::string::npos);
    }
}

TEST_CASE("a single-node cluster persists its term before it leads") {
    TempDir dir;
    asio::io_context io;
    const auto membership = make_membership(free_ports(1));
    Mesh mesh(io, membership, NodeId{0});
    ElectorDriver driver(io, mesh, test_config(1, NodeId{0}), DriverOptions{dir.path, 1});
    mesh.start();
    driver.start();
    REQUIRE(run_until(
        io, [&] { return driver.snapshot().role == elector::Role::Leader; }, 3000ms));
    const auto stored = load_durable_state(dir.path, 1);
    REQUIRE(stored.has_value());
    CHECK(stored->term == driver.snapshot().term);
}

TEST_CASE("a failed state write stops the driver before anything depending on it is sent") {
    TempDir dir;
    { std::ofstream(dir.path / "not-a-dir") << "x"; }
    asio::io_context io;
    const auto membership = make_membership(free_ports(1));
    Mesh mesh(io, membership, NodeId{0});
    // The data directory lies below a regular file: creating it fails at the first write.
    ElectorDriver driver(io, mesh, test_config(1, NodeId{0}),
                         DriverOptions{dir.path / "not-a-dir" / "data", 1});
    mesh.start();
    driver.start();
    REQUIRE(run_until(
        io, [&] { return driver.failed(); }, 3000ms));
    run_for(io, 200ms);
    CHECK(driver.counters().state_write_failures == 1);
    CHECK(driver.counters().state_writes == 0);
    CHECK(driver.snapshot().role != elector::Role::Leader);
    CHECK(driver.transfer_leadership(NodeId{0}).has_value());
}

// ---- The metadata log's storage thread ----------------------------------------------
// Here so that the TSan pass of CI (net tests) runs the storage thread: fsyncs run on it while the
// io thread appends, and its failure comes back as a storage failure.

namespace {

/// FileStorage whose storage-thread sync fails with EIO once `fail` is set.
class SyncFailingStorage final : public replication::LogStorage {
  public:
    explicit SyncFailingStorage(const std::filesystem::path& dir)
        : inner_(dir, replication::FsyncPolicy::Batched) {}
    std::atomic<bool> fail{false};

    replication::Recovery recover() override { return inner_.recover(); }
    void append(const std::vector<replication::Entry>& e) override { inner_.append(e); }
    void truncate_after(Lsn after) override { inner_.truncate_after(after); }
    void write_meta(const replication::LogMeta& meta) override { inner_.write_meta(meta); }
    Lsn flush() override { return inner_.flush(); }
    Lsn durable_lsn() const override { return inner_.durable_lsn(); }
    replication::SyncTicket begin_sync() override { return inner_.begin_sync(); }
    void sync(const replication::SyncTicket& t) override {
        if (fail.load()) {
            throw std::system_error(EIO, std::generic_category(), "fdatasync (injected)");
        }
        inner_.sync(t);
    }
    Lsn end_sync(const replication::SyncTicket& t) override { return inner_.end_sync(t); }
    std::uint64_t fsync_count() const override { return inner_.fsync_count(); }
    void persist_snapshot(const replication::Snapshot& s) override { inner_.persist_snapshot(s); }

  private:
    replication::FileStorage inner_;
};

}  // namespace

TEST_CASE("log driver: group commit on the storage thread; a failed fsync stops the node's log",
          "[log][storage-thread]") {
    asio::io_context io;
    TempDir dir;
    const Membership m = make_membership(free_ports(3));
    std::vector<std::unique_ptr<TestNode>> nodes;
    std::vector<std::shared_ptr<SyncFailingStorage>> stores;
    std::vector<std::unique_ptr<LogDriver>> logs;
    std::vector<std::string> failures(3);
    for (std::uint16_t i = 0; i < 3; ++i) {
        const auto data = dir.path / ("n" + std::to_string(i + 1));
        nodes.push_back(std::make_unique<TestNode>(io, m, NodeId{i}, data));
        nodes.back()->start();
        stores.push_back(std::make_shared<SyncFailingStorage>(data / "log"));
        LogDriverOptions o;
        o.dir = data / "log";
        o.logger = std::make_shared<spdlog::logger>(
            "log-test", std::make_shared<spdlog::sinks::null_sink_mt>());
        o.on_storage_failure = [&failures, i](const std::string& what) { failures[i] = what; };
        o.storage = stores.back();
        logs.push_back(std::make_unique<LogDriver>(io, *nodes.back()->mesh, *nodes.back()->driver,
                                                   std::move(o)));
        logs.back()->start();
    }
    std::size_t leader = 0;
    REQUIRE(run_until(
        io,
        [&] {
            for (std::size_t i = 0; i < 3; ++i) {
                if (logs[i]->log().can_propose()) {
                    leader = i;
                    return true;
                }
            }
            return false;
        },
        10s));
    // 200 proposals at once: the io thread appends while the storage thread fsyncs.
    std::vector<ProposeOutcome> outcomes;
    for (int k = 0; k < 200; ++k) {
        logs[leader]->propose("k" + std::to_string(k), "v",
                              [&](const ProposeOutcome& o) { outcomes.push_back(o); });
    }
    REQUIRE(run_until(
        io, [&] { return outcomes.size() == 200; }, 10s));
    for (const ProposeOutcome& o : outcomes) {
        REQUIRE(o.status == ProposeStatus::Committed);
    }
    const Lsn last = outcomes.back().lsn;
    REQUIRE(run_until(
        io,
        [&] {
            return logs[0]->log().commit_lsn() == last && logs[1]->log().commit_lsn() == last &&
                   logs[2]->log().commit_lsn() == last;
        },
        10s));
    CHECK(logs[leader]->fsyncs() > 0);
    CHECK(logs[leader]->counters().flushes < 200);  // grouped

    // A follower's fsync fails on the storage thread: its log stops; the others commit on.
    const std::size_t follower = (leader + 1) % 3;
    stores[follower]->fail = true;
    outcomes.clear();
    for (int k = 0; k < 20; ++k) {
        logs[leader]->propose("after" + std::to_string(k), "v",
                              [&](const ProposeOutcome& o) { outcomes.push_back(o); });
    }
    REQUIRE(run_until(
        io, [&] { return outcomes.size() == 20 && logs[follower]->failed(); }, 10s));
    for (const ProposeOutcome& o : outcomes) {
        CHECK(o.status == ProposeStatus::Committed);
    }
    CHECK_THAT(failures[follower], Catch::Contains("injected"));
    CHECK(logs[follower]->counters().storage_failures == 1);
    logs.clear();  // before the meshes and drivers
}

TEST_CASE("membership changes: a node added at runtime is connected; a retired one is refused") {
    // Bare meshes (no elector): n1 and n2 start with a 2-node table, n3 starts with the whole
    // 3-node table (a joiner learns it from the configuration), then n1 and n2 add it.
    asio::io_context io;
    const auto whole = make_membership(free_ports(3));
    Membership two = whole;
    two.nodes.pop_back();
    std::vector<std::unique_ptr<Mesh>> meshes;
    for (std::uint16_t i = 0; i < 3; ++i) {
        auto options = test_mesh_options();
        options.seed = 50U + i;
        meshes.push_back(std::make_unique<Mesh>(io, i < 2 ? two : whole, NodeId{i}, options));
        meshes.back()->start();
    }
    const NodeId n1{0}, n2{1}, n3{2};
    REQUIRE(run_until(
        io, [&] { return meshes[0]->is_up(n2); }, 5000ms));
    CHECK_FALSE(meshes[2]->is_up(n1));  // nobody dials n3 before it is in their table

    // A bad address is refused like at construction; the table is unchanged.
    CHECK(meshes[0]->add_node(NodeAddress{"n2", "127.0.0.1", 1}).error.find("duplicate") !=
          std::string::npos);
    CHECK(meshes[0]->membership().size() == 2);

    for (std::size_t i = 0; i < 2; ++i) {
        const auto added = meshes[i]->add_node(whole.nodes[2]);
        REQUIRE(added.index == n3);
    }
    REQUIRE(run_until(
        io, [&] { return meshes[2]->is_up(n1) && meshes[2]->is_up(n2); }, 5000ms));

    // n2 is removed: n1 and n3 retire it. Its connections close and are never redialed; n2
    // (which does not know) keeps dialing n3 and is refused.
    meshes[0]->retire_node(n2);
    meshes[2]->retire_node(n2);
    CHECK(meshes[0]->is_retired(n2));
    const auto refused_before = meshes[2]->counters().refusal(HandshakeRefusal::UnknownNode);
    REQUIRE(run_until(
        io,
        [&] {
            return !meshes[1]->is_up(n1) && !meshes[1]->is_up(n3) &&
                   meshes[2]->counters().refusal(HandshakeRefusal::UnknownNode) > refused_before;
        },
        5000ms));
    run_for(io, 300ms);
    CHECK_FALSE(meshes[0]->is_up(n2));
    CHECK_FALSE(meshes[2]->is_up(n2));
    CHECK(meshes[0]->is_up(n3));
    CHECK(meshes[2]->is_up(n1));

    // n2 is added back (same id, same index): connected again.
    meshes[0]->readmit_node(n2);
    meshes[2]->readmit_node(n2);
    REQUIRE(run_until(
        io, [&] { return meshes[1]->is_up(n1) && meshes[1]->is_up(n3); }, 5000ms));
    for (auto& m : meshes) {
        m->stop();
    }
}

// ---- Join exchange (net/README.md, "Join") ----------------------------------------------------

namespace {

const std::string kTestSecret(32, 's');

void with_secret(MeshOptions& seed, MeshOptions& joiner) {
    seed.secret = kTestSecret;
    joiner.secret = kTestSecret;
}

}  // namespace

TEST_CASE("join: the seed's handler accepts at once; the joiner never becomes a peer") {
    JoinSetup s("n4", with_secret);  // the MACs work for an id outside the seed's table
    std::string asked_id;
    JoinRequest asked;
    const std::string configuration(40 << 10, 'c');  // a large answer: the 64 KiB path
    s.seed->set_join_handler(
        [&](std::string id, JoinRequest request, std::function<void(JoinAnswer)> respond) {
            asked_id = id;
            asked = request;
            respond(JoinAnswer{JoinStatus::Accepted, configuration});
        });
    s.join();
    CHECK(s.error.empty());
    REQUIRE(s.answer.has_value());
    CHECK(s.answer->status == JoinStatus::Accepted);
    CHECK(s.answer->detail == configuration);
    CHECK(asked_id == "n4");
    CHECK(asked.peer == s.request.peer);
    CHECK(asked.http == s.request.http);
    run_for(s.io, 100ms);  // done runs exactly once; nothing else happens afterwards
    CHECK(s.done_calls == 1);
    const MeshCounters& seed = s.seed->counters();
    CHECK(seed.join_requests == 1);
    CHECK(seed.peer_ups == 0);
    CHECK(seed.handshakes_completed == 0);
    CHECK(seed.handshake_refusals == std::array<std::uint64_t, kRefusalCount>{});
    CHECK(seed.bad_frames == std::array<std::uint64_t, kBadFrameKindCount>{});
    CHECK_FALSE(s.seed->is_up(NodeId{0}));
    CHECK(s.joiner->counters().peer_ups == 0);
}

TEST_CASE("join: the handler answers later (redirect); a second respond does nothing") {
    JoinSetup s;
    std::function<void(JoinAnswer)> stored;
    s.seed->set_join_handler([&](std::string, JoinRequest, std::function<void(JoinAnswer)> r) {
        stored = std::move(r);
    });
    s.ask();
    REQUIRE(run_until(
        s.io, [&] { return stored != nullptr; }, 5000ms));
    run_for(s.io, 50ms);
    CHECK(s.done_calls == 0);  // waiting for the answer
    stored(JoinAnswer{JoinStatus::Redirect, "127.0.0.1:7001"});
    REQUIRE(run_until(
        s.io, [&] { return s.done_calls > 0; }, 5000ms));
    CHECK(s.error.empty());
    REQUIRE(s.answer.has_value());
    CHECK(s.answer->status == JoinStatus::Redirect);
    CHECK(s.answer->detail == "127.0.0.1:7001");
    stored(JoinAnswer{JoinStatus::Accepted, "again"});  // the connection is answered or closed
    run_for(s.io, 50ms);
    CHECK(s.done_calls == 1);
    CHECK(s.seed->counters().join_requests == 1);
}

TEST_CASE("join: a joiner waiting for its answer is never evicted by silent sockets") {
    JoinSetup s;
    std::function<void(JoinAnswer)> stored;
    s.seed->set_join_handler([&](std::string, JoinRequest, std::function<void(JoinAnswer)> r) {
        stored = std::move(r);
    });
    s.ask();
    REQUIRE(run_until(
        s.io, [&] { return stored != nullptr; }, 5000ms));
    // Silent sockets from the joiner's address and from everywhere, reopened when closed: each
    // new one evicts an older silent one, never the joiner that proved itself.
    std::vector<std::unique_ptr<SilentHolder>> holders;
    for (int source = 1; source <= 9; ++source) {
        holders.push_back(std::make_unique<SilentHolder>(s.io, "127.0.0." + std::to_string(source),
                                                         s.seed->local_port(), 8));
    }
    run_for(s.io, 300ms);
    CHECK(s.done_calls == 0);  // still waiting, not closed
    stored(JoinAnswer{JoinStatus::Redirect, "127.0.0.1:7001"});
    REQUIRE(run_until(
        s.io, [&] { return s.done_calls > 0; }, 5000ms));
    CHECK(s.error.empty());
    CHECK(s.answer.has_value());
}

TEST_CASE("join: a joiner with another secret is refused at the handshake") {
    JoinSetup s("n4", [](MeshOptions& seed, MeshOptions& joiner) {
        seed.secret = kTestSecret;
        joiner.secret = std::string(32, 'x');
    });
    bool asked = false;
    s.seed->set_join_handler(
        [&](std::string, JoinRequest, std::function<void(JoinAnswer)>) { asked = true; });
    s.join();
    CHECK_FALSE(s.answer.has_value());
    CHECK_THAT(s.error, Catch::Contains("auth_failed"));
    CHECK_FALSE(asked);
    CHECK(s.seed->counters().join_requests == 0);
    CHECK(s.joiner->counters().refusal(HandshakeRefusal::AuthFailed) == 1);
}

TEST_CASE("join: an id already in the seed's table reaches the handler (a joiner asking again)") {
    JoinSetup s("n1");
    std::string seen;
    s.seed->set_join_handler(
        [&](std::string id, JoinRequest, std::function<void(JoinAnswer)> respond) {
            seen = id;
            respond(JoinAnswer{JoinStatus::Refused, "already a member at other addresses"});
        });
    s.join();
    CHECK(seen == "n1");
    REQUIRE(s.answer.has_value());
    CHECK(s.answer->status == JoinStatus::Refused);
    CHECK(s.seed->counters().join_requests == 1);
    CHECK_FALSE(s.seed->is_up(NodeId{0}));  // a joiner's connection never becomes a peer
}

TEST_CASE("join: a seed without a join handler refuses") {
    JoinSetup s;
    s.join();
    CHECK_FALSE(s.answer.has_value());
    CHECK_THAT(s.error, Catch::Contains("does not accept joins"));
    CHECK(s.seed->counters().refusal(HandshakeRefusal::JoinRefused) == 1);
}

TEST_CASE("join: a handler that never answers leaves the joiner with a timeout") {
    JoinSetup s("n4", [](MeshOptions& seed, MeshOptions& joiner) {
        seed.join_timeout = 5000ms;  // the joiner gives up first
        joiner.join_timeout = 200ms;
    });
    std::function<void(JoinAnswer)> stored;
    s.seed->set_join_handler([&](std::string, JoinRequest, std::function<void(JoinAnswer)> r) {
        stored = std::move(r);
    });
    s.join();
    CHECK_FALSE(s.answer.has_value());
    CHECK_THAT(s.error, Catch::Contains("timeout"));
    REQUIRE(stored != nullptr);
    run_for(s.io, 100ms);  // the seed sees the joiner's connection close
    stored(JoinAnswer{JoinStatus::Accepted, "too late"});  // does nothing
    run_for(s.io, 50ms);
    CHECK(s.done_calls == 1);
}

TEST_CASE("join: an unreachable seed and a stopped mesh end the request with an error") {
    JoinSetup s;
    const auto closed_port = free_ports(1)[0];
    s.ask(closed_port);  // nobody listens there
    REQUIRE(run_until(
        s.io, [&] { return s.done_calls == 1; }, 5000ms));
    CHECK_FALSE(s.answer.has_value());
    CHECK_THAT(s.error, Catch::Contains("connect failed"));

    // Pending when the joiner's mesh stops: done runs with "mesh stopped".
    s.seed->set_join_handler([](std::string, JoinRequest, std::function<void(JoinAnswer)>) {});
    s.done_calls = 0;
    s.ask();
    REQUIRE(run_until(
        s.io, [&] { return s.seed->counters().join_requests == 1; }, 5000ms));
    s.joiner->stop();
    CHECK(s.done_calls == 1);
    CHECK_THAT(s.error, Catch::Contains("mesh stopped"));
    // A request on a stopped mesh: done runs later, on the io_context, never inside the call.
    s.error.clear();
    s.ask();
    CHECK(s.done_calls == 1);
    REQUIRE(run_until(
        s.io, [&] { return s.done_calls == 2; }, 1000ms));
    CHECK_THAT(s.error, Catch::Contains("mesh stopped"));
}

TEST_CASE("join: an answer above the bound is logged and replaced by a refusal") {
    JoinSetup s;
    s.seed->set_join_handler([](std::string, JoinRequest, std::function<void(JoinAnswer)> r) {
        r(JoinAnswer{JoinStatus::Accepted, std::string(kMaxJoinAnswerBytes, 'c')});
    });
    s.join();
    CHECK(s.error.empty());
    REQUIRE(s.answer.has_value());
    CHECK(s.answer->status == JoinStatus::Refused);
    CHECK_THAT(s.answer->detail, Catch::Contains("too large"));
}

// ---- Incarnations (node/identity.hpp): a peer known by another incarnation is refused --------

namespace {

/// Two bare meshes on loopback (n1 dials n2) with the cluster secret and incarnations "inc-0" and
/// "inc-1"; `tune(i, options)` changes the rest before mesh i is made. Not started.
std::vector<std::unique_ptr<Mesh>> two_meshes(
    asio::io_context& io, unsigned seed,
    const std::function<void(std::uint16_t, MeshOptions&)>& tune) {
    const auto m = make_membership(free_ports(2));
    std::vector<std::unique_ptr<Mesh>> meshes;
    for (std::uint16_t i = 0; i < 2; ++i) {
        auto options = test_mesh_options();
        options.seed = seed + i;
        options.secret = std::string(32, 'k');
        options.incarnation = "inc-" + std::to_string(i);
        tune(i, options);
        meshes.push_back(std::make_unique<Mesh>(io, m, NodeId{i}, options));
    }
    return meshes;
}

}  // namespace

TEST_CASE("incarnations: a node refused as state_lost is told, by the dialer and by the acceptor") {
    for (const bool dialer_refuses : {true, false}) {
        for (const bool secret : {true, false}) {
            CAPTURE(dialer_refuses, secret);
            asio::io_context io;
            std::vector<std::string> lost(2);
            std::vector<int> asked(2, 0);
            // n1 (index 0) always dials n2. The refusing side remembers the other by "old".
            const std::size_t refuser = dialer_refuses ? 0 : 1;
            auto meshes = two_meshes(io, 70U, [&](std::uint16_t i, MeshOptions& options) {
                if (!secret) {
                    options.secret.reset();
                }
                options.incarnation = i == refuser ? "mine" : "new";
                options.admit_incarnation = [&, i](NodeId, const std::string& inc, bool) {
                    ++asked[i];
                    return i == refuser && inc != "old"
                               ? std::optional<std::string>("known by old, not " + inc)
                               : std::nullopt;
                };
                options.on_state_lost = [&, i](NodeId, const std::string& detail) {
                    lost[i] = detail;
                };
            });
            for (auto& mesh : meshes) {
                mesh->start();
            }
            const std::size_t refused = 1 - refuser;
            REQUIRE(run_until(
                io, [&] { return !lost[refused].empty(); }, 5000ms));
            CHECK(lost[refused] == "known by old, not new");
            CHECK(lost[refuser].empty());
            CHECK(meshes[refuser]->counters().refusal(HandshakeRefusal::StateLost) >= 1);
            run_for(io, 200ms);
            CHECK_FALSE(meshes[refuser]->is_up(NodeId{static_cast<std::uint16_t>(refused)}));
            for (auto& mesh : meshes) {
                mesh->stop();
            }
        }
    }
}

TEST_CASE(
    "restored: a peer whose durable term falls below one it announced is refused "
    "(state_regressed), by the dialer and by the acceptor") {
    // The refuser keeps running; the other node announces term 9 on the live connection, then
    // restarts with the same incarnation and term 8 (its data directory restored from a copy):
    // refused and told; then with the remembered term (repaired): admitted again.
    for (const std::uint16_t refuser : {std::uint16_t{0}, std::uint16_t{1}}) {
        CAPTURE(refuser);
        asio::io_context io;
        const auto m = make_membership(free_ports(2));
        const auto restored = static_cast<std::uint16_t>(1 - refuser);
        std::vector<std::uint64_t> terms{7, 7};
        std::vector<std::string> told(2);
        std::vector<std::uint64_t> learned(2, 0);  // the highest term each side heard
        const auto make = [&](std::uint16_t i) {
            auto options = test_mesh_options();
            options.seed = 90U + i;
            options.secret = std::string(32, 'k');
            options.incarnation = "inc-" + std::to_string(i);
            options.durable_term = [&terms, i] { return terms[i]; };
            options.on_state_regressed = [&told, i](NodeId, const std::string& detail) {
                told[i] = detail;
            };
            options.remember_term = [&learned, i](NodeId, const std::string&, std::uint64_t t) {
                learned[i] = std::max(learned[i], t);
            };
            return std::make_unique<Mesh>(io, m, NodeId{i}, options);
        };
        std::vector<std::unique_ptr<Mesh>> meshes;
        meshes.push_back(make(0));
        meshes.push_back(make(1));
        const auto restart = [&](std::uint64_t term) {
            meshes[restored]->stop();
            meshes[restored].reset();
            terms[restored] = term;
            meshes[restored] = make(restored);
            meshes[restored]->start();
        };
        const auto linked = [&] {
            return meshes[0]->is_up(NodeId{1}) && meshes[1]->is_up(NodeId{0});
        };
        for (auto& mesh : meshes) {
            mesh->start();
        }
        REQUIRE(run_until(io, linked, 5000ms));
        restart(7);  // the same term again: nothing regressed
        REQUIRE(run_until(io, linked, 5000ms));
        // A term reached while connected is announced on the live connection (a term Ping).
        terms[restored] = 9;
        meshes[restored]->announce_term();
        REQUIRE(run_until(
            io, [&] { return learned[refuser] == 9; }, 5000ms));
        restart(8);
        REQUIRE(run_until(
            io, [&] { return !told[restored].empty(); }, 5000ms));
        CHECK_THAT(told[restored], Catch::Contains("durable term 8, below the term 9"));
        CHECK_THAT(told[restored], Catch::Contains("--repair --min-term"));
        CHECK(told[refuser].empty());
        CHECK(meshes[refuser]->counters().refusal(HandshakeRefusal::StateRegressed) >= 1);
        run_for(io, 200ms);
        CHECK_FALSE(meshes[refuser]->is_up(NodeId{restored}));
        restart(9);  // repaired with a --min-term at least the remembered term
        REQUIRE(run_until(io, linked, 5000ms));
        for (auto& mesh : meshes) {
            mesh->stop();
        }
    }
}

TEST_CASE("restored: a member's hello without a durable term is refused when terms are checked") {
    asio::io_context io;
    auto meshes = two_meshes(io, 95U, [&](std::uint16_t i, MeshOptions& options) {
        if (i == 1) {
            options.durable_term = [] { return std::uint64_t{4}; };
        }
    });
    for (auto& mesh : meshes) {
        mesh->start();
    }
    REQUIRE(run_until(
        io,
        [&] { return meshes[1]->counters().refusal(HandshakeRefusal::UnsupportedVersion) >= 1; },
        5000ms));
    run_for(io, 200ms);
    CHECK_FALSE(meshes[1]->is_up(NodeId{0}));
    for (auto& mesh : meshes) {
        mesh->stop();
    }
}

TEST_CASE("removed: a node that dials a peer which removed it is told (unknown_node)") {
    // The remover is the dialed lower index (the removed node's dial request) or the higher one.
    for (const unsigned remover : {0U, 1U}) {
        CAPTURE(remover);
        asio::io_context io;
        std::vector<std::string> told(2);
        auto meshes = two_meshes(io, 60U, [&](std::uint16_t i, MeshOptions& options) {
            options.on_unknown_to = [&, i](NodeId, const std::string& detail) { told[i] = detail; };
        });
        const auto removed = static_cast<std::uint16_t>(1U - remover);
        meshes[remover]->retire_node(NodeId{removed});
        for (auto& mesh : meshes) {
            mesh->start();
        }
        REQUIRE(run_until(
            io, [&] { return !told[removed].empty(); }, 5000ms));
        CHECK_THAT(told[removed], Catch::Contains("does not hold your id"));
        CHECK(told[remover].empty());
        CHECK_FALSE(meshes[removed]->is_up(NodeId{static_cast<std::uint16_t>(remover)}));
        for (auto& mesh : meshes) {
            mesh->stop();
        }
    }
}

TEST_CASE("incarnations: an admitted incarnation connects; both sides are asked once") {
    asio::io_context io;
    std::vector<std::string> seen(2);
    auto meshes = two_meshes(io, 80U, [&](std::uint16_t i, MeshOptions& options) {
        options.repaired = i == 1;
        options.admit_incarnation = [&, i](NodeId, const std::string& inc, bool repaired) {
            seen[i] = inc + (repaired ? "/repaired" : "");
            return std::optional<std::string>();
        };
    });
    for (auto& mesh : meshes) {
        mesh->start();
    }
    REQUIRE(run_until(
        io, [&] { return meshes[0]->is_up(NodeId{1}) && meshes[1]->is_up(NodeId{0}); }, 5000ms));
    CHECK(seen[0] == "inc-1/repaired");
    CHECK(seen[1] == "inc-0");
    for (auto& mesh : meshes) {
        mesh->stop();
    }
}

TEST_CASE("quarantine: a new incarnation exchanges no elector frame until it is ended") {
    // Bare meshes with an elector channel handler counting frames: n2 is quarantined.
    asio::io_context io;
    std::vector<int> frames(2, 0);
    std::vector<NodeSet> admitted(2);
    auto meshes = two_meshes(io, 90U, [&](std::uint16_t i, MeshOptions& options) {
        options.quarantined = i == 1;
        options.on_admitted_by = [&, i](NodeId peer) { admitted[i].insert(peer); };
    });
    for (std::uint16_t i = 0; i < 2; ++i) {
        meshes[i]->set_frame_handler(
            Channel::Elector,
            [&, i](NodeId, std::span<const std::uint8_t>) -> std::optional<FrameRejection> {
                ++frames[i];
                return std::nullopt;
            });
        meshes[i]->start();
    }
    REQUIRE(run_until(
        io, [&] { return meshes[0]->is_up(NodeId{1}) && meshes[1]->is_up(NodeId{0}); }, 5000ms));
    // Each side learns that the other admitted it: n2 as the acceptor at once, n1 (the dialer)
    // from n2's first frame (its ping).
    REQUIRE(run_until(
        io, [&] { return admitted[0].contains(NodeId{1}) && admitted[1].contains(NodeId{0}); },
        2000ms));
    const std::vector<std::uint8_t> payload{1, 2, 3};
    CHECK(meshes[0]->send(NodeId{1}, Channel::Elector, payload));  // sent, dropped on arrival
    CHECK_FALSE(meshes[1]->send(NodeId{0}, Channel::Elector, payload));
    CHECK(run_until(
        io, [&] { return meshes[1]->counters().quarantined_frames == 1; }, 5000ms));
    run_for(io, 200ms);
    CHECK(frames == std::vector<int>{0, 0});
    CHECK(meshes[1]->counters().quarantined_frames == 1);
    CHECK(meshes[1]->quarantined());
    meshes[1]->end_quarantine();
    CHECK(meshes[0]->send(NodeId{1}, Channel::Elector, payload));
    CHECK(meshes[1]->send(NodeId{0}, Channel::Elector, payload));
    REQUIRE(run_until(
        io,
        [&] {
            return frames == std::vector<int>{1, 1};
        },
        2000ms));
    for (auto& mesh : meshes) {
        mesh->stop();
    }
}

TEST_CASE(
    "restart: a restarted peer is dialed at once, not on the redial backoff; an unproven one "
    "is not") {
    // n1 (index 0) dials n2. After the loss, its redial waits 10-20 s (reconnect_initial): a
    // link within 5 s is the dial request's doing.
    asio::io_context io;
    const auto tune = [](std::uint16_t, MeshOptions& options) {
        options.reconnect_initial = 20000ms;
        options.reconnect_max = 60000ms;
    };
    auto meshes = two_meshes(io, 100U, tune);
    for (auto& mesh : meshes) {
        mesh->start();
    }
    const auto both_up = [&] {
        return meshes[0]->is_up(NodeId{1}) && meshes[1] && meshes[1]->is_up(NodeId{0});
    };
    // n2's dial request at its first start is served too (n1's own dial is already under way).
    REQUIRE(run_until(
        io, [&] { return both_up() && meshes[0]->counters().dial_requests == 1; }, 5000ms));
    const Membership membership = meshes[0]->membership();
    meshes[1]->stop();
    meshes[1].reset();
    REQUIRE(run_until(
        io, [&] { return !meshes[0]->is_up(NodeId{1}); }, 2000ms));
    const auto restart_options = [&](std::string secret) {
        auto options = test_mesh_options();
        options.seed = 101U;
        options.secret = std::move(secret);
        options.incarnation = "inc-1";
        tune(1, options);
        return options;
    };
    const auto dialed = meshes[0]->counters().connections_dialed;
    const auto accepted = meshes[0]->counters().connections_accepted;
    {
        // Someone without the secret starts as n2: its dial request proves nothing, so n1 neither
        // dials nor resets its backoff.
        Mesh impostor(io, membership, NodeId{1}, restart_options(std::string(32, 'x')));
        impostor.start();
        CHECK(run_until(
            io, [&] { return meshes[0]->counters().connections_accepted == accepted + 1; },
            2000ms));
        CHECK(run_until(
            io, [&] { return impostor.counters().refusal(HandshakeRefusal::AuthFailed) == 1; },
            5000ms));
        run_for(io, 200ms);
        CHECK(impostor.counters().refusal(HandshakeRefusal::AuthFailed) == 1);
        CHECK(impostor.counters().dial_requests_sent == 1);
        CHECK(meshes[0]->counters().dial_requests == 1);
        CHECK(meshes[0]->counters().connections_dialed == dialed);
        CHECK_FALSE(meshes[0]->is_up(NodeId{1}));
    }
    // The real n2 starts again: n1 dials it at once.
    meshes[1] =
        std::make_unique<Mesh>(io, membership, NodeId{1}, restart_options(std::string(32, 'k')));
    meshes[1]->start();
    REQUIRE(run_until(io, both_up, 5000ms));
    CHECK(meshes[1]->counters().dial_requests_sent == 1);
    CHECK(meshes[0]->counters().dial_requests == 2);
    CHECK(meshes[0]->counters().connections_dialed == dialed + 1);
    // The dial request is no connection of the pair: one each side, nothing refused.
    run_for(io, 200ms);
    CHECK(both_up());
    CHECK(meshes[0]->counters().refusal(HandshakeRefusal::DuplicateNode) == 0);
    CHECK(meshes[1]->counters().refusal(HandshakeRefusal::DuplicateNode) == 0);
    CHECK(meshes[0]->counters().refusal(HandshakeRefusal::WrongDirection) == 0);
    for (auto& mesh : meshes) {
        mesh->stop();
    }
}

// ---- Only proof ends a promise (docs/design.md, assumption 3) -----------------------------------
// The mesh tells why a peer went down (LinkLoss); a hello naming a peer that is up touches its
// connection only once the dialer has proven itself.

namespace {

struct PeerEvent {
    NodeId peer;
    bool up = false;
    LinkLoss loss = LinkLoss::Local;
};

/// n1 (raw, on a thread of its own) dials n2 as `incarnation`: its hello, then a confirmation
/// with the secret's MAC (`prove`) or a guessed one. Returns the first frame n2 answered, or
/// nullopt when n2 closed without answering.
std::optional<Frame> dial_as_n1(std::uint16_t port, const std::string& incarnation, bool prove) {
    asio::io_context aio;
    RawPeer p(aio, port);
    Hello h{kProtocolVersion, "test", "n1"};
    h.nonce = random_nonce();
    h.incarnation = incarnation;
    p.send(encode_hello(h));
    auto answer = p.read_frame();
    if (!answer || decode_control_kind(answer->payload) != ControlKind::Hello) {
        return answer;
    }
    const Hello theirs = decode_hello(answer->payload);
    p.send(encode_confirmation(prove ? handshake_mac(std::string(32, 'k'), HandshakeRole::Dialer,
                                                     "test", "n1", "n2", h.nonce, theirs.nonce)
                                     : std::vector<std::uint8_t>(kMacBytes, 0x42)));
    (void)p.read_frame();  // n2's ping once it is up, or its refusal
    return answer;
}

}  // namespace

TEST_CASE(
    "proof: a hello naming an up peer touches its connection only once the dialer proved "
    "itself; a newer incarnation replaces it") {
    asio::io_context io;
    auto meshes = two_meshes(io, 90U, [](std::uint16_t, MeshOptions&) {});
    std::vector<PeerEvent> events;  // n2's reports about n1
    meshes[1]->add_peer_handler([&](NodeId peer, bool up, LinkLoss loss) {
        events.push_back({peer, up, loss});
    });
    for (auto& mesh : meshes) {
        mesh->start();
    }
    REQUIRE(run_until(
        io, [&] { return meshes[0]->is_up(NodeId{1}) && meshes[1]->is_up(NodeId{0}); }, 5000ms));
    const auto& counters = meshes[1]->counters();
    const std::uint16_t port = meshes[1]->local_port();
    const auto dial_while_running = [&](const std::string& incarnation, bool prove,
                                        const std::function<bool()>& done) {
        std::atomic<bool> finished{false};
        std::optional<Frame> answer;
        std::thread dialer([&] {
            answer = dial_as_n1(port, incarnation, prove);
            finished = true;
        });
        const bool reached = run_until(
            io, [&] { return finished && done(); }, 5000ms);
        dialer.join();
        REQUIRE(reached);
        return answer;
    };
    REQUIRE(events.size() == 1);

    SECTION("a stranger's hello (no secret) is answered and refused for its MAC; the link stays") {
        const auto answer = dial_while_running("inc-0", /*prove=*/false, [&] {
            return counters.refusal(HandshakeRefusal::AuthFailed) == 1;
        });
        // Answered with n2's hello, not refused as a duplicate at the hello.
        REQUIRE(answer);
        CHECK(decode_control_kind(answer->payload) == ControlKind::Hello);
        CHECK(counters.refusal(HandshakeRefusal::DuplicateNode) == 0);
        run_for(io, 100ms);
        CHECK(meshes[1]->is_up(NodeId{0}));
        CHECK(events.size() == 1);
    }
    SECTION("a stranger claiming a new incarnation changes nothing either") {
        dial_while_running("inc-new", /*prove=*/false,
                           [&] { return counters.refusal(HandshakeRefusal::AuthFailed) == 1; });
        run_for(io, 100ms);
        CHECK(meshes[1]->is_up(NodeId{0}));
        CHECK(events.size() == 1);
    }
    SECTION("the same incarnation, proven: a duplicate; the established link is only probed") {
        dial_while_running("inc-0", /*prove=*/true,
                           [&] { return counters.refusal(HandshakeRefusal::DuplicateNode) == 1; });
        run_for(io, 100ms);
        CHECK(meshes[1]->is_up(NodeId{0}));
        CHECK(events.size() == 1);
    }
    SECTION("a newer incarnation, proven: the old link is closed as PeerRestarted") {
        dial_while_running("inc-new", /*prove=*/true, [&] { return events.size() >= 2; });
        CHECK_FALSE(events[1].up);
        CHECK(events[1].loss == LinkLoss::PeerRestarted);
    }
    for (auto& mesh : meshes) {
        mesh->stop();
    }
}

TEST_CASE("proof: a closure by the peer's side is PeerClosed, one decided here is Local") {
    asio::io_context io;
    auto meshes = two_meshes(io, 95U, [](std::uint16_t, MeshOptions&) {});
    std::array<std::vector<PeerEvent>, 2> events;
    for (std::uint16_t i = 0; i < 2; ++i) {
        meshes[i]->add_peer_handler([&, i](NodeId peer, bool up, LinkLoss loss) {
            events[i].push_back({peer, up, loss});
        });
    }
    for (auto& mesh : meshes) {
        mesh->start();
    }
    REQUIRE(run_until(
        io, [&] { return meshes[0]->is_up(NodeId{1}) && meshes[1]->is_up(NodeId{0}); }, 5000ms));
    const std::size_t closer = GENERATE(0U, 1U);
    meshes[closer]->stop();
    REQUIRE(run_until(
        io, [&] { return events[0].size() == 2 && events[1].size() == 2; }, 5000ms));
    CHECK_FALSE(events[closer][1].up);
    CHECK(events[closer][1].loss == LinkLoss::Local);
    CHECK_FALSE(events[1 - closer][1].up);
    CHECK(events[1 - closer][1].loss == LinkLoss::PeerClosed);
    meshes[1 - closer]->stop();
}

namespace {

std::vector<nlohmann::json> ReadTraceLines(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::vector<nlohmann::json> lines;
    for (std::string line; std::getline(in, line);) {
        lines.push_back(nlohmann::json::parse(line));
    }
    return lines;
}

}  // namespace

TEST_CASE("trace mode: each driver appends a header and one line per elector step") {
    TestCluster cluster(3);
    for (auto& n : cluster.nodes) {
        n->trace_file = cluster.dir.path / ("trace-" + std::to_string(n->self.value) + ".ndjson");
    }
    cluster.start_all();
    REQUIRE(cluster.wait_for_leader());
    const NodeId leader = *cluster.agreed_leader();
    REQUIRE(cluster.nodes[leader.value]->driver->issue_lsn().has_value());
    REQUIRE(run_until(
        cluster.io,
        [&] {  // a follower has handled one of the leader's heartbeats
            const NodeId f{static_cast<std::uint16_t>((leader.value + 1) % 3)};
            return cluster.nodes[f.value]->driver->counters().messages_in[4] > 0;
        },
        5000ms));
    std::vector<std::vector<nlohmann::json>> traces;
    for (auto& n : cluster.nodes) {
        traces.push_back(ReadTraceLines(n->trace_file));
        const auto& lines = traces.back();
        REQUIRE(lines.size() >= 3);
        CHECK(lines[0]["kind"] == "header");
        CHECK(lines[0]["node"] == n->self.value);
        CHECK(lines[0]["nodes"] == 3);
        CHECK(lines[0]["restored"]["term"] == 0);
        for (std::size_t k = 1; k < lines.size(); ++k) {
            CHECK(lines[k]["kind"] == "step");
            CHECK(lines[k]["seq"] == k);
            CHECK(lines[k]["node"] == n->self.value);
            CHECK(lines[k]["state"].contains("term"));
        }
        CHECK(std::any_of(lines.begin(), lines.end(),
                          [](const auto& l) { return l.value("action", "") == "Start"; }));
    }
    // The leader's IssueLsn, and its heartbeats broadcast to both others, as a follower got one.
    const auto& mine = traces[leader.value];
    CHECK(std::any_of(mine.begin(), mine.end(), [](const auto& l) {
        return l.value("action", "") == "IssueLsn" && l["state"]["lsn"]["counter"] == 1;
    }));
    std::vector<nlohmann::json> beats;  // every heartbeat the leader's trace says it sent
    for (const auto& l : mine) {
        if (l.value("action", "") == "HeartbeatBroadcastFired") {
            CHECK(l["sent"].size() == 2);  // a broadcast, one line per recipient
        }
        for (const auto& m : l.value("sent", nlohmann::json::array())) {
            if (m["type"] == "LeaderHeartbeat") {
                beats.push_back(m);
            }
        }
    }
    const auto& other = traces[(leader.value + 1U) % 3U];
    const auto received = std::find_if(other.begin(), other.end(), [](const auto& l) {
        return l.value("action", "") == "HandleLeaderHeartbeat";
    });
    REQUIRE(received != other.end());
    CHECK(std::any_of(beats.begin(), beats.end(),
                      [&](const auto& m) { return m == (*received)["msg"]; }));
}

TEST_CASE("trace mode: an unopenable file stops the start; a failed write ends the trace only") {
    TempDir dir;
    const auto config = test_config(3, NodeId{0});
    CHECK_THROWS_WITH(
        ElectorTrace(dir.path / "missing" / "trace", config, {}),
        Catch::Contains("--trace-elector: cannot open") && Catch::Contains("missing"));
    const auto path = dir.path / "trace";
    ElectorTrace trace(path, config, {});
    // The file may grow no further (EFBIG; SIGXFSZ ignored meanwhile): the next line fails.
    rlimit before{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
    const auto previous = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = before;
    small.rlim_cur = static_cast<rlim_t>(std::filesystem::file_size(path));
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    const elector::ElectorState state;
    const auto failed =
        trace.step(runtime::StepInput{.kind = runtime::InputKind::Start}, {}, state, {});
    const auto after =
        trace.step(runtime::StepInput{.kind = runtime::InputKind::Stop}, {}, state, {});
    REQUIRE(setrlimit(RLIMIT_FSIZE, &before) == 0);
    std::signal(SIGXFSZ, previous);
    REQUIRE(failed.has_value());
    CHECK_THAT(*failed, Catch::Contains("write failed") && Catch::Contains("tracing stops"));
    CHECK_FALSE(after.has_value());  // tracing stopped: nothing more is written, nothing fails
    CHECK(ReadTraceLines(path).size() == 1);
}
