// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>

#include "conclave/node/cluster_config.hpp"
#include "conclave/node/security.hpp"
#include "conclave/node/store_backend.hpp"

using conclave::Millis;
using conclave::NodeId;
using nlohmann::json;
using namespace conclave::node;

namespace {

json GoodConfig() {
    return json::parse(R"({
      "cluster": "demo",
      "nodes": [
        {"id": "n1", "peer": "127.0.0.1:7101", "http": "127.0.0.1:8101"},
        {"id": "n2", "peer": "127.0.0.1:7102", "http": "127.0.0.1:8102"},
        {"id": "n3", "peer": "127.0.0.1:7103", "http": "127.0.0.1:8103"}
      ],
      "profile": "default",
      "timing": {"heartbeat_ms": 2000, "miss_count": 10, "max_random_wait_ms": 3000},
      "scouting": true,
      "data_dir": "/var/lib/conclave/{id}",
      "tls": null,
      "log": {"format": "text", "level": "info"}
    })");
}

ClusterConfig Parse(const json& document, const std::string& node = "n1") {
    auto result = parse_cluster_config(document.dump(), node);
    if (auto* error = std::get_if<ConfigError>(&result)) {
        FAIL("unexpected config error: " << error->message);
    }
    return std::get<ClusterConfig>(result);
}

/// The error message for a config that must be refused.
std::string ErrorOf(const json& document, const std::string& node = "n1") {
    auto result = parse_cluster_config(document.dump(), node);
    REQUIRE(std::holds_alternative<ConfigError>(result));
    return std::get<ConfigError>(result).message;
}

std::string ErrorOfText(const std::string& text, const std::string& node = "n1") {
    auto result = parse_cluster_config(text, node);
    REQUIRE(std::holds_alternative<ConfigError>(result));
    return std::get<ConfigError>(result).message;
}

}  // namespace

TEST_CASE("the example config of interfaces.md parses", "[config]") {
    const ClusterConfig c = Parse(GoodConfig(), "n2");
    CHECK(c.cluster == "demo");
    REQUIRE(c.nodes.size() == 3);
    CHECK(c.nodes[0] == NodeEntry{"n1", {"127.0.0.1", 7101}, {"127.0.0.1", 8101}});
    CHECK(c.self == NodeId{1});
    CHECK(c.self_entry().id == "n2");
    CHECK(c.find_node("n3") == NodeId{2});
    CHECK_FALSE(c.find_node("n4"));
    CHECK(c.node_name(NodeId{2}) == "n3");
    CHECK(c.data_dir_template == "/var/lib/conclave/{id}");
    CHECK(c.data_dir == "/var/lib/conclave/n2");
    CHECK_FALSE(c.tls);
    CHECK(c.log == LogSettings{LogFormat::Text, "info"});

    // Elector config: the default profile with the three overrides applied.
    const auto profile = conclave::elector::Config::defaults(3, NodeId{1});
    CHECK(c.elector.cluster_size == 3);
    CHECK(c.elector.self == NodeId{1});
    CHECK(c.elector.heartbeat_period == Millis{2000});
    CHECK(c.elector.heartbeat_miss_count == 10);
    CHECK(c.elector.max_random_wait == Millis{3000});
    CHECK(c.elector.initial_wait == profile.initial_wait);
    CHECK(c.elector.heartbeat_check_period == profile.heartbeat_check_period);
    CHECK(c.elector.scouting);
    CHECK(c.elector.check_quorum);
    CHECK_FALSE(c.elector.validate());
}

TEST_CASE("a minimal config takes the defaults", "[config]") {
    const json minimal = {{"cluster", "c"},
                          {"nodes", {{{"id", "a"}, {"peer", "h:1"}, {"http", "h:2"}}}},
                          {"data_dir", "d"}};
    const ClusterConfig c = Parse(minimal, "a");
    CHECK(c.profile == "default");
    const auto defaults = conclave::elector::Config::defaults(1, NodeId{0});
    CHECK(c.elector.heartbeat_period == defaults.heartbeat_period);
    CHECK(c.elector.heartbeat_miss_count == defaults.heartbeat_miss_count);
    CHECK(c.elector.scouting);
    CHECK(c.elector.check_quorum);
    CHECK(c.data_dir == "d");
    CHECK(c.log == LogSettings{});
}

TEST_CASE("the mesh keeps a silent link open longer than a follower's promise", "[config][lease]") {
    // The leader lease (docs/design.md, assumption 3): the follower's kernel must not close its
    // link to the leader before the promise has run out. The keepalive budget (idle + 2 s x 3
    // probes, also TCP_USER_TIMEOUT) stays 16 s where that is enough, and grows beyond it.
    json doc = GoodConfig();
    doc.erase("timing");
    for (const char* profile : {"fast", "default", "reference"}) {
        CAPTURE(profile);
        doc["profile"] = profile;
        const ClusterConfig config = Parse(doc);
        const conclave::net::MeshOptions m = mesh_options_of(config, std::nullopt, {});
        const auto budget = m.keepalive_idle + m.keepalive_interval * m.keepalive_probes;
        CHECK(budget > config.elector.promise_duration() + std::chrono::seconds{6});
        CHECK(m.keepalive_idle >= std::chrono::seconds{10});
    }
    doc["profile"] = "reference";  // P = 19 s: a 16 s budget would end the promise early
    CHECK(mesh_options_of(Parse(doc), std::nullopt, {}).keepalive_idle == std::chrono::seconds{20});
}

TEST_CASE("profiles and every timing override", "[config]") {
    json doc = GoodConfig();
    doc.erase("timing");
    SECTION("fast and reference profiles") {
        doc["profile"] = "fast";
        CHECK(Parse(doc).elector.heartbeat_period ==
              conclave::elector::Config::fast(3, NodeId{0}).heartbeat_period);
        doc["profile"] = "reference";
        const auto reference = conclave::elector::Config::reference(3, NodeId{0});
        const auto c = Parse(doc).elector;
        CHECK(c.heartbeat_period == reference.heartbeat_period);
        CHECK(c.initial_wait == reference.initial_wait);
    }
    SECTION("all overrides, scouting and check_quorum off") {
        doc["profile"] = "fast";
        doc["timing"] = {{"heartbeat_ms", 150},      {"miss_count", 4},
                         {"max_random_wait_ms", 0},  {"initial_wait_ms", 50},
                         {"scouting_result_ms", 70}, {"election_result_ms", 80},
                         {"heartbeat_check_ms", 60}};
        doc["scouting"] = false;
        doc["check_quorum"] = false;
        const auto c = Parse(doc).elector;
        CHECK(c.heartbeat_period == Millis{150});
        CHECK(c.heartbeat_miss_count == 4);
        CHECK(c.max_random_wait == Millis{0});
        CHECK(c.initial_wait == Millis{50});
        CHECK(c.scouting_result_timeout == Millis{70});
        CHECK(c.election_result_timeout == Millis{80});
        CHECK(c.heartbeat_check_period == Millis{60});
        CHECK_FALSE(c.scouting);
        CHECK_FALSE(c.check_quorum);
    }
    SECTION("the ranked backoff's slot: one knob, or floor, ceiling and multiple") {
        doc["profile"] = "fast";
        doc["timing"] = {{"rank_slot_ms", 40}};
        auto c = Parse(doc).elector;
        CHECK(c.rank_slot == Millis{40});
        CHECK(c.rank_slot_min == Millis{40});  // rank_slot_ms alone is the floor too
        CHECK(c.rank_slot_max == Millis{500});
        doc["timing"] = {{"rank_slot_ms", 900}};
        CHECK(Parse(doc).elector.rank_slot_max == Millis{900});  // the ceiling makes room
        doc["timing"] = {{"rank_slot_ms", 40},
                         {"rank_slot_min_ms", 10},
                         {"rank_slot_max_ms", 200},
                         {"rank_slot_rtt_multiple", 6}};
        c = Parse(doc).elector;
        CHECK(c.rank_slot_min == Millis{10});
        CHECK(c.rank_slot_max == Millis{200});
        CHECK(c.rank_slot_rtt_multiple == 6);
        doc["timing"] = {{"rank_slot_min_ms", 50}};  // above the fast profile's slot (25)
        CHECK(ErrorOf(doc).find("timing.rank_slot_ms: must be between timing.rank_slot_min_ms") !=
              std::string::npos);
        doc["timing"] = {{"rank_slot_rtt_multiple", 101}};
        CHECK(ErrorOf(doc).find("timing.rank_slot_rtt_multiple: must be an integer between 0 and "
                                "100") != std::string::npos);
    }
    SECTION("the leader lease's drift bound: 50 permille in every profile, 0..200") {
        CHECK(Parse(doc).elector.lease_drift_permille == 50);
        doc["timing"] = {{"lease_drift_permille", 120}};
        CHECK(Parse(doc).elector.lease_drift_permille == 120);
        doc["timing"] = {{"lease_drift_permille", 201}};
        CHECK(ErrorOf(doc).find("timing.lease_drift_permille: must be an integer between 0 and "
                                "200") != std::string::npos);
    }
}

TEST_CASE("tls, log and IPv6 endpoints", "[config]") {
    json doc = GoodConfig();
    doc["tls"] = {{"ca", "/etc/c/ca.pem"}, {"cert", "/etc/c/n1.pem"}, {"key", "/etc/c/n1.key"}};
    doc["log"] = {{"format", "json"}, {"level", "debug"}};
    doc["nodes"][0]["peer"] = "[::1]:7101";
    const ClusterConfig c = Parse(doc);
    REQUIRE(c.tls);
    CHECK(*c.tls == TlsFiles{"/etc/c/ca.pem", "/etc/c/n1.pem", "/etc/c/n1.key"});
    CHECK(c.log == LogSettings{LogFormat::Json, "debug"});
    CHECK(c.nodes[0].peer == Endpoint{"::1", 7101});
    CHECK(to_string(c.nodes[0].peer) == "[::1]:7101");
}

TEST_CASE("endpoint parsing", "[config]") {
    CHECK(parse_endpoint("localhost:80") == Endpoint{"localhost", 80});
    CHECK(parse_endpoint("10.0.0.1:65535") == Endpoint{"10.0.0.1", 65535});
    CHECK(parse_endpoint("[fe80::1]:1") == Endpoint{"fe80::1", 1});
    for (const char* bad :
         {"abc", ":80", "host:", "host:0", "host:65536", "host:8x", "::1:80", "[::1]80", "[::1]",
          "ho st:80", "host:+80", "host:-1", "[1.2.3.4]:80", "host:123456", "*:80"}) {
        INFO(bad);
        CHECK_FALSE(parse_endpoint(bad));
    }
}

TEST_CASE("every bad field is named in the error", "[config]") {
    json doc = GoodConfig();
    struct Case {
        std::function<void(json&)> mutate;
        std::string expected;  // substring of the message
    };
    const std::vector<Case> cases = {
        {[](json& d) { d.erase("cluster"); }, "cluster: missing (required field)"},
        {[](json& d) { d["cluster"] = 5; }, "cluster: expected a string, got number 5"},
        {[](json& d) { d["cluster"] = "a b"; }, "cluster: expected 1 to 64 characters"},
        {[](json& d) { d.erase("nodes"); }, "nodes: missing"},
        {[](json& d) { d["nodes"] = json::object(); }, "nodes: expected an array"},
        {[](json& d) { d["nodes"] = json::array(); }, "nodes: must list between 1 and 64 nodes"},
        {[](json& d) { d["nodes"][1] = "n2"; }, "nodes[1]: expected an object, got string \"n2\""},
        {[](json& d) { d["nodes"][2].erase("id"); }, "nodes[2].id: missing"},
        {[](json& d) { d["nodes"][2]["id"] = "../etc"; }, "nodes[2].id: expected 1 to 64"},
        {[](json& d) { d["nodes"][2]["id"] = 3; }, "nodes[2].id: expected a string, got number 3"},
        {[](json& d) { d["nodes"][2]["peer"] = "abc"; },
         "nodes[2].peer: expected \"host:port\" with a port in 1..65535, got string \"abc\""},
        {[](json& d) { d["nodes"][1]["http"] = "127.0.0.1:70000"; }, "nodes[1].http: expected"},
        {[](json& d) { d["nodes"][1].erase("http"); }, "nodes[1].http: missing"},
        {[](json& d) { d["profile"] = "turbo"; },
         "profile: expected \"default\", \"fast\" or \"reference\", got string \"turbo\""},
        {[](json& d) { d["profile"] = nullptr; }, "profile: expected a string, got null"},
        {[](json& d) { d["timing"] = 5; }, "timing: expected an object"},
        {[](json& d) { d["timing"]["heartbeat_ms"] = "2000"; },
         "timing.heartbeat_ms: expected an integer, got string \"2000\""},
        {[](json& d) { d["timing"]["heartbeat_ms"] = 2.5; },
         "timing.heartbeat_ms: expected an integer, got number 2.5"},
        {[](json& d) { d["timing"]["heartbeat_ms"] = -1; },
         "timing.heartbeat_ms: must be an integer between 0 and 3600000, got number -1"},
        {[](json& d) { d["timing"]["initial_wait_ms"] = 18446744073709551615ULL; },
         "timing.initial_wait_ms: must be an integer between 0 and 3600000"},
        {[](json& d) { d["timing"]["miss_count"] = 5000; },
         "timing.miss_count: must be an integer"},
        // Config::validate() errors come back under the config's own names.
        {[](json& d) { d["timing"]["miss_count"] = 1; }, "timing.miss_count: must be at least 2"},
        {[](json& d) { d["timing"]["heartbeat_ms"] = 0; }, "timing.heartbeat_ms: must be positive"},
        {[](json& d) { d["timing"]["scouting_result_ms"] = 0; },
         "timing.scouting_result_ms: must be positive"},
        {[](json& d) { d["timing"]["election_result_ms"] = 0; },
         "timing.election_result_ms: must be positive"},
        {[](json& d) { d["timing"]["heartbeat_check_ms"] = 0; },
         "timing.heartbeat_check_ms: must be positive"},
        {[](json& d) { d["timing"]["heartbeat_check_ms"] = 3'000'000; },
         "timing.heartbeat_check_ms: must not exceed the inactivity interval "
         "(timing.heartbeat_ms * timing.miss_count = 20000 ms)"},
        {[](json& d) { d["scouting"] = "yes"; }, "scouting: expected true or false, got string"},
        {[](json& d) { d["check_quorum"] = 1; }, "check_quorum: expected true or false"},
        {[](json& d) { d.erase("data_dir"); }, "data_dir: missing"},
        {[](json& d) { d["data_dir"] = ""; }, "data_dir: must not be empty"},
        {[](json& d) { d["data_dir"] = "/x/{node}"; },
         "data_dir: unknown placeholder \"{node}\" (only {id} is supported)"},
        {[](json& d) { d["tls"] = "yes"; }, "tls: expected null or an object"},
        {[](json& d) {
             d["tls"] = {{"ca", "a"}, {"cert", "b"}};
         },
         "tls.key: missing"},
        {[](json& d) {
             d["tls"] = {{"ca", "a"}, {"cert", ""}, {"key", "c"}};
         },
         "tls.cert: must be a file path"},
        {[](json& d) { d["log"]["format"] = "xml"; }, "log.format: expected \"text\" or \"json\""},
        {[](json& d) { d["log"]["level"] = "loud"; }, "log.level: expected \"trace\", \"debug\""},
        {[](json& d) { d["log"] = "info"; }, "log: expected an object"},
        {[](json& d) {
             d["admin"] = {{"max_watchers", 0}};
         },
         "admin.max_watchers: must be an integer between 1 and 48, got number 0"},
        {[](json& d) {
             d["admin"] = {{"max_watchers", 49}};
         },
         "admin.max_watchers: must be an integer between 1 and 48, got number 49"},
        {[](json& d) { d["metadata"] = true; }, "metadata: expected an object"},
        {[](json& d) {
             d["metadata"] = {{"fsync", "sometimes"}};
         },
         "metadata.fsync: expected \"batched\", \"always\" or \"never\""},
        {[](json& d) {
             d["metadata"] = {{"enabled", "yes"}};
         },
         "metadata.enabled: expected true"},
        {[](json& d) {
             d["metadata"] = {{"fsnyc", "never"}};
         },
         "metadata.fsnyc: unknown field \"fsnyc\" (did you mean \"fsync\"?)"},
        {[](json& d) {
             d["metadata"] = {{"propose_timeout_ms", 0}};
         },
         "metadata.propose_timeout_ms"},
        {[](json& d) {
             d["metadata"] = {{"fsync", "never"}};
         },
         "metadata.fsync: \"never\" can lose acknowledged entries on a machine crash; refused "
         "unless \"unsafe_no_fsync\": true is set too"},
        {[](json& d) {
             d["metadata"] = {{"fsync", "never"}, {"unsafe_no_fsync", "yes"}};
         },
         "metadata.unsafe_no_fsync: expected true"},
        {[](json& d) {
             d["metadata"] = {{"quota_bytes", 1000}};
         },
         "metadata.quota_bytes: expected 0 (no limit) or at least 66576"},
        {[](json& d) {
             d["metadata"] = {{"quota_entries", -1}};
         },
         "metadata.quota_entries"},
        {[](json& d) {
             d["metadata"] = {{"compact_threshold", 100}, {"compact_retain", 100}};
         },
         "metadata.compact_retain: must be below metadata.compact_threshold (100), got 100"},
        {[](json& d) {
             d["metadata"] = {{"promote_lag_entries", -1}};
         },
         "metadata.promote_lag_entries"},
        {[](json& d) {
             d["metadata"] = {{"promote_lag_entries", "many"}};
         },
         "metadata.promote_lag_entries"},
        {[](json& d) {
             d["admin"] = {{"idle_timeout_ms", 50}};
         },
         "admin.idle_timeout_ms"},
        {[](json& d) {
             d["admin"] = {{"idle_timeout_ms", 20000}};
         },
         "admin.idle_timeout_ms"},
    };
    for (const Case& c : cases) {
        json mutated = doc;
        c.mutate(mutated);
        const std::string message = ErrorOf(mutated);
        INFO("config: " << mutated.dump());
        INFO("message: " << message);
        CHECK(message.find(c.expected) != std::string::npos);
    }
}

TEST_CASE("unknown fields are refused, with a suggestion for typos", "[config]") {
    json doc = GoodConfig();
    json typo = doc;
    typo["timing"]["heartbeat_msec"] = 100;
    CHECK(
        ErrorOf(typo) ==
        "timing.heartbeat_msec: unknown field \"heartbeat_msec\" (did you mean \"heartbeat_ms\"?)");
    json top = doc;
    top["scoutng"] = true;
    CHECK(ErrorOf(top) == "scoutng: unknown field \"scoutng\" (did you mean \"scouting\"?)");
    json node = doc;
    node["nodes"][1]["weight"] = 3;
    CHECK(ErrorOf(node).rfind(
              "nodes[1].weight: unknown field \"weight\" (known fields: id peer http priority)",
              0) == 0);
    json tls = doc;
    tls["tls"] = {{"ca", "a"}, {"cert", "b"}, {"key", "c"}, {"password", "x"}};
    CHECK(ErrorOf(tls).rfind("tls.password: unknown field", 0) == 0);
    json log = doc;
    log["log"]["colour"] = true;
    CHECK(ErrorOf(log).rfind("log.colour: unknown field", 0) == 0);
}

TEST_CASE("duplicate ids and clashing endpoints are refused", "[config]") {
    json doc = GoodConfig();
    json dup = doc;
    dup["nodes"][2]["id"] = "n1";
    CHECK(ErrorOf(dup) == "nodes[2].id: duplicate id \"n1\" (also nodes[0].id)");

    json same_peer = doc;
    same_peer["nodes"][1]["peer"] = "127.0.0.1:7101";
    CHECK(ErrorOf(same_peer) ==
          "nodes[1].peer: endpoint 127.0.0.1:7101 clashes with "
          "nodes[0].peer (127.0.0.1:7101)");
    json peer_vs_http = doc;
    peer_vs_http["nodes"][2]["http"] = "127.0.0.1:7102";
    CHECK(ErrorOf(peer_vs_http) ==
          "nodes[2].http: endpoint 127.0.0.1:7102 clashes with "
          "nodes[1].peer (127.0.0.1:7102)");
    json own = doc;
    own["nodes"][0]["http"] = "127.0.0.1:7101";
    CHECK(ErrorOf(own).rfind("nodes[0].http: endpoint 127.0.0.1:7101 clashes with nodes[0].peer",
                             0) == 0);
    json wildcard = doc;
    wildcard["nodes"][2]["http"] = "0.0.0.0:8101";
    CHECK(ErrorOf(wildcard).rfind("nodes[2].http: endpoint 0.0.0.0:8101 clashes with nodes[0].http",
                                  0) == 0);
    // The same port on two different hosts is fine (a real multi-machine cluster).
    json hosts = doc;
    hosts["nodes"][0]["peer"] = "10.0.0.1:7100";
    hosts["nodes"][1]["peer"] = "10.0.0.2:7100";
    CHECK_NOTHROW(Parse(hosts));
}

TEST_CASE("the node id must be configured", "[config]") {
    CHECK(ErrorOf(GoodConfig(), "n9") ==
          "--node-id: \"n9\" is not one of the configured nodes (n1, n2, n3)");
}

TEST_CASE("invalid JSON is reported with line and column", "[config]") {
    const std::string message = ErrorOfText("{\n  \"cluster\": \"demo\",\n  \"nodes\": [,]\n}");
    CHECK(message.rfind("invalid JSON: parse error at line 3, column", 0) == 0);
    CHECK(ErrorOfText("").rfind("invalid JSON:", 0) == 0);
    CHECK(ErrorOfText("[1, 2]") == "(top level): expected a JSON object, got an array");
    CHECK(ErrorOfText(R"({"cluster": "a", "cluster": "b"})") ==
          "invalid JSON: duplicate key \"cluster\" in the same object");
}

TEST_CASE("the effective config round-trips", "[config]") {
    json doc = GoodConfig();
    doc["profile"] = "fast";
    doc["tls"] = {{"ca", "ca.pem"}, {"cert", "c.pem"}, {"key", "k.pem"}};
    doc["metadata"] = {{"fsync", "never"},        {"propose_timeout_ms", 500},
                       {"unsafe_no_fsync", true}, {"quota_bytes", 1 << 20},
                       {"quota_entries", 5000},   {"compact_threshold", 400},
                       {"compact_retain", 40},    {"promote_lag_entries", 25}};
    doc["secret_file"] = "/etc/conclave/secret";
    doc["admin"] = {
        {"token_file", "/etc/conclave/token"}, {"open_reads", true}, {"hosts", {"ops.example"}},
        {"max_connections_per_source", 4},     {"max_watchers", 7},  {"idle_timeout_ms", 500}};
    const ClusterConfig c = Parse(doc, "n3");
    CHECK(c.security.secret_file == "/etc/conclave/secret");
    CHECK(c.security.admin_token_file == "/etc/conclave/token");
    CHECK(c.security.admin_open_reads);
    CHECK_FALSE(Parse(GoodConfig(), "n3").security.admin_open_reads);  // reads need the token
    CHECK(c.security.admin_hosts == std::vector<std::string>{"ops.example"});
    CHECK(c.security.admin_max_connections_per_source == 4);
    CHECK(c.security.admin_max_watchers == 7);
    CHECK(c.security.admin_idle_timeout_ms == 500);
    CHECK_FALSE(c.security.insecure);
    CHECK(c.metadata.enabled);
    CHECK(c.metadata.fsync == conclave::replication::FsyncPolicy::Never);
    const auto effective = effective_config_json(c);
    CHECK(effective["data_dir"] == "/var/lib/conclave/n3");
    CHECK(effective["metadata"]["fsync"] == "never");
    CHECK(effective["metadata"]["unsafe_no_fsync"] == true);
    CHECK(effective["metadata"]["quota_bytes"] == 1 << 20);
    CHECK(effective["metadata"]["compact_threshold"] == 400);
    CHECK(c.metadata.quota_entries == 5000);
    CHECK(c.metadata.compact_retain == 40);
    CHECK(c.metadata.promote_lag_entries == 25);
    CHECK(effective["metadata"]["promote_lag_entries"] == 25);
    CHECK(effective["timing"]["heartbeat_ms"] == 2000);
    CHECK(effective["timing"]["heartbeat_check_ms"] ==
          conclave::elector::Config::fast(3, NodeId{2}).heartbeat_check_period.count());
    CHECK(effective["check_quorum"] == true);
    const ClusterConfig again = Parse(json::parse(effective.dump()), "n3");
    CHECK(again.nodes == c.nodes);
    CHECK(again.data_dir == c.data_dir);
    CHECK(again.tls == c.tls);
    CHECK(again.log == c.log);
    CHECK(again.metadata == c.metadata);
    CHECK(again.security == c.security);
    CHECK(again.elector.heartbeat_period == c.elector.heartbeat_period);
    CHECK(again.elector.heartbeat_check_period == c.elector.heartbeat_check_period);
    CHECK(again.elector.initial_wait == c.elector.initial_wait);
    CHECK(effective_config_json(again) == effective);
}

TEST_CASE("relative paths in a config file name files next to it", "[config]") {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("conclave-config-paths-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir / "etc");
    json doc = GoodConfig();
    doc["data_dir"] = "data/{id}";
    doc["tls"] = {{"ca", "pki/ca.pem"}, {"cert", "/abs/n1.pem"}, {"key", "pki/../pki/n1.key"}};
    doc["secret_file"] = "secret";
    doc["admin"] = {{"token_file", "admin-token"},
                    {"tls", {{"cert", "https/cert.pem"}, {"key", "https/key.pem"}}}};
    {
        std::ofstream out(dir / "etc" / "cluster.json");
        out << doc.dump(2);
    }
    // Loaded through a path relative to the working directory, from another directory.
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir);
    auto loaded = load_cluster_config("etc/cluster.json", "n2");
    std::filesystem::current_path(cwd);
    REQUIRE(std::holds_alternative<ClusterConfig>(loaded));
    const ClusterConfig& c = std::get<ClusterConfig>(loaded);
    const std::string etc = (dir / "etc").string();
    CHECK(c.data_dir == etc + "/data/n2");
    CHECK(c.data_dir_template == etc + "/data/{id}");
    CHECK(c.tls->ca_path == etc + "/pki/ca.pem");
    CHECK(c.tls->cert_path == "/abs/n1.pem");
    CHECK(c.tls->key_path == etc + "/pki/n1.key");
    CHECK(c.security.secret_file == etc + "/secret");
    CHECK(c.security.admin_token_file == etc + "/admin-token");
    CHECK(c.security.admin_tls_cert == etc + "/https/cert.pem");
    CHECK(c.security.admin_tls_key == etc + "/https/key.pem");
    std::filesystem::remove_all(dir);
}

TEST_CASE("loading from a file", "[config]") {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("conclave-config-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = dir / "cluster.json";
    {
        std::ofstream out(path);
        out << GoodConfig().dump(2);
    }
    auto good = load_cluster_config(path, "n1");
    CHECK(std::holds_alternative<ClusterConfig>(good));

    auto missing = load_cluster_config(dir / "nope.json", "n1");
    REQUIRE(std::holds_alternative<ConfigError>(missing));
    CHECK(std::get<ConfigError>(missing).message ==
          (dir / "nope.json").string() + ": cannot read config file: No such file or directory");

    auto directory = load_cluster_config(dir, "n1");
    REQUIRE(std::holds_alternative<ConfigError>(directory));
    CHECK(std::get<ConfigError>(directory).message.find("it is a directory") != std::string::npos);

    {
        std::ofstream out(path);
        out << "{\"cluster\": \"demo\", \"nodes\": 1}";
    }
    auto bad = load_cluster_config(path, "n1");
    REQUIRE(std::holds_alternative<ConfigError>(bad));
    CHECK(std::get<ConfigError>(bad).message ==
          path.string() + ": nodes: expected an array of {id, peer, http}, got number 1");
    std::filesystem::remove_all(dir);
}

// Every option of the timing table (node/src/cluster_config.cpp, kTimingOptions) is parsed, round-
// trips through the effective-config dump, is refused out of range under its own name, and is
// documented in node/README.md: adding an option is one line in the table plus its README row.
TEST_CASE("every timing option is parsed, dumped, range-checked and documented", "[config]") {
    std::ifstream readme(std::string(CONCLAVE_SOURCE_ROOT) + "/node/README.md");
    REQUIRE(readme.good());
    const std::string docs((std::istreambuf_iterator<char>(readme)), {});
    const std::vector<std::string_view> names = timing_option_names();
    REQUIRE(names.size() >= 12);
    const nlohmann::ordered_json dumped = effective_config_json(Parse(GoodConfig()));
    REQUIRE(dumped.at("timing").size() == names.size());
    for (const std::string_view name : names) {
        const std::string key(name);
        INFO("timing." << key);
        CHECK(docs.find("| `" + key + "`") != std::string::npos);
        json doc = GoodConfig();
        doc["timing"] = {{key, dumped["timing"][key]}};
        const nlohmann::ordered_json again = effective_config_json(Parse(doc));
        CHECK(again["timing"][key] == dumped["timing"][key]);
        doc["timing"] = {{key, -1}};
        CHECK(ErrorOf(doc).find("timing." + key + ": must be an integer between 0 and") !=
              std::string::npos);
    }
    json doc = GoodConfig();
    doc["timing"] = {{"heartbeat_msec", 100}};
    CHECK(ErrorOf(doc).find("did you mean \"heartbeat_ms\"") != std::string::npos);
}

// The same for every described field (node/src/cluster_config.cpp: the top-level table
// TopLevelFields, the sections LogOptions, MetadataOptions, AdminOptions, BackendOptions, and the
// timing table): each field is in the effective config of a config that sets it, a dumped config
// parses back to the same dump, a value of the wrong type is refused under the field's own name,
// and node/README.md documents it (a top-level field as a row of its "Config file" table). A field
// added to a table without its documentation fails here; the parser, the unknown-field check and
// the dump need no other edit.
TEST_CASE("every described option is dumped, round-trips, is refused by name and documented",
          "[config]") {
    std::ifstream readme(std::string(CONCLAVE_SOURCE_ROOT) + "/node/README.md");
    REQUIRE(readme.good());
    const std::string docs((std::istreambuf_iterator<char>(readme)), {});
    const std::vector<std::string> names = described_option_names();
    REQUIRE(names.size() >= 45);
    // Both kinds of store, so that every backend field is written.
    json etcd = GoodConfig();
    etcd["metadata"] = {{"enabled", false}};
    etcd["backend"] = {{"kind", "etcd"}, {"endpoints", {"127.0.0.1:2379"}}};
    json zookeeper = etcd;
    zookeeper["backend"] = {{"kind", "zookeeper"}, {"hosts", "127.0.0.1:2181"}};
    for (const json& doc : {etcd, zookeeper}) {
        const nlohmann::ordered_json dumped = effective_config_json(Parse(doc));
        CHECK(effective_config_json(Parse(json::parse(dumped.dump()))) == dumped);
    }
    const nlohmann::ordered_json with_etcd = effective_config_json(Parse(etcd));
    const nlohmann::ordered_json with_zookeeper = effective_config_json(Parse(zookeeper));
    std::size_t top_level = 0;
    for (const std::string& name : names) {
        INFO(name);
        const std::size_t dot = name.find('.');
        if (dot == std::string::npos) {
            ++top_level;
            CHECK(docs.find("\n| `" + name + "` |") != std::string::npos);
            CHECK(with_etcd.contains(name));
            json doc = etcd;
            doc[name] = json::object({{"wrong", "type"}});
            const std::string error = ErrorOf(doc);  // "tls.wrong: unknown field" counts too
            CHECK((error.rfind(name + ":", 0) == 0 || error.rfind(name + ".", 0) == 0));
            // Left out, a field is either optional or refused as missing under its name.
            doc.erase(name);
            const auto result = parse_cluster_config(doc.dump(), "n1");
            if (const auto* missing = std::get_if<ConfigError>(&result)) {
                CHECK(missing->message == name + ": missing (required field)");
            }
            continue;
        }
        const std::string section = name.substr(0, dot);
        const std::string option = name.substr(dot + 1);
        CHECK((docs.find("`" + option + "`") != std::string::npos ||
               docs.find("\"" + option + "\"") != std::string::npos));
        CHECK((with_etcd.at(section).contains(option) ||
               with_zookeeper.at(section).contains(option)));
        json doc = with_etcd.at(section).contains(option) ? etcd : zookeeper;
        doc[section][option] = json::object({{"wrong", "type"}});
        const std::string error = ErrorOf(doc);  // "admin.tls.wrong: unknown field" counts too
        CHECK((error.rfind(name + ":", 0) == 0 || error.rfind(name + ".", 0) == 0));
    }
    // Every field of the effective config is described (nothing is dumped by hand beside them).
    CHECK(top_level == with_etcd.size());
    json doc = GoodConfig();
    doc["metadata"] = {{"propose_timeout_msec", 100}};
    CHECK(ErrorOf(doc).find("did you mean \"propose_timeout_ms\"") != std::string::npos);
    doc = GoodConfig();
    doc["data_dirs"] = "/tmp";
    CHECK(ErrorOf(doc) == "data_dirs: unknown field \"data_dirs\" (did you mean \"data_dir\"?)");
}

TEST_CASE("backend: the built-in elector by default, etcd and zookeeper stores",
          "[config][store]") {
    CHECK(Parse(GoodConfig()).backend.kind == BackendSettings::Kind::Raft);
    json doc = GoodConfig();
    doc["backend"] = {{"kind", "raft"}};
    CHECK(!Parse(doc).backend.is_store());
    CHECK(Parse(doc).metadata.enabled);

    doc["backend"] =
        json::parse(R"({"kind": "etcd", "endpoints": ["127.0.0.1:2379", "10.0.0.2:2379"],
                                     "ttl_ms": 3000})");
    const ClusterConfig etcd = Parse(doc);
    CHECK(etcd.backend.kind == BackendSettings::Kind::Etcd);
    REQUIRE(etcd.backend.endpoints.size() == 2);
    CHECK(etcd.backend.endpoints[1] == Endpoint{"10.0.0.2", 2379});
    CHECK(etcd.backend.ttl_ms == 3000);
    CHECK(etcd.backend.drift_permille == etcd.elector.lease_drift_permille);
    CHECK(etcd.backend.prefix == "/conclave");
    CHECK(!etcd.metadata.enabled);  // no metadata log beside a store
    // --print-config loads back to the same config.
    const auto again = parse_cluster_config(effective_config_json(etcd).dump(), "n1");
    REQUIRE(std::holds_alternative<ClusterConfig>(again));
    CHECK(std::get<ClusterConfig>(again).backend == etcd.backend);

    doc["backend"] = json::parse(
        R"({"kind": "zookeeper", "hosts": "127.0.0.1:2181,127.0.0.2:2181", "drift_permille": 20,
            "prefix": "/elections"})");
    const ClusterConfig zk = Parse(doc);
    CHECK(zk.backend.kind == BackendSettings::Kind::ZooKeeper);
    CHECK(zk.backend.hosts == "127.0.0.1:2181,127.0.0.2:2181");
    CHECK(zk.backend.ttl_ms == 2000);
    CHECK(zk.backend.drift_permille == 20);
    CHECK(zk.backend.prefix == "/elections");
}

TEST_CASE("backend: conflicting or malformed fields are refused by name", "[config][store]") {
    json doc = GoodConfig();
    doc["backend"] = {{"kind", "consul"}};
    CHECK(ErrorOf(doc).find("backend.kind: expected") != std::string::npos);
    doc["backend"] = {{"kind", "etcd"}, {"hosts", "127.0.0.1:2181"}};
    CHECK(ErrorOf(doc).find("backend.hosts: is for \"zookeeper\"") != std::string::npos);
    doc["backend"] = {{"kind", "zookeeper"}, {"endpoints", {"127.0.0.1:2379"}}};
    CHECK(ErrorOf(doc).find("backend.endpoints: is for \"etcd\"") != std::string::npos);
    doc["backend"] = {{"kind", "etcd"}, {"endpoints", json::array()}};
    CHECK(ErrorOf(doc).find("backend.endpoints: expected a non-empty array") != std::string::npos);
    doc["backend"] = {{"kind", "etcd"}, {"endpoints", {"nohost"}}};
    CHECK(ErrorOf(doc).find("backend.endpoints[0]: expected \"host:port\"") != std::string::npos);
    doc["backend"] = {{"kind", "zookeeper"}, {"hosts", "h:1"}, {"ttl_ms", 100}};
    CHECK(ErrorOf(doc).find("backend.ttl_ms") != std::string::npos);
    doc["backend"] = {{"kind", "zookeeper"}, {"hosts", "h:1"}, {"prefix", "/a/b"}};
    CHECK(ErrorOf(doc).find("backend.prefix") != std::string::npos);
    doc["backend"] = {{"kind", "zookeeper"}, {"hosts", "h:1"}, {"ttl_msec", 2000}};
    CHECK(ErrorOf(doc).find("did you mean \"ttl_ms\"") != std::string::npos);
    doc["backend"] = {{"kind", "raft"}, {"ttl_ms", 2000}};
    CHECK(ErrorOf(doc).find("takes no other field") != std::string::npos);
    // The metadata log needs the built-in elector's quorum.
    doc["backend"] = {{"kind", "etcd"}, {"endpoints", {"127.0.0.1:2379"}}};
    doc["metadata"] = {{"enabled", true}};
    CHECK(ErrorOf(doc).find("metadata: the metadata log needs the built-in") != std::string::npos);
    doc["metadata"] = {{"enabled", false}};
    CHECK(!Parse(doc).metadata.enabled);
}

TEST_CASE("store lease: counted from the renewal's send, shortened by the drift bound",
          "[store][lease]") {
    const auto sent = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
    // 2000 ms x 950 / 1050 = 1809.52 ms, rounded down to the microsecond.
    CHECK(store_lease_end(sent, std::chrono::milliseconds(2000), 50) - sent ==
          std::chrono::microseconds(1'809'523));
    CHECK(store_lease_end(sent, std::chrono::milliseconds(2000), 0) - sent ==
          std::chrono::milliseconds(2000));
    CHECK(store_lease_end(sent, std::chrono::milliseconds(2000), 500) - sent ==
          std::chrono::microseconds(666'666));
}
