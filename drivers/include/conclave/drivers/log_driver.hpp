// SPDX-License-Identifier: Apache-2.0
// LogDriver: runs the replicated metadata log core (replication/log.hpp) on the io_context of an
// ElectorDriver, over the same Mesh (Channel::Replication), with FileStorage on disk.
//
// Why in net/: it is the log's twin of ElectorDriver (core actions -> mesh sends, timers, durable
// storage; mesh frames and peer events -> core inputs) and needs nothing from the node layer. The
// node (Node::propose, /metadata) sits on top of it.
//
// The core's LogActions are interpreted by the shared runtime (runtime/log_runtime.hpp, the code
// the simulator runs too: fan-out, timer generations, storage before the next action, group
// commit, stop after a storage failure); this driver is its production environment. The effects,
// in order:
//   SendLog / BroadcastLog        -> CBOR (codec/log_codec.hpp), Mesh::send on Channel::Replication
//   PersistMeta / TruncateEntries -> FileStorage, durable before the next action
//   PersistEntries                -> FileStorage::append (write); made durable by the group commit
//                                    below
//   ArmLogTimer / CancelLogTimer  -> one steady_timer per LogTimer with a generation number
//   ApplyCommitted                -> committed-entry subscribers (after the batch, in order)
//   ProposeResult                 -> the proposer's callback (after the batch)
//   NotifyLogRole                 -> role()/leader_status, log line
//   NotifyMembership              -> ElectorDriver::set_voters (after the batch), log line; a
//                                    refusal is logged as an error and counted
// Group commit on a storage thread: after a batch that appended entries, a sync is posted to the
// io_context, so everything appended by the handlers that run before it (proposals, appends from
// the leader) is covered; the fsync itself runs on the driver's storage thread while the io
// thread goes on (elector heartbeats stay on time), and its result comes back by post: only then
// does the core hear persisted() (durable before acknowledged). What is appended while a sync
// runs shares the next one. A storage error (on append, meta, truncate, or the storage thread's
// fsync) stops the log for good (failed(); pending proposals are answered Failed), like the
// elector driver's failed state write.
//
// Inputs: Replication-channel frames (decoded; the decoded sender must be the handshaken peer,
// else the frame is rejected and the connection closed, counted by the mesh), peer up/down,
// every leadership snapshot the ElectorDriver delivers (subscribe), and propose().
// Proposal LSNs come from the elector (ElectorDriver::issue_lsn): (term, counter) with the term
// of this leadership, so they are unique across restarts (see replication/README.md).
//
// Threading: the ElectorDriver's io_context, one thread, plus the storage thread, which only runs
// LogStorage::sync (the fsync; it touches the file descriptor and an atomic counter) and posts the
// result back. The driver must be destroyed before the mesh, the elector driver and the
// io_context (callbacks registered with them check that it is alive; the destructor joins the
// storage thread).
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "conclave/drivers/driver.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/replication/key_state.hpp"
#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/runtime/log_runtime.hpp"

namespace conclave::drivers {

inline constexpr std::size_t kLogMessageTypeCount =
    std::variant_size_v<replication::LogMessageBody>;

/// How a proposal ended. Only Committed is a promise; TimedOut, LeadershipLost and Failed mean
/// the outcome is unknown (the entry may still commit: committed-entry subscribers see it if so).
enum class ProposeStatus : std::uint8_t {
    Committed,
    NotLeader,        // not the leader (nothing appended)
    NotActive,        // leader, still syncing (nothing appended)
    InvalidEntry,     // empty/oversized key or value (nothing appended)
    TimedOut,         // outcome unknown
    LeadershipLost,   // outcome unknown
    Stopped,          // the log is not running (not started, stopped; nothing appended)
    Failed,           // storage failed; outcome unknown
    NoSpace,          // the log's quota is reached: NOSPACE alarm (nothing appended)
    ConditionFailed,  // a ProposeCondition does not hold (nothing appended)
};
std::string_view to_string(ProposeStatus s);
/// Whether an entry with this status may have been appended and may still commit.
bool outcome_unknown(ProposeStatus s);

struct ProposeOutcome {
    ProposeStatus status = ProposeStatus::Committed;
    Lsn lsn{};  // the committed LSN (or the LSN the entry was appended at, when unknown)
    /// ConditionFailed: the key's last write the condition was checked against (kNoLsn: none)
    /// and the leader's term.
    Lsn current{};
    Term term{};
};

/// Conditions of a proposal (conditional and fenced writes), checked by the leader when it
/// appends the entry, against the state the entry will apply on: the committed key state plus
/// every entry before it in the leader's log, uncommitted ones included. The check and the append
/// are one step on the io thread, so no other entry can come between them; an entry commits
/// only with every entry before it, so the state it was checked against is the state it applies
/// on. A failed condition appends nothing.
struct ProposeCondition {
    /// The LSN of the key's last write must equal this one (kNoLsn: the key must not exist).
    std::optional<Lsn> expect_lsn;
    /// The leader's term (its fencing token) must equal this one; the entry is then of that term.
    std::optional<Term> fence;
    bool empty() const { return !expect_lsn && !fence; }
};

struct LogDriverOptions {
    /// Directory of the log files (<data_dir>/log); created if missing.
    std::filesystem::path dir;
    replication::FsyncPolicy fsync = replication::FsyncPolicy::Batched;
    /// Core configuration; cluster_size and self are taken from the mesh. max_batch_bytes is
    /// capped so that a batch fits in one frame.
    replication::LogConfig config;
    /// Where the driver logs; spdlog's default logger when unset.
    std::shared_ptr<spdlog::logger> logger{};
    /// Called once (after the current batch of actions) when a storage error stops the log, with
    /// the error: the owner takes the node out of service (conclaved steps down and exits 1).
    std::function<void(const std::string&)> on_storage_failure{};
    /// The log's storage (not yet recovered). Null (the default): a FileStorage in `dir` with
    /// `fsync`. Tests inject a faulty storage here (tests/net/storage_fault_test.cpp).
    std::shared_ptr<replication::LogStorage> storage{};
    /// Membership (docs/membership.md §8): called for each NotifyMembership at once, inside the
    /// batch, before any later action of it (which may send to a node the configuration added:
    /// the owner grows the mesh and the elector here). Must not close connections or feed the
    /// drivers inputs (post that).
    std::function<void(const replication::NotifyMembership&)> on_membership{};
};

struct LogDriverCounters {
    std::array<std::uint64_t, kLogMessageTypeCount> messages_in{};  // by LogMessageBody index
    std::array<std::uint64_t, kLogMessageTypeCount> messages_out{};
    std::uint64_t messages_dropped = 0;  // the mesh refused (peer down, queue overflow)
    std::uint64_t bad_frames = 0;        // undecodable or wrong sender (connection closed)
    /// Log messages of a term above the elector's durable term, dropped until the elector has
    /// made that term durable: the log never holds an entry of a term above the vote record's.
    std::uint64_t ahead_of_vote_record = 0;
    std::uint64_t flushes = 0;  // group commits
    std::uint64_t storage_failures = 0;
    std::uint64_t proposals_ok = 0;
    std::uint64_t proposals_failed = 0;   // every other outcome
    std::uint64_t conditions_failed = 0;  // ... of which: a ProposeCondition did not hold
    // Membership.
    std::uint64_t membership_changes = 0;  // NotifyMembership handed to the elector
    std::uint64_t voter_set_refused = 0;   // ... and refused by it (ElectorDriver::set_voters)
};

class LogDriver {
  public:
    using ProposeCallback = std::function<void(const ProposeOutcome&)>;
    using CommittedCallback = std::function<void(const replication::Entry&)>;

    /// Recovers the log from options.dir (a torn tail is truncated and logged). Throws
    /// std::runtime_error / std::system_error naming the file when the directory holds a foreign
    /// or damaged log, std::invalid_argument for a config that does not validate.
    LogDriver(boost::asio::io_context& io, net::Mesh& mesh, ElectorDriver& elector,
              LogDriverOptions options);
    ~LogDriver();
    LogDriver(const LogDriver&) = delete;
    LogDriver& operator=(const LogDriver&) = delete;

    /// Applies the recovered committed prefix (subscribers see it) and follows the elector.
    void start();
    /// Stops feeding the core; pending proposals (appended) are answered LeadershipLost (outcome
    /// unknown). Idempotent.
    void stop();

    /// Proposes an entry; `done` is called exactly once, on the io_context thread (possibly
    /// before propose returns, for a refusal).
    void propose(std::string key, std::string value, ProposeCallback done);
    /// The same, appended only if `condition` holds (else ConditionFailed, nothing appended).
    void propose(std::string key, std::string value, const ProposeCondition& condition,
                 ProposeCallback done);
    /// Membership: proposes a configuration entry (`value`: encode_configuration's
    /// JSON) through ReplicatedLog::propose_config; answered like propose(). A change the core
    /// refuses (check_config_change) is InvalidEntry: callers check it first for the reason.
    void propose_config(std::string value, ProposeCallback done);
    /// Level-triggered: the callback gets every committed entry delivered so far, then each new
    /// one, in LSN order, sync points included (is_sync_point). Runs on the io_context thread.
    /// With `prefix`, only the entries whose key starts with it (no sync point unless empty);
    /// with `after`, the replay starts after that LSN (a watch resuming from a cursor; below the
    /// last compaction the snapshot's entries after it stand for the writes they replaced).
    /// Returns an id for unsubscribe().
    std::uint64_t subscribe_committed(CommittedCallback callback, std::string prefix = {},
                                      Lsn after = replication::kNoLsn);
    /// Stops the subscriber's callbacks (also when called from inside one). Unknown ids are
    /// ignored.
    void unsubscribe(std::uint64_t id);
    /// The committed log applied key by key (every committed entry through commit_lsn(): it is
    /// updated when the log applies an entry, before subscribers and proposers hear of it).
    const replication::KeyState& keys() const { return keys_; }
    /// The LSN of the last write of `key` in the whole log held here, uncommitted entries
    /// included (kNoLsn: never written): what a ProposeCondition is checked against.
    Lsn latest_write(std::string_view key) const;

    std::vector<replication::Entry> committed_after(Lsn after, std::size_t max_entries) const {
        return runtime_.log().committed_after(after, max_entries);
    }
    const replication::ReplicatedLog& log() const { return runtime_.log(); }
    const replication::RecoveryReport& recovery() const { return recovered_.report; }
    const LogDriverCounters& counters() const { return counters_; }
    std::uint64_t fsyncs() const { return storage_->fsync_count(); }
    bool running() const { return started_ && !stopped_ && !failed(); }
    bool failed() const { return runtime_.failed(); }

  private:
    /// The runtime's production environment: Asio timers and posts, the mesh, FileStorage.
    struct Env {
        LogDriver* driver = nullptr;
        static constexpr bool kPlantedBugs = false;
        Millis now() const { return driver->elector_.now(); }
        replication::LogStorage& storage() { return *driver->storage_; }
        void send(std::span<const NodeId> to, const replication::LogMessage& m);
        void arm(replication::LogTimer timer, Millis delay, runtime::TimerGeneration generation);
        void cancel(replication::LogTimer timer);
        void schedule_flush();
        void schedule_meta();
        void apply(const std::vector<replication::Entry>& entries);
        void propose_result(const replication::ProposeResult& result);
        void role(const replication::NotifyLogRole& role);
        void failed(const std::string& what);
        void membership(const replication::NotifyMembership& m);
        void after_batch() {
            driver->note_repaired();
            driver->run_deferred();
        }
    };

    std::optional<net::FrameRejection> on_frame(NodeId from, std::span<const std::uint8_t> payload);
    /// The leader's deferred commit point (Env::schedule_meta): written on the storage thread.
    void start_meta_write();
    /// Logs the core's rollback alarm once, when it was raised by the last input (`reported`:
    /// it was already raised before).
    void report_rollback(bool reported);
    void on_peer(NodeId peer, bool up);
    void on_leadership(const elector::LeadershipSnapshot& snapshot);
    template <class Input>
    void input(Input&& call) {
        runtime_.run(std::forward<Input>(call));
    }
    void send(NodeId to, const replication::LogMessage& m, const std::vector<std::uint8_t>& bytes);
    void complete(Lsn lsn, ProposeOutcome outcome);
    /// Answers the refusals waiting on the write at `lsn` (all of them when `lsn` is nullopt).
    void answer_waiting_refusals(std::optional<Lsn> lsn, bool committed);
    /// propose() and propose_config(): the common checks, the LSN, the pending callback.
    void propose_entry(std::string key, std::string value, bool config,
                       const ProposeCondition& condition, ProposeCallback done);
    /// ConditionFailed when `condition` does not hold for `key` now.
    std::optional<ProposeOutcome> check_condition(std::string_view key,
                                                  const ProposeCondition& condition) const;
    /// The active configuration changed: the elector's voters, and the log line.
    void on_membership(const replication::NotifyMembership& m);
    void start_sync();
    void run_deferred();
    /// Logs the end of a repair (`conclaved --repair`) once the core removed the marker.
    void note_repaired();
    std::string log_prefix() const;

    boost::asio::io_context& io_;
    net::Mesh& mesh_;
    ElectorDriver& elector_;
    LogDriverOptions options_;
    std::shared_ptr<replication::LogStorage> storage_;  // options_.storage or a FileStorage
    replication::Recovery recovered_;                   // the report; the log moved into runtime_
    Env env_{this};
    runtime::LogRuntime<Env> runtime_;
    std::array<std::unique_ptr<boost::asio::steady_timer>, replication::kLogTimerCount> timers_;
    std::map<Lsn, ProposeCallback> pending_;
    /// Conditional proposals refused against a write of the uncommitted tail, keyed by that
    /// write's LSN: the refusal is answered only once that write commits (before, a reader could
    /// still see the state the condition expected). If it does not commit, nothing was appended
    /// and the leadership is in doubt: the proposer hears NotLeader.
    struct WaitingRefusal {
        ProposeOutcome refusal;
        ProposeCallback done;
    };
    std::multimap<Lsn, WaitingRefusal> waiting_refusals_;
    struct Subscriber {
        std::string prefix;
        CommittedCallback callback;
    };
    std::map<std::uint64_t, Subscriber> subscribers_;
    std::uint64_t next_subscriber_ = 1;
    replication::KeyState keys_;                   // the committed log, key by key
    std::vector<std::function<void()>> deferred_;  // callbacks to run after the current batch
    Lsn delivered_lsn_{};                          // last entry handed to subscribers (this run)
    LogDriverCounters counters_;
    bool started_ = false;
    bool stopped_ = false;
    bool repaired_ = false;  // the log started with the repaired marker, not yet removed
    std::shared_ptr<int> alive_ = std::make_shared<int>(0);
    // Runs LogStorage::sync (fsync) off the io thread; joined first in the destructor.
    boost::asio::thread_pool storage_thread_{1};
};

}  // namespace conclave::drivers
