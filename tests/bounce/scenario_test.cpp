// SPDX-License-Identifier: Apache-2.0
// leader-bounce end to end: real processes, the expectations for each scenario.
// BOUNCE_TOOL and BOUNCE_DAEMON are set by CMake (the daemon is conclaved, or the test-only
// fake_conclaved until conclaved exists).
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Outcome {
    int exit_status = -1;
    nlohmann::json runs;
};

/// Runs leader-bounce with `args` and returns its exit status and JSON summary.
Outcome run_tool(const std::string& args, const std::string& daemon = BOUNCE_DAEMON) {
    const std::string json_path = (std::filesystem::temp_directory_path() /
                                   ("bounce-test-" + std::to_string(::getpid()) + ".json"))
                                      .string();
    std::filesystem::remove(json_path);
    const std::string command = std::string(BOUNCE_TOOL) + " " + args + " --quiet --conclaved " +
                                daemon + " --json " + json_path + " > /dev/null";
    const int raw = std::system(command.c_str());
    Outcome o;
    o.exit_status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    std::ifstream in(json_path);
    if (in) {
        o.runs = nlohmann::json::parse(in);
    }
    std::filesystem::remove(json_path);
    return o;
}

const nlohmann::json& with_scouting(const Outcome& o, bool on) {
    for (const auto& r : o.runs) {
        if (r.at("scouting").get<bool>() == on) {
            return r;
        }
    }
    FAIL("no run with scouting " << on);
    static const nlohmann::json none;
    return none;
}

/// With a daemon that serves the metadata log, the tool proposes entries throughout the run:
/// none acknowledged may be lost, and some must be acknowledged before the first fault and after
/// the last one (the cluster kept or resumed serving writes). `args` gets the metadata switch.
std::string metadata_args() {
    return BOUNCE_METADATA ? " --metadata on" : " --metadata off";
}
void check_metadata(const nlohmann::json& run) {
    const nlohmann::json& m = run.at("metadata");
    if (!BOUNCE_METADATA) {
        CHECK(m.at("enabled") == false);
        return;
    }
    INFO(m.dump());
    REQUIRE(m.at("enabled") == true);
    CHECK(m.at("no_acknowledged_entry_lost") == true);
    CHECK(m.at("acknowledged_before_faults").get<int>() > 0);
    CHECK(m.at("acknowledged_after_faults").get<int>() > 0);
    CHECK(m.at("nodes_read") == run.at("nodes"));
}

}  // namespace

TEST_CASE("ping-pong: scouting keeps the leader, no scouting bounces it", "[ping-pong]") {
    const Outcome o = run_tool("ping-pong --compare --duration 3");
    REQUIRE(o.exit_status == 0);
    REQUIRE(o.runs.size() == 2);
    CHECK(with_scouting(o, true).at("needless_leader_changes") == 0);
    CHECK(with_scouting(o, false).at("needless_leader_changes").get<int>() >= 1);
    CHECK(with_scouting(o, true).at("safe") == true);
    CHECK(with_scouting(o, false).at("safe") == true);
}

TEST_CASE("non-sticky: scouting keeps the leader, no scouting lets the returning node depose it",
          "[non-sticky]") {
    const Outcome o = run_tool("non-sticky --compare --duration 3");
    REQUIRE(o.exit_status == 0);
    REQUIRE(o.runs.size() == 2);
    CHECK(with_scouting(o, true).at("needless_leader_changes") == 0);
    CHECK(with_scouting(o, false).at("needless_leader_changes").get<int>() >= 1);
}

TEST_CASE("leader-crash elects a new leader and loses no acknowledged entry", "[leader-crash]") {
    const Outcome o = run_tool("leader-crash --duration 1" + metadata_args());
    REQUIRE(o.exit_status == 0);
    REQUIRE(o.runs.size() == 1);
    CHECK(o.runs[0].at("new_leader_after_crash") == true);
    CHECK(o.runs[0].at("leader_changes").get<int>() >= 1);
    CHECK(o.runs[0].at("safe") == true);
    check_metadata(o.runs[0]);
}

TEST_CASE("leader-pause elects a new leader and stays safe", "[leader-pause]") {
    const Outcome o = run_tool("leader-pause --duration 2" + metadata_args());
    REQUIRE(o.exit_status == 0);
    CHECK(o.runs[0].at("leader_changes").get<int>() >= 1);
    CHECK(o.runs[0].at("needless_leader_changes") == 0);
    check_metadata(o.runs[0]);
}

TEST_CASE("chaos with a fixed seed reports no safety violation and loses no acknowledged entry",
          "[chaos]") {
    const Outcome o = run_tool("chaos --duration 6 --seed 7 --nodes 5" + metadata_args());
    REQUIRE(o.exit_status == 0);
    CHECK(o.runs[0].at("safe") == true);
    check_metadata(o.runs[0]);
}

TEST_CASE("crash-chaos kills random nodes, reports its seed and kills, and loses nothing",
          "[crash-chaos]") {
    const Outcome o = run_tool("crash-chaos --duration 8 --seed 3" + metadata_args());
    REQUIRE(o.exit_status == 0);
    REQUIRE(o.runs.size() == 1);
    const nlohmann::json& r = o.runs[0];
    INFO(r.at("warnings").dump());
    CHECK(r.at("scenario") == "crash-chaos");
    CHECK(r.at("seed") == 3);
    CHECK(r.at("kills").get<int>() >= 3);  // a cycle takes at most 3 s
    CHECK(r.at("leader_kills").get<int>() <= r.at("kills").get<int>());
    const auto& q = r.at("leaderless_while_quorum_runs");
    CHECK(q.at("total_ms").get<std::int64_t>() <= r.at("leaderless_ms").get<std::int64_t>());
    CHECK(q.at("longest_ms").get<std::int64_t>() <= q.at("total_ms").get<std::int64_t>());
    CHECK(r.at("safe") == true);
    check_metadata(r);
}

TEST_CASE("disk-full: the leader whose disk fills exits 1 and no acknowledged entry is lost",
          "[disk-full]") {
    if (!BOUNCE_METADATA) {
        WARN("skipped: the fake daemon has no metadata log to fill");
        return;
    }
    const Outcome o = run_tool("disk-full --duration 1" + metadata_args());
    REQUIRE(o.exit_status == 0);
    REQUIRE(o.runs.size() == 1);
    INFO(o.runs[0].at("warnings").dump());
    CHECK(o.runs[0].at("disk_full_exit") == "exited with status 1");
    CHECK(o.runs[0].at("new_leader_after_crash") == true);
    CHECK(o.runs[0].at("safe") == true);
    CHECK(o.runs[0].at("warnings").empty());
    check_metadata(o.runs[0]);
}

TEST_CASE(
    "rolling-replace: every node is replaced by one that joins, the leader last; nothing lost",
    "[rolling-replace]") {
    if (!BOUNCE_METADATA) {
        WARN("skipped: the fake daemon has neither --join nor POST /members");
        return;
    }
    const Outcome o = run_tool("rolling-replace --duration 0.5" + metadata_args());
    REQUIRE(o.runs.size() == 1);
    const nlohmann::json& run = o.runs[0];
    INFO(run.at("warnings").dump());
    INFO(run.at("replacements").dump());
    REQUIRE(o.exit_status == 0);
    CHECK(run.at("safe") == true);
    CHECK(run.at("replacements_complete") == true);
    const nlohmann::json& replaced = run.at("replacements");
    REQUIRE(replaced.size() == 3);
    bool leader_replaced = false;
    for (std::size_t i = 0; i < replaced.size(); ++i) {
        const nlohmann::json& x = replaced[i];
        CHECK(x.at("new") == "n" + std::to_string(4 + i));
        CHECK(x.at("complete") == true);
        CHECK(x.at("join_ms").get<std::int64_t>() <= x.at("promoted_ms").get<std::int64_t>());
        CHECK(x.at("promoted_ms").get<std::int64_t>() <= x.at("removed_ms").get<std::int64_t>());
        leader_replaced = leader_replaced || x.at("old_was_leader").get<bool>();
    }
    // Followers go first, so the leader is the last one (unless leadership moved on its own).
    CHECK(leader_replaced);
    CHECK(run.at("final_leader").get<std::string>() >= "n4");
    const nlohmann::json& m = run.at("metadata");
    INFO(m.dump());
    REQUIRE(m.at("enabled") == true);
    CHECK(m.at("no_acknowledged_entry_lost") == true);
    CHECK(m.at("acknowledged_before_faults").get<int>() > 0);
    CHECK(m.at("acknowledged_after_faults").get<int>() > 0);
    CHECK(m.at("nodes_read") == 3);  // the three new nodes; the old ones are stopped
}

namespace {

/// preferred with one round on 3 nodes; `stability_ms` sets timing.preferred_stability_ms.
nlohmann::json run_preferred(int stability_ms) {
    const Outcome o = run_tool("preferred --rounds 1 --duration 0.5 --preferred-stability " +
                               std::to_string(stability_ms) + metadata_args());
    REQUIRE(o.exit_status == 0);
    REQUIRE(o.runs.size() == 1);
    const nlohmann::json& run = o.runs[0];
    INFO(run.at("warnings").dump());
    const nlohmann::json& p = run.at("preferred");
    INFO(p.dump());
    // The round ran: the preferred node led, was killed, another node took over, it restarted.
    CHECK(run.at("safe") == true);
    // Two valid leases at once: none longer than the polls can tell apart (a hand-back's old
    // lease ends at the poll that shows it gone, up to one round trip late).
    const nlohmann::json& overlap = run.at("lease").at("longest_overlap");
    CHECK((overlap.is_null() || overlap.at("length_ms") <= overlap.at("error_ms")));
    CHECK(p.at("node") == "n1");
    REQUIRE(p.at("rounds").size() == 1);
    const nlohmann::json& round = p.at("rounds")[0];
    CHECK(round.at("failover_ms").is_number());
    CHECK(round.at("interim_leader") != "n1");
    CHECK(round.at("restarted_ms").get<std::int64_t>() > round.at("killed_ms").get<std::int64_t>());
    check_metadata(run);
    return run;
}

}  // namespace

TEST_CASE("preferred: leadership comes back to the preferred node exactly once per restart",
          "[.preferred]") {
    if (!BOUNCE_METADATA) {
        WARN("skipped: the fake daemon has no priorities");
        return;
    }
    const nlohmann::json run = run_preferred(2000);
    const nlohmann::json& p = run.at("preferred");
    INFO(p.dump());
    CHECK(p.at("every_round_returned") == true);
    CHECK(p.at("every_round_single_handback") == true);
    CHECK(p.at("rounds")[0].at("handbacks") == 1);
    CHECK(p.at("rounds")[0].at("changes_after_restart") == 1);
    CHECK(run.at("final_leader") == "n1");
}

TEST_CASE("preferred canary: with the hand-back off the check reports that leadership stayed away",
          "[.preferred-canary]") {
    if (!BOUNCE_METADATA) {
        WARN("skipped: the fake daemon has no priorities");
        return;
    }
    const nlohmann::json run = run_preferred(0);
    const nlohmann::json& p = run.at("preferred");
    INFO(p.dump());
    CHECK(p.at("every_round_returned") == false);
    CHECK(p.at("rounds")[0].at("returned") == false);
    CHECK(p.at("rounds")[0].at("handbacks") == 0);
}

TEST_CASE("bad command lines exit with status 2", "[cli]") {
    CHECK(run_tool("no-such-scenario").exit_status == 2);
    CHECK(run_tool("ping-pong --scouting maybe").exit_status == 2);
    CHECK(run_tool("chaos --duration -1").exit_status == 2);
    CHECK(run_tool("chaos --metadata maybe").exit_status == 2);
    CHECK(run_tool("chaos --rate 0").exit_status == 2);
    CHECK(run_tool("rolling-replace --nodes 5").exit_status == 2);  // 10 nodes in all
    CHECK(run_tool("preferred --rounds 0").exit_status == 2);
    CHECK(run_tool("preferred --preferred-stability -1").exit_status == 2);
}

TEST_CASE("a daemon that dies at start-up fails the run fast, leaving nothing behind", "[cli]") {
    const Outcome o = run_tool("leader-crash", "/bin/false");
    CHECK(o.exit_status == 1);
    CHECK(o.runs.is_null());
}
