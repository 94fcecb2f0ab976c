// `conclaved --repair` (issue 16), node/src/repair.cpp: the gates on the elector state.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "conclave/drivers/state_file.hpp"
#include "conclave/node/cli.hpp"
#include "conclave/node/repair.hpp"
#include "conclave/replication/storage.hpp"

using namespace conclave;
namespace fs = std::filesystem;

namespace {

struct RepairCommandDir {
    RepairCommandDir() {
        static int counter = 0;
        path = fs::temp_directory_path() /
               ("conclave-repair-command-test-" + std::to_string(::getpid()) + "-" +
                std::to_string(counter++));
        fs::remove_all(path);
    }
    ~RepairCommandDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
    fs::path path;
};

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
    RepairCommandDir dir;
    VotedAboveItsLog(dir.path);
    const fs::path state = dir.path / net::kStateFileName;
    std::string damaged = ReadBytes(state);
    damaged[damaged.size() / 2] = '\x01';
    std::ofstream(state, std::ios::binary | std::ios::trunc) << damaged;
    REQUIRE_THROWS_AS(net::load_durable_state(dir.path, 3), net::StateFileError);

    // Without --min-term, R would be log.meta's term 2 and the rewritten state {2, self}: the
    // node would then vote again in term 5, where it already voted for n3 (two leaders of 5).
    std::ostringstream out, err;
    CHECK(node::run_repair(ThreeNodes(dir.path), std::nullopt, out, err) == node::kExitUsage);
    CHECK(err.str().find("--min-term") != std::string::npos);
    CHECK(ReadBytes(state) == damaged);  // nothing changed
    CHECK_FALSE(fs::exists(dir.path / "log" / "log.repaired"));

    // With the cluster's current term: R = 5, the state is {5, self}, the damaged file kept.
    // (R once came out as garbage here: see read_elector_state in node/src/repair.cpp.)
    CHECK(node::run_repair(ThreeNodes(dir.path), 5, out, err) == node::kExitOk);
    CHECK(out.str().find("repaired marker R = term 5\n") != std::string::npos);
    CHECK(net::load_durable_state(dir.path, 3) == DurableState{Term{5}, NodeId{1}});
    CHECK(ReadBytes(fs::path(state.string() + ".corrupt")) == damaged);
    CHECK(replication::FileStorage::read_repaired_marker(dir.path / "log") == Term{5});
}

TEST_CASE("--repair: a readable elector state bounds R and is raised to it", "[node][repair]") {
    RepairCommandDir dir;
    VotedAboveItsLog(dir.path);
    std::ostringstream out, err;
    REQUIRE(node::run_repair(ThreeNodes(dir.path), std::nullopt, out, err) == node::kExitOk);
    // R takes the elector's term 5 (its vote there stays recorded: the term is not raised).
    CHECK(replication::FileStorage::read_repaired_marker(dir.path / "log") == Term{5});
    CHECK(net::load_durable_state(dir.path, 3) == DurableState{Term{5}, NodeId{2}});
    REQUIRE(node::run_repair(ThreeNodes(dir.path), 7, out, err) == node::kExitOk);
    CHECK(replication::FileStorage::read_repaired_marker(dir.path / "log") == Term{7});
    CHECK(net::load_durable_state(dir.path, 3) == DurableState{Term{7}, std::nullopt});
}
