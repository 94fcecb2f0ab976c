// SPDX-License-Identifier: Apache-2.0
// Liveness and advisory broadcast (node/broadcast.hpp): the wire form and its validation, the
// receiver's dedupe (with a canary: the exactly-once check fails without it), and Nodes on
// 127.0.0.1: delivery once, liveness in /status and /members, a raw peer's duplicate and hostile
// frames; a store backend's member and broadcast records. Every wait is bounded.
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "conclave/codec/json.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/node/broadcast.hpp"
#include "conclave/node/node.hpp"
#include "conclave/node/security.hpp"
#include "conclave/node/store_backend.hpp"
#include "support/loopback.hpp"

namespace {

using conclave::NodeId;
using conclave::admin::BroadcastMessage;
using conclave::admin::BroadcastResult;
using conclave::node::BroadcastDedupe;
using conclave::node::ClusterConfig;
using conclave::node::Node;
using nlohmann::json;
namespace net = conclave::net;

BroadcastMessage SampleMessage(std::uint64_t seq) {
    return BroadcastMessage{"n1", "0123456789abcdef", seq, "cache/invalidate",
                            json{{"project", "p1"}, {"keys", {1, 2, 3}}}};
}

BroadcastMessage DecodeMessage(const std::vector<std::uint8_t>& bytes) {
    auto decoded = conclave::node::decode_broadcast_frame(bytes);
    REQUIRE(std::holds_alternative<BroadcastMessage>(decoded));
    return std::get<BroadcastMessage>(decoded);
}

/// Deliveries of `frames` through one receiver that accepts a message when `accept` says so: the
/// exactly-once check of the tests below.
std::size_t DeliveriesOf(const std::vector<std::vector<std::uint8_t>>& frames,
                         const std::function<bool(const BroadcastMessage&)>& accept) {
    std::size_t delivered = 0;
    for (const auto& frame : frames) {
        delivered += accept(DecodeMessage(frame)) ? 1U : 0U;
    }
    return delivered;
}

std::vector<std::uint8_t> Cbor(const json& j) {
    return json::to_cbor(j);
}

ClusterConfig ParseConfig(const std::string& text, const std::string& id) {
    auto parsed = conclave::node::parse_cluster_config(text, id);
    if (auto* error = std::get_if<conclave::node::ConfigError>(&parsed)) {
        FAIL(error->message);
    }
    return std::get<ClusterConfig>(parsed);
}

conclave::node::NodeOptions QuietOptions() {
    conclave::node::NodeOptions options;
    options.logger = conclave::test::quiet_logger("broadcast-test");
    return options;
}

bool MetricIs(Node& node, const std::string& series, int value) {
    return node.metrics_text().find(series + " " + std::to_string(value) + "\n") !=
           std::string::npos;
}

}  // namespace

TEST_CASE("broadcast frames: round trip, and every malformed one refused", "[node][broadcast]") {
    const BroadcastMessage m = SampleMessage(7);
    const BroadcastMessage back = DecodeMessage(conclave::node::encode_broadcast(m));
    CHECK(back.id() == "n1/0123456789abcdef/7");
    CHECK(back.topic == m.topic);
    CHECK(back.payload == m.payload);
    CHECK(back.to_json() == json{{"id", "n1/0123456789abcdef/7"},
                                 {"from", "n1"},
                                 {"topic", "cache/invalidate"},
                                 {"payload", m.payload}});
    const auto beat = conclave::node::decode_broadcast_frame(conclave::node::encode_beat("n2"));
    REQUIRE(std::holds_alternative<conclave::node::BroadcastBeat>(beat));
    CHECK(std::get<conclave::node::BroadcastBeat>(beat).from == "n2");

    const json good = json::from_cbor(conclave::node::encode_broadcast(m));
    const auto refused = [](const json& j) {
        CHECK_THROWS_AS(conclave::node::decode_broadcast_frame(Cbor(j)),
                        conclave::codec::DecodeError);
    };
    for (const char* field : {"v", "kind", "from", "boot", "seq", "topic", "payload"}) {
        json j = good;
        j.erase(field);
        refused(j);
    }
    json j = good;
    j["extra"] = 1;
    refused(j);
    j = good;
    j["v"] = 2;
    refused(j);
    j = good;
    j["seq"] = 0;
    refused(j);
    j = good;
    j["boot"] = "0123456789ABCDEF";
    refused(j);
    j = good;
    j["topic"] = "";
    refused(j);
    j = good;
    j["topic"] = std::string(conclave::node::kMaxTopicBytes + 1, 't');
    refused(j);
    j = good;
    j["payload"] = std::string(conclave::node::kMaxPayloadBytes, 'x');  // + quotes: too large
    refused(j);
    j = good;
    j["payload"] = json::binary({1, 2, 3});
    refused(j);
    j = good;
    j["kind"] = "other";
    refused(j);
    refused(json::array({1, 2}));
    refused(json{{"v", 1}, {"kind", "beat"}, {"from", "n1"}, {"seq", 1}});
    // Nested deeper than the bound: refused before the recursive parser runs.
    std::vector<std::uint8_t> deep{0xa1, 0x61, 'x'};  // {"x": [[[[...
    deep.insert(deep.end(), 100000, 0x81);
    deep.push_back(0x00);
    CHECK_THROWS_AS(conclave::node::decode_broadcast_frame(deep), conclave::codec::DecodeError);
    for (const std::vector<std::uint8_t>& junk :
         {std::vector<std::uint8_t>{}, std::vector<std::uint8_t>{0xff},
          std::vector<std::uint8_t>{0xbf, 0x61}, std::vector<std::uint8_t>{0x5b, 0xff, 0xff}}) {
        CHECK_THROWS_AS(conclave::node::decode_broadcast_frame(junk), conclave::codec::DecodeError);
    }
}

TEST_CASE("broadcast: topic and payload bounds", "[node][broadcast]") {
    using conclave::node::check_broadcast;
    CHECK_FALSE(check_broadcast("t", nullptr));
    CHECK_FALSE(check_broadcast(std::string(conclave::node::kMaxTopicBytes, 't'), json::object()));
    CHECK_FALSE(check_broadcast("t", std::string(conclave::node::kMaxPayloadBytes - 2, 'x')));
    const auto big = check_broadcast("t", std::string(conclave::node::kMaxPayloadBytes - 1, 'x'));
    REQUIRE(big);
    CHECK(big->too_large);
    const auto long_topic =
        check_broadcast(std::string(conclave::node::kMaxTopicBytes + 1, 't'), nullptr);
    REQUIRE(long_topic);
    CHECK(long_topic->too_large);
    const auto empty = check_broadcast("", nullptr);
    REQUIRE(empty);
    CHECK_FALSE(empty->too_large);
    CHECK(check_broadcast("\xff", nullptr));  // not UTF-8
    json deep = 1;
    for (std::size_t i = 0; i <= conclave::node::kMaxPayloadNesting; ++i) {
        deep = json::array({deep});
    }
    CHECK(check_broadcast("t", deep));
    CHECK_FALSE(check_broadcast("t", deep[0]));
}

TEST_CASE("broadcast dedupe: each id once, in bounded memory", "[node][broadcast]") {
    // The same frame twice (a retry, or a sender that repeats itself), then a new one.
    const std::vector<std::vector<std::uint8_t>> frames = {
        conclave::node::encode_broadcast(SampleMessage(1)),
        conclave::node::encode_broadcast(SampleMessage(1)),
        conclave::node::encode_broadcast(SampleMessage(2))};
    BroadcastDedupe dedupe;
    CHECK(DeliveriesOf(frames, [&](const BroadcastMessage& m) { return dedupe.accept(m); }) == 2);

    SECTION("canary: without the dedupe the exactly-once check fails") {
        CHECK(DeliveriesOf(frames, [](const BroadcastMessage&) { return true; }) == 3);
    }
    SECTION("another boot of the same node is another sender") {
        BroadcastMessage again = SampleMessage(1);
        again.boot = "fedcba9876543210";
        CHECK(dedupe.accept(again));
        CHECK_FALSE(dedupe.accept(again));
    }
    SECTION("out of order within the window: each once") {
        BroadcastMessage m = SampleMessage(10);
        CHECK(dedupe.accept(m));
        m.seq = 5;
        CHECK(dedupe.accept(m));
        CHECK_FALSE(dedupe.accept(m));
    }
    SECTION("past the window an old id counts as seen; memory stays bounded") {
        BroadcastMessage m = SampleMessage(3);
        for (std::uint64_t seq = 3; seq < 3 + conclave::node::kDedupeWindow + 10; ++seq) {
            m.seq = seq;
            CHECK(dedupe.accept(m));
        }
        m.seq = 5;
        CHECK_FALSE(dedupe.accept(m));
        for (std::size_t i = 0; i < conclave::node::kDedupeSenders + 50; ++i) {
            BroadcastMessage other = SampleMessage(1);
            other.from = "x" + std::to_string(i);
            CHECK(dedupe.accept(other));
        }
        CHECK(dedupe.senders() == conclave::node::kDedupeSenders);
    }
}

TEST_CASE("broadcast between Nodes: delivered once to each live member, liveness shown",
          "[node][broadcast]") {
    boost::asio::io_context io;
    const auto dir = conclave::test::fresh_temp_dir("conclave-broadcast-test");
    // fast's heartbeat with a 1 s liveness window: a loaded machine does not make a member look
    // gone between two checks.
    const std::string text = conclave::test::loopback_cluster_config(
        "bc", "n", 3, conclave::test::free_ports(io, 6), dir, R"(, "timing": {"miss_count": 10})");
    Node n0(io, ParseConfig(text, "n0"), QuietOptions());
    Node n1(io, ParseConfig(text, "n1"), QuietOptions());
    Node n2(io, ParseConfig(text, "n2"), QuietOptions());
    std::vector<BroadcastMessage> got;
    n1.subscribe([&](const BroadcastMessage& m) { got.push_back(m); });
    CHECK(n0.broadcast("t", 1).outcome == BroadcastResult::Outcome::Unavailable);
    for (Node* n : {&n0, &n1, &n2}) {
        REQUIRE_FALSE(n->start());
    }
    REQUIRE(conclave::test::run_until(io, [&] {
        const auto s = n0.status();
        return s.peers.size() == 2 && s.peers[0].live && s.peers[1].live;
    }));
    // n2 stops: not live any more, nothing sent to it.
    bool n2_stopped = false;
    n2.stop([&] { n2_stopped = true; });
    REQUIRE(
        conclave::test::run_until(io, [&] { return n2_stopped && !n0.status().peers[1].live; }));
    const auto members = n0.members();
    REQUIRE(members.members.size() == 3);
    CHECK(members.liveness_window_ms == n0.liveness_window().count());
    CHECK(members.members[0].last_heartbeat_ms == 0);
    CHECK(members.members[0].live == true);
    CHECK(members.members[1].live == true);
    CHECK(members.members[2].live == false);
    CHECK(members.members[2].last_heartbeat_ms);  // heard from before it stopped

    const BroadcastResult r = n0.broadcast("cache", json{{"k", "v"}});
    REQUIRE(r.outcome == BroadcastResult::Outcome::Sent);
    CHECK(r.sent_to == std::vector<std::string>{"n1"});
    CHECK(r.not_sent == std::vector<std::string>{"n2"});
    REQUIRE(conclave::test::run_until(io, [&] { return !got.empty(); }));
    CHECK(got[0].id() == r.id);
    CHECK(got[0].from == "n0");
    CHECK(got[0].payload == json{{"k", "v"}});
    CHECK(n0.broadcast("", 1).outcome == BroadcastResult::Outcome::Invalid);
    CHECK(n0.broadcast("t", std::string(conclave::node::kMaxPayloadBytes, 'x')).outcome ==
          BroadcastResult::Outcome::TooLarge);
    // A second broadcast arrives too, and nothing twice.
    const BroadcastResult r2 = n0.broadcast("cache", 2);
    REQUIRE(conclave::test::run_until(io, [&] { return got.size() >= 2; }));
    CHECK(got[1].id() == r2.id);
    CHECK(MetricIs(n1, "conclave_broadcasts_received_total{result=\"delivered\"}", 2));

    int stopped = 0;
    n0.stop([&] { ++stopped; });
    n1.stop([&] { ++stopped; });
    REQUIRE(conclave::test::run_until(io, [&] { return stopped == 2; }));
    std::filesystem::remove_all(dir);
}

TEST_CASE("broadcast: a raw peer's repeated and hostile frames", "[node][broadcast][hostile]") {
    boost::asio::io_context io;
    const auto dir = conclave::test::fresh_temp_dir("conclave-broadcast-raw");
    const std::string text =
        conclave::test::loopback_cluster_config("bc", "n", 2, conclave::test::free_ports(io, 4),
                                                dir, R"(, "metadata": {"enabled": false})");
    Node node(io, ParseConfig(text, "n1"), QuietOptions());
    std::vector<BroadcastMessage> got;
    node.subscribe([&](const BroadcastMessage& m) { got.push_back(m); });
    REQUIRE_FALSE(node.start());
    // The peer n0 is a bare mesh that serves the same channels and sends what the test says.
    const ClusterConfig c0 = ParseConfig(text, "n0");
    net::MeshOptions options = conclave::node::mesh_options_of(c0, 1, {});
    options.durable_term = [] { return std::uint64_t{0}; };
    options.logger = conclave::test::quiet_logger("raw-peer");
    net::Mesh raw(io, conclave::node::membership_of(c0), c0.self, options);
    const auto ignore = [](NodeId, std::span<const std::uint8_t>) {
        return std::optional<net::FrameRejection>();
    };
    raw.set_frame_handler(net::Channel::Elector, ignore);
    raw.set_frame_handler(net::Channel::Broadcast, ignore);
    raw.start();
    const NodeId n1{1};
    REQUIRE(conclave::test::run_until(io, [&] { return raw.is_up(n1); }));

    BroadcastMessage m{"n0", "0123456789abcdef", 1, "t", json{{"x", 1}}};
    const auto once = conclave::node::encode_broadcast(m);
    CHECK(raw.send(n1, net::Channel::Broadcast, once));
    CHECK(raw.send(n1, net::Channel::Broadcast, once));  // the same frame again
    m.seq = 2;
    CHECK(raw.send(n1, net::Channel::Broadcast, conclave::node::encode_broadcast(m)));
    REQUIRE(conclave::test::run_until(io, [&] {
        return MetricIs(node, "conclave_broadcasts_received_total{result=\"duplicate\"}", 1) &&
               got.size() == 2;
    }));
    CHECK(got[0].seq == 1);
    CHECK(got[1].seq == 2);

    // Another sender's name on n0's connection, then junk: each closes the connection and is
    // counted; the node keeps running and takes the peer back (the raw peer redials).
    m.from = "n9";
    m.seq = 3;
    CHECK(raw.send(n1, net::Channel::Broadcast, conclave::node::encode_broadcast(m)));
    REQUIRE(conclave::test::run_until(
        io, [&] { return MetricIs(node, "conclave_bad_frames_total{kind=\"wrong_sender\"}", 1); }));
    REQUIRE(conclave::test::run_until(
        io, [&] { return raw.counters().peer_ups >= 2 && raw.is_up(n1); }));
    const std::vector<std::uint8_t> junk{0xa1, 0x61, 'v', 0xff};
    CHECK(raw.send(n1, net::Channel::Broadcast, junk));
    REQUIRE(conclave::test::run_until(
        io, [&] { return MetricIs(node, "conclave_bad_frames_total{kind=\"undecodable\"}", 1); }));
    REQUIRE(conclave::test::run_until(
        io, [&] { return raw.counters().peer_ups >= 3 && raw.is_up(n1); }));
    CHECK(got.size() == 2);
    CHECK(node.health().healthy);

    raw.stop();
    bool stopped = false;
    node.stop([&] { stopped = true; });
    REQUIRE(conclave::test::run_until(io, [&] { return stopped; }));
    std::filesystem::remove_all(dir);
}

TEST_CASE("broadcast and liveness with a store backend, the store unreachable",
          "[node][broadcast][store]") {
    boost::asio::io_context io;
    const auto dir = conclave::test::fresh_temp_dir("conclave-broadcast-store");
    const std::string text = conclave::test::loopback_cluster_config(
        "bc", "n", 2, conclave::test::free_ports(io, 4), dir,
        R"(, "metadata": {"enabled": false},
             "backend": {"kind": "etcd", "endpoints": ["127.0.0.1:1"], "ttl_ms": 2000})");
    Node node(io, ParseConfig(text, "n0"), QuietOptions());
    CHECK(node.broadcast("t", 1).outcome == BroadcastResult::Outcome::Unavailable);
    const auto members = node.members();
    CHECK(members.liveness_window_ms == 2000);  // the store's TTL
    REQUIRE(members.members.size() == 2);
    CHECK(members.members[0].live == true);
    CHECK(members.members[1].live == false);  // no record of it read
    CHECK_FALSE(members.members[1].last_heartbeat_ms);
    const auto status = node.status();
    CHECK(status.liveness_window_ms == 2000);
    REQUIRE(status.peers.size() == 1);
    CHECK_FALSE(status.peers[0].live);
    std::filesystem::remove_all(dir);
}

TEST_CASE("store member records: round trip, and every malformed one refused",
          "[node][broadcast][store]") {
    using conclave::node::decode_member_record;
    using conclave::node::encode_member_record;
    const std::string good = encode_member_record({"n1", "127.0.0.1:80", "0123456789abcdef", 7});
    const auto r = decode_member_record(good);
    CHECK(r.id == "n1");
    CHECK(r.http == "127.0.0.1:80");
    CHECK(r.boot == "0123456789abcdef");
    CHECK(r.beat == 7);
    for (const std::string& bad : {
             std::string(""),
             std::string("not json"),
             std::string("[1]"),
             std::string(R"({"id":"n1","http":"h","boot":"0123456789abcdef"})"),
             std::string(R"({"id":"n1","http":"h","boot":"0123456789abcdef","beat":0})"),
             std::string(R"({"id":"n1","http":"h","boot":"0123456789abcdef","beat":-1})"),
             std::string(R"({"id":"n1","http":"h","boot":"XYZ","beat":1})"),
             std::string(R"({"id":"","http":"h","boot":"0123456789abcdef","beat":1})"),
             std::string(R"({"id":1,"http":"h","boot":"0123456789abcdef","beat":1})"),
             std::string(R"({"id":"n1","http":"h","boot":"0123456789abcdef","beat":1,"x":2})"),
             std::string(R"({"id":")") + std::string(300, 'a') +
                 R"(","http":"h","boot":"0123456789abcdef","beat":1})",
             std::string(conclave::node::kStoreRecordLimit + 1, ' '),
         }) {
        CAPTURE(bad.substr(0, 80));
        CHECK_THROWS_AS(decode_member_record(bad), conclave::codec::DecodeError);
    }
}

TEST_CASE("store member table: liveness from this node's clock, malformed records dropped once",
          "[node][broadcast][store]") {
    using conclave::node::encode_member_record;
    using conclave::node::StoreMemberTable;
    using std::chrono::milliseconds;
    const auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
    const auto rec = [](const std::string& id, std::uint64_t beat) {
        return encode_member_record({id, "127.0.0.1:80", "0123456789abcdef", beat});
    };
    StoreMemberTable table;
    CHECK(table.observe({{"n1", rec("n1", 1)}, {"n2", rec("n2", 1)}}, t0).empty());
    // n1 beats, n2's record stays the same: n2's heartbeat stays at t0 however often it is read.
    CHECK(table.observe({{"n1", rec("n1", 2)}, {"n2", rec("n2", 1)}}, t0 + milliseconds(500))
              .empty());
    auto beats = table.heartbeats();
    CHECK(beats.at("n1") == t0 + milliseconds(500));
    CHECK(beats.at("n2") == t0);
    // A record gone (its lease ended) keeps its last heartbeat: it ages out of the window.
    CHECK(table.observe({{"n1", rec("n1", 3)}}, t0 + milliseconds(900)).empty());
    CHECK(table.heartbeats().at("n2") == t0);
    // Malformed: dropped, reported once per version, never an exception.
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"n3", "{"}, {"n4", rec("n1", 9)}, {"n5", std::string(1, '\0')}};
    CHECK(table.observe(bad, t0 + milliseconds(1000)).size() == 3);
    CHECK(table.observe(bad, t0 + milliseconds(1100)).empty());
    beats = table.heartbeats();
    CHECK(beats.size() == 2);
    CHECK(beats.at("n1") == t0 + milliseconds(900));  // n4's copy of n1's record is not n1's beat
}

TEST_CASE("store broadcast records: a message decodes, anything else is refused",
          "[node][broadcast][store]") {
    using conclave::node::decode_store_broadcast;
    const BroadcastMessage m{"n1", "0123456789abcdef", 3, "t", json{{"k", 1}}};
    const auto bytes = conclave::node::encode_broadcast(m);
    const auto text = std::string(bytes.begin(), bytes.end());
    const BroadcastMessage back = decode_store_broadcast(text);
    CHECK(back.id() == m.id());
    CHECK(back.payload == m.payload);
    const auto beat = conclave::node::encode_beat("n1");
    for (const std::string& bad :
         {std::string(), std::string("garbage"), std::string(beat.begin(), beat.end()),
          text.substr(0, 10), std::string(conclave::node::kStoreRecordLimit + 1, 'a')}) {
        CHECK_THROWS_AS(decode_store_broadcast(bad), conclave::codec::DecodeError);
    }
}
