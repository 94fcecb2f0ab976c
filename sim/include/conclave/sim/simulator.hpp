// SPDX-License-Identifier: Apache-2.0
// Deterministic cluster simulator: N real elector cores (conclave::elector::Elector) on a simulated
// network with simulated time. One seeded Rng drives everything (latencies, losses, duplications,
// the cores' random backoff, the fault schedule built on top), so a seed replays bit for bit.
//
// Model
// - Events sit in one queue ordered by (time, sequence number); the sequence number breaks ties in
//   insertion order, which keeps runs deterministic.
// - The network is a TCP-like full mesh. The connection between a and b is up when both are alive
//   and the link is not cut. A connection going down or up produces peer_down / peer_up at both
//   live ends (after `peer_event_delay_ms`); messages in flight on a connection that went down are
//   lost (each connection has an epoch). Per direction, messages are FIFO unless reordering is on.
// - Faults: per-link latency (base + uniform jitter, slowed links), loss, duplication, reordering,
//   symmetric cuts (a single link, e.g. the article's "A-B cut only", or a partition into two
//   groups), one-way blackholes (asymmetric: the connection stays up, one direction silently
//   drops), crash + restart (durable state = the last PersistState; optionally lost, to prove the
//   checks bite), pause (a stalled process: connections stay up, nothing is processed, its inputs
//   and timers are handled late when it resumes; no peer_down anywhere).
// - Timers: one pending instance per (node, TimerId) with a generation number; arming or
//   cancelling bumps the generation, so replaced instances never fire.
// - A batch of actions is performed in order; PersistState updates the durable store at once,
//   before any later send of the batch is put on the network.
// - After every step the History invariants are checked; the first violation stops the run.
// - Optionally (SimOptions::log) each node runs a replication::ReplicatedLog beside its elector
//   (see LogSimOptions and sim/README.md, "The replicated log"): fed by the elector's
//   NotifyLeadership, its messages on the same faulty mesh, its timers in simulated time, a
//   MemoryStorage whose non-flushed tail a crash loses (group commit at random moments), and a
//   client workload; LogHistory checks its invariants after every step of every log.
#pragma once

#include <boost/describe/enum.hpp>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <vector>

#include "conclave/core/check.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/runtime/elector_runtime.hpp"
#include "conclave/runtime/log_runtime.hpp"
#include "conclave/sim/invariants.hpp"
#include "conclave/sim/log_invariants.hpp"
#include "conclave/sim/rng.hpp"

namespace conclave::sim {

/// The log configuration random runs use: short periods (simulated time is cheap) and small
/// batches, so that flow control, pipelining and catch-up in several batches are exercised.
replication::LogConfig sim_log_config();

/// The replicated log in the simulator (used when SimOptions::log is set).
struct LogSimOptions {
    /// Template for every node's log (cluster_size and self are set by the simulator).
    replication::LogConfig config = sim_log_config();
    /// Group commit: after an append, the node's storage is flushed (and the core told with
    /// persisted()) at a random moment within [0, flush_delay_max_ms]; a crash before that loses
    /// the tail.
    std::int64_t flush_delay_max_ms = 4;
    /// Clients send a request every [1, propose_interval_max_ms] ms (0: no workload).
    std::int64_t propose_interval_max_ms = 60;
    /// Client -> node latency, uniform in [1, client_latency_max_ms].
    std::int64_t client_latency_max_ms = 5;
    /// Storage faults (0: none): while the simulated time is before storage_faults_until_ms, each
    /// append fails with ENOSPC and each flush (fsync) with EIO with probability
    /// storage_fault_ppm / 1e6; the node's log runtime then stops (its failed-persist path) and
    /// the process exits (a crash). With faults on, a crash also keeps a random prefix of the
    /// unsynced tail (writes that reached the disk without an fsync) instead of losing all of it.
    std::uint32_t storage_fault_ppm = 0;
    std::int64_t storage_faults_until_ms = INT64_MAX;
    /// Slow storage (0: off): the group commit is asynchronous, as in conclaved (the runtime's
    /// begin_sync() at the flush point, sync_done() when the fsync completes), and before
    /// storage_faults_until_ms one fsync in slow_sync_one_in takes up to storage_latency_max_ms
    /// (the others up to flush_delay_max_ms). A crash before the completion loses what the sync
    /// covered (or keeps a random prefix of it, with storage_fault_ppm).
    std::int64_t storage_latency_max_ms = 0;
    std::uint64_t slow_sync_one_in = 8;
    /// Deferred commit point, as conclaved (runtime/log_runtime.hpp): the commit point a leader
    /// persists before it answers writers is written later: the write starts within
    /// [0, flush_delay_max_ms] and takes two fsyncs (and a rename, as FileStorage's), each drawn
    /// as the group commit's (slow storage included); a crash before it completes loses it, and
    /// the writers it covers are answered only once it completed.
    /// false: every PersistMeta is written at once (the runtime without schedule_meta).
    bool defer_meta = true;
    LogHistoryOptions history;
};

/// A bug planted in the simulator's storage handling (not in any production code): the canary
/// that proves the bit-flip checks bite.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    StorageBug, std::uint8_t, None,
    /// At restart, a log with a flipped byte is "repaired" silently: truncated at the flip (a
    /// flipped meta: replaced by a fresh one) and started as a voter, without the repaired
    /// marker, instead of recovery refusing to start.
    SilentRepair)

/// A switch of the simulator's model of node identity (not production code): the canary that
/// proves the wipe fault's checks bite.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    IdentityBug, std::uint8_t, None,
    /// Peers admit any incarnation of a node (no state_lost refusal), so a wiped node is admitted
    /// by a majority at its first handshakes and leaves quarantine at once.
    AdmitAnyIncarnation)

/// What a wipe (FaultKind::Wipe, in FaultAction::value) takes from a stopped node's data
/// directory.
enum class WipeLoss : std::uint8_t {
    VoteRecord,  // elector-state.json: the start is refused (exit 3) until the node is repaired
    Log,         // the log, the vote record kept: the start is refused (exit 3, the vote record
                 // says the log existed) until the node is repaired (without SimOptions::log:
                 // the elector loses nothing)
    Everything,  // the whole data directory: a new incarnation, quarantined, refused by peers
                 // that know an earlier one
};

struct SimOptions {
    std::size_t nodes = 3;
    std::uint64_t seed = 1;
    /// Template for every node's config (cluster_size and self are set by the simulator).
    elector::Config elector = elector::Config::fast(3, NodeId{0});
    /// Restart a crashed node from an empty durable state (a deliberately broken driver).
    bool lose_durable_state = false;
    /// A bug planted in the shared runtime (runtime/), to prove the simulator exercises it.
    runtime::RuntimeBug runtime_bug = runtime::RuntimeBug::None;
    /// A bug planted in the simulated storage's recovery (the bit-flip canary).
    StorageBug storage_bug = StorageBug::None;
    /// The canary of the identity model (FaultKind::Wipe).
    IdentityBug identity_bug = IdentityBug::None;
    HistoryOptions history;
    /// Each direction of each link gets a base latency uniform in [min, max]; every message adds a
    /// jitter uniform in [0, jitter].
    std::int64_t latency_min_ms = 1;
    std::int64_t latency_max_ms = 10;
    std::int64_t jitter_ms = 5;
    /// Time for a connection change to reach the node as peer_up / peer_down.
    std::int64_t peer_event_delay_ms = 2;
    /// Every this often, each leader issues an LSN (0: never).
    std::int64_t lsn_period_ms = 97;
    /// NDJSON trace sink (see TRACE-FORMAT): nullptr for none.
    std::ostream* trace = nullptr;
    /// Run a replicated log beside every elector, with a client workload.
    bool log = false;
    LogSimOptions log_options;
    /// Node-table growth (docs/membership.md §8; membership through the log): how many nodes
    /// every node's table holds at the start (0: all `nodes`). The nodes from `initial_table` on
    /// are in nobody's table and are not started: join() starts one, as `conclaved --join` does,
    /// once a configuration whose table names it has committed. A node's table (its elector's
    /// and log core's cluster_size, the links its mesh has) grows when its log makes such a
    /// configuration active; a link is up only between two nodes that each hold the other.
    std::size_t initial_table = 0;
    /// The canary of the node-table check: a node whose log's table grows does not grow its
    /// elector (a driver that forgot Node::follow_table's elector step).
    bool skip_elector_growth = false;
    /// Hostile runs against a lying member (tests/sim/hostile_test.cpp): a violation does not stop
    /// the run; it is recorded (violation_counts(), recorded_violations()) and the run goes on to
    /// the end of its budget. violation() then only holds one until the next step absorbs it.
    bool keep_running_after_violations = false;
    /// Clock drift (docs/design.md, the leader lease): node i's monotonic clock runs at
    /// 1 + clock_drift_ppm[i] / 1e6 times the simulated real time (missing or 0: the simulated
    /// clock itself). Its elector and log cores get its local time, and a timer armed on it fires
    /// at the first real millisecond at which the local clock has reached the deadline. Validated:
    /// |drift| <= kMaxClockDriftPpm.
    std::vector<std::int32_t> clock_drift_ppm;
    static constexpr std::int32_t kMaxClockDriftPpm = 500000;
};

/// A change to the simulated world, applied at a given time (see Simulator::schedule).
enum class FaultKind : std::uint8_t {
    Cut,          // symmetric cut of link a-b (connection down)
    Heal,         // undo one Cut of a-b
    Partition,    // cut every link between `mask` and the rest
    Unpartition,  // undo one Partition of `mask`
    Blackhole,    // messages a -> b silently lost; connection stays up
    Unblackhole,
    SlowLink,  // add `value` ms to a <-> b latency
    UnslowLink,
    BeginLoss,  // lose each message with probability value / 1e6
    EndLoss,
    BeginDuplication,  // duplicate each message with probability value / 1e6
    EndDuplication,
    BeginReorder,  // no FIFO per direction
    EndReorder,
    Crash,
    Restart,
    Pause,          // stall node a for `value` ms
    HealAll,        // end every fault: heal links, restart crashed nodes, stop loss/dup/reorder
    FailPersist,    // node a's next `value` (>= 1) elector state writes fail (EIO / ENOSPC)
    Transfer,       // the operator asks every node that believes it leads (alive, not paused) to
                    // transfer_leadership to b (to the node after b when it is b itself)
    CorruptRepair,  // crash a (if up); its log loses its last `value` stored entries
                    // (a corrupt tail) and is "repaired": the marker R is set, as
                    // `conclaved --repair` does (only while the repaired nodes stay a minority:
                    // otherwise a plain crash). A later Restart brings it back.
    BitFlip,        // crash a (if up) and flip a byte of its durable log: a record before the
                    // last one, or the meta (with fewer than two records, the meta); only while
                    // the damaged or repaired nodes stay a minority. Recovery then refuses to
                    // start it (every Restart is refused) until a Repair.
    Repair,         // the operator runs `conclaved --repair` on a's flipped log (truncate at the
                    // flip, or rewrite a flipped meta, and set the marker R), then starts it
    Wipe,           // crash a (if up) and lose part of its durable state: WipeLoss{value}
                    // (only while the nodes whose identity is not whole stay a minority)
    SetVoters,      // membership: node a's active configuration becomes voters `mask`
                    // at version `value` (Elector::set_voters, as the log's commit would call
                    // it); a crashed node gets it at its restart, as from its own log
};

struct FaultAction {
    FaultKind kind{};
    NodeId a{};
    NodeId b{};
    std::uint64_t mask = 0;
    std::uint32_t value = 0;
};

std::string describe(const FaultAction& f);

/// Handed to the step observer after every core input.
struct StepRecord {
    Millis now{};
    NodeId node{};
    StepAction action{};
    const elector::ElectorState* state = nullptr;  // after the step
    const elector::Actions* actions = nullptr;
};

struct SimStats {
    std::uint64_t steps = 0;   // inputs given to cores
    std::uint64_t events = 0;  // events taken off the queue
    std::uint64_t messages_sent = 0;
    std::uint64_t messages_delivered = 0;
    std::uint64_t messages_dropped = 0;
    std::uint64_t messages_duplicated = 0;
    std::uint64_t crashes = 0;
    std::uint64_t pauses = 0;
    std::uint64_t lsns_issued = 0;
    std::uint64_t persist_failures = 0;   // injected state-write failures (node then crashes)
    std::uint64_t transfers = 0;          // transfer_leadership calls the leader accepted
    std::uint64_t transfers_refused = 0;  // refused (target not connected, ...)
    std::uint64_t hand_backs = 0;         // preferred leader's hand-backs (docs/design.md)
    // The replicated log (zero without SimOptions::log).
    std::uint64_t log_steps = 0;  // inputs given to log cores
    std::uint64_t log_messages_sent = 0;
    std::uint64_t log_messages_delivered = 0;
    std::uint64_t log_messages_dropped = 0;
    std::uint64_t log_flushes = 0;
    std::uint64_t storage_faults = 0;        // injected ENOSPC / EIO (the node then crashes)
    std::uint64_t torn_tails = 0;            // crashes that kept part of an unsynced tail
    std::uint64_t log_repairs = 0;           // CorruptRepair faults applied
    std::uint64_t log_entries_repaired = 0;  // stored entries they dropped
    std::uint64_t log_repairs_skipped = 0;   // not applied: a minority is repaired already
    std::uint64_t bit_flips = 0;             // BitFlip faults applied
    std::uint64_t bit_flips_skipped = 0;     // not applied: a minority is damaged already
    std::uint64_t starts_refused = 0;        // restarts refused by recovery (a flipped byte)
    std::uint64_t flip_repairs = 0;          // flipped logs repaired by the operator
    std::uint64_t silent_repairs = 0;        // StorageBug::SilentRepair applied (the canary)
    std::uint64_t slow_syncs = 0;            // fsyncs delayed beyond flush_delay_max_ms
    std::uint64_t meta_writes_deferred = 0;  // deferred commit points written
    std::uint64_t meta_writes_lost = 0;      // deferred commit points a crash interrupted
    std::uint64_t results_held = 0;          // ProposeResults a deferred write held back
    std::uint64_t proposals = 0;             // client requests that reached a live node
    std::uint64_t proposals_appended = 0;    // accepted by an ACTIVE leader
    std::uint64_t proposals_acked = 0;       // ProposeResult::None
    std::uint64_t proposals_refused = 0;     // NotLeader, NotActive, or the node was down
    std::uint64_t proposals_unknown = 0;     // TimedOut, LeadershipLost
    // Membership through the log (zero unless configuration entries are proposed).
    std::uint64_t config_proposals = 0;            // configuration entries a log appended
    std::uint64_t config_proposals_passive = 0;    // ... by a PASSIVE leader (SkipOwnTermCommit)
    std::uint64_t config_notices = 0;              // NotifyMembership handed to electors
    std::uint64_t config_notices_stale = 0;        // ... refused as older than the elector's own
    std::uint64_t config_notices_behind_join = 0;  // ... at a joiner, older than it joined with
    // Node-table growth (SimOptions::initial_table).
    std::uint64_t table_growths = 0;           // a node's table grew (its log, mesh, elector)
    std::uint64_t joins = 0;                   // nodes started by join()
    std::uint64_t joiner_restarts = 0;         // restarts of a joined node
    std::uint64_t joiner_restarts_stored = 0;  // ... whose log held no configuration (R9)
    std::uint64_t messages_outside_table = 0;  // dropped: one end's table lacks the other
    // Node identity (FaultKind::Wipe).
    std::uint64_t wipes = 0;                // wipes applied
    std::uint64_t wipes_skipped = 0;        // not applied: a minority is wiped already
    std::uint64_t identity_refused = 0;     // restarts refused: vote record lost beside a log
    std::uint64_t state_lost_refusals = 0;  // handshakes a peer refused (state_lost, exit 3)
    std::uint64_t quarantines_ended = 0;    // new incarnations admitted by a majority
    std::uint64_t quarantine_drops = 0;     // messages dropped by a quarantined end
    std::uint64_t identity_repairs = 0;     // --repair --min-term T on a refused node
};

class Simulator {
  public:
    explicit Simulator(SimOptions options);
    ~Simulator();
    Simulator(const Simulator&) = delete;
    Simulator& operator=(const Simulator&) = delete;

    /// Starts every node at the current time and brings the mesh up.
    void start_all();
    /// Applies `fault` at time `at` (>= now).
    void schedule(Millis at, FaultAction fault);
    /// Applies `fault` now.
    void apply(const FaultAction& fault);

    /// Processes the next event. False when the queue is empty or a violation was found.
    bool step();
    /// Processes every event up to and including `until`, then sets the clock to `until`.
    /// False if a violation stopped the run.
    bool run_until(Millis until);

    // ---- Observation ---------------------------------------------------------------------------
    Millis now() const { return Millis{now_ms_}; }
    /// What node `n`'s own clock reads now (SimOptions::clock_drift_ppm; now() without drift).
    Millis local_now(NodeId n) const { return Millis{local_ms(n.value, now_ms_)}; }
    /// The drift of `n`'s clock in ppm (0: none).
    std::int32_t clock_drift_ppm(NodeId n) const { return drift_ppm_[n.value]; }
    std::size_t size() const { return options_.nodes; }
    bool alive(NodeId n) const { return cores_[n.value] != nullptr; }
    bool paused(NodeId n) const { return paused_until_ms_[n.value] > now_ms_; }
    /// A new incarnation not yet admitted by a majority of the other voters: its messages and
    /// those sent to it are dropped.
    bool quarantined(NodeId n) const { return registered_[n.value] == 0; }
    /// The incarnation of `n`'s data directory (1 at the start; a wipe or a repair gives another).
    std::uint32_t data_incarnation(NodeId n) const { return data_incarnation_[n.value]; }
    /// Whether `n` may not start until it is repaired (vote record lost, or refused by a peer).
    bool identity_refused(NodeId n) const { return identity_refused_[n.value] != 0; }
    /// State of a live node's core (nullptr when crashed).
    const elector::ElectorState* state(NodeId n) const;
    /// The ranked backoff's current slot at `n` (it follows round_trip()); nullopt when crashed.
    std::optional<Millis> rank_slot(NodeId n) const;
    /// What a node's mesh would measure: the largest round trip (base + slowed latency both
    /// ways, + the jitter's maximum) over its connected links; nullopt without any. Given to the
    /// core before every input (ElectorRuntime::observe_round_trip).
    std::optional<std::chrono::microseconds> round_trip(std::size_t node) const;
    /// True when a and b can talk both ways (connection up, no blackhole either way).
    bool connected(NodeId a, NodeId b) const;
    /// Alive, not paused, and connected to a majority (itself included).
    bool healthy(NodeId n) const;
    /// True when no fault is in effect.
    bool fault_free() const;
    const std::optional<Violation>& violation() const { return violation_; }
    /// With SimOptions::keep_running_after_violations: how many violations of each kind the run
    /// met, and the first kMaxRecordedViolations of them in order.
    const std::map<ViolationKind, std::uint64_t>& violation_counts() const {
        return violation_counts_;
    }
    const std::vector<Violation>& recorded_violations() const { return recorded_violations_; }
    static constexpr std::size_t kMaxRecordedViolations = 16;
    const SimStats& stats() const { return stats_; }
    const History& history() const { return history_; }
    const SimOptions& options() const { return options_; }
    /// The run's only random generator; schedules built before start_all() draw from it too.
    Rng& rng() { return rng_; }
    /// Hash of every step (time, node, action, state after): equal runs have equal fingerprints.
    std::uint64_t fingerprint() const { return fingerprint_; }

    /// Called after every core input (for timelines, liveness and stability tracking).
    std::function<void(const Simulator&, const StepRecord&)> on_step;

    // ---- The replicated log (SimOptions::log) --------------------------------------------------
    bool log_enabled() const { return options_.log; }
    /// A live node's log core (nullptr when crashed or without SimOptions::log).
    const replication::ReplicatedLog* log(NodeId n) const;
    /// Every node's log core, nullptr for crashed nodes.
    std::vector<const replication::ReplicatedLog*> logs() const;
    const LogHistory& log_history() const { return log_history_; }
    /// Starts or stops the client workload (on by default with SimOptions::log).
    void set_workload(bool on);
    /// A client request handled by `n` now: proposes a fresh entry. The LSN if n's log appended
    /// it (its outcome is reported later), nullopt if refused (or n is down or paused).
    std::optional<Lsn> propose_now(NodeId n);

    // ---- Hostile input (tests/sim/hostile_test.cpp) --------------------------------------------
    /// Hands `m` to node `to`'s elector now, as if it had arrived from the network, whatever its
    /// `from` and field values (a forged frame that passed the decoder). False when `to` is not a
    /// live, running node or the run has stopped.
    bool inject(NodeId to, const elector::Message& m);
    /// The same for `to`'s log core (SimOptions::log).
    bool inject_log(NodeId to, const replication::LogMessage& m);

    // ---- Membership ----------------------------------------------------------------------------
    /// Gives node `n` its new active configuration now (FaultKind::SetVoters). Remembered for
    /// its restarts. False when the core refused it (it counts the refusal).
    bool set_voters(NodeId n, NodeSet voters, std::uint64_t version);
    /// The configuration last given to `n` (nullopt: none, the default one).
    std::optional<std::pair<NodeSet, std::uint64_t>> voters_of(NodeId n) const {
        return configs_[n.value];
    }
    /// Membership through the log (SimOptions::log with LogConfig::decode_configuration set): node
    /// `n`'s log appends `value` (the codec's JSON of a Configuration) with propose_config, the
    /// LSN from its elector, as an operator's request to the ACTIVE leader. The LSN if appended;
    /// nullopt if refused (not the ACTIVE leader, a change pending, not adjacent), down or paused.
    /// A refusal the log's check_config_change did not predict is a LogDriver violation.
    std::optional<Lsn> propose_config_now(NodeId n, std::string value);

    // ---- Node-table growth (SimOptions::initial_table; docs/membership.md §8) ------------------
    /// How many nodes `n`'s table holds (the table it starts with: stored, it survives crashes);
    /// 0 while `n` is in nobody's table and has not joined.
    std::size_t table_size(NodeId n) const { return table_[n.value]; }
    /// Starts node `n` (outside the initial table, not started yet) as `conclaved --join` does
    /// once the configuration adding it committed: its log core with a table of `table` nodes
    /// and an empty log, its elector at that configuration (`voters`, `version`: a learner),
    /// which it also starts with after a crash until its log holds a configuration (R9).
    /// False when `n` has joined already, `table` does not name it, or the run has stopped.
    bool join(NodeId n, std::size_t table, NodeSet voters, std::uint64_t version);

  private:
    /// Node `n`'s clock at real time `real_ms`, and the first real time at which it reads at
    /// least `local` (never before now: a timer armed now fires now or later).
    std::int64_t local_ms(std::size_t n, std::int64_t real_ms) const {
        const std::int64_t d = drift_ppm_[n];
        return d == 0 ? real_ms : real_ms + floor_div(real_ms * d, 1000000);
    }
    std::int64_t real_ms_at(std::size_t n, std::int64_t local) const;
    static std::int64_t floor_div(std::int64_t a, std::int64_t b) {
        return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
    }
    std::optional<std::chrono::microseconds> current_round_trip(std::size_t node);
    enum class LogInput : std::uint8_t {
        Start,
        OnLeadership,
        Propose,
        Receive,
        TimerFired,
        Persisted,
        PeerUp,
        PeerDown
    };
    enum class EventKind : std::uint8_t {
        Deliver,
        Timer,
        PeerUp,
        PeerDown,
        Fault,
        LsnTick,
        LogDeliver,     // a LogMessage (in log_payloads_[payload]) arrives
        LogTimerFired,  // log timer `log_timer` of `node`
        LogFlush,       // group commit point of `node`'s storage
        LogSyncDone,    // the asynchronous fsync of `node`'s storage completed (slow storage)
        LogMetaBegin,   // `node` starts writing its deferred commit point
        LogMetaDone,    // the write of `node`'s deferred commit point completed
        ClientTick,     // the workload sends its next request
        ClientRequest,  // a client request arrives at `node`
    };
    struct Event {
        std::int64_t time_ms = 0;
        std::uint64_t seq = 0;
        EventKind kind{};
        std::uint16_t node = 0;  // destination / owner
        std::uint16_t peer = 0;  // sender for Deliver, subject of PeerUp/PeerDown
        elector::TimerId timer{};
        replication::LogTimer log_timer{};
        std::uint32_t stamp = 0;    // timer generation, connection epoch or node incarnation
        std::uint32_t fault = 0;    // index into faults_
        std::uint32_t payload = 0;  // LogDeliver: index into log_payloads_
        elector::Message message;
    };
    /// A timer event of `kind` for node `n`, due `delay` from now on n's clock, stamped with the
    /// timer's generation and n's incarnation (the caller sets which timer it is).
    Event timer_event(std::size_t n, Millis delay, EventKind kind,
                      runtime::TimerGeneration generation) const;
    struct Later {
        template <class E>
        bool operator()(const E& x, const E& y) const {
            return x.time_ms != y.time_ms ? x.time_ms > y.time_ms : x.seq > y.seq;
        }
    };

    // The environment the shared runtime (runtime/elector_runtime.hpp) runs each elector in:
    // simulated time, network and durable storage.
    struct ElectorEnv {
        Simulator* sim = nullptr;
        std::size_t node = 0;
        static constexpr bool kPlantedBugs = true;
        // The planted SendBeforePersist is caught by History (not-durable), not by the
        // runtime's own check (tests/sim/runtime_test.cpp shows both).
        static constexpr bool kOwnPersistOrderCheck = true;
        Millis now() const { return sim->local_now(NodeId{static_cast<std::uint16_t>(node)}); }
        void send(std::span<const NodeId> to, const elector::Message& m);
        void arm(elector::TimerId timer, Millis delay, runtime::TimerGeneration generation);
        void cancel(elector::TimerId) {}
        bool persist(const elector::DurableState& state);
        void notify(const elector::LeadershipSnapshot& snapshot);
        void alarm(const elector::RaiseAlarm&) {}  // History checks the actions themselves
        void failed(const elector::DurableState& state);
        void before_actions(const elector::Actions& actions);
    };
    /// One live elector process: its core inside the shared runtime.
    struct SimNode {
        SimNode(Simulator& sim, std::size_t node, elector::Config config,
                elector::DurableState restored);
        ElectorEnv env;
        runtime::ElectorRuntime<ElectorEnv> rt;
        const elector::ElectorState& state() const { return rt.elector().state(); }
        std::optional<Lsn> issue_lsn() { return rt.issue_lsn(); }
    };
    // The storage a node's log runtime writes to: its MemoryStorage (log_storage_, which survives
    // crashes), with the injected faults of LogSimOptions::storage_fault_ppm.
    class FaultyLogStorage final : public replication::LogStorage {
      public:
        FaultyLogStorage(Simulator* sim, std::size_t node) : sim_(sim), node_(node) {}
        replication::Recovery recover() override { return inner().recover(); }
        void append(const std::vector<replication::Entry>& entries) override;
        void truncate_after(Lsn after_lsn) override { inner().truncate_after(after_lsn); }
        void write_meta(const replication::LogMeta& meta) override { inner().write_meta(meta); }
        Lsn flush() override;
        Lsn durable_lsn() const override { return sim_->log_storage_[node_].durable_lsn(); }
        void persist_snapshot(const replication::Snapshot& snapshot) override {
            inner().persist_snapshot(snapshot);
        }
        replication::SyncTicket begin_sync() override { return inner().begin_sync(); }
        Lsn end_sync(const replication::SyncTicket& ticket) override {
            return inner().end_sync(ticket);
        }

      private:
        replication::MemoryStorage& inner() { return sim_->log_storage_[node_]; }
        Simulator* sim_;
        std::size_t node_;
    };
    // The environment of each node's log runtime (runtime/log_runtime.hpp): simulated network,
    // time, MemoryStorage (with faults), the group commit at a random moment, and the deferred
    // commit point (LogSimOptions::defer_meta).
    struct LogEnv {
        Simulator* sim = nullptr;
        std::size_t node = 0;
        FaultyLogStorage store;
        static constexpr bool kPlantedBugs = true;
        // The planted AckBeforeFsync is caught by LogHistory (log-not-durable, log-ack-lost), not
        // by the runtime's own check (tests/replication/log_runtime_test.cpp shows that one).
        static constexpr bool kOwnPersistOrderCheck = true;
        Millis now() const { return sim->local_now(NodeId{static_cast<std::uint16_t>(node)}); }
        replication::LogStorage& storage() { return store; }
        void send(std::span<const NodeId> to, const replication::LogMessage& m);
        void arm(replication::LogTimer timer, Millis delay, runtime::TimerGeneration generation);
        void cancel(replication::LogTimer) {}
        void schedule_flush();
        void schedule_meta();  // the deferred commit point (LogSimOptions::defer_meta)
        bool defers_meta() const { return sim->options_.log_options.defer_meta; }
        void apply(const std::vector<replication::Entry>&) {}  // LogHistory checks the actions
        /// An answer the runtime released (LogHistory checks it after the step, or at once
        /// after a deferred commit point's write).
        void propose_result(const replication::ProposeResult& result);
        void role(const replication::NotifyLogRole&) {}
        /// Membership: the log's active configuration changed; the voters and the
        /// version go to this node's elector (set_voters), as the production driver does. Handed
        /// over once the outermost input under way is done (see Simulator::log_membership).
        void membership(const replication::NotifyMembership& notice);
        void failed(const std::string& what);
        void after_batch() {}
        void before_actions(const replication::LogActions& actions);
    };
    struct LogNode {
        LogNode(Simulator& sim, std::size_t node, replication::LogConfig config,
                replication::RecoveredLog recovered);
        LogEnv env;
        runtime::LogRuntime<LogEnv> rt;
        std::optional<replication::SyncTicket> sync;     // the fsync in flight (slow storage)
        std::optional<replication::LogMeta> meta_write;  // the deferred commit point in flight
    };
    /// A flipped byte in a stopped node's durable log (FaultKind::BitFlip).
    struct Flip {
        bool meta = false;       // the meta; else the record at `record` (entries() index)
        std::size_t record = 0;  // the first bad record
    };
    /// The log input being given (for tracing).
    struct PendingLogStep {
        LogInput input{};
        const replication::LogMessage* received = nullptr;
    };

    /// The input being given to a node (for tracing and the step hooks).
    struct PendingStep {
        StepAction action{};
        const elector::Message* received = nullptr;
        std::optional<NodeId> peer;
        std::optional<elector::TimerId> timer;
        bool begun = false;
        std::size_t persisted = 0;  // PersistState actions of this step that were written
    };
    /// Gives one input to `node`'s runtime (`call`), which performs the core's actions.
    template <class Call>
    void input(std::size_t node, StepAction action, Call&& call,
               const elector::Message* received = nullptr,
               std::optional<NodeId> peer = std::nullopt,
               std::optional<elector::TimerId> timer = std::nullopt);
    void begin_step(std::size_t node, StepAction action, const elector::Actions& actions,
                    const elector::Message* received, std::optional<NodeId> peer,
                    std::optional<elector::TimerId> timer);
    void finish_step(std::size_t node, StepAction action, const elector::Actions& actions);
    /// finish_step for a step whose state write failed: checks what took effect, not what the
    /// core holds in memory (see the definition).
    void finish_failed_step(std::size_t node, StepAction action, const elector::Actions& actions);

    std::size_t link(std::size_t a, std::size_t b) const { return a * options_.nodes + b; }
    void push(Event e);
    Event pop();  // the earliest event (the queue must not be empty)
    elector::Config config_for(std::size_t node) const;
    void dispatch(const Event& e);
    // dispatch(), by case.
    void lsn_tick(const Event& e);
    void dispatch_to_crashed(const Event& e);
    bool drop_stale(const Event& e);
    void deliver(const Event& e);
    /// A step that gives the core no input through the runtime (IssueLsn): hooks only.
    void perform(std::size_t node, StepAction action, const elector::Actions& actions);
    void send(std::size_t from, std::size_t to, const elector::Message& m);
    void update_connection(std::size_t a, std::size_t b);
    void crash(std::size_t n);
    /// The process of `node` exits now (after the current step: a queued Crash fault).
    /// `f` as a fault event now, after the events already due now.
    void fault_now(const FaultAction& f);
    void crash_now(std::size_t node);
    void restart(std::size_t n);
    void transfer(std::size_t target);
    /// After a heartbeat broadcast firing: the preferred leader's hand-back, if the core names a
    /// node (ElectorRuntime::hand_back), traced and checked as a TransferLeadership step.
    void hand_back(std::size_t node);
    // apply(), by kind of fault: true when the fault was of that kind.
    bool apply_link_fault(const FaultAction& f);
    bool apply_loss_fault(const FaultAction& f);
    void apply_node_fault(const FaultAction& f);
    /// FaultKind::CorruptRepair on node `a`.
    void corrupt_repair(std::size_t a, std::uint32_t drop);
    /// FaultKind::HealAll.
    void heal_all();
    void cut_pair(std::size_t a, std::size_t b, int delta);
    void trace_step(std::size_t node, StepAction action, const elector::Actions& actions,
                    const elector::ElectorState& state, const elector::Message* received,
                    std::optional<NodeId> peer, std::optional<elector::TimerId> timer);
    void trace_net(const char* event, const elector::Message* m, std::size_t to, const char* detail,
                   const replication::LogMessage* log_message = nullptr);
    void trace_log(std::size_t node, LogInput input, const replication::LogActions& actions,
                   const replication::LogMessage* received);
    void install_log_check_handler();
    /// keep_running_after_violations: counts and clears violation_ (no-op otherwise).
    void absorb_violation();
    void record_violation(Violation v);
    void check(std::size_t node, StepAction action, const elector::ElectorState& state,
               const elector::Actions& actions);
    /// LeaseExclusive: no two live nodes hold a valid leader lease at now().
    void check_lease_exclusive();
    /// The clocks' drift and whether it is beyond the bound rho ("" without drift).
    std::string drift_note() const;

    // The replicated log (simulator_log.cpp).
    replication::LogConfig log_config_for(std::size_t node) const;
    void transmit(std::size_t from, std::size_t to, const elector::Message* m,
                  const replication::LogMessage* log_message);
    void send_log(std::size_t from, std::size_t to, const replication::LogMessage& m);
    std::uint32_t store_payload(const replication::LogMessage& m);
    replication::LogMessage take_payload(std::uint32_t index);
    void log_start(std::size_t node);
    void log_crash(std::size_t node);
    /// FaultKind::CorruptRepair on a crashed node: drop up to `drop` stored entries, set the
    /// marker.
    void log_corrupt_and_repair(std::size_t node, std::uint32_t drop, NodeSet unaware);
    /// Nodes other than `node` whose state is not whole: wiped (refused, or quarantined as a new
    /// incarnation), or, with the log, a log that is flipped (refusing to start) or carries the
    /// repaired marker. Wipes, bit flips and corrupting crashes keep them a minority.
    std::size_t damaged_except(std::size_t node) const;
    /// FaultKind::BitFlip: crash `node` and flip a byte of its log.
    void log_bit_flip(std::size_t node);
    /// Whether recovery lets `node` start (false: a flipped byte, the restart is refused);
    /// StorageBug::SilentRepair truncates silently instead.
    bool log_recovery_allows_start(std::size_t node);
    /// FaultKind::Repair (and HealAll): `conclaved --repair` on a flipped log, then a restart.
    void log_repair_flip(std::size_t node);
    // Node identity (simulator_identity.cpp; node/src/identity.cpp, net/ handshake).
    void init_identity();
    /// FaultKind::Wipe on node `n`.
    void wipe(std::size_t n, WipeLoss loss);
    /// Whether `n` may start (false: its vote record is lost beside a log, or a peer refused it).
    bool identity_allows_start(std::size_t n);
    /// The handshake of a connection a-b coming up: each end admits the other's incarnation or
    /// refuses it (the refused node exits). True when both admitted.
    bool handshake(std::size_t a, std::size_t b);
    bool admits(std::size_t self, std::size_t peer) const;
    /// The wipe of `n`'s log storage (SimOptions::log); `unaware`: the peers not yet told of its
    /// crash.
    void log_wipe(std::size_t n, NodeSet unaware);
    /// `conclaved --repair --min-term T` on a node whose start is refused, then a restart.
    void repair_identity(std::size_t n);
    /// Messages from or to a quarantined node are dropped (counted; traced).
    bool quarantine_drops(std::size_t from, std::size_t to, const elector::Message* m,
                          const replication::LogMessage* log_message);
    /// A node's log restarts on at least what its storage held durably when it stopped, unless
    /// it carries the repaired marker (LogTruncated).
    void check_recovered_floor(std::size_t node);
    /// The asynchronous group commit (slow storage): LogFlush begins a sync, LogSyncDone ends it.
    void log_begin_sync(std::size_t node);
    void log_end_sync(std::size_t node);
    /// An event of `node`'s current incarnation at a random moment within flush_delay_max_ms.
    void push_within_flush_delay(std::size_t node, EventKind kind);
    /// A storage completion event (LogSyncDone, LogMetaDone) after `fsyncs` drawn fsync delays.
    void push_storage_completion(std::size_t node, EventKind kind, int fsyncs);
    /// The deferred commit point (LogSimOptions::defer_meta): LogMetaBegin takes it from the
    /// runtime, LogMetaDone writes it and hands it back.
    void log_begin_meta(std::size_t node);
    void log_end_meta(std::size_t node);
    /// LogHistory checks the answers the runtime released (released_) to `node`'s clients.
    void check_released(std::size_t node);
    void dispatch_log(const Event& e);
    void client_tick();
    void client_request(std::size_t node);
    /// Gives one input to `node`'s log core and performs what it returns; a failed CONCLAVE_CHECK
    /// inside the core becomes a LogCoreCheck violation.
    void log_input(std::size_t node, LogInput input,
                   const std::function<replication::LogActions(replication::ReplicatedLog&)>& call,
                   const replication::LogMessage* received = nullptr);
    using LogRt = runtime::LogRuntime<LogEnv>;
    /// Gives one input to `node`'s log runtime and checks LogHistory after it.
    void log_step(std::size_t node, LogInput input,
                  const std::function<const replication::LogActions&(LogRt&)>& call,
                  const replication::LogMessage* received = nullptr);
    void begin_log_step(std::size_t node, LogInput input, const replication::LogActions& actions,
                        const replication::LogMessage* received);
    /// Whether the storage operation now under way fails (LogSimOptions::storage_fault_ppm).
    bool storage_fault();
    /// Appends a client entry (config = false) or a configuration entry (propose_config) at
    /// `node`'s log, the LSN from its elector when the log can take it (propose_now).
    /// `config_acceptable`: check_config_change accepts it (a configuration the core will refuse
    /// is not recorded as proposed: its InvalidEntry is expected).
    std::optional<Lsn> propose_entry(std::size_t node, replication::Entry entry, bool config,
                                     bool config_acceptable);
    /// Membership through the log: queues `notice` for `node`'s elector; delivered by
    /// deliver_membership() once no input is under way (an elector step may not run inside a
    /// log step whose actions are half performed, nor inside another elector step).
    void log_membership(std::size_t node, const replication::NotifyMembership& notice);
    /// Both ends hold each other in their tables (else the mesh has no connection between them).
    bool knows(std::size_t a, std::size_t b) const { return b < table_[a] && a < table_[b]; }
    /// After every event: each live node's elector and log core hold its table (NodeTable).
    void check_tables();
    /// A joiner's start (join() and its restarts): while its log holds no configuration, its
    /// elector takes the one it was accepted with (node/src/node.cpp, the stored table).
    void start_joiner_config(std::size_t node);
    void deliver_membership();
    /// Counts the inputs under way (elector and log, nested); at zero, queued notices go out.
    struct Busy {
        explicit Busy(Simulator& s) : sim(s) { ++sim.busy_; }
        ~Busy();
        Busy(const Busy&) = delete;
        Busy& operator=(const Busy&) = delete;
        Simulator& sim;
    };

    SimOptions options_;
    Rng rng_;
    History history_;
    std::int64_t now_ms_ = 0;
    std::uint64_t next_seq_ = 0;
    // The event queue: a heap of (time, sequence, slot) keys over a pool of events, so the heap
    // moves 24 bytes, not a whole event with its message.
    struct QueuedEvent {
        std::int64_t time_ms = 0;
        std::uint64_t seq = 0;
        std::uint32_t slot = 0;
    };
    std::priority_queue<QueuedEvent, std::vector<QueuedEvent>, Later> queue_;
    std::vector<Event> event_pool_;
    std::vector<std::uint32_t> free_slots_;
    std::vector<FaultAction> faults_;

    std::vector<std::unique_ptr<SimNode>> cores_;  // nullptr when crashed
    std::vector<elector::DurableState> durable_;
    std::vector<std::uint32_t> persist_failures_;  // pending injected state-write failures
    std::vector<std::uint32_t> incarnation_;
    std::vector<std::int64_t> paused_until_ms_;
    std::vector<std::int32_t> drift_ppm_;  // per node (SimOptions::clock_drift_ppm)
    PendingStep pending_;

    // Per ordered pair (a * n + b).
    std::vector<std::uint16_t> cut_count_;        // symmetric: kept equal for (a,b) and (b,a)
    std::vector<std::uint16_t> blackhole_count_;  // direction a -> b
    std::vector<std::int64_t> slow_ms_;           // symmetric extra latency
    std::vector<std::uint8_t> connection_up_;     // symmetric
    // Bumped whenever connection_up_, slow_ms_ or base_latency_ms_ change: round_trip()'s cache.
    std::uint64_t links_version_ = 0;
    struct RoundTripCache {
        std::uint64_t links_version = ~std::uint64_t{0};
        std::optional<std::chrono::microseconds> value;
    };
    std::vector<RoundTripCache> round_trip_cache_;
    std::vector<std::uint32_t> epoch_;           // symmetric connection epoch
    std::vector<std::int64_t> base_latency_ms_;  // direction a -> b
    std::vector<std::int64_t> last_arrival_ms_;  // direction a -> b (FIFO)

    std::uint32_t loss_ppm_ = 0;
    std::uint32_t duplication_ppm_ = 0;
    int loss_depth_ = 0;
    int duplication_depth_ = 0;
    int reorder_depth_ = 0;

    // The replicated log: cores (empty when crashed or disabled), storage that survives crashes.
    std::vector<std::unique_ptr<LogNode>> logs_;  // nullptr when crashed or disabled
    std::vector<replication::MemoryStorage> log_storage_;
    std::vector<std::optional<Flip>> flipped_;  // per node: a flipped byte not repaired yet
    std::vector<std::size_t> floor_len_;        // per node: durable log length at its last stop
    std::vector<Term> floor_term_;              // per node: durable meta term at its last stop
    PendingLogStep pending_log_;
    std::vector<const replication::ReplicatedLog*> log_views_;  // &*logs_[n] or nullptr
    std::vector<replication::LogMessage> log_payloads_;
    std::vector<std::uint32_t> free_payloads_;
    LogHistory log_history_;
    std::vector<replication::ProposeResult> released_;  // answers of the current log input
    conclave::InvariantFailureHandler previous_check_handler_ = nullptr;
    bool workload_ = false;
    bool workload_ticking_ = false;
    std::uint16_t client_belief_ = 0;  // the node clients think leads
    std::uint64_t client_sequence_ = 0;

    // Membership: the configuration each node was last given (re-given at its restarts, unless
    // the log runs: then the restarted log's start() hands its own to the elector, R9).
    std::vector<std::optional<std::pair<NodeSet, std::uint64_t>>> configs_;
    // Membership through the log: NotifyMembership not yet handed to the elector.
    struct PendingNotice {
        std::size_t node = 0;
        std::uint32_t incarnation = 0;
        NodeSet voters;
        std::uint64_t version = 0;
        std::size_t table = 0;  // the table size the elector grows to first (0: no growth)
    };
    std::vector<PendingNotice> pending_notices_;
    // Node-table growth: each node's table size (0: not joined yet), and the configuration a
    // joiner was accepted with (its elector's start while its log holds none).
    std::vector<std::size_t> table_;
    std::vector<std::optional<std::pair<NodeSet, std::uint64_t>>> join_config_;
    int busy_ = 0;

    // Node identity: each data directory's incarnation, whether it is registered (admitted by a
    // majority; else quarantined) and repaired, whether its start is refused (1: vote record
    // lost beside a log, 2: a peer refused it, state_lost), the peers that admitted it since its
    // start, the incarnation each node admitted each peer with (peers.json, a * n + b; 0: none),
    // and the highest term a wiped node's lost vote records held (the repair's bound).
    std::vector<std::uint32_t> data_incarnation_;
    std::vector<std::uint8_t> registered_;
    std::vector<std::uint8_t> repaired_identity_;
    std::vector<std::uint8_t> identity_refused_;
    std::vector<std::uint64_t> admitted_by_;
    std::vector<std::uint32_t> known_incarnation_;
    std::vector<std::uint64_t> lost_term_;
    std::uint32_t next_incarnation_ = 0;

    std::optional<Violation> violation_;
    // SimOptions::keep_running_after_violations: violations moved out of violation_.
    std::map<ViolationKind, std::uint64_t> violation_counts_;
    std::vector<Violation> recorded_violations_;
    SimStats stats_;
    std::uint64_t fingerprint_ = 0;
    bool started_ = false;
};

}  // namespace conclave::sim
