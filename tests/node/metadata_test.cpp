// SPDX-License-Identifier: Apache-2.0
// The replicated metadata log through the Node API and HTTP, on a real 3-node loopback cluster in
// one process (one io_context): proposals commit and every node's subscriber sees them in order,
// followers refuse (and redirect over HTTP), a new leader keeps what was acknowledged, a restarted
// node catches up from its data dir. Every wait is bounded by a deadline.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <spdlog/sinks/ostream_sink.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

#include "conclave/drivers/log_driver.hpp"
#include "conclave/drivers/state_file.hpp"
#include "conclave/node/node.hpp"
#include "node_cluster.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using conclave::Lsn;
using conclave::admin::MetadataProposeResult;
using conclave::admin::MetadataProposeStatus;
using conclave::node::ClusterConfig;
using conclave::node::Node;
using conclave::replication::Entry;
using nlohmann::json;

using namespace conclave::test::node_cluster;

}  // namespace

TEST_CASE("metadata log: 3 nodes commit, refuse, redirect, fail over and catch up",
          "[node][metadata]") {
    Cluster c;

    // Alone, n1 knows no leader: POST answers 503, the embedding API NoLeader.
    c.start(0);
    {
        const HttpResult r = request(c.io, c.http_port(0), http::verb::post, "/metadata",
                                     R"({"key": "a", "value": 1})");
        CHECK(r.status == 503);
        CHECK(r.body.at("error") == "no_leader");
        CHECK(c.propose(0, "a", "1").status == MetadataProposeStatus::NoLeader);
    }
    c.start(1);
    c.start(2);
    const std::size_t leader = c.active_leader();
    const std::size_t follower = (leader + 1) % 3;

    // Proposals on the leader commit in order and reach every subscriber.
    std::vector<MetadataProposeResult> results;
    for (int k = 0; k < 20; ++k) {
        c.nodes[leader]->propose("key" + std::to_string(k), std::to_string(k),
                                 [&](const MetadataProposeResult& r) { results.push_back(r); });
    }
    REQUIRE(run_cluster_until(c.io, [&] { return results.size() == 20; }));
    for (std::size_t k = 0; k < results.size(); ++k) {
        INFO(k << " " << results[k].detail);
        REQUIRE(results[k].ok());
        if (k > 0) {
            CHECK(results[k - 1].lsn < results[k].lsn);
        }
    }
    REQUIRE(run_cluster_until(c.io, [&] {
        return c.seen[0].size() == 20 && c.seen[1].size() == 20 && c.seen[2].size() == 20;
    }));
    for (std::size_t n = 0; n < 3; ++n) {
        for (std::size_t k = 0; k < 20; ++k) {
            CHECK(c.seen[n][k].key == "key" + std::to_string(k));
            CHECK(c.seen[n][k].lsn == results[k].lsn);
        }
    }
    // A late subscriber gets the committed prefix at once (level-triggered).
    std::size_t late = 0;
    c.nodes[follower]->subscribe_committed(
        [&](const Entry& e) { late += conclave::replication::is_sync_point(e) ? 0U : 1U; });
    CHECK(late == 20);

    // A follower refuses and names the leader.
    const MetadataProposeResult refused = c.propose(follower, "x", "1");
    CHECK(refused.status == MetadataProposeStatus::NotLeader);
    CHECK(refused.leader == "n" + std::to_string(leader + 1));

    // HTTP: 307 from a follower, 200 from the leader, GET pages, 400 on bad input.
    {
        const HttpResult r = request(c.io, c.http_port(follower), http::verb::post, "/metadata",
                                     R"({"key": "http", "value": {"a": [1, 2]}})");
        CHECK(r.status == 307);
        CHECK(r.location ==
              "http://127.0.0.1:" + std::to_string(c.http_port(leader)) + "/metadata");
        CHECK(r.body.at("leader") == "n" + std::to_string(leader + 1));
    }
    Lsn http_lsn{};
    {
        const HttpResult r = request(c.io, c.http_port(leader), http::verb::post, "/metadata",
                                     R"({"key": "http", "value": {"a": [1, 2]}})");
        REQUIRE(r.status == 200);
        http_lsn = Lsn{conclave::Term{r.body.at("lsn").at("term").get<std::uint64_t>()},
                       r.body.at("lsn").at("counter").get<std::uint64_t>()};
        CHECK(results.back().lsn < http_lsn);
    }
    {
        const HttpResult r =
            request(c.io, c.http_port(leader), http::verb::get, "/metadata?from=0.0&max=5");
        REQUIRE(r.status == 200);
        REQUIRE(r.body.at("entries").size() <= 5);
        CHECK(r.body.at("entries").at(0).at("key") == "key0");
        CHECK(r.body.at("entries").at(0).at("value") == 0);
        const HttpResult all = request(c.io, c.http_port(leader), http::verb::get, "/metadata");
        REQUIRE(all.status == 200);
        CHECK(all.body.at("entries").size() == 21);
        CHECK(all.body.at("entries").back().at("value") == json{{"a", {1, 2}}});
        CHECK(all.body.at("commit_lsn").at("counter") == http_lsn.counter);
    }
    for (const auto& [verb, target, body, needle] :
         std::vector<std::tuple<http::verb, std::string, std::string, std::string>>{
             {http::verb::post, "/metadata", "not json", "body: expected a JSON object"},
             {http::verb::post, "/metadata", R"({"value": 1})", "body.key"},
             {http::verb::post, "/metadata", R"({"key": "k"})", "body.value: missing"},
             {http::verb::post, "/metadata", R"({"key": "_conclave/members", "value": 1})",
              "reserved"},
             {http::verb::post, "/metadata", R"({"key": "k", "value": 1, "x": 2})", "body.x"},
             {http::verb::post, "/metadata?x=1", R"({"key": "k", "value": 1})", "query"},
             {http::verb::get, "/metadata?from=abc", "", "from: expected TERM.COUNTER"},
             {http::verb::get, "/metadata?max=0", "", "max: expected an integer"},
         }) {
        const HttpResult r = request(c.io, c.http_port(leader), verb, target, body);
        INFO(target << " " << body);
        CHECK(r.status == 400);
        CHECK_THAT(r.body.at("detail").get<std::string>(), Catch::Contains(needle));
    }
    {
        const HttpResult r = request(c.io, c.http_port(leader), http::verb::get, "/status");
        CHECK(r.body.at("leader_status") == "active");
        CHECK(r.body.at("commit_lsn").at("counter") == http_lsn.counter);
        const HttpResult f = request(c.io, c.http_port(follower), http::verb::get, "/status");
        CHECK_FALSE(f.body.contains("leader_status"));
        CHECK(f.body.contains("commit_lsn"));
    }

    // Stop the leader: a new leader syncs, keeps every acknowledged entry, and commits more.
    c.stop(leader);
    const std::size_t second = c.active_leader();
    REQUIRE(second != leader);
    const auto kept = c.nodes[second]->committed_after(Lsn{}, 1000);
    std::vector<Entry> kept_data;
    for (const Entry& e : kept) {
        if (!conclave::replication::is_sync_point(e)) {
            kept_data.push_back(e);
        }
    }
    REQUIRE(kept_data.size() == 21);
    for (std::size_t k = 0; k < 20; ++k) {
        CHECK(kept_data[k].lsn == results[k].lsn);
    }
    CHECK(kept_data[20].lsn == http_lsn);
    const MetadataProposeResult after = c.commit("after-failover", "\"x\"");
    CHECK(http_lsn < after.lsn);

    // Restart the old leader from its data dir: it replays its committed prefix and catches up.
    c.start(leader);
    REQUIRE(run_cluster_until(c.io, [&] { return c.seen[leader].size() == 22; }));
    CHECK(c.seen[leader][20].lsn == http_lsn);
    CHECK(c.seen[leader][21].key == "after-failover");
    CHECK(c.nodes[leader]->log_driver()->recovery().records > 0);

    // GET /metadata pages are bounded in bytes (1 MiB): 20 values of 64 KB take two pages, and
    // next_from continues where the first stopped (storage). An opaque (non-JSON)
    // value is served as a string.
    c.commit("opaque", "not json");
    const std::string big = "\"" + std::string(64000, 'b') + "\"";
    // A 64 KB entry may outlast a leadership on a slow machine: sent again on "outcome unknown",
    // it may then be in the log twice (the pages below count what is there).
    for (int k = 0; k < 20; ++k) {
        c.commit("big" + std::to_string(k), big, nullptr, true);
    }
    {
        const HttpResult first =
            request(c.io, c.http_port(second), http::verb::get, "/metadata?from=0.0&max=10000");
        REQUIRE(first.status == 200);
        const auto& entries = first.body.at("entries");
        CHECK(entries.at(22).at("key") == "opaque");
        CHECK(entries.at(22).at("value") == "not json");
        CHECK(entries.back().at("key").get<std::string>().rfind("big", 0) == 0);
        const std::string next = first.body.at("next_from").get<std::string>();
        const HttpResult rest =
            request(c.io, c.http_port(second), http::verb::get, "/metadata?max=10000&from=" + next);
        REQUIRE(rest.status == 200);
        // Both pages together: the 23 entries before, then big0..big19 in order (each at least
        // once), the first page ending within them (a page holds at most 1 MiB).
        std::vector<std::string> bigs;
        for (const auto* page : {&entries, &rest.body.at("entries")}) {
            for (std::size_t i = page == &entries ? 23 : 0; i < page->size(); ++i) {
                const std::string key = page->at(i).at("key").get<std::string>();
                if (bigs.empty() || bigs.back() != key) {
                    bigs.push_back(key);
                }
            }
        }
        REQUIRE(bigs.size() == 20);
        for (int k = 0; k < 20; ++k) {
            CHECK(bigs[static_cast<std::size_t>(k)] == "big" + std::to_string(k));
        }
        CHECK(entries.size() > 23);
        CHECK(rest.body.at("entries").size() > 0);
        CHECK(rest.body.at("entries").back().at("key") == "big19");
        CHECK(rest.body.at("entries").back().at("value") == std::string(64000, 'b'));
    }
    // Those pages were built off the io thread: the node's reader thread runs the work, the
    // answer comes back on the io thread (this one, which drives the io_context).
    {
        std::thread::id worker;
        std::thread::id answered;
        bool done = false;
        c.nodes[second]->admin_source().offload(
            [&] {
                worker = std::this_thread::get_id();
                return conclave::admin::AdminResponse{};
            },
            [&](const conclave::admin::AdminResponse&) {
                answered = std::this_thread::get_id();
                done = true;
            });
        REQUIRE(run_cluster_until(c.io, [&] { return done; }));
        CHECK(worker != std::this_thread::get_id());
        CHECK(answered == std::this_thread::get_id());
    }

    for (std::size_t i = 0; i < 3; ++i) {
        c.stop(i);
    }
}

// Compaction and the quota on a real cluster: a node that was down while the others
// compacted catches up from the snapshot; distinct keys fill the quota and the cluster turns
// read-only for metadata (507 NOSPACE, /status alarm, /healthz 200, reads work).
TEST_CASE("metadata log: compaction, snapshot catch-up and the NOSPACE quota", "[node][metadata]") {
    Cluster c(R"({"fsync": "batched", "propose_timeout_ms": 3000, "compact_threshold": 20,
                  "compact_retain": 5, "quota_entries": 40})");
    c.start(0);
    c.start(1);
    c.start(2);
    const std::size_t leader = c.active_leader();
    const std::size_t away = (leader + 1) % 3;
    c.stop(away);
    // 100 writes over 4 keys: compacted many times; at most 4 keys + a short tail are held.
    for (int k = 0; k < 100; ++k) {
        INFO(k);
        c.commit("key" + std::to_string(k % 4), std::to_string(k));
    }
    const auto& log = c.nodes[leader]->log_driver()->log();
    CHECK(log.counters().compactions > 0);
    CHECK(log.used_entries() < 40);
    c.start(away);
    REQUIRE(run_cluster_until(
        c.io, [&] { return c.nodes[away]->log_driver()->log().commit_lsn() == log.commit_lsn(); }));
    CHECK(c.nodes[away]->log_driver()->log().counters().snapshots_installed >= 1);
    // Its subscriber ends with the same map: the last value of each key.
    std::map<std::string, std::string> map;
    for (const Entry& e : c.seen[away]) {
        map[e.key] = e.value;
    }
    CHECK(map == std::map<std::string, std::string>{
                     {"key0", "96"}, {"key1", "97"}, {"key2", "98"}, {"key3", "99"}});

    // Distinct keys: compaction cannot free space; the quota (40 entries) is reached.
    std::optional<HttpResult> full;
    for (int k = 0; k < 60 && !full; ++k) {
        const HttpResult r =
            request(c.io, c.http_port(leader), http::verb::post, "/metadata",
                    R"({"key": "distinct)" + std::to_string(k) + R"(", "value": 1})");
        if (r.status != 200) {
            full = r;
        }
    }
    REQUIRE(full);
    CHECK(full->status == 507);
    CHECK(full->body.at("error") == "nospace");
    CHECK_THAT(full->body.at("detail").get<std::string>(), Catch::Contains("NOSPACE"));
    const HttpResult status = request(c.io, c.http_port(leader), http::verb::get, "/status");
    CHECK(status.body.at("alarms") == json::array({"NOSPACE"}));
    CHECK(request(c.io, c.http_port(leader), http::verb::get, "/healthz").status == 200);
    CHECK(request(c.io, c.http_port(leader), http::verb::get, "/metadata").status == 200);
    // Sticky: an overwrite of an existing key is refused too while the alarm is raised.
    CHECK(c.propose(leader, "key0", "1").status == MetadataProposeStatus::NoSpace);
}

// ---- Storage faults: injected ENOSPC / EIO / EROFS
// --------------------------------

namespace {

/// errno values to inject, 0 = none. Read on the storage thread too (sync), hence atomics.
struct InjectedFaults {
    std::atomic<int> append{0};    // PersistEntries (write)
    std::atomic<int> sync{0};      // the group commit's fdatasync (on the storage thread)
    std::atomic<int> meta{0};      // write_meta
    std::atomic<int> truncate{0};  // truncate_after
    std::atomic<int> snapshot{0};  // persist_snapshot (the snapshot file)
    std::atomic<int> state{0};     // the elector's state file
    std::atomic<int> hits{0};      // faults thrown
};

[[noreturn]] void ThrowInjected(InjectedFaults& f, int error, const std::string& what) {
    ++f.hits;
    throw std::system_error(error, std::generic_category(), what + " (injected)");
}

/// FileStorage with injectable failures: what LogDriver gets through LogDriverOptions::storage.
class FaultyStorage final : public conclave::replication::LogStorage {
  public:
    FaultyStorage(const std::filesystem::path& dir, std::shared_ptr<InjectedFaults> faults)
        : inner_(dir, conclave::replication::FsyncPolicy::Batched), faults_(std::move(faults)) {}

    conclave::replication::Recovery recover() override { return inner_.recover(); }
    void append(const std::vector<Entry>& entries) override {
        if (const int e = faults_->append.load()) {
            ThrowInjected(*faults_, e, "write " + inner_.log_path().string());
        }
        inner_.append(entries);
    }
    void truncate_after(Lsn after) override {
        if (const int e = faults_->truncate.load()) {
            ThrowInjected(*faults_, e, "truncate " + inner_.log_path().string());
        }
        inner_.truncate_after(after);
    }
    void write_meta(const conclave::replication::LogMeta& meta) override {
        if (const int e = faults_->meta.load()) {
            ThrowInjected(*faults_, e, "write " + inner_.meta_path().string());
        }
        inner_.write_meta(meta);
    }
    Lsn flush() override {
        if (const int e = faults_->sync.load()) {
            ThrowInjected(*faults_, e, "fdatasync " + inner_.log_path().string());
        }
        return inner_.flush();
    }
    Lsn durable_lsn() const override { return inner_.durable_lsn(); }
    conclave::replication::SyncTicket begin_sync() override { return inner_.begin_sync(); }
    void sync(const conclave::replication::SyncTicket& t) override {
        if (const int e = faults_->sync.load()) {
            ThrowInjected(*faults_, e, "fdatasync " + inner_.log_path().string());
        }
        inner_.sync(t);
    }
    Lsn end_sync(const conclave::replication::SyncTicket& t) override { return inner_.end_sync(t); }
    std::uint64_t fsync_count() const override { return inner_.fsync_count(); }
    void persist_snapshot(const conclave::replication::Snapshot& snapshot) override {
        if (const int e = faults_->snapshot.load()) {
            ThrowInjected(*faults_, e, "write " + inner_.snapshot_path().string());
        }
        inner_.persist_snapshot(snapshot);
    }

  private:
    conclave::replication::FileStorage inner_;
    std::shared_ptr<InjectedFaults> faults_;
};

struct FaultCluster : Cluster {
    std::vector<std::shared_ptr<InjectedFaults>> faults;
    std::vector<std::shared_ptr<std::ostringstream>> logs;

    explicit FaultCluster(
        const std::string& metadata = R"({"fsync": "batched", "propose_timeout_ms": 3000})")
        : Cluster(metadata) {
        for (int i = 0; i < 3; ++i) {
            faults.push_back(std::make_shared<InjectedFaults>());
            logs.push_back(std::make_shared<std::ostringstream>());
        }
        customize = [this](std::size_t i, conclave::node::NodeOptions& options) {
            options.logger = std::make_shared<spdlog::logger>(
                "fault-test", std::make_shared<spdlog::sinks::ostream_sink_st>(*logs[i]));
            auto f = faults[i];
            options.log_storage = [f](const std::filesystem::path& dir,
                                      conclave::replication::FsyncPolicy) {
                return std::make_shared<FaultyStorage>(dir, f);
            };
            options.store_elector_state = [f](const std::filesystem::path& dir,
                                              const conclave::elector::DurableState&) {
                if (const int e = f->state.load()) {
                    ++f->hits;
                    throw conclave::drivers::StateFileError(
                        "write " + (dir / "elector-state.json").string() + ": " + std::strerror(e) +
                        " (injected)");
                }
            };
        };
    }

    ~FaultCluster() {
        for (auto& n : nodes) {
            n.reset();  // before the log streams their loggers write to
        }
    }

    /// Commits `count` keys named prefix0.. on the active leader; returns their LSNs.
    /// `count` acknowledged writes (prefix0, prefix1, ...), each to the active leader, each sent
    /// again on an unknown outcome too (around a failover a slow machine may lose a leadership
    /// mid-commit): the tests check that every acknowledged LSN is kept, not how many there are.
    std::vector<Lsn> commit_keys(const std::string& prefix, int count) {
        std::vector<Lsn> lsns;
        for (int k = 0; k < count; ++k) {
            lsns.push_back(commit(prefix + std::to_string(k), "1", nullptr, true).lsn);
        }
        return lsns;
    }

    /// Every acknowledged LSN is in node i's committed log.
    void check_kept(std::size_t i, const std::vector<Lsn>& acked) {
        std::vector<Lsn> have;
        for (const Entry& e : nodes[i]->committed_after(Lsn{}, 100000)) {
            have.push_back(e.lsn);
        }
        for (const Lsn& l : acked) {
            INFO("acknowledged " << l.term.value << "." << l.counter);
            CHECK(std::find(have.begin(), have.end(), l) != have.end());
        }
    }

    /// The failed node i is out of service: /healthz 503 naming the reason, /status storage
    /// failed, the metric, the critical log line (the alarm).
    void check_out_of_service(std::size_t i, const std::string& reason) {
        // Through the Node (what /healthz and /status serve; the HTTP mapping is tested in
        // admin_server_test.cpp): the node's admin server closes when its stop completes.
        const conclave::admin::HealthReport h = nodes[i]->health();
        CHECK_FALSE(h.healthy);  // /healthz answers 503 with this detail
        CHECK_THAT(h.detail, Catch::Contains(reason));
        const json s = conclave::admin::status_to_json(nodes[i]->status());
        CHECK(s.at("storage").at("state") == "failed");
        CHECK_THAT(s.at("storage").at("reason").get<std::string>(), Catch::Contains(reason));
        CHECK(s.at("storage").at("since").get<std::string>().size() == 20);
        CHECK_THAT(nodes[i]->metrics_text(), Catch::Contains("conclave_storage_failed 1"));
        CHECK_THAT(logs[i]->str(), Catch::Contains("storage failure: out of service"));
    }

    /// Waits until node i's (self-initiated) stop completed.
    void wait_stopped(std::size_t i) {
        bool done = false;
        nodes[i]->stop([&] { done = true; });
        REQUIRE(run_cluster_until(io, [&] { return done; }));
    }

    /// The failed node is out of service and refuses writes; a survivor takes over (returned),
    /// keeps every acknowledged entry and commits `more` new ones, added to `acked`.
    std::size_t take_over(std::size_t failed, const std::string& reason, std::vector<Lsn>& acked,
                          int more) {
        check_out_of_service(failed, reason);
        CHECK_FALSE(propose(failed, "after-failure", "1").ok());
        const std::size_t next = survivors_lead(failed);
        wait_stopped(failed);
        check_kept(next, acked);
        const std::vector<Lsn> extra = commit_keys("after", more);
        acked.insert(acked.end(), extra.begin(), extra.end());
        return next;
    }

    /// Waits until node i has stopped and the others have an ACTIVE leader; returns it.
    std::size_t survivors_lead(std::size_t failed) {
        REQUIRE(run_cluster_until(io, [&] { return !nodes[failed]->health().healthy; }));
        std::optional<std::size_t> next;
        REQUIRE(run_cluster_until(io, [&] {
            for (std::size_t i = 0; i < nodes.size(); ++i) {
                if (i != failed && nodes[i] && nodes[i]->status().log &&
                    nodes[i]->status().log->leader_status == "active") {
                    next = i;
                    return true;
                }
            }
            return false;
        }));
        return *next;
    }
};

}  // namespace

TEST_CASE("storage faults: a leader whose log write or fsync fails steps down, loses nothing",
          "[node][metadata][storage-fault]") {
    const auto [which, error, reason] = GENERATE(table<std::string, int, std::string>({
        {"append", ENOSPC, "No space left on device"},
        {"sync", EIO, "Input/output error"},
        {"append", EROFS, "Read-only file system"},
    }));
    INFO(which << " " << reason);
    FaultCluster c;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    const std::size_t leader = c.active_leader();
    const std::string leader_id = "n" + std::to_string(leader + 1);
    std::vector<Lsn> acked = c.commit_keys("before", 5);
    CHECK(request(c.io, c.http_port(leader), http::verb::get, "/status").body.at("storage") ==
          json{{"state", "ok"}});
    CHECK(c.nodes[leader]->health().healthy);

    (which == "append" ? c.faults[leader]->append : c.faults[leader]->sync).store(error);
    // A failing append fails the proposal that makes it. A failing fsync runs on the leader's
    // storage thread: the two followers' acknowledgements may commit the entry before it does,
    // and then the write is rightly acknowledged (durable on a majority) and must be kept like
    // the others; propose until the leader's own fsync fails (a loaded machine may commit many
    // entries on the followers' acks before the storage thread runs: bounded by time, not count).
    MetadataProposeResult failed = c.propose(leader, "during", "1");
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    for (int k = 0; which == "sync" && failed.ok() && std::chrono::steady_clock::now() < deadline;
         ++k) {
        acked.push_back(failed.lsn);
        failed = c.propose(leader, "during" + std::to_string(k), "1");
    }
    CHECK_FALSE(failed.ok());
    CHECK(failed.status == MetadataProposeStatus::Failed);  // outcome unknown, never "committed"
    CHECK(c.faults[leader]->hits.load() >= 1);
    REQUIRE(c.nodes[leader]->storage_failure());
    // Out of service at once (before the handover ends): no acknowledgement, 503, metric,
    // alarm. It hands over and stops; a survivor leads, keeps every acknowledged entry, accepts
    // writes, and no writer is redirected to the failed node.
    const std::size_t next = c.take_over(leader, reason, acked, 3);
    for (std::size_t i = 0; i < 3; ++i) {
        if (i == leader || i == next) {
            continue;
        }
        const MetadataProposeResult r = c.propose(i, "redirect", "1");
        CHECK(r.status == MetadataProposeStatus::NotLeader);
        CHECK(r.leader != leader_id);
        CHECK(r.leader == "n" + std::to_string(next + 1));
        // The failed leader's last proposal may have committed too (outcome unknown): wait for
        // the commit point, not for a count.
        REQUIRE(
            run_cluster_until(c.io, [&] { return !(c.nodes[i]->commit_lsn() < acked.back()); }));
        c.check_kept(i, acked);
    }
}

TEST_CASE("storage faults: a follower whose fsync or state file fails leaves; the others go on",
          "[node][metadata][storage-fault]") {
    const auto [which, error, reason] = GENERATE(table<std::string, int, std::string>({
        {"sync", ENOSPC, "No space left on device"},
        {"state", EROFS, "Read-only file system"},
    }));
    INFO(which << " " << reason);
    FaultCluster c;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    const std::size_t leader = c.active_leader();
    const std::size_t follower = (leader + 1) % 3;
    std::vector<Lsn> acked = c.commit_keys("before", 5);
    REQUIRE(run_cluster_until(c.io, [&] { return c.seen[follower].size() >= 5; }));

    if (which == "sync") {
        c.faults[follower]->sync.store(error);
        // The leader still commits with the third node; the follower acknowledges nothing more.
        const std::vector<Lsn> more = c.commit_keys("during", 3);
        acked.insert(acked.end(), more.begin(), more.end());
        REQUIRE(run_cluster_until(
            c.io, [&] { return c.nodes[follower]->storage_failure().has_value(); }));
        c.check_out_of_service(follower, reason);
        c.wait_stopped(follower);
        c.check_kept(leader, acked);
    } else {
        // The state file is written on a term change: the leader steps down, the follower's
        // campaign (or vote) cannot be made durable, so it stops and never votes or leads.
        c.faults[follower]->state.store(error);
        REQUIRE_FALSE(c.nodes[leader]->step_down());
        REQUIRE(run_cluster_until(
            c.io, [&] { return c.nodes[follower]->storage_failure().has_value(); }));
        CHECK(c.nodes[follower]->status().role != conclave::elector::Role::Leader);
        c.check_out_of_service(follower, "elector state");
        const std::size_t next = c.survivors_lead(follower);
        CHECK(next != follower);
        c.check_kept(next, acked);
        const std::vector<Lsn> more = c.commit_keys("after", 2);
        acked.insert(acked.end(), more.begin(), more.end());
        c.check_kept(next, acked);
    }
}

// The other writes of the log: its metadata file (the term promise, written when a
// node adopts a term: here a new leader's), the truncation of an uncommitted tail (a node that
// led alone rejoins a cluster that went on without it), and the snapshot file (a leader's
// compaction). Each failure takes the node out of service like a failed append or fsync:
// nothing more acknowledged, 503, metric, alarm, a leader hands over, and the survivors keep
// every acknowledged entry.
TEST_CASE("storage faults: a failed meta, truncate or snapshot write takes the node out cleanly",
          "[node][metadata][storage-fault]") {
    const auto [which, error, reason] = GENERATE(table<std::string, int, std::string>({
        {"meta", ENOSPC, "No space left on device"},
        {"meta", EIO, "Input/output error"},
        {"truncate", EIO, "Input/output error"},
        {"truncate", ENOSPC, "No space left on device"},
        {"snapshot", ENOSPC, "No space left on device"},
        {"snapshot", EIO, "Input/output error"},
    }));
    INFO(which << " " << reason);
    FaultCluster c(which == "snapshot" ? R"({"fsync": "batched", "propose_timeout_ms": 3000,
                                             "compact_threshold": 8, "compact_retain": 2})"
                                       : R"({"fsync": "batched", "propose_timeout_ms": 3000})");
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    const std::size_t leader = c.active_leader();
    std::vector<Lsn> acked = c.commit_keys("before", 5);
    std::size_t failed = leader;
    if (which == "meta") {
        // The node the leadership moves to cannot write its new term: it never leads the log.
        failed = (leader + 1) % 3;
        c.faults[failed]->meta.store(error);
        REQUIRE_FALSE(c.nodes[leader]->transfer_leadership("n" + std::to_string(failed + 1)));
        REQUIRE(run_cluster_until(c.io,
                                  [&] { return c.nodes[failed]->storage_failure().has_value(); }));
    } else if (which == "truncate") {
        // The leader held entries nobody else got (an uncommitted tail of its term, written
        // into its log while every node is stopped); the others go on without it. Restarted,
        // it must cut that tail and cannot.
        for (std::size_t i = 0; i < 3; ++i) {
            c.stop((leader + 1 + i) % 3);  // the leader last: nothing to hand over to
        }
        {
            conclave::replication::FileStorage disk(
                c.root / ("n" + std::to_string(leader + 1)) / "log",
                conclave::replication::FsyncPolicy::EveryEntry);
            const conclave::replication::Recovery r = disk.recover();
            REQUIRE_FALSE(r.log.entries.empty());
            const Lsn last = r.log.entries.back().lsn;
            std::vector<Entry> tail;
            for (std::uint64_t k = 1; k <= 3; ++k) {
                tail.push_back(
                    Entry{Lsn{last.term, last.counter + k}, "lost" + std::to_string(k), "1"});
            }
            disk.append(tail);
            disk.flush();
        }
        for (std::size_t i = 0; i < 3; ++i) {
            if (i != leader) {
                c.start(i);
            }
        }
        c.active_leader();  // the others elect without the node whose tail is cut below
        const std::vector<Lsn> more = c.commit_keys("without", 3);
        acked.insert(acked.end(), more.begin(), more.end());
        c.faults[leader]->truncate.store(error);
        c.start(leader);
        REQUIRE(run_cluster_until(c.io,
                                  [&] { return c.nodes[leader]->storage_failure().has_value(); }));
        CHECK(c.faults[leader]->hits.load() >= 1);
    } else {
        // The leader's next compaction cannot write its snapshot file. The writes go to the
        // leader of the moment: on a busy machine the leadership may move meanwhile, and the
        // node then compacts (and fails) as a follower.
        c.faults[leader]->snapshot.store(error);
        for (int k = 0; k < 200 && !c.nodes[leader]->storage_failure(); ++k) {
            const MetadataProposeResult r =
                c.propose(c.active_leader(), "more" + std::to_string(k), "1");
            if (r.ok()) {
                acked.push_back(r.lsn);
            }
        }
        REQUIRE(c.nodes[leader]->storage_failure());
    }
    const std::size_t next = c.take_over(failed, reason, acked, 2);
    c.check_kept(next, acked);
    for (std::size_t i = 0; i < 3; ++i) {
        if (i != failed && i != next) {
            REQUIRE(run_cluster_until(c.io,
                                      [&] { return !(c.nodes[i]->commit_lsn() < acked.back()); }));
            c.check_kept(i, acked);
        }
    }
}
