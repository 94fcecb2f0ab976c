// SPDX-License-Identifier: Apache-2.0
// The key state of the metadata log on a real 3-node loopback cluster in one process: reads of a
// key and of a prefix with the LSN of the write and the commit LSN, linearizable reads (the
// leader only, after its sync point; a follower redirects) with their planted-bug canaries,
// conditional and fenced writes (409, nothing appended), prefix watches. Every wait is bounded.
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conclave/codec/json.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "conclave/node/node.hpp"
#include "node_cluster.hpp"

namespace {

using conclave::Lsn;
using conclave::admin::MetadataCondition;
using conclave::admin::MetadataProposeResult;
using conclave::admin::MetadataProposeStatus;
using conclave::node::PlantedReadBug;
using conclave::replication::Entry;
using nlohmann::json;
using namespace conclave::test::node_cluster;

std::string Text(const Lsn& lsn) {
    return conclave::admin::lsn_text(lsn);
}

HttpResult Get(Cluster& c, std::size_t i, const std::string& target) {
    return request(c.io, c.http_port(i), http::verb::get, target);
}

HttpResult Post(Cluster& c, std::size_t i, const json& body) {
    return request(c.io, c.http_port(i), http::verb::post, "/metadata", body.dump());
}

MetadataProposeResult ProposeIf(Cluster& c, std::size_t i, const std::string& key,
                                const std::string& value, MetadataCondition condition) {
    std::optional<MetadataProposeResult> result;
    c.nodes[i]->propose(key, value, condition, [&](const MetadataProposeResult& r) { result = r; });
    REQUIRE(run_cluster_until(c.io, [&] { return result.has_value(); }));
    return *result;
}

/// Entries of the leader's log (snapshot + tail): what a refused write must leave unchanged.
std::size_t LogLength(Cluster& c, std::size_t i) {
    return c.nodes[i]->log_driver()->log().end_len();
}

/// The check a linearizable read on a follower must pass: 307 to the leader's admin endpoint,
/// query kept. False when the follower answers from its own state.
bool FollowerRedirects(Cluster& c, std::size_t follower, std::size_t leader) {
    const HttpResult r = Get(c, follower, "/metadata/k1");
    INFO(r.status << " " << r.body.dump());
    return r.status == 307 &&
           r.location ==
               "http://127.0.0.1:" + std::to_string(c.http_port(leader)) + "/metadata/k1" &&
           r.body.value("error", "") == "not_leader";
}

}  // namespace

TEST_CASE("key state: reads with LSNs, conditional and fenced writes, prefix listings",
          "[node][metadata][keys]") {
    Cluster c;
    c.start_all();
    const std::size_t leader = c.active_leader();
    const std::size_t follower = (leader + 1) % 3;

    const HttpResult put = Post(c, leader, {{"key", "k1"}, {"value", {{"v", 1}}}});
    REQUIRE(put.status == 200);
    const Lsn l1 = conclave::codec::lsn_from_json(put.body.at("lsn"));

    // The leader answers at once: the value, the LSN of its write, the commit LSN it reflects.
    HttpResult r = Get(c, leader, "/metadata/k1");
    REQUIRE(r.status == 200);
    CHECK(r.body.at("key") == "k1");
    CHECK(r.body.at("value") == json{{"v", 1}});
    CHECK(r.body.at("lsn") == Text(l1));
    CHECK(conclave::admin::parse_lsn_text(r.body.at("commit_lsn").get<std::string>()) >= l1);
    CHECK(Get(c, leader, "/metadata/k1?consistency=linearizable").status == 200);
    r = Get(c, leader, "/metadata/absent");
    CHECK(r.status == 404);
    CHECK(r.body.at("error") == "not_found");
    CHECK(r.body.contains("commit_lsn"));

    // A follower redirects a linearizable read and answers a serializable one from its state.
    CHECK(FollowerRedirects(c, follower, leader));
    REQUIRE(run_cluster_until(c.io, [&] { return c.nodes[follower]->commit_lsn() >= l1; }));
    r = Get(c, follower, "/metadata/k1?consistency=serializable");
    CHECK(r.status == 200);
    CHECK(r.body.at("lsn") == Text(l1));
    CHECK(c.nodes[follower]->get("k1").entries.at(0).lsn == l1);
    CHECK(c.nodes[follower]->get("k1").outcome.lsn >= l1);
    CHECK(c.nodes[follower]->get("absent").entries.empty());

    // Conditional writes: 409 with the current LSN, nothing appended.
    const std::size_t before = LogLength(c, leader);
    r = Post(c, leader, {{"key", "k1"}, {"value", 2}, {"expect_lsn", "0.0"}});
    CHECK(r.status == 409);
    CHECK(r.body.at("error") == "condition_failed");
    CHECK(r.body.at("lsn") == Text(l1));
    CHECK(LogLength(c, leader) == before);
    r = Post(c, leader, {{"key", "k1"}, {"value", 2}, {"expect_lsn", Text(l1)}});
    REQUIRE(r.status == 200);
    r = Post(c, leader, {{"key", "k1"}, {"value", 3}, {"expect_lsn", Text(l1)}});
    CHECK(r.status == 409);
    CHECK(r.body.at("lsn") != Text(l1));
    CHECK(Post(c, leader, {{"key", "k2"}, {"value", 1}, {"expect_lsn", "0.0"}}).status == 200);
    CHECK(Post(c, leader, {{"key", "k2"}, {"value", 1}, {"expect_lsn", "0.0"}}).status == 409);

    // Fenced writes: the leader's term must be the token.
    const std::uint64_t term = c.nodes[leader]->current().fencing_token;
    CHECK(Post(c, leader, {{"key", "k3"}, {"value", 1}, {"fence", term}}).status == 200);
    const std::size_t before_fence = LogLength(c, leader);
    r = Post(c, leader, {{"key", "k3"}, {"value", 2}, {"fence", term - 1}});
    CHECK(r.status == 409);
    CHECK(r.body.at("fencing_token") == term);
    CHECK(Post(c, leader, {{"key", "k3"}, {"value", 2}, {"fence", term + 1}}).status == 409);
    CHECK(LogLength(c, leader) == before_fence);

    // Atomic against entries not yet committed: two writes conditioned on the same LSN, proposed
    // in one step of the io thread: the second is checked against the first (pending).
    const Lsn k3 = c.nodes[leader]->get("k3").entries.at(0).lsn;
    // The refusal is answered only after the write it was checked against has committed (before,
    // a linearizable read could still see the state the condition expected).
    std::optional<MetadataProposeResult> first, second;
    bool first_before_second = false;
    c.nodes[leader]->propose("k3", "10", MetadataCondition{k3, std::nullopt},
                             [&](const MetadataProposeResult& p) { first = p; });
    c.nodes[leader]->propose("k3", "11", MetadataCondition{k3, std::nullopt},
                             [&](const MetadataProposeResult& p) {
                                 second = p;
                                 first_before_second = first.has_value();
                             });
    REQUIRE(run_cluster_until(c.io, [&] { return first && second; }));
    CHECK(first_before_second);
    CHECK(first->ok());
    CHECK(second->status == MetadataProposeStatus::ConditionFailed);
    CHECK(second->current_lsn == first->lsn);
    CHECK(ProposeIf(c, leader, "k3", "12", {first->lsn, term}).ok());
    CHECK(c.nodes[leader]->get("k3").entries.at(0).value == "12");

    // Prefix listings, in key order, bounded by max.
    r = Get(c, leader, "/metadata?prefix=k");
    REQUIRE(r.status == 200);
    REQUIRE(r.body.at("keys").size() == 3);
    CHECK(r.body.at("keys")[0].at("key") == "k1");
    CHECK(r.body.at("keys")[0].at("value") == 2);
    CHECK(r.body.at("keys")[2].at("key") == "k3");
    CHECK(r.body.at("more") == false);
    r = Get(c, leader, "/metadata?prefix=k&max=2");
    CHECK(r.body.at("keys").size() == 2);
    CHECK(r.body.at("more") == true);
    CHECK(Get(c, leader, "/metadata?prefix=zz").body.at("keys").empty());
    r = Get(c, follower, "/metadata?prefix=k");
    CHECK(r.status == 307);
    CHECK(r.location.find("/metadata?prefix=k") != std::string::npos);
    CHECK(Get(c, follower, "/metadata?prefix=k&consistency=serializable").status == 200);
    c.stop_all();
}

TEST_CASE("batched writes: one entry each, in order; checked whole; every outcome answered",
          "[node][metadata][keys]") {
    Cluster c;
    c.start_all();
    const std::size_t leader = c.active_leader();
    const std::size_t follower = (leader + 1) % 3;
    const auto lsn_of = [](const json& answer) {
        return conclave::codec::lsn_from_json(answer.at("lsn"));
    };

    // Three writes, three consecutive LSNs in request order, each key readable with its LSN.
    HttpResult r = Post(c, leader,
                        {{"entries",
                          {{{"key", "b1"}, {"value", 1}},
                           {{"key", "b2"}, {"value", {{"x", 2}}}},
                           {{"key", "b1"}, {"value", 3}, {"expect_lsn", "0.0"}}}}});
    // The third is checked against the first, still pending in the same step: refused, 409.
    REQUIRE(r.status == 409);
    REQUIRE(r.body.at("results").size() == 3);
    const Lsn b1 = lsn_of(r.body.at("results")[0]);
    const Lsn b2 = lsn_of(r.body.at("results")[1]);
    CHECK(b2.term == b1.term);
    CHECK(b2.counter == b1.counter + 1);
    CHECK(r.body.at("results")[2].at("error") == "condition_failed");
    CHECK(r.body.at("results")[2].at("lsn") == Text(b1));
    CHECK(Get(c, leader, "/metadata/b1").body.at("value") == 1);
    CHECK(Get(c, leader, "/metadata/b2").body.at("lsn") == Text(b2));

    r = Post(c, leader,
             {{"entries",
               {{{"key", "b1"}, {"value", 4}, {"expect_lsn", Text(b1)}},
                {{"key", "b3"}, {"value", "s"}}}}});
    REQUIRE(r.status == 200);
    CHECK(b2 < lsn_of(r.body.at("results")[0]));
    CHECK(Get(c, leader, "/metadata/b1").body.at("value") == 4);

    // A malformed write refuses the whole batch before anything is proposed.
    const std::size_t before = LogLength(c, leader);
    for (const auto& [body, needle] : std::vector<std::pair<json, std::string>>{
             {{{"entries", json::array()}}, "body.entries: expected an array of 1..1024"},
             {{{"entries", 7}}, "body.entries: expected an array"},
             {{{"entries", {{{"key", "ok"}, {"value", 1}}}}, {"key", "k"}},
              "body: a batch {\"entries\": [...]} has no other field"},
             {{{"entries", {{{"key", "ok"}, {"value", 1}}, {{"value", 1}}}}},
              "body.entries[1].key: expected a non-empty string"},
             {{{"entries",
                {{{"key", "ok"}, {"value", 1}}, {{"key", "k"}, {"value", 1}, {"x", 1}}}}},
              "body.entries[1].x: unknown field"},
             {{{"entries", {{{"key", "ok"}, {"value", 1}, {"fence", "7"}}}}},
              "body.entries[0].fence: expected"},
             {{{"entries", {{{"key", "_conclave/members"}, {"value", 1}}}}},
              "body.entries[0].key: the key space _conclave/ is reserved"},
         }) {
        INFO(body.dump());
        r = Post(c, leader, body);
        CHECK(r.status == 400);
        CHECK_THAT(r.body.at("detail").get<std::string>(), Catch::Contains(needle));
    }
    json too_many = json::array();
    for (std::size_t i = 0; i <= conclave::admin::kMaxMetadataBatch; ++i) {
        too_many.push_back({{"key", "k"}, {"value", 0}});
    }
    CHECK(Post(c, leader, {{"entries", too_many}}).status == 400);
    CHECK(LogLength(c, leader) == before);

    // A follower appends nothing: 307 to the leader, with every write's answer.
    r = Post(c, follower,
             {{"entries", {{{"key", "b4"}, {"value", 1}}, {{"key", "b5"}, {"value", 1}}}}});
    CHECK(r.status == 307);
    CHECK(r.location == "http://127.0.0.1:" + std::to_string(c.http_port(leader)) + "/metadata");
    REQUIRE(r.body.at("results").size() == 2);
    CHECK(r.body.at("results")[1].at("error") == "not_leader");
    CHECK(LogLength(c, leader) == before);
    c.stop_all();
}

TEST_CASE("key state: every node applies the same map; prefix subscribers see their keys only",
          "[node][metadata][keys]") {
    Cluster c;
    c.start_all();
    const std::size_t leader = c.active_leader();
    std::vector<std::string> under_a;
    c.nodes[leader]->subscribe_committed("a/", [&](const Entry& e) { under_a.push_back(e.key); });
    for (const char* key : {"a/1", "b/1", "a/2", "a/1", "b/2"}) {
        REQUIRE(c.propose(leader, key, "1").ok());
    }
    CHECK(under_a == std::vector<std::string>{"a/1", "a/2", "a/1"});
    const Lsn commit = c.nodes[leader]->commit_lsn();
    REQUIRE(run_cluster_until(c.io, [&] {
        for (auto& n : c.nodes) {
            if (n->commit_lsn() < commit) {
                return false;
            }
        }
        return true;
    }));
    for (const char* key : {"a/1", "a/2", "b/1", "b/2"}) {
        const Lsn at = c.nodes[leader]->get(key).entries.at(0).lsn;
        for (auto& n : c.nodes) {
            CHECK(n->get(key).entries.at(0).lsn == at);
        }
    }
    c.stop_all();
}

TEST_CASE("linearizable reads: a follower redirects (canary: planted local reads answer)",
          "[node][metadata][keys]") {
    for (const bool planted : {false, true}) {
        Cluster c;
        if (planted) {
            c.customize = [](std::size_t, conclave::node::NodeOptions& o) {
                o.planted_read_bug = PlantedReadBug::LocalReads;
            };
        }
        c.start_all();
        const std::size_t leader = c.active_leader();
        REQUIRE(c.propose(leader, "k1", "1").ok());
        // The check of the test above must catch the planted bug.
        CHECK(FollowerRedirects(c, (leader + 1) % 3, leader) == !planted);
        CHECK(FollowerRedirects(c, (leader + 2) % 3, leader) == !planted);
        c.stop_all();
    }
}

namespace {

/// FileStorage whose group-commit fsync waits while `stall` is set: a leader elected meanwhile
/// cannot commit its sync point (its log stays PASSIVE).
class StallingStorage final : public conclave::replication::LogStorage {
  public:
    StallingStorage(const std::filesystem::path& dir, std::shared_ptr<std::atomic<bool>> stall)
        : inner_(dir, conclave::replication::FsyncPolicy::Batched), stall_(std::move(stall)) {}
    conclave::replication::Recovery recover() override { return inner_.recover(); }
    void append(const std::vector<Entry>& entries) override { inner_.append(entries); }
    void truncate_after(Lsn after) override { inner_.truncate_after(after); }
    void write_meta(const conclave::replication::LogMeta& meta) override {
        inner_.write_meta(meta);
    }
    Lsn flush() override {
        Wait();
        return inner_.flush();
    }
    Lsn durable_lsn() const override { return inner_.durable_lsn(); }
    conclave::replication::SyncTicket begin_sync() override { return inner_.begin_sync(); }
    void sync(const conclave::replication::SyncTicket& t) override {
        Wait();
        inner_.sync(t);
    }
    Lsn end_sync(const conclave::replication::SyncTicket& t) override { return inner_.end_sync(t); }
    std::uint64_t fsync_count() const override { return inner_.fsync_count(); }
    void persist_snapshot(const conclave::replication::Snapshot& s) override {
        inner_.persist_snapshot(s);
    }

  private:
    void Wait() const {
        while (stall_->load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    conclave::replication::FileStorage inner_;
    std::shared_ptr<std::atomic<bool>> stall_;
};

/// Index of the node the elector made leader, once there is one.
std::size_t ElectedLeader(Cluster& c) {
    std::optional<std::size_t> leader;
    REQUIRE(run_cluster_until(c.io, [&] {
        for (std::size_t i = 0; i < c.nodes.size(); ++i) {
            if (c.nodes[i]->current().is_leader()) {
                leader = i;
                return true;
            }
        }
        return false;
    }));
    return *leader;
}

}  // namespace

TEST_CASE("linearizable reads: a leader answers only after its sync point (canary: planted skip)",
          "[node][metadata][keys]") {
    for (const bool planted : {false, true}) {
        INFO("planted " << planted);
        Cluster c(R"({"fsync": "batched", "propose_timeout_ms": 600})");
        auto stall = std::make_shared<std::atomic<bool>>(true);
        c.customize = [stall, planted](std::size_t, conclave::node::NodeOptions& o) {
            o.log_storage = [stall](const std::filesystem::path& dir,
                                    conclave::replication::FsyncPolicy) {
                return std::make_shared<StallingStorage>(dir, stall);
            };
            if (planted) {
                o.planted_read_bug = PlantedReadBug::SkipSyncPoint;
            }
        };
        c.start_all();
        const std::size_t leader = ElectedLeader(c);
        REQUIRE(c.nodes[leader]->status().log->leader_status == "passive");
        // Its lease may well be valid: that is not enough before the sync point.
        const HttpResult early = Get(c, leader, "/metadata/k1");
        CHECK((early.status == 503) == !planted);
        if (!planted) {
            CHECK(early.body.at("error") == "not_active");
        }
        CHECK(Get(c, leader, "/metadata/k1?consistency=serializable").status == 404);
        stall->store(false);
        c.active_leader();
        REQUIRE(run_cluster_until(
            c.io, [&] { return Get(c, c.active_leader(), "/metadata/k1").status == 404; }));
        c.stop_all();
    }
}

namespace {

/// A GET /metadata?watch=1 stream read raw (the chunks' lines are whole): what has arrived.
struct WatchClient {
    WatchClient(asio::io_context& io, std::uint16_t port, const std::string& target)
        : stream(std::make_shared<beast::tcp_stream>(io)) {
        auto req =
            std::make_shared<std::string>("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        stream->async_connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                              [this, req](beast::error_code ec) {
                                  if (!ec) {
                                      asio::async_write(
                                          *stream, asio::buffer(*req),
                                          [this, req](beast::error_code, std::size_t) { Read(); });
                                  }
                              });
    }
    void Read() {
        stream->async_read_some(asio::buffer(buffer), [this](beast::error_code ec, std::size_t n) {
            if (!ec) {
                received.append(buffer.data(), n);
                Read();
            }
        });
    }
    std::size_t Count(const std::string& needle) const {
        std::size_t n = 0;
        for (auto at = received.find(needle); at != std::string::npos;
             at = received.find(needle, at + 1)) {
            ++n;
        }
        return n;
    }
    std::shared_ptr<beast::tcp_stream> stream;
    std::array<char, 4096> buffer{};
    std::string received;
};

}  // namespace

TEST_CASE("watches: committed changes under a prefix, resumable, the snapshot first",
          "[node][metadata][keys]") {
    Cluster c(R"({"fsync": "batched", "propose_timeout_ms": 3000, "compact_threshold": 10,
                  "compact_retain": 2})");
    c.start_all();
    const std::size_t leader = c.active_leader();
    REQUIRE(c.propose(leader, "w/a", "1").ok());
    REQUIRE(c.propose(leader, "x/a", "1").ok());
    const MetadataProposeResult wb = c.propose(leader, "w/b", "2");
    REQUIRE(wb.ok());

    // From the start: w/a and w/b, not x/a; then each new change under w/.
    WatchClient all(c.io, c.http_port(leader), "/metadata?watch=1&prefix=w/&from=0.0");
    REQUIRE(run_cluster_until(c.io, [&] { return all.Count("\"key\":\"w/b\"") == 1; }));
    CHECK(all.Count("\"key\":\"w/a\"") == 1);
    CHECK(all.Count("x/a") == 0);
    // Resumed after w/b's LSN: nothing old, then what commits.
    WatchClient resumed(c.io, c.http_port(leader),
                        "/metadata?watch=1&prefix=w/&from=" + Text(wb.lsn));
    REQUIRE(c.propose(leader, "w/c", "3").ok());
    REQUIRE(c.propose(leader, "x/b", "3").ok());
    REQUIRE(run_cluster_until(c.io, [&] {
        return all.Count("\"key\":\"w/c\"") == 1 && resumed.Count("\"key\":\"w/c\"") == 1;
    }));
    CHECK(resumed.Count("\"key\":\"w/") == 1);
    CHECK(all.Count("x/b") == 0);
    CHECK(all.Count("\"snapshot\":true") == 0);

    // Compacted away: a cursor older than the snapshot gets the snapshot's entries first (the
    // last write of each key, marked), then the changes.
    for (int i = 0; i < 30; ++i) {
        REQUIRE(c.propose(leader, "w/a", std::to_string(i)).ok());
    }
    REQUIRE(c.nodes[leader]->log_driver()->log().snapshot().lsn > wb.lsn);
    WatchClient old(c.io, c.http_port(leader), "/metadata?watch=1&prefix=w/&from=0.0");
    REQUIRE(run_cluster_until(c.io, [&] { return old.Count("\"value\":29") == 1; }));
    CHECK(old.Count("\"snapshot\":true") >= 1);
    CHECK(old.Count("\"key\":\"w/a\"") < 31);  // compacted: not every write of w/a
    CHECK(old.Count("\"key\":\"w/b\"") == 1);
    // The node's other watchers still get each change once.
    CHECK(all.Count("\"key\":\"w/a\"") == 31);
    c.stop_all();
}
