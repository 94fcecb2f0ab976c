#include "conclave/net/log_driver.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <cassert>
#include <stdexcept>

#include "conclave/codec/log_codec.hpp"

namespace conclave::net {

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

LogConfig checked(LogConfig config, const Mesh& mesh) {
    config.cluster_size = mesh.membership().size();
    config.self = mesh.self();
    config.max_batch_bytes = std::min(config.max_batch_bytes, kMaxBatchBytesOnWire);
    if (auto error = config.validate()) {
        throw std::invalid_argument("metadata log config: " + *error);
    }
    return config;
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
    }
    return "unknown";
}

bool outcome_unknown(ProposeStatus s) {
    return s == ProposeStatus::TimedOut || s == ProposeStatus::LeadershipLost ||
           s == ProposeStatus::Failed;
}

std::string_view log_message_type_name(std::size_t index) {
    static constexpr std::array<std::string_view, kLogMessageTypeCount> kNames = {
        "SyncRequest", "SyncResponse", "Append", "AppendAck", "FetchRequest", "FetchResponse"};
    return index < kNames.size() ? kNames[index] : "unknown";
}

LogDriver::LogDriver(asio::io_context& io, Mesh& mesh, ElectorDriver& elector,
                     LogDriverOptions options)
    : io_(io),
      mesh_(mesh),
      elector_(elector),
      options_(with_default_logger(std::move(options))),
      storage_(options_.dir, options_.fsync),
      recovered_(storage_.recover()),
      log_(checked(options_.config, mesh), std::move(recovered_.log)) {
    const RecoveryReport& report = recovered_.report;
    if (report.truncated()) {
        options_.logger->warn("{} log: recovery cut the log file: {}", log_prefix(),
                              report.describe());
    } else {
        options_.logger->info("{} log: recovered {} entries from '{}' (fsync {})", log_prefix(),
                              report.records, options_.dir.string(), to_string(options_.fsync));
    }
    reported_durable_ = log_.last_lsn();
    for (auto& t : timers_) {
        t = std::make_unique<asio::steady_timer>(io_);
    }
    std::weak_ptr<int> alive = alive_;
    mesh_.set_frame_handler(
        Channel::Replication,
        [this, alive](NodeId from,
                      std::span<const std::uint8_t> payload) -> std::optional<FrameRejection> {
            if (alive.expired()) {
                return FrameRejection{BadFrameKind::UnknownChannel, "log driver is gone"};
            }
            return on_frame(from, payload);
        });
    mesh_.add_peer_handler([this, alive](NodeId peer, bool up) {
        if (!alive.expired()) {
            on_peer(peer, up);
        }
    });
    elector_.subscribe([this, alive](const LeadershipSnapshot& snapshot) {
        if (!alive.expired()) {
            on_leadership(snapshot);
        }
    });
}

LogDriver::~LogDriver() {
    alive_.reset();
    for (auto& t : timers_) {
        t->cancel();
    }
}

std::string LogDriver::log_prefix() const {
    return "[" + mesh_.membership().at(mesh_.self()).id + "]";
}

void LogDriver::start() {
    if (started_ || failed_) {
        return;
    }
    started_ = true;
    execute(log_.start(elector_.now()));
    for (std::uint16_t i = 0; i < mesh_.membership().size(); ++i) {
        const NodeId peer{i};
        if (peer != mesh_.self() && mesh_.is_up(peer)) {
            execute(log_.peer_up(elector_.now(), peer));
        }
    }
    execute(log_.on_leadership(elector_.now(), elector_.snapshot()));
}

void LogDriver::stop() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    for (std::size_t i = 0; i < kLogTimerCount; ++i) {
        cancel(static_cast<LogTimer>(i));
    }
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [lsn, done] : pending) {
        ++counters_.proposals_failed;
        // Appended entries may still commit elsewhere: outcome unknown.
        done(ProposeOutcome{ProposeStatus::LeadershipLost, lsn});
    }
}

void LogDriver::subscribe_committed(CommittedCallback callback) {
    // Level-triggered: replay what was delivered to the others so far (committed entries are
    // never truncated, so they are still at the front of the log), then follow.
    const std::vector<Entry>& entries = log_.entries();
    assert(delivered_len_ <= entries.size());
    for (std::size_t i = 0; i < delivered_len_; ++i) {
        callback(entries[i]);
    }
    subscribers_.push_back(std::move(callback));
}

void LogDriver::propose(std::string key, std::string value, ProposeCallback done) {
    assert(done);
    if (!running()) {
        ++counters_.proposals_failed;
        done(ProposeOutcome{failed_ ? ProposeStatus::Failed : ProposeStatus::Stopped, kNoLsn});
        return;
    }
    if (!log_.can_propose()) {  // refuse before issuing: an LSN is not burnt for nothing
        ++counters_.proposals_failed;
        done(ProposeOutcome{log_.role() == LogRole::LeaderPassive ? ProposeStatus::NotActive
                                                                  : ProposeStatus::NotLeader,
                            kNoLsn});
        return;
    }
    const std::optional<Lsn> lsn = elector_.issue_lsn();
    if (!lsn) {
        ++counters_.proposals_failed;
        done(ProposeOutcome{ProposeStatus::NotLeader, kNoLsn});
        return;
    }
    pending_.emplace(*lsn, std::move(done));
    execute(log_.propose(elector_.now(), *lsn, std::move(key), std::move(value)));
}

std::optional<FrameRejection> LogDriver::on_frame(NodeId from,
                                                  std::span<const std::uint8_t> payload) {
    LogMessage message;
    try {
        message = decode_log_cbor(payload);
    } catch (const DecodeError& e) {
        ++counters_.bad_frames;
        return FrameRejection{BadFrameKind::Undecodable, std::string("log message: ") + e.what()};
    } catch (const std::exception& e) {
        ++counters_.bad_frames;
        return FrameRejection{BadFrameKind::Undecodable, std::string("log message: ") + e.what()};
    }
    if (message.from != from) {
        ++counters_.bad_frames;
        return FrameRejection{BadFrameKind::WrongSender, "log message claims sender index " +
                                                             std::to_string(message.from.value) +
                                                             ", connection belongs to index " +
                                                             std::to_string(from.value)};
    }
    ++counters_.messages_in[message.body.index()];
    if (running()) {
        execute(log_.receive(elector_.now(), message));
    }
    return std::nullopt;
}

void LogDriver::on_peer(NodeId peer, bool up) {
    if (running()) {
        execute(up ? log_.peer_up(elector_.now(), peer) : log_.peer_down(elector_.now(), peer));
    }
}

void LogDriver::on_leadership(const LeadershipSnapshot& snapshot) {
    if (running()) {
        execute(log_.on_leadership(elector_.now(), snapshot));
    }
}

void LogDriver::execute(const LogActions& actions) {
    ++depth_;
    for (const LogAction& action : actions) {
        if (failed_) {
            break;  // nothing after a failed storage action may take effect
        }
        perform(action);
    }
    --depth_;
    if (depth_ == 0) {
        if (appended_ && !failed_) {
            schedule_flush();
        }
        run_deferred();
    }
}

void LogDriver::perform(const LogAction& action) {
    std::visit(
        [&](const auto& a) {
            using T = std::decay_t<decltype(a)>;
            if constexpr (std::is_same_v<T, SendLog>) {
                send(a.to, a.message, encode_log_cbor(a.message));
            } else if constexpr (std::is_same_v<T, BroadcastLog>) {
                const auto bytes = encode_log_cbor(a.message);
                for (std::uint16_t i = 0; i < mesh_.membership().size(); ++i) {
                    if (NodeId{i} != mesh_.self()) {
                        send(NodeId{i}, a.message, bytes);
                    }
                }
            } else if constexpr (std::is_same_v<T, PersistMeta> ||
                                 std::is_same_v<T, PersistEntries> ||
                                 std::is_same_v<T, TruncateEntries>) {
                try {
                    perform_storage_action(storage_, action);
                } catch (const std::exception& e) {
                    fail(e.what());
                    return;
                }
                if constexpr (std::is_same_v<T, PersistEntries>) {
                    appended_ = true;
                }
            } else if constexpr (std::is_same_v<T, ArmLogTimer>) {
                arm(a.timer, a.delay);
            } else if constexpr (std::is_same_v<T, CancelLogTimer>) {
                cancel(a.timer);
            } else if constexpr (std::is_same_v<T, ApplyCommitted>) {
                deferred_.push_back([this, entries = a.entries] {
                    const auto subscribers = subscribers_;  // a callback may subscribe more
                    for (const Entry& e : entries) {
                        ++delivered_len_;
                        for (const auto& s : subscribers) {
                            s(e);
                        }
                    }
                });
            } else if constexpr (std::is_same_v<T, ProposeResult>) {
                complete(a.lsn, ProposeOutcome{status_of(a.error), a.lsn});
            } else {
                static_assert(std::is_same_v<T, NotifyLogRole>);
                options_.logger->info("{} log: role {} in term {}", log_prefix(), to_string(a.role),
                                      a.term.value);
            }
        },
        action);
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
    if (mesh_.send(to, Channel::Replication, bytes)) {
        ++counters_.messages_out[m.body.index()];
    } else {
        ++counters_.messages_dropped;
    }
}

void LogDriver::arm(LogTimer timer, Millis delay) {
    const auto index = static_cast<std::size_t>(timer);
    const std::uint64_t generation = ++generations_[index];
    auto& t = *timers_[index];
    t.expires_after(delay);
    t.async_wait(
        [this, alive = std::weak_ptr<int>(alive_), timer, index, generation](const error_code& ec) {
            if (alive.expired() || ec || generation != generations_[index]) {
                return;
            }
            ++generations_[index];
            if (running()) {
                execute(log_.timer_fired(elector_.now(), timer));
            }
        });
}

void LogDriver::cancel(LogTimer timer) {
    const auto index = static_cast<std::size_t>(timer);
    ++generations_[index];
    timers_[index]->cancel();
}

void LogDriver::schedule_flush() {
    if (flush_posted_) {
        return;
    }
    flush_posted_ = true;
    asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
        if (!alive.expired()) {
            flush();
        }
    });
}

void LogDriver::flush() {
    flush_posted_ = false;
    if (failed_ || !appended_) {
        return;
    }
    appended_ = false;
    Lsn durable{};
    try {
        durable = storage_.flush();
    } catch (const std::exception& e) {
        fail(e.what());
        run_deferred();
        return;
    }
    ++counters_.flushes;
    if (durable != reported_durable_ && durable != kNoLsn && running()) {
        reported_durable_ = durable;
        execute(log_.persisted(elector_.now(), durable));
    }
}

void LogDriver::fail(const std::string& what) {
    ++counters_.storage_failures;
    failed_ = true;
    for (std::size_t i = 0; i < kLogTimerCount; ++i) {
        cancel(static_cast<LogTimer>(i));
    }
    options_.logger->critical(
        "{} log: storage failed: {}; the metadata log stops on this node (restart it)",
        log_prefix(), what);
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [lsn, done] : pending) {
        ++counters_.proposals_failed;
        deferred_.push_back([done = std::move(done), lsn = lsn] {
            done(ProposeOutcome{ProposeStatus::Failed, lsn});
        });
    }
    if (options_.on_storage_failure) {
        deferred_.push_back([callback = options_.on_storage_failure, what] { callback(what); });
    }
}

}  // namespace conclave::net
