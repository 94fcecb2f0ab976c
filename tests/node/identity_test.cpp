// SPDX-License-Identifier: Apache-2.0
// The node's identity (node/identity.hpp, drivers/state_file.hpp): the vote record's checksum and
// owner, the cross-check of the data directory at start, and the peers' incarnations.
#include <boost/crc.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "conclave/drivers/state_file.hpp"
#include "conclave/net/handshake.hpp"
#include "conclave/node/identity.hpp"
#include "conclave/node/node_table.hpp"
#include "conclave/replication/storage.hpp"
#include "support/loopback.hpp"

using namespace conclave;
namespace fs = std::filesystem;

namespace {

std::string IdRead(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void IdWrite(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

node::ClusterConfig IdConfig(const fs::path& data_dir, std::uint16_t self = 1) {
    node::ClusterConfig c;
    c.cluster = "demo";
    c.nodes = {node::NodeEntry{"n1", {}, {}}, node::NodeEntry{"n2", {}, {}},
               node::NodeEntry{"n3", {}, {}}};
    c.self = NodeId{self};
    c.data_dir = data_dir;
    return c;
}

std::string Thrown(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("the vote record: a checksum catches a flipped digit that keeps the JSON valid",
          "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-crc");
    const drivers::NodeIdentity id{"demo", "n2", "0123456789abcdef0123456789abcdef"};
    drivers::store_durable_state(dir, elector::DurableState{Term{31}, NodeId{2}}, id);
    const auto back = drivers::load_state_file(dir, 3);
    REQUIRE(back);
    CHECK(back->state == elector::DurableState{Term{31}, NodeId{2}});
    CHECK(back->identity == id);
    std::string text = IdRead(dir / drivers::kStateFileName);
    const auto at = text.find("\"term\":31");
    REQUIRE(at != std::string::npos);
    text[at + 7] = '1';  // 31 -> 11: still valid JSON, a believable term
    IdWrite(dir / drivers::kStateFileName, text);
    const std::string why = Thrown([&] { drivers::load_state_file(dir, 3); });
    CHECK_THAT(why, Catch::Contains("crc32"));
    CHECK_THAT(why, Catch::Contains("--repair --min-term"));
    CHECK_THAT(why, !Catch::Contains("remove it"));
}

TEST_CASE("the vote record: an earlier format is read and given an identity at start",
          "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-v1");
    IdWrite(dir / drivers::kStateFileName, "{\"format\": 1, \"term\": 4, \"voted_for\": 0}\n");
    const auto check = node::check_identity(IdConfig(dir));
    CHECK(check.upgraded);
    CHECK_FALSE(check.created);
    CHECK(check.identity.incarnation.size() == 32);
    const auto back = drivers::load_state_file(dir, 3);
    REQUIRE(back);
    CHECK(back->state == elector::DurableState{Term{4}, NodeId{0}});
    CHECK(back->identity == check.identity);
    // The next start reads the same identity.
    CHECK(node::check_identity(IdConfig(dir)).identity == check.identity);
}

TEST_CASE("identity: an empty data directory is a new node; its identity is written first",
          "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-new");
    const auto first = node::check_identity(IdConfig(dir));
    CHECK(first.created);
    CHECK(first.identity.cluster == "demo");
    CHECK(first.identity.node == "n2");
    CHECK(fs::exists(dir / drivers::kStateFileName));
    const auto again = node::check_identity(IdConfig(dir));
    CHECK_FALSE(again.created);
    CHECK(again.identity == first.identity);
    // Two new nodes never share an incarnation.
    const fs::path other = test::fresh_temp_dir("conclave-identity-new-2");
    CHECK(node::check_identity(IdConfig(other)).identity.incarnation != first.identity.incarnation);
}

TEST_CASE("identity: a log or node table without the vote record is refused", "[node][identity]") {
    for (const char* file : {"members.json", "log/log.meta", "log/log.dat"}) {
        CAPTURE(file);
        const fs::path dir = test::fresh_temp_dir("conclave-identity-lost");
        fs::create_directories(dir / "log");
        IdWrite(dir / file, "x");
        const std::string why = Thrown([&] { node::check_identity(IdConfig(dir)); });
        CHECK_THAT(why, Catch::Contains("elector-state.json' is missing"));
        CHECK_THAT(why, Catch::Contains((dir / file).string()));
        CHECK_THAT(why, Catch::Contains("--repair --min-term T"));
        CHECK_THAT(why, Catch::Contains("--join"));
        CHECK_FALSE(fs::exists(dir / drivers::kStateFileName));  // nothing was written
    }
}

TEST_CASE("identity: a metadata log lost beside a kept vote record is refused",
          "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-log-lost");
    const auto config = IdConfig(dir);
    drivers::NodeIdentity id = node::check_identity(config).identity;
    // Before the log was created nothing is expected of it.
    CHECK_NOTHROW(node::check_identity(config));
    id.log = true;  // what Node records once log/log.dat exists
    drivers::store_durable_state(dir, elector::DurableState{Term{7}, NodeId{1}}, id);
    CHECK(drivers::load_state_file(dir, 3)->identity->log);
    IdWrite(dir / "log" / "log.dat", "CNCLVLOG");
    CHECK_NOTHROW(node::check_identity(config));
    for (const bool whole_directory : {false, true}) {
        CAPTURE(whole_directory);
        if (whole_directory) {
            fs::remove_all(dir / "log");
        } else {
            fs::remove(dir / "log" / "log.dat");
        }
        const std::string why = Thrown([&] { node::check_identity(config); });
        CHECK_THAT(why, Catch::Contains("log.dat' is missing, but"));
        CHECK_THAT(why, Catch::Contains("--repair --min-term T"));
        CHECK_THAT(why, Catch::Contains("--join"));
    }
    auto no_log = config;
    no_log.metadata.enabled = false;  // a node that runs no metadata log expects none
    CHECK_NOTHROW(node::check_identity(no_log));
}

TEST_CASE("identity: another node's or cluster's vote record is refused", "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-owner");
    node::check_identity(IdConfig(dir, 1));  // n2's
    CHECK_THAT(Thrown([&] { node::check_identity(IdConfig(dir, 2)); }),
               Catch::Contains("belongs to node 'n2' of cluster 'demo', not to node 'n3'"));
    auto other_cluster = IdConfig(dir, 1);
    other_cluster.cluster = "prod";
    CHECK_THAT(Thrown([&] { node::check_identity(other_cluster); }),
               Catch::Contains("of cluster 'demo', not to node 'n2' of cluster 'prod'"));
}

TEST_CASE("peer incarnations: remembered durably, another one refused unless repaired",
          "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-peers");
    {
        node::PeerIncarnations peers(dir);
        CHECK_FALSE(peers.admit("n1", "aaaa", false));
        CHECK_FALSE(peers.admit("n1", "aaaa", false));
        CHECK_FALSE(peers.admit("n3", "", false));  // announces none (an earlier version)
        CHECK(peers.known().size() == 1);
    }
    node::PeerIncarnations peers(dir);  // from the file
    CHECK(peers.known().at("n1") == "aaaa");
    const auto why = peers.admit("n1", "bbbb", false);
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Contains("known by incarnation aaaa..., not bbbb..."));
    CHECK(why->size() <= net::kMaxRefusalDetailBytes);
    CHECK(peers.known().at("n1") == "aaaa");  // a refusal changes nothing
    // Repaired (--repair --min-term): the new incarnation replaces the old one.
    CHECK_FALSE(peers.admit("n1", "bbbb", true));
    CHECK(node::PeerIncarnations(dir).known().at("n1") == "bbbb");
    // Removed: forgotten, so a later join with an empty data directory is taken.
    peers.forget("n1");
    CHECK(node::PeerIncarnations(dir).known().empty());
    CHECK_FALSE(peers.admit("n1", "cccc", false));
}

TEST_CASE("peer incarnations: the highest term each one announced outlives a restart",
          "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-peer-terms");
    {
        node::PeerIncarnations peers(dir);
        CHECK_FALSE(peers.admit("n1", "aaaa", false));
        CHECK_FALSE(peers.announced_term("n1", "aaaa"));
        peers.remember_term("n1", "aaaa", 5);
        peers.remember_term("n1", "aaaa", 3);  // lower: kept at 5
        peers.remember_term("n1", "zzzz", 9);  // not the admitted incarnation: not recorded
        peers.remember_term("n2", "bbbb", 9);  // not admitted at all
    }
    node::PeerIncarnations peers(dir);  // from the file, as after a restart
    CHECK(peers.announced_term("n1", "aaaa") == std::optional<std::uint64_t>{5});
    CHECK_FALSE(peers.announced_term("n1", "zzzz"));
    CHECK_FALSE(peers.announced_term("n2", "bbbb"));
    // A repaired peer's new incarnation starts without a term; a removed peer is forgotten.
    CHECK_FALSE(peers.admit("n1", "cccc", true));
    CHECK_FALSE(node::PeerIncarnations(dir).announced_term("n1", "cccc"));
    peers.remember_term("n1", "cccc", 7);
    CHECK(node::PeerIncarnations(dir).announced_term("n1", "cccc") ==
          std::optional<std::uint64_t>{7});
    peers.forget("n1");
    CHECK_FALSE(node::PeerIncarnations(dir).announced_term("n1", "cccc"));
    // A file of the earlier format (incarnations only, no terms) is read as it is.
    IdWrite(dir / node::PeerIncarnations::kFileName,
            R"({"format":1,"peers":{"n1":"aaaa"},"crc32":)" + std::to_string([] {
                boost::crc_32_type crc;
                const std::string listed = R"({"n1":"aaaa"})";
                crc.process_bytes(listed.data(), listed.size());
                return crc.checksum();
            }()) +
                "}\n");
    CHECK(node::PeerIncarnations(dir).known().at("n1") == "aaaa");
    // A term changed on disk is caught by the checksum.
    node::PeerIncarnations(dir).remember_term("n1", "aaaa", 12);
    std::string text = IdRead(dir / node::PeerIncarnations::kFileName);
    const auto at = text.find(R"("terms":{"n1":12})");
    REQUIRE(at != std::string::npos);
    text.replace(at, 17, R"("terms":{"n1":10})");
    IdWrite(dir / node::PeerIncarnations::kFileName, text);
    CHECK_THAT(Thrown([&] { node::PeerIncarnations damaged(dir); }),
               Catch::Contains("checksum mismatch"));
}

TEST_CASE("peer incarnations: a damaged file is refused, not forgotten", "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-peers-bad");
    node::PeerIncarnations(dir).admit("n1", "aaaa", false);
    std::string text = IdRead(dir / node::PeerIncarnations::kFileName);
    text[text.find("aaaa")] = 'b';
    IdWrite(dir / node::PeerIncarnations::kFileName, text);
    CHECK_THAT(Thrown([&] { node::PeerIncarnations peers(dir); }),
               Catch::Contains("checksum mismatch"));
}

TEST_CASE("a joined node's vote record is checked against the node table it joined",
          "[node][identity]") {
    // Its config file names only itself; members.json (written by the join) holds four nodes,
    // and it voted for the fourth (itself, index 3).
    const fs::path dir = test::fresh_temp_dir("conclave-identity-joined");
    node::ClusterConfig config = IdConfig(dir, 0);
    config.nodes = {node::NodeEntry{"n4", {}, {}}};
    const drivers::NodeIdentity id{"demo", "n4", "0123456789abcdef0123456789abcdef"};
    drivers::store_durable_state(dir, elector::DurableState{Term{4}, NodeId{3}}, id);
    CHECK(Thrown([&] { node::check_identity(config); }).find("not below the cluster size 1") !=
          std::string::npos);
    node::StoredTable table;
    table.cluster = "demo";
    table.version = 3;
    table.voters = {"n1", "n2", "n3", "n4"};
    for (std::uint16_t i = 0; i < 4; ++i) {
        const node::Endpoint peer{"127.0.0.1", static_cast<std::uint16_t>(7001 + i)};
        const node::Endpoint http{"127.0.0.1", static_cast<std::uint16_t>(8001 + i)};
        table.nodes.push_back(node::NodeEntry{"n" + std::to_string(i + 1), peer, http});
        table.removed.push_back(false);
    }
    node::store_node_table(dir, table);
    CHECK(node::vote_record_cluster_size(config) == 4);
    CHECK(node::check_identity(config).identity == id);
}

TEST_CASE("a vote record below the terms its own log holds is refused", "[node][identity]") {
    const fs::path dir = test::fresh_temp_dir("conclave-identity-vote-below-log");
    const node::ClusterConfig config = IdConfig(dir);
    CHECK_NOTHROW(node::check_vote_record_covers_log(config, Term{5}, Term{5}));
    const std::string why =
        Thrown([&] { node::check_vote_record_covers_log(config, Term{4}, Term{5}); });
    CHECK(why.find("is of term 4") != std::string::npos);
    CHECK(why.find("holds entries of term 5") != std::string::npos);
    CHECK(why.find("--repair --min-term") != std::string::npos);
}
