// `conclaved --repair` (issue 16), node/src/repair.cpp: the gates on the elector state.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "conclave/drivers/state_file.hpp"
#include "conclave/node/cli.hpp"
#include "conclave/node/repair.hpp"
#include "conclave/replication/storage.hpp"
#include "support/loopback.hpp"

using namespace conclave;
namespace fs = std::filesystem;

namespace {

std::string ReadBytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

node::ClusterConfig ThreeNodes(const fs::path& data_dir) {
    node::ClusterConfig c;
    c.nodes = {node::NodeEntry{"n1", {}, {}}, node::NodeEntry{"n2", {}, {}},
               node::NodeEntry{"n3", {}, {}}};
    c.self = NodeId{1};
    c.data_dir = data_dir;
    return c;
}

// A follower that voted for n3 in term 5 (elector state) while its log had only heard of term 2.
void VotedAboveItsLog(const fs::path& data_dir) {
    using replication::Entry;
    replication::FileStorage s(data_dir / "log", replication::FsyncPolicy::Batched);
    (void)s.recover();
    s.append({Entry{Lsn{Term{2}, 0}, {}, {}}, Entry{Lsn{Term{2}, 1}, "k", "v"}});
    s.flush();
    s.write_meta(replication::LogMeta{Term{2}, Lsn{Term{2}, 1}});
    net::store_durable_state(data_dir, DurableState{Term{5}, NodeId{2}});
}

}  // namespace

TEST_CASE("--repair: an unreadable elector state needs --min-term; it is replaced atomically",
          "[node][repair]") {
    const fs::path dir = test::fresh_temp_dir("conclave-repair-command-unreadable");
    VotedAboveItsLog(dir);
    const fs::path state = dir / net::kStateFileName;
    std::string damaged = ReadBytes(state);
    damaged[damaged.size() / 2] = '\x01';
    std::ofstream(state, std::ios::binary | std::ios::trunc) << damaged;
    REQUIRE_THROWS_AS(net::load_durable_state(dir, 3), net::StateFileError);

    // Without --min-term, R would be log.meta's term 2 and the rewritten state {2, self}: the
    // node would then vote again in term 5, where it already voted for n3 (two leaders of 5).
    std::ostringstream out, err;
    CHECK(node::run_repair(ThreeNodes(dir), std::nullopt, out, err) == node::kExitUsage);
    CHECK(err.str().find("--min-term") != std::string::npos);
    CHECK(ReadBytes(state) == damaged);  // nothing changed
    CHECK_FALSE(fs::exists(dir / "log" / "log.repaired"));

    // With the cluster's current term: R = 5, the state is {5, self}, the damaged file kept.
    // (R once came out as garbage here: see read_elector_state in node/src/repair.cpp.)
    CHECK(node::run_repair(ThreeNodes(dir), 5, out, err) == node::kExitOk);
    CHECK(out.str().find("repaired marker R = term 5\n") != std::string::npos);
    CHECK(net::load_durable_state(dir, 3) == DurableState{Term{5}, NodeId{1}});
    CHECK(ReadBytes(fs::path(state.string() + ".corrupt")) == damaged);
    CHECK(replication::FileStorage::read_repaired_marker(dir / "log") == Term{5});
    fs::remove_all(dir);
}

TEST_CASE("--repair: a readable elector state bounds R and is raised to it", "[node][repair]") {
    const fs::path dir = test::fresh_temp_dir("conclave-repair-command-readable");
    VotedAboveItsLog(dir);
    std::ostringstream out, err;
    REQUIRE(node::run_repair(ThreeNodes(dir), std::nullopt, out, err) == node::kExitOk);
    // R takes the elector's term 5 (its vote there stays recorded: the term is not raised).
    CHECK(replication::FileStorage::read_repaired_marker(dir / "log") == Term{5});
    CHECK(net::load_durable_state(dir, 3) == DurableState{Term{5}, NodeId{2}});
    REQUIRE(node::run_repair(ThreeNodes(dir), 7, out, err) == node::kExitOk);
    CHECK(replication::FileStorage::read_repaired_marker(dir / "log") == Term{7});
    CHECK(net::load_durable_state(dir, 3) == DurableState{Term{7}, std::nullopt});
    fs::remove_all(dir);
}
