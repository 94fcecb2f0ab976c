// A small deterministic in-test cluster of log cores: the test plays the elector (one leader per
// term, terms only grow), the network (loss, reorder, duplication) and storage (group commit at
// random points, crashes that lose what is not durable). Invariants are checked after every step.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "conclave/replication/check.hpp"
#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"

namespace conclave::replication::testing {

struct InvariantViolation : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void ThrowViolation(const char* what) {
    throw InvariantViolation(what);
}

struct SimNode {
    std::unique_ptr<MemoryStorage> storage;
    std::unique_ptr<ReplicatedLog> log;
    bool up = true;
    bool armed[kLogTimerCount] = {false, false};
    std::size_t applied = 0;  // entries applied since the last restart
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
};

class Cluster {
  public:
    Cluster(std::uint64_t seed, std::size_t size, LogConfig base);

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
    void Check();

    const std::string& failure() const { return failure_; }
    const ClusterStats& stats() const { return stats_; }
    const std::vector<Entry>& history() const { return history_; }
    std::vector<SimNode>& nodes() { return nodes_; }
    std::vector<InFlight>& network() { return network_; }

  private:
    void Perform(std::size_t node, LogActions actions);
    void Fail(std::string what);
    std::uint64_t Random(std::uint64_t bound) { return rng_() % bound; }

    std::mt19937_64 rng_;
    LogConfig base_;
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
