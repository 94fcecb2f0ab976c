// SPDX-License-Identifier: Apache-2.0
// A small deterministic in-test cluster of log cores, each inside the shared runtime
// (runtime/log_runtime.hpp, LogRuntime<Cluster's NodeEnv>): the test plays the elector (one leader
// per term, terms only grow), the network (loss, reorder, duplication), the clock (which armed
// timer instance fires when, stale instances included) and storage (the runtime's group commit
// flushed at random points chosen from the seed, crashes that lose what is not durable).
// Invariants are checked after every step.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "conclave/core/check.hpp"
#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/runtime/log_runtime.hpp"

namespace conclave::replication::testing {

struct InvariantViolation : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void ThrowViolation(const char* what) {
    throw InvariantViolation(what);
}

class Cluster;

/// The environment of one node's LogRuntime: sends go to the cluster's network, timers and the
/// group commit wait until the cluster's seed picks their moment (Fire, Flush), and every
/// ApplyCommitted / ProposeResult the runtime performs is checked against the cluster's history.
struct NodeEnv {
    Cluster* cluster = nullptr;
    std::size_t node = 0;
    static constexpr bool kPlantedBugs = true;  // a test environment (RuntimeBug below)
    // The planted AckBeforeFsync is caught by the cluster's own durability checks.
    static constexpr bool kOwnPersistOrderCheck = true;
    Millis now() const { return Millis{0}; }
    LogStorage& storage();
    void send(std::span<const NodeId> to, const LogMessage& m);
    void arm(LogTimer timer, Millis delay, runtime::TimerGeneration generation);
    void cancel(LogTimer timer);
    void schedule_flush() {}  // the seed picks the moment of Cluster::Flush
    void apply(const std::vector<Entry>& committed);
    void propose_result(const ProposeResult& result);
    void role(const NotifyLogRole&) {}
    void failed(const std::string& what);
    void after_batch();
};

struct SimNode {
    std::unique_ptr<MemoryStorage> storage;
    std::unique_ptr<NodeEnv> env;
    /// The node's runtime; kept after a crash (its memory is compared with the others until
    /// the restart replaces it), never given input while the node is down.
    std::unique_ptr<runtime::LogRuntime<NodeEnv>> rt;
    bool up = true;
    /// Per timer: the generation of the live instance (nullopt: none armed), and the last
    /// instance that fired or was replaced (fired again as a stale instance now and then).
    std::array<std::optional<runtime::TimerGeneration>, kLogTimerCount> armed{};
    std::array<std::optional<runtime::TimerGeneration>, kLogTimerCount> stale{};
    std::size_t applied = 0;  // entries applied since the last restart

    const ReplicatedLog& log() const { return rt->log(); }
};

struct InFlight {
    NodeId to{};
    LogMessage message;
};

struct ClusterStats {
    std::uint64_t steps = 0;
    std::uint64_t acked = 0;
    std::uint64_t elections = 0;
    std::uint64_t crashes = 0;
    std::uint64_t refused = 0;
    std::uint64_t unknown_outcome = 0;
    std::uint64_t flushes = 0;      // group commits that told a core something became durable
    std::uint64_t stale_fired = 0;  // stale timer instances the runtime kept from the core
};

class Cluster {
  public:
    Cluster(std::uint64_t seed, std::size_t size, LogConfig base,
            runtime::RuntimeBug bug = runtime::RuntimeBug::None);

    /// One random event. Returns false (with failure() set) once an invariant is violated.
    bool Step();
    /// Restarts every node, heals the network, elects a leader and runs until quiet; then checks
    /// that every node holds the whole committed history. Returns false on a violation.
    bool HealAndConverge();

    // Building blocks (also used by scripted tests).
    void Elect(std::size_t node, bool tell_old_leader);
    void Crash(std::size_t node);
    void Restart(std::size_t node);
    bool Propose(std::size_t node);
    void Deliver(std::size_t index);
    void Flush(std::size_t node);
    void Fire(std::size_t node, LogTimer timer);
    /// Fires the node's last stale instance of `timer` (replaced, cancelled or fired), if any:
    /// a violation if it reaches the core.
    void FireStale(std::size_t node, LogTimer timer);
    void Check();

    const std::string& failure() const { return failure_; }
    const ClusterStats& stats() const { return stats_; }
    const std::vector<Entry>& history() const { return history_; }
    std::vector<SimNode>& nodes() { return nodes_; }
    std::vector<InFlight>& network() { return network_; }

  private:
    friend struct NodeEnv;
    using Rt = runtime::LogRuntime<NodeEnv>;
    /// Gives one input to a live node's runtime (which performs the core's actions).
    template <class Input>
    const LogActions& Run(std::size_t node, Input&& input) {
        return nodes_[node].rt->run(std::forward<Input>(input));
    }
    void Fail(std::string what);
    std::uint64_t Random(std::uint64_t bound) { return rng_() % bound; }

    std::mt19937_64 rng_;
    LogConfig base_;
    runtime::RuntimeBug bug_;
    std::vector<SimNode> nodes_;
    std::vector<InFlight> network_;
    Term term_{};
    std::optional<std::size_t> leader_;
    std::map<std::uint64_t, std::uint64_t> next_counter_;  // per term
    std::vector<Entry> history_;        // the committed prefix, as far as any node saw
    std::map<Lsn, std::size_t> acked_;  // acknowledged LSN -> its index in history_
    std::string failure_;
    ClusterStats stats_;
};

}  // namespace conclave::replication::testing
