// SPDX-License-Identifier: Apache-2.0
#include "conclave/drivers/log_driver.hpp"
#include "conclave/core/check.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <limits>
#include <stdexcept>

#include "conclave/codec/log_codec.hpp"

namespace conclave::drivers {

namespace asio = boost::asio;
using boost::system::error_code;
using namespace conclave::replication;

namespace {

LogDriverOptions with_default_logger(LogDriverOptions options) {
    if (!options.logger) {
        options.logger = spdlog::default_logger();
    }
    return options;
}

/// Batches must fit in one frame: entry payload plus CBOR overhead (< 64 bytes per entry at
/// max_batch_entries) stays well below the 1 MiB frame limit.
constexpr std::size_t kMaxBatchBytesOnWire = std::size_t{512} << 10;

LogConfig checked(LogConfig config, const net::Mesh& mesh) {
    config.cluster_size = mesh.membership().size();
    config.self = mesh.self();
    config.max_batch_bytes = std::min(config.max_batch_bytes, kMaxBatchBytesOnWire);
    if (auto error = config.validate()) {
        throw std::invalid_argument("metadata log config: " + *error);
    }
    // A window of batches or snapshot chunks in flight to one peer (each up to max_batch_bytes
    // plus one entry and framing) stays within half of the mesh's send queue: the rest is
    // for the elector's frames, heartbeats and resends; a full queue resets the connection.
    const std::size_t window_bytes =
        std::size_t{config.max_inflight_batches} *
        (config.max_batch_bytes + config.max_key_bytes + config.max_value_bytes + 4096);
    if (window_bytes > net::MeshOptions{}.max_queue_bytes / 2) {
        throw std::invalid_argument(
            "metadata log config: max_inflight_batches x max_batch_bytes (" +
            std::to_string(window_bytes) +
            " bytes in flight) exceeds half of the mesh's send "
            "queue (" +
            std::to_string(net::MeshOptions{}.max_queue_bytes) + " bytes)");
    }
    return config;
}

std::shared_ptr<LogStorage> storage_of(const LogDriverOptions& options) {
    if (options.storage) {
        return options.storage;
    }
    // "always" (EveryEntry) would fsync inside append(), on the io thread. Every append is made
    // durable by the storage thread's sync before it is acknowledged under either policy, so
    // the daemon's "always" is group commit too (replication/README.md).
    const FsyncPolicy policy =
        options.fsync == FsyncPolicy::EveryEntry ? FsyncPolicy::Batched : options.fsync;
    return std::make_shared<FileStorage>(options.dir, policy);
}

ProposeStatus status_of(ProposeError e) {
    switch (e) {
        case ProposeError::None:
            return ProposeStatus::Committed;
        case ProposeError::NotLeader:
            return ProposeStatus::NotLeader;
        case ProposeError::NotActive:
            return ProposeStatus::NotActive;
        case ProposeError::InvalidEntry:
            return ProposeStatus::InvalidEntry;
        case ProposeError::TimedOut:
            return ProposeStatus::TimedOut;
        case ProposeError::LeadershipLost:
            return ProposeStatus::LeadershipLost;
        case ProposeError::NoSpace:
            return ProposeStatus::NoSpace;
    }
    return ProposeStatus::Failed;
}

}  // namespace

std::string_view to_string(ProposeStatus s) {
    switch (s) {
        case ProposeStatus::Committed:
            return "committed";
        case ProposeStatus::NotLeader:
            return "not_leader";
        case ProposeStatus::NotActive:
            return "not_active";
        case ProposeStatus::InvalidEntry:
            return "invalid_entry";
        case ProposeStatus::TimedOut:
            return "timed_out";
        case ProposeStatus::LeadershipLost:
            return "leadership_lost";
        case ProposeStatus::Stopped:
            return "stopped";
        case ProposeStatus::Failed:
            return "failed";
        case ProposeStatus::NoSpace:
            return "nospace";
        case ProposeStatus::ConditionFailed:
            return "condition_failed";
    }
    return "unknown";
}

bool outcome_unknown(ProposeStatus s) {
    return s == ProposeStatus::TimedOut || s == ProposeStatus::LeadershipLost ||
           s == ProposeStatus::Failed;
}

LogDriver::LogDriver(asio::io_context& io, net::Mesh& mesh, ElectorDriver& elector,
                     LogDriverOptions options)
    : io_(io),
      mesh_(mesh),
      elector_(elector),
      options_(with_default_logger(std::move(options))),
      storage_(storage_of(options_)),
      recovered_(storage_->recover()),
      runtime_(env_, checked(options_.config, mesh), std::move(recovered_.log)) {
    const RecoveryReport& report = recovered_.report;
    if (report.truncated()) {
        options_.logger->warn("{} log: recovery cut the log file: {}", log_prefix(),
                              report.describe());
    } else {
        options_.logger->info("{} log: recovered {} entries from '{}' (fsync {})", log_prefix(),
                              report.records, options_.dir.string(), to_string(options_.fsync));
    }
    if (const auto r = runtime_.log().repaired()) {
        repaired_ = true;
        options_.logger->warn(
            "{} log: repaired (conclaved --repair, R = term {}): non-voting (no sync promise, "
            "acknowledgements not counted for commit) until caught up from a leader of a term "
            "above {}",
            log_prefix(), r->value, r->value);
    }
    for (auto& t : timers_) {
        t = std::make_unique<asio::steady_timer>(io_);
    }
    std::weak_ptr<int> alive = alive_;
    mesh_.set_frame_handler(
        net::Channel::Replication,
        [this, alive](NodeId from,
                      std::span<const std::uint8_t> payload) -> std::optional<net::FrameRejection> {
            if (alive.expired()) {
                return net::FrameRejection{net::BadFrameKind::UnknownChannel, "log driver is gone"};
            }
            return on_frame(from, payload);
        });
    mesh_.add_peer_handler([this, alive](NodeId peer, bool up, LinkLoss) {
        if (!alive.expired()) {
            on_peer(peer, up);
        }
    });
    elector_.subscribe([this, alive](const elector::LeadershipSnapshot& snapshot) {
        if (!alive.expired()) {
            on_leadership(snapshot);
        }
    });
}

LogDriver::~LogDriver() {
    alive_.reset();
    storage_thread_.join();  // a sync in flight ends; its completion is dropped (alive_ is gone)
    for (auto& t : timers_) {
        t->cancel();
    }
}

std::string LogDriver::log_prefix() const {
    return "[" + mesh_.membership().at(mesh_.self()).id + "]";
}

void LogDriver::start() {
    if (started_ || failed()) {
        return;
    }
    started_ = true;
    const Millis now = elector_.now();
    input([&](ReplicatedLog& log) { return log.start(now); });
    for (std::uint16_t i = 0; i < mesh_.membership().size(); ++i) {
        const NodeId peer{i};
        if (peer != mesh_.self() && mesh_.is_up(peer)) {
            input([&](ReplicatedLog& log) { return log.peer_up(now, peer); });
        }
    }
    input([&](ReplicatedLog& log) { return log.on_leadership(now, elector_.snapshot()); });
}

void LogDriver::stop() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    runtime_.cancel_timers();
    // A deferred commit point is written now: the writers it committed hear "committed".
    runtime_.write_deferred_meta();
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [lsn, done] : pending) {
        ++counters_.proposals_failed;
        // Appended entries may still commit elsewhere: outcome unknown.
        done(ProposeOutcome{ProposeStatus::LeadershipLost, lsn});
    }
    answer_waiting_refusals(std::nullopt, false);
    run_deferred();
}

std::uint64_t LogDriver::subscribe_committed(CommittedCallback callback, std::string prefix,
                                             Lsn after) {
    // Level-triggered: replay what was delivered to the others so far (committed entries are
    // never truncated, so they are still at the front of the log), then follow.
    // After a compaction the snapshot stands for the entries it replaced (the last of each key).
    for (const Entry& e : log().committed_after(after, std::numeric_limits<std::size_t>::max())) {
        if (e.lsn > delivered_lsn_) {
            break;
        }
        if (prefix.empty() || (!is_sync_point(e) && has_prefix(e.key, prefix))) {
            callback(e);
        }
    }
    const std::uint64_t id = next_subscriber_++;
    subscribers_.emplace(id, Subscriber{std::move(prefix), std::move(callback)});
    return id;
}

void LogDriver::unsubscribe(std::uint64_t id) {
    subscribers_.erase(id);
}

void LogDriver::propose(std::string key, std::string value, ProposeCallback done) {
    propose_entry(std::move(key), std::move(value), false, ProposeCondition{}, std::move(done));
}

void LogDriver::propose(std::string key, std::string value, const ProposeCondition& condition,
                        ProposeCallback done) {
    propose_entry(std::move(key), std::move(value), false, condition, std::move(done));
}

void LogDriver::propose_config(std::string value, ProposeCallback done) {
    propose_entry(std::string(kMembersKey), std::move(value), true, ProposeCondition{},
                  std::move(done));
}

Lsn LogDriver::latest_write(std::string_view key) const {
    const ReplicatedLog& l = log();
    // The uncommitted tail is held whole (only committed entries are compacted); the committed
    // prefix is what keys_ holds.
    for (std::size_t pos = l.end_len(); pos > l.state().commit_len; --pos) {
        if (l.at(pos - 1).key == key) {
            return l.at(pos - 1).lsn;
        }
    }
    const Entry* e = keys_.find(key);
    return e != nullptr ? e->lsn : kNoLsn;
}

std::optional<ProposeOutcome> LogDriver::check_condition(std::string_view key,
                                                         const ProposeCondition& condition) const {
    if (condition.empty()) {
        return std::nullopt;
    }
    const Term term = log().state().term;
    const Lsn current = latest_write(key);
    if ((condition.fence && *condition.fence != term) ||
        (condition.expect_lsn && *condition.expect_lsn != current)) {
        return ProposeOutcome{ProposeStatus::ConditionFailed, kNoLsn, current, term};
    }
    return std::nullopt;
}

void LogDriver::propose_entry(std::string key, std::string value, bool config,
                              const ProposeCondition& condition, ProposeCallback done) {
    CONCLAVE_CHECK(done, "a proposal has a completion callback");
    if (!running()) {
        ++counters_.proposals_failed;
        done(ProposeOutcome{failed() ? ProposeStatus::Failed : ProposeStatus::Stopped, kNoLsn});
        return;
    }
    if (!log().can_propose()) {  // refuse before issuing: an LSN is not burnt for nothing
        ++counters_.proposals_failed;
        done(ProposeOutcome{
            log().role() != LogRole::Follower ? ProposeStatus::NotActive : ProposeStatus::NotLeader,
            kNoLsn});
        return;
    }
    if (auto refused = check_condition(key, condition)) {
        ++counters_.proposals_failed;
        ++counters_.conditions_failed;
        if (pending_.contains(refused->current)) {  // refused against an uncommitted write
            waiting_refusals_.emplace(refused->current, WaitingRefusal{*refused, std::move(done)});
            return;
        }
        done(*refused);
        return;
    }
    const std::optional<Lsn> lsn = elector_.issue_lsn();
    // A fenced entry is of the fencing term (the log's term follows the elector's at once).
    if (!lsn || (condition.fence && lsn->term != *condition.fence)) {
        ++counters_.proposals_failed;
        done(ProposeOutcome{ProposeStatus::NotLeader, kNoLsn});
        return;
    }
    pending_.emplace(*lsn, std::move(done));
    input([&](ReplicatedLog& log) {
        return config ? log.propose_config(elector_.now(), *lsn, std::move(value))
                      : log.propose(elector_.now(), *lsn, std::move(key), std::move(value));
    });
}

std::optional<net::FrameRejection> LogDriver::on_frame(NodeId from,
                                                       std::span<const std::uint8_t> payload) {
    LogMessage message;
    try {
        message = codec::decode_log_cbor(payload);
    } catch (const codec::DecodeError& e) {
        ++counters_.bad_frames;
        return net::FrameRejection{net::BadFrameKind::Undecodable,
                                   std::string("log message: ") + e.what()};
    } catch (const std::exception& e) {
        ++counters_.bad_frames;
        return net::FrameRejection{net::BadFrameKind::Undecodable,
                                   std::string("log message: ") + e.what()};
    }
    if (message.from != from) {
        ++counters_.bad_frames;
        return net::FrameRejection{
            net::BadFrameKind::WrongSender,
            "log message claims sender index " + std::to_string(message.from.value) +
                ", connection belongs to index " + std::to_string(from.value)};
    }
    ++counters_.messages_in[message.body.index()];
    if (message.term > elector_.elector().state().durable().term) {
        // The vote record's term bounds every term the log holds (a start refuses a vote record
        // below it: an older copy). The leader re-sends; the elector hears of the term first.
        ++counters_.ahead_of_vote_record;
        return std::nullopt;
    }
    if (running()) {
        const std::uint64_t violations = runtime_.log().counters().protocol_violation_alarms;
        const bool had_rollback = runtime_.log().rollback_alarm().has_value();
        input([&](ReplicatedLog& log) { return log.receive(elector_.now(), message); });
        report_rollback(had_rollback);
        if (runtime_.log().counters().protocol_violation_alarms != violations) {
            // Dropped by the core; no correct member sends this (docs/design.md, "Hostile input").
            const replication::LogViolation& v = runtime_.log().last_violation();
            options_.logger->error(
                "{} log: ALARM protocol violation from peer {} in term {}: {} (message "
                "dropped; conclave_metadata_protocol_violations_total{{kind=\"{}\"}})",
                log_prefix(), mesh_.membership().at(v.from).id, v.term.value, v.reason,
                replication::to_string(v.kind));
        }
    }
    return std::nullopt;
}

void LogDriver::report_rollback(bool reported) {
    const auto& alarm = runtime_.log().rollback_alarm();
    if (reported || !alarm) {
        return;
    }
    options_.logger->critical(
        "{} log: ALARM ROLLBACK ({}): {} (conclave_metadata_rollback_alarm; GET /status "
        "\"rollback\"; the node's own committed entries are kept)",
        log_prefix(), replication::to_string(alarm->kind),
        replication::describe(*alarm, runtime_.log().config().node_ids));
}

void LogDriver::on_peer(NodeId peer, bool up) {
    if (running()) {
        input([&](ReplicatedLog& log) {
            return up ? log.peer_up(elector_.now(), peer) : log.peer_down(elector_.now(), peer);
        });
    }
}

void LogDriver::on_leadership(const elector::LeadershipSnapshot& snapshot) {
    if (running()) {
        input([&](ReplicatedLog& log) { return log.on_leadership(elector_.now(), snapshot); });
    }
}

void LogDriver::complete(Lsn lsn, ProposeOutcome outcome) {
    auto it = pending_.find(lsn);
    if (it == pending_.end()) {
        return;  // answered already (stop)
    }
    if (outcome.status == ProposeStatus::Committed) {
        ++counters_.proposals_ok;
    } else {
        ++counters_.proposals_failed;
    }
    deferred_.push_back([done = std::move(it->second), outcome] { done(outcome); });
    pending_.erase(it);
    answer_waiting_refusals(lsn, outcome.status == ProposeStatus::Committed);
}

void LogDriver::answer_waiting_refusals(std::optional<Lsn> lsn, bool committed) {
    const auto first = lsn ? waiting_refusals_.lower_bound(*lsn) : waiting_refusals_.begin();
    const auto last = lsn ? waiting_refusals_.upper_bound(*lsn) : waiting_refusals_.end();
    for (auto it = first; it != last; ++it) {
        const ProposeOutcome outcome =
            committed ? it->second.refusal : ProposeOutcome{ProposeStatus::NotLeader, kNoLsn};
        deferred_.push_back([done = std::move(it->second.done), outcome] { done(outcome); });
    }
    waiting_refusals_.erase(first, last);
}

void LogDriver::run_deferred() {
    // Callbacks may propose again (which runs execute() and may add more): loop until empty.
    while (!deferred_.empty()) {
        auto batch = std::move(deferred_);
        deferred_.clear();
        for (auto& f : batch) {
            f();
        }
    }
}

void LogDriver::send(NodeId to, const LogMessage& m, const std::vector<std::uint8_t>& bytes) {
    if (mesh_.send(to, net::Channel::Replication, bytes)) {
        ++counters_.messages_out[m.body.index()];
    } else {
        ++counters_.messages_dropped;
    }
}

// ---- The runtime's environment ----------------------------------------------------------------

void LogDriver::Env::send(std::span<const NodeId> to, const LogMessage& m) {
    const auto bytes = codec::encode_log_cbor(m);  // once for every recipient of a broadcast
    for (const NodeId peer : to) {
        driver->send(peer, m, bytes);
    }
}

void LogDriver::Env::arm(LogTimer timer, Millis delay, runtime::TimerGeneration generation) {
    LogDriver* d = driver;
    auto& t = *d->timers_[static_cast<std::size_t>(timer)];
    t.expires_after(delay);
    t.async_wait(
        [d, alive = std::weak_ptr<int>(d->alive_), timer, generation](const error_code& ec) {
            if (alive.expired() || ec || !d->running()) {
                return;
            }
            d->runtime_.timer_fired(timer, generation);  // filters replaced instances itself
        });
}

void LogDriver::Env::cancel(LogTimer timer) {
    driver->timers_[static_cast<std::size_t>(timer)]->cancel();
}

void LogDriver::Env::schedule_flush() {
    // Posted, so that every handler already queued (proposals, appends from the leader) appends
    // before the sync begins and shares its fsync.
    LogDriver* d = driver;
    asio::post(d->io_, [d, alive = std::weak_ptr<int>(d->alive_)] {
        if (!alive.expired()) {
            d->start_sync();
        }
    });
}

void LogDriver::Env::schedule_meta() {
    // Posted like the flush, so that the commit advances of the handlers already queued share
    // the write; the write itself (two fsyncs and a rename) runs on the storage thread, and the
    // writers it covers are answered when it is back. Advances made meanwhile share the next.
    LogDriver* d = driver;
    asio::post(d->io_, [d, alive = std::weak_ptr<int>(d->alive_)] {
        if (!alive.expired()) {
            d->start_meta_write();
        }
    });
}

void LogDriver::start_meta_write() {
    std::optional<LogMeta> meta = runtime_.begin_meta_write();
    if (!meta) {
        return;
    }
    asio::post(storage_thread_, [this, alive = std::weak_ptr<int>(alive_), storage = storage_,
                                 meta = *meta] {
        std::optional<std::string> error;
        try {
            storage->write_meta(meta);  // FileStorage: safe beside the io thread's write_meta
        } catch (const std::exception& e) {
            error = e.what();
        }
        asio::post(io_, [this, alive, meta, error = std::move(error)] {
            if (!alive.expired()) {
                runtime_.meta_written(meta, error);
            }
        });
    });
}

void LogDriver::start_sync() {
    const std::optional<SyncTicket> ticket = runtime_.begin_sync();
    if (!ticket) {
        return;
    }
    // The fsync runs on the storage thread; the io thread goes on serving the elector (and
    // appending: what it appends meanwhile is covered by the next sync). The core hears
    // persisted() only when the sync is back: durable before acknowledged.
    asio::post(storage_thread_,
               [this, alive = std::weak_ptr<int>(alive_), storage = storage_, ticket = *ticket] {
                   std::optional<std::string> error;
                   try {
                       storage->sync(ticket);
                   } catch (const std::exception& e) {
                       error = e.what();
                   }
                   asio::post(io_, [this, alive, ticket, error = std::move(error)] {
                       if (alive.expired()) {
                           return;
                       }
                       runtime_.sync_done(ticket, error, running());  // durable even after stop()
                       counters_.flushes = runtime_.flushes();
                   });
               });
}

void LogDriver::Env::apply(const std::vector<Entry>& entries) {
    LogDriver* d = driver;
    // The key state follows the commit point at once (a proposer is answered, and a read served,
    // only after the batch); subscribers hear of the entries after the batch.
    for (const Entry& e : entries) {
        d->keys_.apply(e);
    }
    d->deferred_.push_back([d, entries] {
        for (const Entry& e : entries) {
            d->delivered_lsn_ = e.lsn;
            // A callback may subscribe or unsubscribe: walk the ids, look each one up.
            std::vector<std::uint64_t> ids;
            ids.reserve(d->subscribers_.size());
            for (const auto& [id, unused] : d->subscribers_) {
                ids.push_back(id);
            }
            for (std::uint64_t id : ids) {
                auto it = d->subscribers_.find(id);
                if (it == d->subscribers_.end()) {
                    continue;
                }
                const std::string& prefix = it->second.prefix;
                if (prefix.empty() || (!is_sync_point(e) && has_prefix(e.key, prefix))) {
                    const CommittedCallback callback = it->second.callback;
                    callback(e);
                }
            }
        }
    });
}

void LogDriver::note_repaired() {
    if (repaired_ && !runtime_.log().repaired()) {
        repaired_ = false;
        options_.logger->info(
            "{} log: repair complete: caught up from the leader of term {} up to its commit point "
            "{}; the repaired marker is removed and this node votes again",
            log_prefix(), runtime_.log().state().term.value,
            to_string(runtime_.log().commit_lsn()));
    }
}

void LogDriver::Env::propose_result(const ProposeResult& result) {
    driver->complete(result.lsn, ProposeOutcome{status_of(result.error), result.lsn});
}

void LogDriver::Env::role(const NotifyLogRole& role) {
    driver->options_.logger->info("{} log: role {} in term {}", driver->log_prefix(),
                                  to_string(role.role), role.term.value);
}

void LogDriver::Env::membership(const NotifyMembership& m) {
    if (driver->options_.on_membership) {
        driver->options_.on_membership(m);  // §8: grow the table before the batch goes on
    }
    driver->on_membership(m);
}

void LogDriver::on_membership(const NotifyMembership& m) {
    // After the batch, like the other notifications: the core's state (and the PersistMeta of
    // R4) is settled by then, and the elector's own reaction (a removed leader steps down) feeds
    // the log through on_leadership like any leadership change.
    deferred_.push_back([this, m] {
        const auto names = [this](NodeSet set) {
            std::string out;
            for (std::uint16_t i = 0; i < mesh_.membership().size(); ++i) {
                if (set.contains(NodeId{i})) {
                    out += (out.empty() ? "" : ", ") + mesh_.membership().at(NodeId{i}).id;
                }
            }
            return "[" + out + "]";
        };
        ++counters_.membership_changes;
        const std::uint64_t known = elector_.elector().state().config_version;
        if (m.version < known) {
            // A joiner started at the configuration it was accepted with (node_table.hpp) and
            // replays older ones while it catches up: not a refusal, nothing to tell the elector.
            options_.logger->info(
                "{} log: membership version {} replayed while catching up (the elector is at {})",
                log_prefix(), m.version, known);
            return;
        }
        const NodeId self = mesh_.self();
        const char* role = m.voters.contains(self)     ? "voter"
                           : m.learners.contains(self) ? "learner (never votes nor stands)"
                                                       : "removed (not a member: its elector never "
                                                         "campaigns or votes; stop this node)";
        options_.logger->info(
            "{} log: membership version {}: voters {}, learners {}; this node: {}", log_prefix(),
            m.version, names(m.voters), names(m.learners), role);
        if (auto error = elector_.set_voters(m.voters, m.version)) {
            ++counters_.voter_set_refused;
            options_.logger->error(
                "{} log: the elector refused membership version {}: {} (it keeps its voters)",
                log_prefix(), m.version, *error);
        }
    });
}

void LogDriver::Env::failed(const std::string& what) {
    // The runtime has cancelled every timer and ignores further inputs.
    LogDriver* d = driver;
    ++d->counters_.storage_failures;
    d->options_.logger->critical(
        "{} log: storage failed: {}; the metadata log stops on this node (restart it)",
        d->log_prefix(), what);
    auto pending = std::move(d->pending_);
    d->pending_.clear();
    for (auto& [lsn, done] : pending) {
        ++d->counters_.proposals_failed;
        d->deferred_.push_back([done = std::move(done), lsn = lsn] {
            done(ProposeOutcome{ProposeStatus::Failed, lsn});
        });
    }
    d->answer_waiting_refusals(std::nullopt, false);
    if (d->options_.on_storage_failure) {
        d->deferred_.push_back(
            [callback = d->options_.on_storage_failure, what] { callback(what); });
    }
}

}  // namespace conclave::drivers
