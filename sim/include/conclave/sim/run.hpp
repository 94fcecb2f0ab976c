// SPDX-License-Identifier: Apache-2.0
// Seeded random schedules: a fault mix, a fault window, then a fault-free tail in which liveness
// is checked. One call runs one seed; the runner and the tests call it for many seeds.
#pragma once

#include <boost/describe/enum.hpp>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/sim/simulator.hpp"
#include "conclave/sim/stability.hpp"

namespace conclave::sim {

/// Which faults random schedules may use.
struct FaultMix {
    bool loss = false;
    bool duplication = false;
    bool reorder = false;
    bool latency = false;     // slowed links
    bool cut = false;         // single-link cuts (the article's "A-B cut only")
    bool partition = false;   // symmetric two-group partitions
    bool asymmetric = false;  // one-way blackholes
    bool crash = false;       // crash + restart
    bool pause = false;       // stalled processes
    bool blackhole = false;   // both directions of a link drop silently; the connection stays up
    bool transfer = false;    // the operator's transfer_leadership at random moments
    /// A crash whose restart finds the log's tail corrupt and `conclaved --repair`
    /// run on it (CorruptRepair). Needs the log; not part of "all" (it would change every
    /// seed's schedule): name it, e.g. "all,repair".
    bool repair = false;
    /// A crash whose node loses its vote record, its log or its whole data directory
    /// (FaultKind::Wipe, the loss drawn by the schedule): refused at start, or back as a new
    /// incarnation that its peers refuse (state_lost) and that stays quarantined; the operator
    /// repairs it at the end of the episode (one case in two) or of the fault window. With the
    /// log, a log lost beside its vote record restarts unmarked, as in conclaved, and is reported
    /// (log-truncated). Not part of "all": name it, e.g. "all,wipe".
    bool wipe = false;
    /// A node silently cut off: every link of it drops both ways while its connections stay up
    /// (nobody gets peer_down), so a leader cut off this way keeps its lease until the lease ends
    /// on its own clock, the case clock drift matters for. Not part of "all": "all,isolate".
    bool isolate = false;

    static FaultMix all();
    bool any() const;
    /// "all", "none" or a comma-separated list of: all, loss, dup, reorder, latency, cut,
    /// partition, asym, crash, pause, blackhole, transfer, repair, wipe, isolate. nullopt (and
    /// `error` set) for an unknown name.
    static std::optional<FaultMix> parse(std::string_view list, std::string* error);
    std::string to_string() const;
};

/// Clock drift of random runs (SimOptions::clock_drift_ppm), drawn per node per seed from a
/// generator of its own, so the fault schedule of a seed is the same with and without drift.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    ClockDrift, std::uint8_t,
    None,    // every clock is the simulated one
    Within,  // each node's rate uniform in [1 - rho, 1 + rho] (rho: lease_drift_permille)
    Beyond   // as Within, then two nodes at 1 - 3 rho and 1 + 3 rho: beyond what the lease assumes
)

struct RunOptions {
    std::uint64_t seed = 1;
    std::size_t nodes = 3;
    FaultMix faults = FaultMix::all();
    /// Fault episodes per run, each lasting 100 ms .. 2.5 s inside the fault window.
    std::size_t episodes = 4;
    /// Faults happen in [0, fault_window); every fault is over at fault_window.
    Millis fault_window{6000};
    /// Fault-free time after the window; 0: liveness_bound + 1 s.
    Millis tail{0};
    /// Stop after this many steps (0: no limit). A truncated run skips the liveness check.
    std::uint64_t max_steps = 0;
    bool scouting = true;
    /// The elector's backoff after losing a leader and at start.
    elector::Backoff backoff = elector::Backoff::Uniform;
    elector::PlantedBug planted_bug = elector::PlantedBug::None;
    /// Node priorities by index (docs/design.md, "Priorities"); empty: every node priority 1.
    std::vector<std::uint32_t> priorities;
    /// The preferred leader's stability period (Config::preferred_stability); nullopt: the fast
    /// profile's.
    std::optional<Millis> preferred_stability;
    bool lose_durable_state = false;
    /// A bug planted in the shared runtime (runtime/elector_runtime.hpp).
    runtime::RuntimeBug runtime_bug = runtime::RuntimeBug::None;
    HistoryOptions history;
    std::ostream* trace = nullptr;
    /// Run the replicated log beside every elector, with a client workload, its invariants after
    /// every step, and at the end a fresh proposal that must commit and logs that must converge.
    bool log = false;
    replication::PlantedLogBug log_bug = replication::PlantedLogBug::None;
    LogHistoryOptions log_history;
    /// Compaction: the log's compact_threshold (0: off); compact_retain is a quarter of
    /// it. Keys repeat (24 of them) so that snapshots replace superseded values.
    std::size_t log_compact = 0;
    /// The deferred commit point, as conclaved (LogSimOptions::defer_meta); false: every
    /// PersistMeta written at once.
    bool defer_meta = true;
    /// Storage faults in the fault window (LogSimOptions::storage_fault_ppm at
    /// kStorageFaultPpm): ENOSPC on append, EIO on fsync, part of an unsynced tail kept at a
    /// crash; slow storage (the asynchronous group commit, one fsync in 8 taking up to
    /// kStorageLatencyMaxMs, beyond the elector's heartbeat tolerance of the fast profile); and in
    /// one run of two a bit flip (FaultKind::BitFlip) in a node's durable log, whose restart is
    /// refused until the operator repairs it (FaultKind::Repair, at the latest at the end of the
    /// window). Implies the log.
    bool storage_faults = false;
    static constexpr std::uint32_t kStorageFaultPpm = 5000;
    static constexpr std::int64_t kStorageLatencyMaxMs = 500;
    /// The bit-flip canary (StorageBug::SilentRepair): needs storage_faults.
    StorageBug storage_bug = StorageBug::None;
    /// The identity canary (IdentityBug::AdmitAnyIncarnation): matters with the wipe fault.
    IdentityBug identity_bug = IdentityBug::None;
    ClockDrift drift = ClockDrift::None;
};

struct RunResult {
    std::uint64_t seed = 0;
    std::optional<Violation> violation;
    Millis violation_at{};
    SimStats stats;
    Millis end{};
    std::uint64_t fingerprint = 0;
    /// Time from the end of the faults until every node agreed on one leader.
    std::optional<Millis> converged_after;
    Millis liveness_bound{};
    LeadershipSummary leadership;
    /// With the log: the committed history's length, the acknowledged proposals, and how long the
    /// healed cluster took (after the tail) to commit a fresh proposal and converge, and the bound.
    std::size_t log_committed = 0;
    std::size_t log_acked = 0;
    /// Compaction: snapshots taken / installed by the nodes alive at the end (since their start).
    std::uint64_t log_compactions = 0;
    std::uint64_t log_snapshots_installed = 0;
    std::optional<Millis> log_converged_after;
    Millis log_bound{};
};

/// The elector config random runs use: the fast profile with the run's switches.
elector::Config run_config(const RunOptions& options);

/// Liveness bound: once every fault has ended, every live node knows the same leader within
///     initial_wait                                  a node restarted when the faults end waits
///                                                   this long before its first scouting round
///   + 2 * inactivity_interval + heartbeat_check_period
///                                                   a leader left without a quorum steps down
///                                                   within two check-quorum periods; a follower
///                                                   notices a silent leader within the inactivity
///                                                   interval rounded up by one check period
///   + ranked_max                                    ranked backoff only: the longest ranked wait,
///                                                   (N - 1) * rank_slot + rank_slot / 8, added to
///                                                   the initial wait at start
///   + kLivenessRounds * (max(max_random_wait, ranked_max) + scouting_result_timeout
///                        + election_result_timeout + 4 * max_one_way_latency)
///                                                   election attempts (back off, scout, propose,
///                                                   four message delays each); several rounds
///                                                   allow for split votes
inline constexpr std::int64_t kLivenessRounds = 8;
Millis liveness_bound(const elector::Config& config, std::int64_t max_one_way_latency_ms);

/// Log liveness bound, from the end of the tail (the elector agreed long before, every fault is
/// over): a fresh proposal at the agreed leader commits and every log converges within
///     2 * sync_retry_period                  the leader, if still PASSIVE, re-asks once
///   + 2 * heartbeat_period                   a follower learns the commit point with the next
///                                            heartbeat; a stalled batch is re-sent after one
///   + (log_len / max_batch_entries + 4) * (2 * max_one_way_latency + flush_delay_max)
///                                            catch-up one batch per round trip (probing), plus
///                                            the round trips of the fresh proposal itself
Millis log_liveness_bound(const LogSimOptions& options, std::int64_t max_one_way_latency_ms,
                          std::size_t log_len);

/// Each node's clock drift in ppm for `options` (empty for ClockDrift::None).
std::vector<std::int32_t> draw_clock_drift(const RunOptions& options);

RunResult run_seed(const RunOptions& options);

/// The command line that replays `options` exactly (`program` is the runner's path).
std::string replay_command(std::string_view program, const RunOptions& options);

}  // namespace conclave::sim
