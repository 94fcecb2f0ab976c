// SPDX-License-Identifier: Apache-2.0
// A small deterministic in-test router for several electors: each node is an ElectorRuntime (the
// one interpreter of the core's actions, runtime/) over a NodeEnv of this router; the router
// delivers messages FIFO per link after a fixed latency, fires timers in simulated-time order and
// can cut and heal links (reporting peer down / up to both ends). No threads, no sleeps, no clock.
//
// While it runs it checks, after every action: at most one leader per term; per node, persisted
// terms never decrease and a term never holds two different votes; a message carrying the node's
// own term leaves only once that term is persisted (a proposal: with the self-vote); fencing
// tokens seen by a node never decrease.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "conclave/elector/elector.hpp"
#include "conclave/runtime/elector_runtime.hpp"

namespace conclave::test {

/// splitmix64: a tiny deterministic random source, one per node so that backoffs differ.
struct SplitMix64 {
    std::uint64_t state;
    std::uint64_t operator()() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
};

class Router {
  public:
    struct LeaderEvent {
        Millis at;
        NodeId node;
        Term term;
    };

    Router(const std::vector<elector::Config>& configs, std::uint64_t seed)
        : size_(configs.size()) {
        for (std::size_t i = 0; i < size_; ++i) {
            nodes_.push_back(
                std::make_unique<Node>(*this, id(i), configs[i], SplitMix64{seed * 1000 + i}));
        }
        timers_.resize(size_);
        disk_.resize(size_);
        tokens_.resize(size_);
        links_.resize(size_ * size_);
        connected_.assign(size_ * size_, true);
    }

    Router(const Router&) = delete;  // nodes refer to their router: no copy, no move
    Router& operator=(const Router&) = delete;

    /// `size` nodes with the fast profile.
    static Router fast_cluster(std::size_t size, bool scouting, std::uint64_t seed) {
        std::vector<elector::Config> configs;
        for (std::size_t i = 0; i < size; ++i) {
            elector::Config c = elector::Config::fast(size, NodeId{static_cast<std::uint16_t>(i)});
            c.scouting = scouting;
            configs.push_back(c);
        }
        return Router(configs, seed);
    }

    /// Starts every node at `now` over a full mesh.
    void start_all() {
        for (std::size_t i = 0; i < size_; ++i) {
            rt(i).start();
        }
        for (std::size_t a = 0; a < size_; ++a) {
            for (std::size_t b = 0; b < size_; ++b) {
                if (a != b) {
                    rt(a).peer_up(id(b));
                }
            }
        }
    }

    /// Cuts the link between a and b in both directions: in-flight messages are lost and both
    /// ends see the peer go down.
    void cut(NodeId a, NodeId b) {
        if (!connected(a, b)) {
            return;
        }
        set_connected(a, b, false);
        link(a, b).clear();
        link(b, a).clear();
        rt(a.value).peer_down(b);
        rt(b.value).peer_down(a);
    }
    void heal(NodeId a, NodeId b) {
        if (connected(a, b)) {
            return;
        }
        set_connected(a, b, true);
        rt(a.value).peer_up(b);
        rt(b.value).peer_up(a);
    }
    void isolate(NodeId a) {
        for (std::size_t b = 0; b < size_; ++b) {
            if (b != a.value) {
                cut(a, id(b));
            }
        }
    }
    void rejoin(NodeId a) {
        for (std::size_t b = 0; b < size_; ++b) {
            if (b != a.value) {
                heal(a, id(b));
            }
        }
    }

    /// Processes every event due at or before `until`, earliest first (ties: scheduling order).
    void run_until(Millis until) {
        for (;;) {
            std::optional<std::pair<Millis, std::uint64_t>> best;
            std::size_t best_node = 0;
            std::optional<std::size_t> best_timer;
            std::optional<std::size_t> best_link;
            for (std::size_t n = 0; n < size_; ++n) {
                for (std::size_t t = 0; t < elector::kTimerCount; ++t) {
                    if (timers_[n][t] && (!best || timers_[n][t]->key < *best)) {
                        best = timers_[n][t]->key;
                        best_node = n;
                        best_timer = t;
                        best_link.reset();
                    }
                }
            }
            for (std::size_t l = 0; l < links_.size(); ++l) {
                if (!links_[l].empty()) {
                    const auto key = std::pair{links_[l].front().at, links_[l].front().seq};
                    if (!best || key < *best) {
                        best = key;
                        best_link = l;
                        best_timer.reset();
                    }
                }
            }
            if (!best || best->first > until) {
                now_ = until;
                return;
            }
            now_ = best->first;
            if (best_timer) {
                const TimerGeneration generation = timers_[best_node][*best_timer]->generation;
                timers_[best_node][*best_timer].reset();
                rt(best_node).timer_fired(static_cast<elector::TimerId>(*best_timer), generation);
            } else {
                const std::size_t to = *best_link % size_;
                const elector::Message message = links_[*best_link].front().message;
                links_[*best_link].pop_front();
                ++delivered_;
                rt(to).receive(message);
            }
        }
    }

    Millis now() const { return now_; }
    const elector::Elector& node(NodeId n) const { return nodes_[n.value]->runtime.elector(); }
    /// The node in role Leader, if there is exactly one.
    std::optional<NodeId> sole_leader() const {
        std::optional<NodeId> found;
        for (std::size_t i = 0; i < size_; ++i) {
            if (node(id(i)).state().role == elector::Role::Leader) {
                if (found) {
                    return std::nullopt;
                }
                found = id(i);
            }
        }
        return found;
    }
    /// Every time a node became leader (from its ElectionWon notifications).
    const std::vector<LeaderEvent>& elections_won() const { return elections_won_; }
    std::uint64_t alarms() const { return alarms_; }
    std::uint64_t delivered() const { return delivered_; }

  private:
    using TimerGeneration = runtime::TimerGeneration;

    /// The runtime's environment for one node: this router's time, links, timers and disk.
    struct NodeEnv {
        static constexpr bool kPlantedBugs = false;
        Router& router;
        NodeId self;

        Millis now() const { return router.now_; }
        void send(std::span<const NodeId> to, const elector::Message& m) {
            for (const NodeId n : to) {
                router.send(self, n, m);
            }
        }
        void arm(elector::TimerId t, Millis delay, TimerGeneration g) {
            router.timers_[self.value][static_cast<std::size_t>(t)] =
                PendingTimer{{router.now_ + delay, router.seq_++}, g};
        }
        void cancel(elector::TimerId t) {
            router.timers_[self.value][static_cast<std::size_t>(t)].reset();
        }
        bool persist(const elector::DurableState& s) {
            router.persist(self, s);
            return true;
        }
        void notify(const elector::LeadershipSnapshot& s) { router.notify(self, s); }
        void alarm(const elector::RaiseAlarm&) { ++router.alarms_; }
        void failed(const elector::DurableState&) { FAIL("the router's disk never fails"); }
    };
    struct Node {
        Node(Router& r, NodeId self, const elector::Config& config, SplitMix64 random)
            : env{r, self}, runtime(env, config, elector::DurableState{}, random) {}
        NodeEnv env;
        runtime::ElectorRuntime<NodeEnv> runtime;
    };
    struct PendingTimer {
        std::pair<Millis, std::uint64_t> key;  // due time, scheduling order
        TimerGeneration generation = 0;
    };

    runtime::ElectorRuntime<NodeEnv>& rt(std::size_t i) { return nodes_[i]->runtime; }

    struct InFlight {
        Millis at;
        std::uint64_t seq;
        elector::Message message;
    };
    static constexpr Millis kLatency{1};

    static NodeId id(std::size_t i) { return NodeId{static_cast<std::uint16_t>(i)}; }
    bool connected(NodeId a, NodeId b) const { return connected_[a.value * size_ + b.value]; }
    void set_connected(NodeId a, NodeId b, bool up) {
        connected_[a.value * size_ + b.value] = up;
        connected_[b.value * size_ + a.value] = up;
    }
    std::deque<InFlight>& link(NodeId from, NodeId to) {
        return links_[from.value * size_ + to.value];
    }

    void send(NodeId from, NodeId to, const elector::Message& message) {
        check_durable_before_send(from, to, message);
        if (connected(from, to)) {
            link(from, to).push_back(InFlight{now_ + kLatency, seq_++, message});
        }
    }

    void check_durable_before_send(NodeId from, NodeId to, const elector::Message& m) {
        const elector::DurableState& disk = disk_[from.value];
        const auto* response = std::get_if<elector::ElectionResponse>(&m.body);
        if (std::holds_alternative<elector::ElectionProposal>(m.body)) {
            REQUIRE(disk == elector::DurableState{m.term, from});
        } else if (response && response->granted) {
            REQUIRE(disk.term == m.term);
            // A vote that a candidate of this term can count is durable.
            const elector::Elector& receiver = node(to);
            if (receiver.state().role == elector::Role::Candidate &&
                receiver.state().term == m.term) {
                REQUIRE(disk.voted_for == to);
            }
        } else if (std::holds_alternative<elector::LeaderHeartbeat>(m.body) ||
                   std::holds_alternative<elector::HeartbeatAck>(m.body) ||
                   std::holds_alternative<elector::HeartbeatResponse>(m.body)) {
            REQUIRE(disk.term == m.term);
        }
    }

    void persist(NodeId self, const elector::DurableState& state) {
        elector::DurableState& disk = disk_[self.value];
        REQUIRE(state.term >= disk.term);
        if (state.voted_for) {
            auto [it, fresh] =
                votes_.emplace(std::pair{self.value, state.term.value}, *state.voted_for);
            REQUIRE(it->second == *state.voted_for);
        }
        disk = state;
    }
    void notify(NodeId self, const elector::LeadershipSnapshot& s) {
        if (s.fencing_token != 0) {
            REQUIRE(s.fencing_token >= tokens_[self.value]);
            tokens_[self.value] = s.fencing_token;
        }
        if (s.role == elector::Role::Leader) {
            auto [it, fresh] = leader_of_term_.emplace(s.term.value, self);
            REQUIRE(it->second == self);  // at most one leader per term
            elections_won_.push_back(LeaderEvent{now_, self, s.term});
        }
    }

    std::size_t size_;
    // Nodes hold a reference to this router: it is neither copied nor moved (fast_cluster
    // returns a prvalue).
    std::vector<std::unique_ptr<Node>> nodes_;
    std::vector<std::array<std::optional<PendingTimer>, elector::kTimerCount>> timers_;
    std::vector<std::deque<InFlight>> links_;
    std::vector<bool> connected_;
    std::vector<elector::DurableState> disk_;
    std::vector<std::uint64_t> tokens_;
    std::map<std::pair<std::uint16_t, std::uint64_t>, NodeId> votes_;
    std::map<std::uint64_t, NodeId> leader_of_term_;
    std::vector<LeaderEvent> elections_won_;
    std::uint64_t alarms_ = 0;
    std::uint64_t delivered_ = 0;
    std::uint64_t seq_ = 0;
    Millis now_{0};
};

}  // namespace conclave::test
