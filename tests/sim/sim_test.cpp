// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "conclave/sim/run.hpp"
#include "conclave/sim/simulator.hpp"
#include "conclave/sim/stability.hpp"

using namespace conclave;
using namespace conclave::sim;
using nlohmann::json;

namespace {

std::uint64_t text_hash(const std::string& s) {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        h = (h ^ c) * 1099511628211ULL;
    }
    return h;
}

std::pair<RunResult, std::string> traced_run(RunOptions o) {
    std::ostringstream trace;
    o.trace = &trace;
    RunResult r = run_seed(o);
    return {r, trace.str()};
}

struct Recorder {
    std::vector<std::tuple<Millis, NodeId, StepAction, std::optional<NodeId>>> steps;
};

}  // namespace

TEST_CASE("a seed replays bit for bit; different seeds differ", "[replay]") {
    RunOptions o;
    o.seed = 4242;
    const auto [first, first_trace] = traced_run(o);
    const auto [second, second_trace] = traced_run(o);
    REQUIRE_FALSE(first.violation);
    CHECK(first.fingerprint == second.fingerprint);
    CHECK(text_hash(first_trace) == text_hash(second_trace));
    CHECK(first_trace == second_trace);
    CHECK(first.stats.events == second.stats.events);
    // Tracing does not change the run.
    o.trace = nullptr;
    CHECK(run_seed(o).fingerprint == first.fingerprint);
    o.seed = 4243;
    const auto [other, other_trace] = traced_run(o);
    CHECK(other.fingerprint != first.fingerprint);
    CHECK(text_hash(other_trace) != text_hash(first_trace));
}

TEST_CASE("replay command names every switch of the run", "[replay]") {
    RunOptions o;
    o.seed = 17;
    o.scouting = false;
    o.planted_bug = elector::PlantedBug::DoubleVote;
    o.lose_durable_state = true;
    const std::string cmd = replay_command("conclave-sim", o);
    CHECK(cmd ==
          "conclave-sim --seed 17 --nodes 3 --faults all --episodes 4 --duration 6000 "
          "--no-scouting --planted-bug double-vote --lose-durable-state");
}

TEST_CASE("trace follows the NDJSON format", "[trace]") {
    RunOptions o;
    o.seed = 99;
    const auto [r, text] = traced_run(o);
    std::istringstream lines(text);
    std::string line;
    REQUIRE(std::getline(lines, line));
    const json header = json::parse(line);
    CHECK(header["kind"] == "header");
    CHECK(header["version"] == 1);
    CHECK(header["nodes"] == 3);
    CHECK(header["quorum"] == 2);
    CHECK(header["scouting"] == true);
    CHECK(header["seed"] == 99);
    std::uint64_t steps = 0;
    std::set<std::string> actions;
    while (std::getline(lines, line)) {
        const json j = json::parse(line);
        if (j["kind"] == "net") {
            CHECK(j.contains("event"));
            continue;
        }
        REQUIRE(j["kind"] == "step");
        ++steps;
        CHECK(j["step"] == steps);
        const std::string action = j["action"];
        actions.insert(action);
        CHECK(j["state"].contains("role"));
        CHECK(j["state"].contains("armed_timers"));
        CHECK(j["sent"].is_array());
        const bool handles = action.rfind("Handle", 0) == 0;
        CHECK(j.contains("msg") == handles);
        if (handles) {
            CHECK(j["msg"]["to"] == j["node"]);
            CHECK(std::string("Handle") + j["msg"]["type"].get<std::string>() == action);
        }
        CHECK(j.contains("peer") == (action == "PeerUp" || action == "PeerDown"));
        const bool fired = action.size() > 5 && action.substr(action.size() - 5) == "Fired";
        CHECK(j.contains("timer") == fired);
        if (fired) {
            CHECK(j["timer"].get<std::string>() + "Fired" == action);
        }
        for (const json& m : j["sent"]) {
            CHECK(m["from"] == j["node"]);
            CHECK(m.contains("to"));
        }
        if (action == "HeartbeatBroadcastFired" && j["state"]["role"] == "leader") {
            CHECK(j["sent"].size() == 2);  // the broadcast, expanded to one message per peer
        }
    }
    CHECK(steps == r.stats.steps);
    for (const char* expected :
         {"Start", "HandleScoutingRequest", "HandleElectionProposal", "HandleLeaderHeartbeat",
          "HeartbeatBroadcastFired", "PeerUp", "IssueLsn"}) {
        CHECK(actions.count(expected) == 1);
    }
}

TEST_CASE("mesh: a crash is seen as peer_down, a pause is not; a paused node acts late", "[mesh]") {
    SimOptions so;
    so.seed = 5;
    Simulator sim(so);
    Recorder rec;
    sim.on_step = [&](const Simulator&, const StepRecord& s) {
        std::optional<NodeId> leader = s.state->leader;
        rec.steps.emplace_back(s.now, s.node, s.action, leader);
    };
    sim.start_all();
    REQUIRE(sim.run_until(Millis{2000}));
    const auto leader = agreed_leader(sim);
    REQUIRE(leader);
    const NodeId follower{static_cast<std::uint16_t>((leader->value + 1) % 3)};
    auto count = [&](StepAction a, Millis from) {
        return std::count_if(rec.steps.begin(), rec.steps.end(), [&](const auto& t) {
            return std::get<2>(t) == a && std::get<0>(t) >= from;
        });
    };

    // Pause the follower for 1 s: nobody sees it go down, it handles nothing meanwhile.
    sim.apply(FaultAction{FaultKind::Pause, follower, {}, 0, 1000});
    CHECK(sim.paused(follower));
    REQUIRE(sim.run_until(Millis{2999}));
    CHECK(count(StepAction::PeerDown, Millis{2000}) == 0);
    const bool follower_acted = std::any_of(rec.steps.begin(), rec.steps.end(), [&](const auto& t) {
        return std::get<1>(t) == follower && std::get<0>(t) > Millis{2000};
    });
    CHECK_FALSE(follower_acted);
    REQUIRE(sim.run_until(Millis{3000}));
    CHECK_FALSE(sim.paused(follower));
    // On resume it handles the backlog at once (late timers and queued heartbeats).
    const auto at_resume = std::count_if(rec.steps.begin(), rec.steps.end(), [&](const auto& t) {
        return std::get<1>(t) == follower && std::get<0>(t) == Millis{3000};
    });
    CHECK(at_resume > 5);

    // Crash the leader: both others get peer_down; a new leader is elected; restart heals.
    const auto before = static_cast<std::size_t>(count(StepAction::PeerDown, Millis{3000}));
    CHECK(before == 0);
    sim.apply(FaultAction{FaultKind::Crash, *leader, {}, 0, 0});
    CHECK_FALSE(sim.alive(*leader));
    REQUIRE(sim.run_until(Millis{3100}));
    CHECK(count(StepAction::PeerDown, Millis{3000}) == 2);
    REQUIRE(sim.run_until(Millis{6000}));
    const auto successor = majority_leader(sim);
    REQUIRE(successor);
    CHECK(*successor != *leader);
    sim.apply(FaultAction{FaultKind::Restart, *leader, {}, 0, 0});
    REQUIRE(sim.run_until(Millis{9000}));
    CHECK(agreed_leader(sim) == successor);  // sticky: the restarted node follows
    CHECK(sim.fault_free());
}

TEST_CASE("mesh: cutting one link gives peer_down at both ends only; healing gives peer_up",
          "[mesh]") {
    SimOptions so;
    so.seed = 6;
    Simulator sim(so);
    std::vector<std::pair<NodeId, StepAction>> events;
    sim.on_step = [&](const Simulator&, const StepRecord& s) {
        if (s.action == StepAction::PeerDown || s.action == StepAction::PeerUp) {
            events.emplace_back(s.node, s.action);
        }
    };
    sim.start_all();
    REQUIRE(sim.run_until(Millis{1000}));
    events.clear();
    sim.apply(FaultAction{FaultKind::Cut, NodeId{0}, NodeId{1}, 0, 0});
    CHECK_FALSE(sim.connected(NodeId{0}, NodeId{1}));
    CHECK(sim.connected(NodeId{0}, NodeId{2}));
    REQUIRE(sim.run_until(Millis{1100}));
    REQUIRE(events.size() == 2);
    CHECK(events[0].second == StepAction::PeerDown);
    CHECK(events[1].second == StepAction::PeerDown);
    events.clear();
    sim.apply(FaultAction{FaultKind::Blackhole, NodeId{2}, NodeId{0}, 0, 0});
    CHECK_FALSE(sim.connected(NodeId{0}, NodeId{2}));  // one way is enough to not talk
    REQUIRE(sim.run_until(Millis{1200}));
    CHECK(events.empty());  // a blackhole keeps the connection up
    sim.apply(FaultAction{FaultKind::HealAll, {}, {}, 0, 0});
    REQUIRE(sim.run_until(Millis{1300}));
    REQUIRE(events.size() == 2);
    CHECK(events[0].second == StepAction::PeerUp);
    CHECK(sim.fault_free());
}

TEST_CASE("liveness bound follows the documented formula", "[liveness]") {
    elector::Config c = elector::Config::fast(3, NodeId{0});
    c.backoff = elector::Backoff::Uniform;  // the ranked bound has its own test (backoff_test.cpp)
    // 300 initial + 2 * 300 inactivity + 50 check + 8 * (300 + 200 + 200 + 4 * 15)
    CHECK(liveness_bound(c, 15) == Millis{300 + 600 + 50 + 8 * 760});
}

TEST_CASE("fault list parsing names the bad entry", "[options]") {
    std::string error;
    CHECK(FaultMix::parse("all", &error)->crash);
    CHECK_FALSE(FaultMix::parse("none", &error)->any());
    const auto mix = FaultMix::parse("cut,pause", &error);
    REQUIRE(mix);
    CHECK(mix->cut);
    CHECK(mix->pause);
    CHECK_FALSE(mix->crash);
    CHECK(mix->to_string() == "cut,pause");
    CHECK_FALSE(FaultMix::parse("cut,meteor", &error));
    CHECK_THAT(error, Catch::Contains("meteor"));
}

TEST_CASE("simulator rejects bad options with a message naming the field", "[options]") {
    SimOptions so;
    so.nodes = 0;
    CHECK_THROWS_WITH(Simulator(so), Catch::Contains("nodes"));
    so.nodes = 3;
    so.elector.heartbeat_miss_count = 1;
    CHECK_THROWS_WITH(Simulator(so), Catch::Contains("heartbeat_miss_count"));
}
