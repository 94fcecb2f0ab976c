// SPDX-License-Identifier: Apache-2.0
// The exhaustive explorer keeps its own interpreter of the elector's actions (cheap copies of
// value-type states; HACKING.md, "Who interprets the cores' actions"). This test keeps the
// exception honest: random walks through the explorer's step function (explorer_walk) are
// replayed on the shared runtime (runtime::ElectorRuntime), and after every transition both
// worlds must hold the same core states, durable states and messages in flight. A drift between
// the two interpreters (fan-out, persist, timers, crash/restart handling) fails here; a canary
// runtime environment that loses one broadcast recipient shows that it does.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "conclave/runtime/elector_runtime.hpp"
#include "conclave/sim/explorer.hpp"
#include "conclave/sim/state_hash.hpp"

using namespace conclave;
using namespace conclave::sim;

namespace {

struct DriftWorld;

/// The runtime's environment in the replay: sends land in the world's in-flight multiset (only
/// to live nodes, as the explorer does: a crash resets the connections), persist writes the
/// world's durable state, timers are remembered with their generations.
struct DriftEnv {
    DriftWorld* world = nullptr;
    std::size_t node = 0;
    static constexpr bool kPlantedBugs = false;
    std::array<std::optional<runtime::TimerGeneration>, elector::kTimerCount> armed{};
    // The node's clock, advanced by a timer's delay when it fires, as explorer.cpp does (the
    // leader lease compares times).
    std::array<Millis, elector::kTimerCount> delay{};
    Millis clock{0};
    Millis now() const { return clock; }
    void send(std::span<const NodeId> to, const elector::Message& m);
    void arm(elector::TimerId t, Millis d, runtime::TimerGeneration g) {
        armed[static_cast<std::size_t>(t)] = g;
        delay[static_cast<std::size_t>(t)] = d;
    }
    void cancel(elector::TimerId t) { armed[static_cast<std::size_t>(t)].reset(); }
    bool persist(const elector::DurableState& s);
    void notify(const elector::LeadershipSnapshot&) {}
    void alarm(const elector::RaiseAlarm&) {}
    void failed(const elector::DurableState&) {}
};

using DriftRuntime = runtime::ElectorRuntime<DriftEnv>;

struct DriftNode {
    DriftEnv env;
    std::unique_ptr<DriftRuntime> rt;
};

struct DriftWorld {
    ExploreOptions options;
    std::vector<DriftNode> nodes;
    std::vector<elector::DurableState> durable;
    std::vector<std::pair<NodeId, elector::Message>> in_flight;
    bool canary_drop_last_recipient = false;  // a planted fan-out bug in the replay's environment

    explicit DriftWorld(const ExploreOptions& o) : options(o), nodes(o.nodes), durable(o.nodes) {
        for (std::size_t i = 0; i < o.nodes; ++i) {
            nodes[i].env.world = this;
            nodes[i].env.node = i;
        }
    }
    bool alive(std::size_t i) const { return nodes[i].rt != nullptr; }
    void create(std::size_t i) {
        elector::Config c = explorer_config(options);
        c.self = NodeId{static_cast<std::uint16_t>(i)};
        nodes[i].env.armed = {};
        nodes[i].rt = std::make_unique<DriftRuntime>(nodes[i].env, c, durable[i],
                                                     [] { return std::uint64_t{0}; });
    }
    DriftRuntime& rt(std::size_t i) { return *nodes[i].rt; }

    // The explorer's transitions, through the runtime (same order of inputs as explorer.cpp).
    void start() {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            create(i);
        }
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            rt(i).start();
        }
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            for (std::size_t j = 0; j < nodes.size(); ++j) {
                if (i != j) {
                    rt(i).peer_up(NodeId{static_cast<std::uint16_t>(j)});
                }
            }
        }
    }
    /// Applies one step of the walk; returns a description of a mismatch in the step itself.
    std::string apply(const WalkStep& step) {
        const std::size_t n = step.node.value;
        switch (step.kind) {
            case WalkStep::Kind::Start:
                return "a second start";
            case WalkStep::Kind::Fire: {
                const auto& g = nodes[n].env.armed[static_cast<std::size_t>(step.timer)];
                if (!alive(n) || !g) {
                    return "the explorer fires " + std::string(to_string(step.timer)) + " of n" +
                           std::to_string(n) + ", which the runtime has not armed";
                }
                nodes[n].env.clock += nodes[n].env.delay[static_cast<std::size_t>(step.timer)];
                rt(n).timer_fired(step.timer, *g);
                return {};
            }
            case WalkStep::Kind::Crash:
                nodes[n].rt.reset();
                std::erase_if(in_flight, [&](const auto& f) {
                    return f.first.value == n || f.second.from.value == n;
                });
                for (std::size_t j = 0; j < nodes.size(); ++j) {
                    if (alive(j)) {
                        rt(j).peer_down(step.node);
                    }
                }
                return {};
            case WalkStep::Kind::Restart:
                create(n);
                rt(n).start();
                for (std::size_t j = 0; j < nodes.size(); ++j) {
                    if (j != n && alive(j)) {
                        rt(n).peer_up(NodeId{static_cast<std::uint16_t>(j)});
                        rt(j).peer_up(step.node);
                    }
                }
                return {};
            case WalkStep::Kind::Deliver:
            case WalkStep::Kind::Drop:
            case WalkStep::Kind::Duplicate: {
                auto it = std::find(in_flight.begin(), in_flight.end(),
                                    std::pair<NodeId, elector::Message>{step.node, *step.message});
                if (it == in_flight.end()) {
                    return "the explorer's message to n" + std::to_string(n) + " (" +
                           to_string(*step.message) + ") is not in flight in the runtime's world";
                }
                const elector::Message m = it->second;
                if (step.kind == WalkStep::Kind::Duplicate) {
                    in_flight.emplace_back(step.node, m);
                    return {};
                }
                in_flight.erase(it);
                if (step.kind == WalkStep::Kind::Deliver) {
                    rt(n).receive(m);
                }
                return {};
            }
        }
        return "?";
    }
    /// Compares with the explorer's world; "" when equal.
    std::string compare(const WalkStep& x) const {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            const std::string who = "n" + std::to_string(i);
            if (x.states[i].has_value() != alive(i)) {
                return who + " is " + (alive(i) ? "alive" : "crashed") + " in the runtime only";
            }
            if (alive(i) && *x.states[i] != nodes[i].rt->elector().state()) {
                return who + ": the core states differ";
            }
            if (x.durable[i] != durable[i]) {
                return who + ": the durable states differ";
            }
        }
        auto key = [](const std::pair<NodeId, elector::Message>& f) {
            const PackedMessage p = pack(f.first, f.second);
            return std::pair{p.head, p.body};
        };
        std::vector<std::pair<std::uint64_t, std::uint64_t>> a;
        std::vector<std::pair<std::uint64_t, std::uint64_t>> b;
        std::transform(x.in_flight.begin(), x.in_flight.end(), std::back_inserter(a), key);
        std::transform(in_flight.begin(), in_flight.end(), std::back_inserter(b), key);
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a != b) {
            return "messages in flight differ: explorer " + std::to_string(a.size()) +
                   ", runtime " + std::to_string(b.size());
        }
        return {};
    }
};

void DriftEnv::send(std::span<const NodeId> to, const elector::Message& m) {
    for (const NodeId peer : to) {
        if (world->canary_drop_last_recipient && to.size() > 1 && peer == to.back()) {
            continue;
        }
        if (world->alive(peer.value)) {
            world->in_flight.emplace_back(peer, m);
        }
    }
}

bool DriftEnv::persist(const elector::DurableState& s) {
    world->durable[node] = s;
    return true;
}

/// Replays walks of `seeds` seeds; returns the first drift ("" when none) and counts transitions.
std::string replay_walks(const ExploreOptions& options, std::uint64_t seeds, std::size_t steps,
                         bool canary, std::uint64_t* transitions) {
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
        DriftWorld world(options);
        world.canary_drop_last_recipient = canary;
        std::string drift;
        std::size_t k = 0;
        explorer_walk(options, seed, steps, [&](const WalkStep& step) {
            if (!drift.empty()) {
                return;
            }
            std::string what = step.kind == WalkStep::Kind::Start ? (world.start(), std::string())
                                                                  : world.apply(step);
            if (what.empty()) {
                what = world.compare(step);
            }
            if (!what.empty()) {
                drift = "seed " + std::to_string(seed) + ", transition " + std::to_string(k) +
                        ": " + what;
            }
            ++k;
        });
        *transitions += k;
        if (!drift.empty()) {
            return drift;
        }
    }
    return {};
}

}  // namespace

TEST_CASE("explorer: its interpreter and the shared runtime agree on random walks",
          "[explorer][runtime]") {
    ExploreOptions o;
    o.max_crashes = 2;
    o.max_duplications = 2;
    std::uint64_t transitions = 0;
    const std::string drift = replay_walks(o, 200, 60, false, &transitions);
    INFO(drift);
    CHECK(drift.empty());
    CHECK(transitions > 200 * 30);  // the walks went somewhere
    // Without scouting, and with five nodes.
    o.scouting = false;
    CHECK(replay_walks(o, 50, 60, false, &transitions).empty());
    o.scouting = true;
    o.nodes = 5;
    CHECK(replay_walks(o, 50, 60, false, &transitions).empty());
}

TEST_CASE("explorer drift check bites: a runtime environment that loses a broadcast recipient",
          "[explorer][runtime]") {
    ExploreOptions o;
    std::uint64_t transitions = 0;
    const std::string drift = replay_walks(o, 20, 60, true, &transitions);
    INFO(drift);
    CHECK_FALSE(drift.empty());
}
