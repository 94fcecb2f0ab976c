// SPDX-License-Identifier: Apache-2.0
// `conclaved --repair`, node/src/repair.cpp: the gates on the elector state.
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
    drivers::store_durable_state(data_dir, elector::DurableState{Term{5}, NodeId{2}});
}

}  // namespace

TEST_CASE("--repair: an unreadable elector state needs --min-term; it is replaced atomically",
          "[node][repair]") {
    const fs::path dir = test::fresh_temp_dir("conclave-repair-command-unreadable");
    VotedAboveItsLog(dir);
    const fs::path state = dir / drivers::kStateFileName;
    std::string damaged = ReadBytes(state);
    damaged[damaged.size() / 2] = '\x01';
    std::ofstream(state, std::ios::binary | std::ios::trunc) << damaged;
    REQUIRE_THROWS_AS(drivers::load_durable_state(dir, 3), drivers::StateFileError);

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
    CHECK(drivers::load_durable_state(dir, 3) == elector::DurableState{Term{5}, NodeId{1}});
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
    CHECK(drivers::load_durable_state(dir, 3) == elector::DurableState{Term{5}, NodeId{2}});
    REQUIRE(node::run_repair(ThreeNodes(dir), 7, out, err) == node::kExitOk);
    CHECK(replication::FileStorage::read_repaired_marker(dir / "log") == Term{7});
    CHECK(drivers::load_durable_state(dir, 3) == elector::DurableState{Term{7}, std::nullopt});
    fs::remove_all(dir);
}

namespace {

struct CrashInRepair {};  // not a std::exception: run_repair does not catch it

// What starting the node on `dir` finds (the two files its drivers read first): nullopt when it
// refuses to start (the log's recover() or the elector state's load throws), else both.
struct Started {
    replication::RecoveredLog log;
    std::optional<elector::DurableState> elector;
};
std::optional<Started> StartNodeOn(const fs::path& dir) {
    try {
        replication::FileStorage s(dir / "log", replication::FsyncPolicy::Batched);
        Started st{s.recover().log, drivers::load_durable_state(dir, 3)};
        return st;
    } catch (const replication::CorruptLogError&) {
        return std::nullopt;
    } catch (const drivers::StateFileError&) {
        return std::nullopt;
    }
}

// n1's log with a flipped bit in its first record, followed by an intact one (so recovery
// refuses it and the repair cuts both), its elector state as VotedAboveItsLog left it ({5,
// voted n3}), or damaged.
void FlippedFirstRecord(const fs::path& dir, bool damage_elector) {
    VotedAboveItsLog(dir);
    const fs::path dat = dir / "log" / replication::FileStorage::kLogFileName;
    std::string bytes = ReadBytes(dat);
    const std::size_t at = 8 + 12;  // after the magic: inside (2, 0)'s payload
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    std::ofstream(dat, std::ios::binary | std::ios::trunc) << bytes;
    if (damage_elector) {
        const fs::path state = dir / drivers::kStateFileName;
        std::string s = ReadBytes(state);
        s[s.size() / 2] = '\x01';
        std::ofstream(state, std::ios::binary | std::ios::trunc) << s;
    }
}

}  // namespace

// G7 (replication/README.md, "Repair gates"): a crash between the log's repair (marker, cut,
// meta) and the raise of the elector's term. Crashed after each durable step of the whole
// command: the node either refuses to start or starts with its log marked R (non-voting: no sync
// promise, log term R) and an elector state that is intact (its vote history: one vote per term,
// so voting in (E, R] repeats nothing) or already raised to R; a rerun of --repair completes.
TEST_CASE("--repair: a crash between the log's repair and the elector's raise", "[node][repair]") {
    for (const bool damaged_elector : {false, true}) {
        CAPTURE(damaged_elector);
        // The steps of an uninterrupted run.
        std::vector<std::string> steps;
        {
            const fs::path dir = test::fresh_temp_dir("conclave-repair-command-steps");
            FlippedFirstRecord(dir, damaged_elector);
            std::ostringstream out, err;
            REQUIRE(node::run_repair(ThreeNodes(dir), 7, out, err, [&](std::string_view s) {
                        steps.emplace_back(s);
                    }) == node::kExitOk);
            fs::remove_all(dir);
        }
        REQUIRE(steps.size() >= 3);
        REQUIRE(steps.front() == "marker");
        REQUIRE(steps[steps.size() - 2] == "meta");  // the log's last step ...
        REQUIRE(steps.back() == "elector");          // ... then the elector's raise
        std::size_t refused = 0, started_below_r = 0;
        for (std::size_t crash_after = 0; crash_after < steps.size(); ++crash_after) {
            CAPTURE(steps[crash_after]);
            const fs::path dir = test::fresh_temp_dir("conclave-repair-command-crash");
            FlippedFirstRecord(dir, damaged_elector);
            std::size_t seen = 0;
            std::ostringstream out, err;
            REQUIRE_THROWS_AS(node::run_repair(ThreeNodes(dir), 7, out, err,
                                               [&](std::string_view) {
                                                   if (seen++ == crash_after) {
                                                       throw CrashInRepair{};
                                                   }
                                               }),
                              CrashInRepair);
            const std::optional<Started> st = StartNodeOn(dir);
            if (!st) {
                ++refused;
            } else {
                // Started: the log is marked R = 7 and non-voting (no sync promise).
                REQUIRE(st->log.meta.repaired == Term{7});
                replication::LogConfig lc;
                lc.cluster_size = 3;
                lc.self = NodeId{1};
                replication::ReplicatedLog log(lc, st->log);
                (void)log.start(Millis{0});
                CHECK(log.repaired() == Term{7});
                const replication::LogActions a = log.receive(
                    Millis{0},
                    replication::LogMessage{NodeId{0}, Term{8}, replication::SyncRequest{}});
                for (const auto& action : a) {
                    const auto* send = std::get_if<replication::SendLog>(&action);
                    CHECK_FALSE((send && std::holds_alternative<replication::SyncResponse>(
                                             send->message.body)));
                }
                CHECK(log.counters().sync_requests_unanswered == 1);
                // The elector: raised to R, or (crash before the raise) exactly as it was, its
                // vote for n3 in term 5 kept.
                REQUIRE(st->elector);
                if (st->elector->term < Term{7}) {
                    ++started_below_r;
                    CHECK(*st->elector == elector::DurableState{Term{5}, NodeId{2}});
                    CHECK(steps[crash_after] != "elector");
                }
            }
            // The operator runs --repair again: it completes, with the same R.
            std::ostringstream out2, err2;
            REQUIRE(node::run_repair(ThreeNodes(dir), 7, out2, err2) == node::kExitOk);
            const std::optional<Started> after = StartNodeOn(dir);
            REQUIRE(after);
            CHECK(after->log.meta.repaired == Term{7});
            CHECK(after->log.meta.term == Term{7});
            CHECK(after->log.entries.empty());  // both records cut: the first was bad
            CHECK(after->elector->term == Term{7});
            fs::remove_all(dir);
        }
        // Not vacuous: the corrupt log refuses to start before the cut; with an intact elector
        // state the crash between the two starts a marked node whose elector is still at 5; a
        // damaged elector state refuses to start until it is rewritten.
        CHECK(refused > 0);
        if (damaged_elector) {
            CHECK(started_below_r == 0);
        } else {
            CHECK(started_below_r > 0);
        }
    }
}
