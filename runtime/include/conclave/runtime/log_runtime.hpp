// SPDX-License-Identifier: Apache-2.0
// LogRuntime<Env>: the one place where the replicated log core's LogActions are interpreted, for
// production (drivers/src/log_driver.cpp: Asio, the mesh, FileStorage) and the simulator
// (sim/src/simulator_log.cpp: simulated time and network, MemoryStorage). Its rules:
//   - fan-out: a BroadcastLog goes to every other node (the environment encodes once);
//   - timers: one live instance per LogTimer, generations as in ElectorRuntime;
//   - storage actions (PersistMeta, TruncateEntries, PersistEntries) run on Env::storage() in
//     order, before any later action of the batch; PersistMeta/TruncateEntries are durable when
//     they return, PersistEntries is made durable by the group commit below;
//   - group commit: after the outermost batch that appended entries, one flush is scheduled
//     (Env::schedule_flush); when the environment calls flush(), one storage flush covers every
//     append since the last one, and the core hears persisted(durable) if the durable LSN moved;
//   - asynchronous group commit (a storage thread, drivers/src/log_driver.cpp): instead of flush(),
//     the environment calls begin_sync() at the scheduled moment, runs LogStorage::sync(ticket)
//     wherever it likes (another thread, a later simulated time) and then sync_done(ticket): the
//     core hears persisted() only then, so nothing is acknowledged before its fsync completed.
//     Appends made while a sync runs are covered by the next one, scheduled by sync_done (group
//     commit across the batch that accumulated meanwhile); one sync is in flight at a time;
//   - persist before send, checked (CONCLAVE_CHECK, check_durable below): a message leaves only
//     if the term it claims is durable (the last PersistMeta's, or the recovered one), and an ok
//     AppendAck only if the entries it acknowledges are: its last_lsn is at or below what the
//     storage itself reported durable (flush() / end_sync(), PersistSnapshot, lowered by
//     TruncateEntries), whatever the core was told;
//   - failed storage: an exception from the storage (EIO, ENOSPC, ...) stops the log for good:
//     nothing later in the batch takes effect, every timer is cancelled, Env::failed(what) runs,
//     and every later input is ignored.
//   - deferred commit point (only when Env provides `void schedule_meta()`, as the daemon's
//     does): a PersistMeta with `before_results` (the commit point a leader persists before it
//     answers writers) that changes neither the durable term nor a repaired marker is not written
//     at once: Env::schedule_meta is called, and the environment later takes the newest such meta
//     with begin_meta_write(), writes it (any thread; LogStorage::write_meta must then be safe
//     against a concurrent write_meta of the owner, as FileStorage's is) and reports it with
//     meta_written(); write_deferred_meta() does all three at once. A ProposeResult that commits
//     an entry above the commit point last written is held, and every answer after it too, in
//     order, until a written meta (deferred or not: the commit point never moves back) covers
//     it. Everything else (sends, appends, applies) goes on meanwhile: only writers' answers
//     depend on that write. The commit advances made while one write runs share the next.
//     An environment that also provides `bool defers_meta() const` decides at run time: false
//     writes every PersistMeta at once, as without schedule_meta (the simulator's option).
// Planted bug (RuntimeBug::AckBeforeFsync, only when Env::kPlantedBugs is true; the production
// environments set it to false): every other flush() tells the core that every stored entry is
// durable without flushing the storage, and leaves the fsync to the next group commit, so a
// crash in between loses entries the node acknowledged (the simulator must catch it). In the
// asynchronous group commit, sync_done() tells the core that every stored entry is durable,
// those appended while the sync ran (not covered by it) included.
// Planted bug (RuntimeBug::AnswerBeforeMeta, same condition): a deferring runtime delivers every
// ProposeResult at once, before a written commit point covers it (the simulator must catch it).
//
// An environment that catches the planted AckBeforeFsync with its own checks (the simulator, the
// log's cluster test) declares `static constexpr bool kOwnPersistOrderCheck = true;`: the
// runtime's AppendAck check then stays out of that bug's way (as in ElectorRuntime).
//
// Env must provide:
//   Millis now();
//   replication::LogStorage& storage();
//   void send(std::span<const NodeId> to, const replication::LogMessage& m);
//   void arm(replication::LogTimer t, Millis delay, TimerGeneration g);  // -> timer_fired(t, g)
//   void cancel(replication::LogTimer t);
//   void schedule_flush();                       // later: flush()
//   void apply(const std::vector<replication::Entry>& committed);
//   void propose_result(const replication::ProposeResult& r);
//   void role(const replication::NotifyLogRole& r);
//   void failed(const std::string& what);
//   void after_batch();                          // the outermost batch is done
// and optionally `void schedule_meta()`                 // later: write_deferred_meta()
//   and then optionally `bool defers_meta() const`       // false: no deferral after all
//   static constexpr bool kPlantedBugs;
// and optionally `void before_actions(const replication::LogActions&)` and
// `void membership(const replication::NotifyMembership&)` (the active configuration changed).
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <deque>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "conclave/core/check.hpp"
#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/runtime/elector_runtime.hpp"

namespace conclave::runtime {

template <class Env>
class LogRuntime {
  public:
    LogRuntime(Env& env, replication::LogConfig config, replication::RecoveredLog recovered,
               RuntimeBug bug = RuntimeBug::None)
        : env_(env),
          log_(std::move(config), std::move(recovered)),
          reported_durable_(log_.last_lsn()),
          stored_durable_(reported_durable_),
          durable_term_(log_.state().term),
          bug_(bug) {
        others_ = others_of(log_.config().cluster_size, log_.config().self);
        durable_commit_ = log_.commit_lsn();  // what recovery found
        CONCLAVE_CHECK(others_.size() + 1 == log_.config().cluster_size,
                       "a broadcast reaches every other node of the table");
    }
    LogRuntime(const LogRuntime&) = delete;
    LogRuntime& operator=(const LogRuntime&) = delete;

    template <class Input>
    const replication::LogActions& run(Input&& input) {
        if (failed_) {
            last_.clear();
            return last_;
        }
        replication::LogActions actions = input(log_);  // local: see ElectorRuntime::run
        if constexpr (requires(Env & e, const replication::LogActions& a) {
                          e.before_actions(a);
                      }) {
            env_.before_actions(actions);
        }
        execute(actions);
        last_ = std::move(actions);
        return last_;
    }

    bool timer_current(replication::LogTimer timer, TimerGeneration generation) const {
        return !failed_ && generations_[index(timer)] == generation;
    }
    const replication::LogActions& timer_fired(replication::LogTimer timer,
                                               TimerGeneration generation) {
        if (generations_[index(timer)] != generation) {
            last_.clear();
            return last_;
        }
        ++generations_[index(timer)];  // this instance is consumed
        return run([&](auto& log) { return log.timer_fired(env_.now(), timer); });
    }

    /// The group commit point (after Env::schedule_flush). Returns the core's actions for
    /// persisted() (empty when nothing new became durable, or `tell_core` is false: the owner
    /// stopped feeding the core but still makes its appends durable).
    const replication::LogActions& flush(bool tell_core = true) {
        flush_scheduled_ = false;
        last_.clear();
        if (failed_ || !appended_) {
            return last_;
        }
        appended_ = false;
        Lsn durable{};
        try {
            if (planted(RuntimeBug::AckBeforeFsync) && !fsync_deferred_) {
                // The bug: everything stored is reported durable now; the fsync waits for the
                // next group commit, scheduled at once.
                durable = log_.last_lsn();
                fsync_deferred_ = true;
                appended_ = true;
                flush_scheduled_ = true;
                env_.schedule_flush();
            } else {
                fsync_deferred_ = false;
                durable = env_.storage().flush();
                stored_durable_ = std::max(stored_durable_, durable);
            }
        } catch (const std::exception& e) {
            fail(e.what());
            env_.after_batch();
            return last_;
        }
        ++flushes_;
        return report_durable(durable, tell_core);
    }

    /// Asynchronous group commit, step 1 (at the moment Env::schedule_flush asked for): names what
    /// the sync covers. nullopt when there is nothing to sync (failed, nothing appended); else the
    /// environment runs storage().sync(*ticket) (any thread) and then calls sync_done().
    std::optional<replication::SyncTicket> begin_sync() {
        flush_scheduled_ = false;
        if (failed_ || !appended_ || sync_in_flight_) {
            return std::nullopt;
        }
        appended_ = false;
        sync_in_flight_ = true;
        return env_.storage().begin_sync();
    }

    /// Asynchronous group commit, step 2: the sync of `ticket` ended (`error` set if it threw).
    /// Tells the core what became durable (unless `tell_core` is false, as in flush()) and
    /// schedules the next sync if entries were appended meanwhile. Returns the core's actions.
    const replication::LogActions& sync_done(const replication::SyncTicket& ticket,
                                             const std::optional<std::string>& error,
                                             bool tell_core = true) {
        sync_in_flight_ = false;
        last_.clear();
        if (failed_) {
            return last_;
        }
        if (error) {
            fail(*error);
            env_.after_batch();
            return last_;
        }
        Lsn durable{};
        try {
            durable = env_.storage().end_sync(ticket);
            stored_durable_ = std::max(stored_durable_, durable);
        } catch (const std::exception& e) {
            fail(e.what());
            env_.after_batch();
            return last_;
        }
        ++flushes_;
        if (planted(RuntimeBug::AckBeforeFsync)) {
            durable = log_.last_lsn();  // the bug: the appends made meanwhile are not synced
        }
        if (appended_ && !flush_scheduled_) {
            flush_scheduled_ = true;
            env_.schedule_flush();
        }
        return report_durable(durable, tell_core);
    }

    /// The deferred commit point, step 1 (Env::schedule_meta asked for it): the newest deferred
    /// meta, for the environment to write (any thread). nullopt when nothing is deferred
    /// (written meanwhile by another PersistMeta), one write is already out, or the log failed.
    std::optional<replication::LogMeta> begin_meta_write() {
        meta_scheduled_ = false;
        if (failed_ || meta_in_flight_ || !deferred_meta_) {
            return std::nullopt;
        }
        meta_in_flight_ = true;
        std::optional<replication::LogMeta> meta = std::move(deferred_meta_);
        deferred_meta_.reset();
        return meta;
    }

    /// Step 2: `meta` from begin_meta_write() is durable (or its write threw `error`: the log
    /// fails). Delivers the ProposeResults it covers, in order; schedules the next write if
    /// commit points were deferred meanwhile.
    void meta_written(const replication::LogMeta& meta, const std::optional<std::string>& error) {
        meta_in_flight_ = false;
        if (failed_) {
            return;
        }
        if (error) {
            fail(*error);
            env_.after_batch();
            return;
        }
        ++deferred_meta_writes_;
        meta_durable(meta);
        schedule_meta();
        env_.after_batch();
    }

    /// Steps 1 and 2 on this thread (an orderly stop; tests).
    void write_deferred_meta() {
        const std::optional<replication::LogMeta> meta = begin_meta_write();
        if (!meta) {
            return;
        }
        std::optional<std::string> error;
        try {
            env_.storage().write_meta(*meta);
        } catch (const std::exception& e) {
            error = e.what();
        }
        meta_written(*meta, error);
    }

    /// Whether a commit point waits for its write (deferred, or handed out and not written).
    bool meta_deferred() const { return deferred_meta_.has_value() || meta_in_flight_; }
    /// ProposeResults held until a written commit point covers them.
    std::size_t held_results() const { return held_results_.size(); }
    /// Deferred commit points written by write_deferred_meta().
    std::uint64_t deferred_meta_writes() const { return deferred_meta_writes_; }

    /// Stops timers and ignores later inputs (used by an orderly stop; not a failure).
    void cancel_timers() {
        for (std::size_t i = 0; i < replication::kLogTimerCount; ++i) {
            cancel(static_cast<replication::LogTimer>(i));
        }
    }

    const replication::ReplicatedLog& log() const { return log_; }
    replication::ReplicatedLog& log() { return log_; }
    bool failed() const { return failed_; }
    bool flush_scheduled() const { return flush_scheduled_; }
    bool sync_in_flight() const { return sync_in_flight_; }
    std::uint64_t flushes() const { return flushes_; }
    TimerGeneration generation(replication::LogTimer t) const { return generations_[index(t)]; }

  private:
    /// Tells the core that the log is durable through `durable` (unless `tell_core` is false, or
    /// nothing new became durable). Returns the core's actions (none when it was not told).
    const replication::LogActions& report_durable(Lsn durable, bool tell_core) {
        if (!tell_core || durable == reported_durable_ || durable == replication::kNoLsn) {
            return last_;
        }
        reported_durable_ = durable;
        return run([&](auto& log) { return log.persisted(env_.now(), durable); });
    }

    static std::size_t index(replication::LogTimer t) { return static_cast<std::size_t>(t); }

    bool planted(RuntimeBug bug) const {
        if constexpr (Env::kPlantedBugs) {
            return bug_ == bug;
        } else {
            return false;
        }
    }

    void execute(const replication::LogActions& actions) {
        CONCLAVE_CHECK(depth_ >= 0, "batches nest");
        ++depth_;
        for (const replication::LogAction& action : actions) {
            if (failed_) {
                break;  // nothing after a failed storage action may take effect
            }
            perform(action);
        }
        --depth_;
        CONCLAVE_CHECK(depth_ >= 0, "every batch ends once");
        if (depth_ == 0) {
            if (appended_ && !failed_ && !flush_scheduled_ && !sync_in_flight_) {
                flush_scheduled_ = true;
                env_.schedule_flush();
            }
            env_.after_batch();
        }
    }

    void perform(const replication::LogAction& action) {
        using namespace replication;
        std::visit(
            [&](const auto& a) {
                using T = std::decay_t<decltype(a)>;
                if constexpr (std::is_same_v<T, SendLog>) {
                    CONCLAVE_CHECK(a.to != log_.config().self, "a node sends to others");
                    check_durable(a.message);
                    env_.send(std::span<const NodeId>(&a.to, 1), a.message);
                } else if constexpr (std::is_same_v<T, BroadcastLog>) {
                    check_durable(a.message);
                    env_.send(std::span<const NodeId>(others_), a.message);
                } else if constexpr (std::is_same_v<T, PersistMeta>) {
                    persist_meta(a);
                } else if constexpr (std::is_same_v<T, PersistEntries> ||
                                     std::is_same_v<T, TruncateEntries> ||
                                     std::is_same_v<T, PersistSnapshot>) {
                    try {
                        perform_storage_action(env_.storage(), action);
                    } catch (const std::exception& e) {
                        fail(e.what());
                        return;
                    }
                    stored(a);
                } else if constexpr (std::is_same_v<T, ArmLogTimer>) {
                    const TimerGeneration g = ++generations_[index(a.timer)];
                    env_.arm(a.timer, a.delay, g);
                } else if constexpr (std::is_same_v<T, CancelLogTimer>) {
                    cancel(a.timer);
                } else if constexpr (std::is_same_v<T, ApplyCommitted>) {
                    env_.apply(a.entries);
                } else if constexpr (std::is_same_v<T, ProposeResult>) {
                    if (must_hold(a)) {
                        held_results_.push_back(a);  // until a written commit point covers it
                    } else {
                        env_.propose_result(a);
                    }
                } else if constexpr (std::is_same_v<T, NotifyMembership>) {
                    // §8: the core's table grew; later broadcasts reach the new nodes (the
                    // environment grows its mesh in membership(), before any of them).
                    if (a.table.size() > others_.size() + 1) {
                        others_ = others_of(a.table.size(), log_.config().self);
                    }
                    CONCLAVE_CHECK(others_.size() + 1 >= a.table.size(),
                                   "a broadcast reaches every node of the active table");
                    // Optional in Env: environments that do not follow membership
                    // yet ignore it.
                    if constexpr (requires { env_.membership(a); }) {
                        env_.membership(a);
                    }
                } else {
                    static_assert(std::is_same_v<T, NotifyLogRole>);
                    env_.role(a);
                }
            },
            action);
    }

    /// PersistMeta: deferred (see "deferred commit point" above) or written now; a meta written
    /// now covers the deferred ones before it.
    void persist_meta(const replication::PersistMeta& a) {
        if constexpr (kDefersMeta) {
            if (defers_meta() && a.before_results && a.meta.term == durable_term_ &&
                !a.meta.repaired) {
                CONCLAVE_CHECK(!deferred_meta_ || deferred_meta_->commit_lsn <= a.meta.commit_lsn,
                               "the commit point never moves back");
                deferred_meta_ = a.meta;
                schedule_meta();
                return;
            }
        }
        try {
            env_.storage().write_meta(a.meta);
        } catch (const std::exception& e) {
            fail(e.what());
            return;
        }
        stored(a);
        if (deferred_meta_ && deferred_meta_->commit_lsn <= a.meta.commit_lsn) {
            deferred_meta_.reset();  // covered
        }
        meta_durable(a.meta);
    }

    void schedule_meta() {
        if constexpr (kDefersMeta) {
            if (deferred_meta_ && !meta_scheduled_ && !meta_in_flight_) {
                meta_scheduled_ = true;
                env_.schedule_meta();
            }
        }
    }

    /// Whether PersistMeta::before_results is deferred (kDefersMeta, unless the environment
    /// says no at run time).
    bool defers_meta() const {
        if constexpr (requires(const Env& e) {
                          { e.defers_meta() } -> std::convertible_to<bool>;
                      }) {
            return kDefersMeta && env_.defers_meta();
        } else {
            return kDefersMeta;
        }
    }

    /// Only with a deferring environment: a commit above the written commit point waits, and so
    /// does every answer after one that waits (answers keep their order).
    bool must_hold(const replication::ProposeResult& r) const {
        if constexpr (kDefersMeta) {
            if (!defers_meta() || planted(RuntimeBug::AnswerBeforeMeta)) {
                return false;
            }
            return !held_results_.empty() ||
                   (r.error == replication::ProposeError::None && durable_commit_ < r.lsn);
        } else {
            return false;
        }
    }

    /// `meta` is durable: the answers its commit point covers go, in order.
    void meta_durable(const replication::LogMeta& meta) {
        durable_commit_ = std::max(durable_commit_, meta.commit_lsn);
        while (!held_results_.empty() &&
               (held_results_.front().error != replication::ProposeError::None ||
                held_results_.front().lsn <= durable_commit_)) {
            const replication::ProposeResult r = held_results_.front();
            held_results_.pop_front();
            env_.propose_result(r);
        }
    }

    /// What a storage action that returned made durable (PersistEntries: nothing yet).
    template <class T>
    void stored(const T& a) {
        using namespace replication;
        if constexpr (std::is_same_v<T, PersistEntries>) {
            appended_ = true;
        } else if constexpr (std::is_same_v<T, PersistMeta>) {
            CONCLAVE_CHECK(a.meta.term >= durable_term_,
                           "the durable promised term never goes back");
            durable_term_ = a.meta.term;
        } else if constexpr (std::is_same_v<T, TruncateEntries>) {
            stored_durable_ = std::min(stored_durable_, a.after_lsn);
        } else {
            static_assert(std::is_same_v<T, PersistSnapshot>);
            stored_durable_ = std::max(stored_durable_, a.snapshot.lsn);
        }
    }

    /// Persist before send, checked: `m` may leave only if the term it claims is durable, and an
    /// ok AppendAck only if the prefix it acknowledges (up to last_lsn) is durable in storage.
    void check_durable(const replication::LogMessage& m) const {
        CONCLAVE_CHECK(m.term <= durable_term_,
                       "persist before send: the term a log message claims is durable before it "
                       "leaves");
        if constexpr (requires { Env::kOwnPersistOrderCheck; }) {
            if (Env::kOwnPersistOrderCheck && planted(RuntimeBug::AckBeforeFsync)) {
                return;
            }
        }
        const auto* ack = std::get_if<replication::AppendAck>(&m.body);
        CONCLAVE_CHECK(!ack || !ack->ok || ack->last_lsn <= stored_durable_,
                       "persist before send: the entries an AppendAck acknowledges are durable "
                       "before it leaves");
    }

    void cancel(replication::LogTimer timer) {
        ++generations_[index(timer)];
        env_.cancel(timer);
    }

    void fail(const std::string& what) {
        failed_ = true;
        cancel_timers();
        env_.failed(what);
    }

    Env& env_;
    replication::ReplicatedLog log_;
    std::vector<NodeId> others_;
    std::array<TimerGeneration, replication::kLogTimerCount> generations_{};
    Lsn reported_durable_{};  // what recovery found is durable
    // What the storage made durable (the last entry's LSN; an over-estimate after a snapshot),
    // and the durable promised term: what check_durable compares sends with.
    Lsn stored_durable_{};
    Term durable_term_{};
    replication::LogActions last_;
    int depth_ = 0;
    bool appended_ = false;
    bool flush_scheduled_ = false;
    bool sync_in_flight_ = false;  // between begin_sync() and sync_done()
    bool failed_ = false;
    std::uint64_t flushes_ = 0;
    RuntimeBug bug_ = RuntimeBug::None;
    bool fsync_deferred_ = false;  // RuntimeBug::AckBeforeFsync only
    // The deferred commit point (Env::schedule_meta): the newest not yet handed out, whether one
    // is scheduled or being written, the commit point of the last meta written, and the
    // ProposeResults held until a written commit point covers them.
    // Whether Env defers the commit point for writers (see "deferred commit point" above).
    static constexpr bool kDefersMeta = requires(Env & e) { e.schedule_meta(); };
    std::optional<replication::LogMeta> deferred_meta_;
    bool meta_scheduled_ = false;
    bool meta_in_flight_ = false;
    Lsn durable_commit_{};
    std::deque<replication::ProposeResult> held_results_;
    std::uint64_t deferred_meta_writes_ = 0;
};

}  // namespace conclave::runtime
