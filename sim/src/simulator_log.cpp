// SPDX-License-Identifier: Apache-2.0
// The replicated log in the simulator: each node's ReplicatedLog beside its elector, its storage,
// timers, messages on the shared mesh, and the client workload. See simulator.hpp and
// sim/README.md ("The replicated log").
#include <cerrno>
#include <ostream>
#include <stdexcept>
#include <system_error>
#include <type_traits>

#include "conclave/codec/json.hpp"
#include "conclave/core/check.hpp"
#include "conclave/core/quorum.hpp"
#include "conclave/sim/simulator.hpp"
#include "conclave/sim/state_hash.hpp"

namespace conclave::sim {
namespace {

using replication::ApplyCommitted;
using replication::ArmLogTimer;
using replication::BroadcastLog;
using replication::CancelLogTimer;
using replication::Entry;
using replication::LogAction;
using replication::LogActions;
using replication::LogMessage;
using replication::NotifyLogRole;
using replication::PersistEntries;
using replication::ProposeError;
using replication::ProposeResult;
using replication::ReplicatedLog;
using replication::SendLog;

/// A CONCLAVE_CHECK of the log core failed inside a call made by the simulator.
struct LogCheckFailed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_check_failure(const char* what) {
    throw LogCheckFailed(what);
}

NodeId node_id(std::size_t n) {
    return NodeId{static_cast<std::uint16_t>(n)};
}

const char* input_name(int input) {
    static constexpr const char* kNames[] = {"Start",      "OnLeadership", "Propose", "Receive",
                                             "TimerFired", "Persisted",    "PeerUp",  "PeerDown"};
    return kNames[input];
}

/// A small client value; now and then a larger one, so that byte-limited batches occur.
std::string client_value(Rng& rng, std::uint64_t sequence) {
    std::string value = "{\"client\":" + std::to_string(sequence) +
                        ",\"r\":" + std::to_string(rng.below(1'000'000'000)) + "}";
    if (rng.below(40) == 0) {
        value.append(static_cast<std::size_t>(rng.between(500, 2000)), 'x');
    }
    return value;
}

}  // namespace

replication::LogConfig sim_log_config() {
    replication::LogConfig c;
    c.heartbeat_period = Millis{50};
    c.sync_retry_period = Millis{100};
    c.propose_timeout_ticks = 20;  // 1 s of simulated time
    c.max_batch_entries = 16;
    c.max_batch_bytes = 4096;
    c.max_inflight_batches = 4;
    c.max_value_bytes = 4096;
    return c;
}

void Simulator::install_log_check_handler() {
    previous_check_handler_ = conclave::set_invariant_failure_handler(&throw_check_failure);
}

replication::LogConfig Simulator::log_config_for(std::size_t node) const {
    replication::LogConfig c = options_.log_options.config;
    c.cluster_size = table_[node];  // the stored table (R9: the log takes a longer one it holds)
    c.self = node_id(node);
    return c;
}

const ReplicatedLog* Simulator::log(NodeId n) const {
    return n.value < logs_.size() && logs_[n.value] ? &logs_[n.value]->rt.log() : nullptr;
}

std::vector<const ReplicatedLog*> Simulator::logs() const {
    return log_views_;
}

void Simulator::set_workload(bool on) {
    workload_ = on && options_.log && options_.log_options.propose_interval_max_ms > 0;
    if (workload_ && started_ && !workload_ticking_) {
        workload_ticking_ = true;
        Event tick;
        tick.time_ms = now_ms_ + rng_.between(1, options_.log_options.propose_interval_max_ms);
        tick.kind = EventKind::ClientTick;
        push(tick);
    }
}

std::uint32_t Simulator::store_payload(const LogMessage& m) {
    if (free_payloads_.empty()) {
        log_payloads_.push_back(m);
        return static_cast<std::uint32_t>(log_payloads_.size() - 1);
    }
    const std::uint32_t index = free_payloads_.back();
    free_payloads_.pop_back();
    log_payloads_[index] = m;
    return index;
}

LogMessage Simulator::take_payload(std::uint32_t index) {
    CONCLAVE_CHECK(index < log_payloads_.size(), "a log event names a stored payload");
    LogMessage m = std::move(log_payloads_[index]);
    log_payloads_[index] = LogMessage{};
    free_payloads_.push_back(index);
    return m;
}

void Simulator::send_log(std::size_t from, std::size_t to, const LogMessage& m) {
    transmit(from, to, nullptr, &m);
}

void Simulator::log_start(std::size_t n) {
    check_recovered_floor(n);
    logs_[n] =
        std::make_unique<LogNode>(*this, n, log_config_for(n), log_storage_[n].recover().log);
    log_views_[n] = &logs_[n]->rt.log();
    log_history_.on_restart(node_id(n));
    log_input(n, LogInput::Start,
              [&](ReplicatedLog& log) { return log.start(local_now(node_id(n))); });
}

void Simulator::log_crash(std::size_t n) {
    if (!options_.log) {
        return;
    }
    replication::MemoryStorage& storage = log_storage_[n];
    if (options_.log_options.storage_fault_ppm == 0 ||
        storage.synced_count() == storage.entries().size()) {
        storage.crash();  // what was not flushed is lost
    } else {
        // Storage faults: writes that were not fsynced may still have reached the disk, in order;
        // a random prefix of the unsynced tail survives (a torn record after it is dropped by
        // recovery's checksum), and it is as durable as the rest from now on.
        const auto synced = static_cast<std::ptrdiff_t>(storage.synced_count());
        const std::vector<Entry> tail(storage.entries().begin() + synced, storage.entries().end());
        const auto keep = static_cast<std::ptrdiff_t>(rng_.below(tail.size() + 1));
        storage.crash();
        if (keep > 0) {
            ++stats_.torn_tails;
            storage.append(std::vector<Entry>(tail.begin(), tail.begin() + keep));
            storage.flush();
        }
    }
    if (logs_[n] && logs_[n]->rt.meta_deferred()) {
        ++stats_.meta_writes_lost;  // its writers were never answered
    }
    logs_[n].reset();
    log_views_[n] = nullptr;
    // What the node's storage holds durably now: its next start must find at least this.
    floor_len_[n] = storage.snapshot().len + storage.entries().size();
    floor_term_[n] = storage.meta().term;
}

std::size_t Simulator::damaged_except(std::size_t node) const {
    std::size_t damaged = 0;
    for (std::size_t j = 0; j < options_.nodes; ++j) {
        const bool log_damaged =
            options_.log && (flipped_[j] || log_storage_[j].meta().repaired.has_value());
        if (j != node && (identity_refused_[j] != 0 || registered_[j] == 0 || log_damaged)) {
            ++damaged;
        }
    }
    return damaged;
}

void Simulator::log_bit_flip(std::size_t n) {
    if (!options_.log || flipped_[n]) {
        return;
    }
    // A node whose log recovery refuses stays out until repaired, and a repaired node needs a
    // quorum of intact ones (replication/README.md, "Corrupt log"): damage stays a minority.
    if (damaged_except(n) + 1 > conclave::tolerated_failures(options_.nodes)) {
        ++stats_.bit_flips_skipped;
        return;
    }
    crash(n);  // (no-op when it is down already)
    const replication::MemoryStorage& storage = log_storage_[n];
    Flip flip;
    if (storage.entries().size() < 2 || rng_.below(4) == 0) {
        flip.meta = true;
    } else {
        // A record before the last one: damage a crash cannot explain (a bad last record may be
        // a torn write, which recovery drops).
        flip.record = static_cast<std::size_t>(rng_.below(storage.entries().size() - 1));
    }
    flipped_[n] = flip;
    ++stats_.bit_flips;
}

bool Simulator::log_recovery_allows_start(std::size_t n) {
    if (!flipped_[n]) {
        return true;
    }
    if (options_.storage_bug != StorageBug::SilentRepair) {
        // FileStorage::recover() throws CorruptLogError: conclaved refuses to start.
        ++stats_.starts_refused;
        return false;
    }
    // The canary: the flipped record and everything after it dropped (a flipped meta replaced
    // by a fresh one), no marker, and the node starts as a voter.
    ++stats_.silent_repairs;
    replication::MemoryStorage& storage = log_storage_[n];
    const Flip flip = *flipped_[n];
    flipped_[n].reset();
    if (flip.meta) {
        storage.write_meta(replication::LogMeta{Term{}, storage.snapshot().lsn});
    } else {
        const replication::LogMeta before = storage.meta();
        storage.corrupt_and_repair(storage.entries().size() - flip.record, Term{});
        replication::LogMeta after = storage.meta();
        after.term = before.term;
        after.repaired = before.repaired;
        storage.write_meta(after);
    }
    return true;
}

void Simulator::log_repair_flip(std::size_t n) {
    if (!options_.log || !flipped_[n] || cores_[n]) {
        return;
    }
    const Flip flip = *flipped_[n];
    flipped_[n].reset();
    ++stats_.flip_repairs;
    replication::MemoryStorage& storage = log_storage_[n];
    // As FileStorage::repair(): truncate at the first bad record; a flipped meta is unreadable,
    // so its term and commit point are unknown (R comes from the entries and the elector's
    // durable term; the commit point falls back to the snapshot's); the old marker is a file
    // of its own and survives.
    if (flip.meta) {
        storage.write_meta(
            replication::LogMeta{Term{}, storage.snapshot().lsn, storage.meta().repaired});
        storage.corrupt_and_repair(0, durable_[n].term);
    } else {
        stats_.log_entries_repaired +=
            storage.corrupt_and_repair(storage.entries().size() - flip.record, durable_[n].term);
    }
    const Term r = storage.meta().repaired.value_or(Term{});
    if (durable_[n].term < r) {
        durable_[n] = elector::DurableState{r, std::nullopt};
    }
    restart(n);
}

void Simulator::check_recovered_floor(std::size_t n) {
    const replication::MemoryStorage& storage = log_storage_[n];
    if (!options_.log_options.history.check_recovered_floor || violation_ ||
        storage.meta().repaired) {
        return;
    }
    const std::size_t len = storage.snapshot().len + storage.entries().size();
    if (len < floor_len_[n] || storage.meta().term < floor_term_[n]) {
        violation_ =
            Violation{ViolationKind::LogTruncated,
                      "log of n" + std::to_string(n) + " restarts on " + std::to_string(len) +
                          " entries, term " + std::to_string(storage.meta().term.value) +
                          ", without the repaired marker; it held " +
                          std::to_string(floor_len_[n]) + " entries, term " +
                          std::to_string(floor_term_[n].value) + " durably when it stopped"};
    }
}

void Simulator::push_storage_completion(std::size_t n, EventKind kind, int fsyncs) {
    const LogSimOptions& lo = options_.log_options;
    std::int64_t delay = 0;
    for (int i = 0; i < fsyncs; ++i) {
        std::int64_t one = rng_.between(0, lo.flush_delay_max_ms);
        if (lo.storage_latency_max_ms > 0 && now_ms_ < lo.storage_faults_until_ms &&
            rng_.below(lo.slow_sync_one_in) == 0) {
            one = rng_.between(0, lo.storage_latency_max_ms);
            ++stats_.slow_syncs;
        }
        delay += one;
    }
    Event e;
    e.time_ms = now_ms_ + delay;
    e.kind = kind;
    e.node = static_cast<std::uint16_t>(n);
    e.stamp = incarnation_[n];
    push(e);
}

void Simulator::log_begin_sync(std::size_t n) {
    LogNode& node = *logs_[n];
    std::optional<replication::SyncTicket> ticket = node.rt.begin_sync();
    if (!ticket) {
        return;
    }
    node.sync = std::move(ticket);
    push_storage_completion(n, EventKind::LogSyncDone, 1);
}

void Simulator::log_begin_meta(std::size_t n) {
    LogNode& node = *logs_[n];
    node.meta_write = node.rt.begin_meta_write();
    if (node.meta_write) {
        push_storage_completion(n, EventKind::LogMetaDone, 2);  // two fsyncs and a rename
    }
}

// The deferred commit point's write completes: durable now (as FileStorage::write_meta, a meta
// older than the one stored, a newer term written meanwhile, is not written), and the runtime
// releases the answers it covers, which LogHistory checks at once.
void Simulator::log_end_meta(std::size_t n) {
    if (!logs_[n]->meta_write) {
        return;
    }
    const replication::LogMeta meta = *logs_[n]->meta_write;
    logs_[n]->meta_write.reset();
    std::optional<std::string> error;
    replication::MemoryStorage& storage = log_storage_[n];
    const replication::LogMeta& stored = storage.meta();
    if (storage_fault()) {
        error = "write of the log meta (injected): Input/output error";
    } else if (meta.term > stored.term ||
               (meta.term == stored.term && meta.commit_lsn >= stored.commit_lsn)) {
        storage.write_meta(meta);
    }
    ++stats_.meta_writes_deferred;
    if (options_.trace) {
        *options_.trace << nlohmann::json{{"kind", "log-meta"},
                                          {"node", n},
                                          {"commit", to_string(meta.commit_lsn)},
                                          {"term", meta.term.value},
                                          {"failed", error.value_or("")}}
                               .dump()
                        << '\n';
    }
    released_.clear();
    logs_[n]->rt.meta_written(meta, error);
    stats_.results_held += released_.size();
    check_released(n);
}

void Simulator::check_released(std::size_t n) {
    std::vector<ProposeResult> released;
    released.swap(released_);
    for (const ProposeResult& result : released) {
        if (violation_ || !logs_[n]) {
            return;  // (a failed write: the node crashed, its answers never left)
        }
        if (auto v =
                log_history_.on_result(node_id(n), result, logs_[n]->rt.log(), log_storage_[n])) {
            violation_ = std::move(v);
        }
    }
}

void Simulator::log_end_sync(std::size_t n) {
    if (!logs_[n]->sync) {
        return;
    }
    const replication::SyncTicket ticket = std::move(*logs_[n]->sync);
    logs_[n]->sync.reset();
    std::optional<std::string> error;
    if (storage_fault()) {
        error = "fsync of the log (injected): Input/output error";
    } else {
        logs_[n]->env.store.sync(ticket);
    }
    ++stats_.log_flushes;
    log_step(n, LogInput::Persisted,
             [&](LogRt& rt) -> const LogActions& { return rt.sync_done(ticket, error); });
}

void Simulator::log_corrupt_and_repair(std::size_t n, std::uint32_t drop, NodeSet unaware) {
    if (!options_.log || logs_[n] || flipped_[n]) {
        return;  // only a stopped node's disk is repaired (a flipped one waits for Repair)
    }
    // The design needs a quorum of un-repaired nodes to make progress (replication/README.md,
    // "Corrupt log"): with that many repaired already, this crash leaves the disk intact.
    if (damaged_except(n) + 1 > conclave::tolerated_failures(options_.nodes)) {
        ++stats_.log_repairs_skipped;
        return;
    }
    ++stats_.log_repairs;
    const replication::MemoryStorage& s = log_storage_[n];
    const std::vector<replication::Entry> durable(
        s.entries().begin(), s.entries().begin() + static_cast<std::ptrdiff_t>(s.synced_count()));
    const std::size_t base = s.snapshot().len;
    // R takes the elector's durable term too, and the elector's term is raised to R (no vote in
    // it), as `conclaved --repair` does.
    stats_.log_entries_repaired += log_storage_[n].corrupt_and_repair(drop, durable_[n].term);
    std::vector<Lsn> lost;
    for (std::size_t i = 0; i < durable.size(); ++i) {
        const std::size_t k = base + i;  // history index
        const std::size_t kept_base = s.snapshot().len;
        if (k < kept_base) {
            continue;  // a snapshot survives whole or the repair drops it with the log
        }
        if (k - kept_base >= s.entries().size() ||
            s.entries()[k - kept_base].lsn != durable[i].lsn) {
            lost.push_back(durable[i].lsn);
        }
    }
    log_history_.on_repair_loss(node_id(n), std::move(lost), unaware);
    const Term r = log_storage_[n].meta().repaired.value_or(Term{});
    if (durable_[n].term < r) {
        durable_[n] = elector::DurableState{r, std::nullopt};
    }
}

void Simulator::dispatch_log(const Event& e) {
    const std::size_t n = e.node;
    switch (e.kind) {
        case EventKind::LogDeliver: {
            const LogMessage m = take_payload(e.payload);
            ++stats_.log_messages_delivered;
            log_input(
                n, LogInput::Receive,
                [&](ReplicatedLog& log) { return log.receive(local_now(node_id(n)), m); }, &m);
            break;
        }
        case EventKind::LogTimerFired:
            log_step(n, LogInput::TimerFired, [&](LogRt& rt) -> const LogActions& {
                return rt.timer_fired(e.log_timer, rt.generation(e.log_timer));
            });
            break;
        case EventKind::LogFlush:
            // The group commit point: the runtime flushes the storage and tells the core (slow
            // storage: begins an asynchronous sync, whose completion tells the core).
            if (logs_[n] && options_.log_options.storage_latency_max_ms > 0) {
                log_begin_sync(n);
            } else if (logs_[n]) {
                ++stats_.log_flushes;
                log_step(n, LogInput::Persisted,
                         [&](LogRt& rt) -> const LogActions& { return rt.flush(); });
            }
            break;
        case EventKind::LogSyncDone:
            if (logs_[n]) {
                log_end_sync(n);
            }
            break;
        case EventKind::LogMetaBegin:
            if (logs_[n]) {
                log_begin_meta(n);
            }
            break;
        case EventKind::LogMetaDone:
            if (logs_[n]) {
                log_end_meta(n);
            }
            break;
        case EventKind::ClientRequest:
            client_request(n);
            break;
        default:
            CONCLAVE_CHECK(false, "every log event kind is dispatched");
    }
}

// The workload: a request every [1, propose_interval_max_ms] ms, mostly to the node the clients
// believe leads (which may be a deposed leader that has not heard yet), sometimes to a random node,
// sometimes to the leader a random node names (a redirect).
void Simulator::client_tick() {
    if (!workload_) {
        workload_ticking_ = false;
        return;
    }
    const std::size_t n = options_.nodes;
    std::size_t target = client_belief_;
    const std::uint64_t dice = rng_.below(100);
    if (dice >= 70 && dice < 85) {
        target = static_cast<std::size_t>(rng_.below(n));
    } else if (dice >= 85) {
        const auto asked = static_cast<std::size_t>(rng_.below(n));
        target = asked;
        if (cores_[asked] && cores_[asked]->state().leader) {
            target = cores_[asked]->state().leader->value;
        }
    }
    const LogSimOptions& lo = options_.log_options;
    Event request;
    request.time_ms = now_ms_ + rng_.between(1, lo.client_latency_max_ms);
    request.kind = EventKind::ClientRequest;
    request.node = static_cast<std::uint16_t>(target);
    push(request);
    Event next;
    next.time_ms = now_ms_ + rng_.between(1, lo.propose_interval_max_ms);
    next.kind = EventKind::ClientTick;
    push(next);
}

void Simulator::client_request(std::size_t n) {
    ++stats_.proposals;
    if (!cores_[n]) {
        ++stats_.proposals_refused;  // connection refused: try another node next time
        client_belief_ = static_cast<std::uint16_t>(rng_.below(options_.nodes));
        return;
    }
    propose_now(node_id(n));
}

std::optional<Lsn> Simulator::propose_now(NodeId node) {
    const std::size_t n = node.value;
    if (!options_.log || n >= options_.nodes || !logs_[n] || paused(node) || violation_ ||
        logs_[n]->rt.failed()) {
        return std::nullopt;  // (a failed log: the process is exiting, the request is refused)
    }
    Entry entry;
    ++client_sequence_;
    // With compaction on, keys repeat (a small key space) so that snapshots replace superseded
    // values; otherwise every key is new.
    const std::uint64_t keys = options_.log_options.config.compact_threshold != 0 ? 24 : 0;
    entry.key = "c" + std::to_string(keys != 0 ? client_sequence_ % keys : client_sequence_);
    entry.value = client_value(rng_, client_sequence_);
    return propose_entry(n, std::move(entry), false, true);
}

std::optional<Lsn> Simulator::propose_config_now(NodeId node, std::string value) {
    const std::size_t n = node.value;
    if (!options_.log || n >= options_.nodes || !logs_[n] || paused(node) || violation_ ||
        logs_[n]->rt.failed()) {
        return std::nullopt;
    }
    const ReplicatedLog& log = logs_[n]->rt.log();
    // What the core will say (R2, R3, adjacency): a refusal it did not predict is a finding.
    std::optional<std::string> why = std::string("membership is off");
    if (log.config().decode_configuration != nullptr) {
        if (const auto cfg = log.config().decode_configuration(value)) {
            why = log.check_config_change(*cfg);
        } else {
            why = "malformed";
        }
    }
    const std::uint64_t refused_before = log.counters().config_proposals_refused;
    const bool passive = !log.can_propose();
    Entry entry;
    entry.key = std::string(replication::kMembersKey);
    entry.value = std::move(value);
    const std::optional<Lsn> lsn = propose_entry(n, std::move(entry), true, !why);
    if (lsn) {
        ++stats_.config_proposals;
        stats_.config_proposals_passive += passive ? 1U : 0U;
    }
    if (!violation_ && logs_[n] && !why && !lsn) {
        violation_ = Violation{
            ViolationKind::LogDriver,
            "log of n" + std::to_string(n) + " refused a configuration change (refusals " +
                std::to_string(logs_[n]->rt.log().counters().config_proposals_refused -
                               refused_before) +
                ") that check_config_change accepted"};
    }
    return lsn;
}

std::optional<Lsn> Simulator::propose_entry(std::size_t n, Entry entry, bool config,
                                            bool config_acceptable) {
    const NodeId node = node_id(n);
    const ReplicatedLog& log = logs_[n]->rt.log();
    const std::size_t size_before = log.end_len();
    // A configuration change goes in when check_config_change says so (which, with the planted
    // SkipOwnTermCommit, is also while PASSIVE once the sync point is appended).
    const bool can = config ? config_acceptable : log.can_propose();
    if (can) {
        // As a driver does: the LSN comes from the elector, only once the log can take it.
        const std::optional<Lsn> issued = cores_[n]->issue_lsn();
        if (!issued && !log.can_propose()) {
            return std::nullopt;  // a PASSIVE leader whose elector has just lost: refused
        }
        if (!issued) {
            violation_ =
                Violation{ViolationKind::LogDriver, "log of n" + std::to_string(n) +
                                                        " is ACTIVE but its elector does not lead"};
            return std::nullopt;
        }
        ++stats_.lsns_issued;
        if (auto v = history_.after_issue(node, *issued, cores_[n]->state())) {
            violation_ = std::move(v);
            return std::nullopt;
        }
        entry.lsn = *issued;
        ++stats_.proposals_appended;
    } else {
        // Not an ACTIVE leader: the request is refused without burning an LSN.
        entry.lsn = Lsn{log.state().term, 0};
    }
    // A configuration entry the core will refuse (R2: one pending already) is not recorded as
    // proposed: its InvalidEntry refusal is expected (a client entry's is a LogDriver finding).
    if (can) {
        log_history_.on_proposed(entry);
    }
    const Lsn lsn = entry.lsn;
    log_input(n, LogInput::Propose, [&](ReplicatedLog& l) {
        if (config) {
            return l.propose_config(local_now(node_id(n)), lsn, std::move(entry.value));
        }
        return l.propose(local_now(node_id(n)), lsn, std::move(entry.key), std::move(entry.value));
    });
    if (violation_ || !logs_[n]) {
        return std::nullopt;
    }
    const std::size_t grown = logs_[n]->rt.log().end_len() - size_before;
    if (grown != (can ? 1U : 0U)) {
        violation_ = Violation{ViolationKind::LogDriver,
                               "log of n" + std::to_string(n) + ": a proposal expected to be " +
                                   (can ? "appended" : "refused") + " appended " +
                                   std::to_string(grown) + " entries"};
        return std::nullopt;
    }
    return can ? std::optional<Lsn>(lsn) : std::nullopt;
}

Simulator::LogNode::LogNode(Simulator& sim, std::size_t node, replication::LogConfig config,
                            replication::RecoveredLog recovered)
    : env{&sim, node, FaultyLogStorage(&sim, node)},
      rt(env, std::move(config), std::move(recovered), sim.options_.runtime_bug) {}

void Simulator::LogEnv::send(std::span<const NodeId> to, const LogMessage& m) {
    for (const NodeId peer : to) {
        sim->send_log(node, peer.value, m);
    }
}

void Simulator::LogEnv::arm(replication::LogTimer timer, Millis delay,
                            runtime::TimerGeneration generation) {
    Event e = sim->timer_event(node, delay, EventKind::LogTimerFired, generation);
    e.log_timer = timer;
    sim->push(e);
}

void Simulator::push_within_flush_delay(std::size_t n, EventKind kind) {
    Event e;
    e.time_ms = now_ms_ + rng_.between(0, options_.log_options.flush_delay_max_ms);
    e.kind = kind;
    e.node = static_cast<std::uint16_t>(n);
    e.stamp = incarnation_[n];
    push(e);
}

void Simulator::LogEnv::schedule_flush() {
    // Group commit: one flush, at a random moment, covers everything appended until then.
    sim->push_within_flush_delay(node, EventKind::LogFlush);
}

void Simulator::LogEnv::schedule_meta() {
    // As LogDriver: the write starts a little later (the commit advances of the inputs due by
    // then share it) and completes after a storage delay (LogMetaDone).
    sim->push_within_flush_delay(node, EventKind::LogMetaBegin);
}

void Simulator::LogEnv::propose_result(const ProposeResult& result) {
    Simulator& s = *sim;
    s.released_.push_back(result);
    switch (result.error) {
        case ProposeError::None:
            ++s.stats_.proposals_acked;
            break;
        case ProposeError::TimedOut:
        case ProposeError::LeadershipLost:
            ++s.stats_.proposals_unknown;
            break;
        case ProposeError::NoSpace:
            ++s.stats_.proposals_refused;
            break;
        case ProposeError::NotLeader:
            ++s.stats_.proposals_refused;
            // The refusal names the leader the node knows (a 307), if any.
            if (s.cores_[node] && s.cores_[node]->state().leader) {
                s.client_belief_ = s.cores_[node]->state().leader->value;
            } else {
                s.client_belief_ = static_cast<std::uint16_t>(s.rng_.below(s.options_.nodes));
            }
            break;
        case ProposeError::NotActive:
        case ProposeError::InvalidEntry:
            ++s.stats_.proposals_refused;
            break;
    }
}

void Simulator::LogEnv::membership(const replication::NotifyMembership& notice) {
    sim->log_membership(node, notice);
}

void Simulator::log_membership(std::size_t n, const replication::NotifyMembership& notice) {
    // §8, as Node::follow_table does (minus the file and the sockets): the table is stored first
    // (table_ survives crashes), the mesh grows (links to the new nodes come up once they hold
    // this node too), and the elector grows when the notice is handed over, before the voters.
    // The log runtime has already rebuilt its broadcast list.
    std::size_t grown_to = 0;
    if (notice.table.size() > table_[n]) {
        const std::size_t before = table_[n];
        table_[n] = notice.table.size();
        grown_to = table_[n];
        ++stats_.table_growths;
        for (std::size_t j = before; j < table_[n] && j < options_.nodes; ++j) {
            if (j != n) {
                update_connection(n, j);
            }
        }
    }
    pending_notices_.push_back(
        PendingNotice{n, incarnation_[n], notice.voters, notice.version, grown_to});
}

void Simulator::LogEnv::failed(const std::string& what) {
    if (sim->options_.log_options.storage_fault_ppm != 0) {
        // An injected storage fault: the runtime took the log out of service; the process then
        // exits (a crash at once) and the schedule restarts it like any crashed node.
        sim->crash_now(node);
        return;
    }
    // Without injected faults MemoryStorage does not fail: a failure is the driver's bug.
    if (!sim->violation_) {
        sim->violation_ = Violation{ViolationKind::LogDriver, "log of n" + std::to_string(node) +
                                                                  ": storage failed: " + what};
    }
}

bool Simulator::storage_fault() {
    const LogSimOptions& lo = options_.log_options;
    if (lo.storage_fault_ppm == 0 || now_ms_ >= lo.storage_faults_until_ms ||
        rng_.below(1'000'000) >= lo.storage_fault_ppm) {
        return false;
    }
    ++stats_.storage_faults;
    return true;
}

void Simulator::FaultyLogStorage::append(const std::vector<Entry>& entries) {
    if (sim_->storage_fault()) {
        throw std::system_error(ENOSPC, std::generic_category(), "append to the log (injected)");
    }
    inner().append(entries);
}

Lsn Simulator::FaultyLogStorage::flush() {
    if (sim_->storage_fault()) {
        // The fsync failed: nothing of the unsynced tail is known durable.
        throw std::system_error(EIO, std::generic_category(), "fsync of the log (injected)");
    }
    return inner().flush();
}

void Simulator::LogEnv::before_actions(const LogActions& actions) {
    sim->begin_log_step(node, sim->pending_log_.input, actions, sim->pending_log_.received);
}

void Simulator::log_input(std::size_t node, LogInput input,
                          const std::function<LogActions(ReplicatedLog&)>& call,
                          const LogMessage* received) {
    log_step(
        node, input, [&](LogRt& rt) -> const LogActions& { return rt.run(call); }, received);
}

void Simulator::log_step(std::size_t node, LogInput input,
                         const std::function<const LogActions&(LogRt&)>& call,
                         const LogMessage* received) {
    CONCLAVE_CHECK(logs_[node], "a log step runs on a running log");
    const Busy busy(*this);
    pending_log_ = PendingLogStep{input, received};
    released_.clear();
    const std::uint64_t steps_before = stats_.log_steps;
    const LogActions* actions = nullptr;
    const std::uint64_t alarms_before = logs_[node]->rt.log().counters().protocol_violation_alarms;
    const bool failed_before = logs_[node]->rt.failed();
    ViolationKind kind = ViolationKind::LogCoreCheck;
    try {
        actions = &call(logs_[node]->rt);
        // A message no correct peer sends (dropped by the core, with an alarm) is a violation of
        // the run: the simulator's peers are all honest (planted bugs aside). It is its own kind:
        // the core did its job (detected and dropped); a lying peer broke the run.
        if (logs_[node]->rt.log().counters().protocol_violation_alarms != alarms_before) {
            const std::string what = std::string("protocol violation alarm: ") +
                                     logs_[node]->rt.log().last_violation().reason;
            if (!options_.keep_running_after_violations) {
                kind = ViolationKind::LogAlarm;
                throw LogCheckFailed(what);
            }
            // Recorded; the step's remaining checks still run (the core dropped the message).
            record_violation(Violation{ViolationKind::LogAlarm,
                                       "log of n" + std::to_string(node) + " in " +
                                           input_name(static_cast<int>(input)) + ": " + what});
        }
    } catch (const LogCheckFailed& failure) {
        if (options_.trace) {
            nlohmann::json line{{"kind", "log"},
                                {"node", node},
                                {"input", input_name(static_cast<int>(input))},
                                {"failed", failure.what()}};
            if (received) {
                line["msg"] = to_string(*received);
            }
            *options_.trace << line.dump() << '\n';
        }
        if (!violation_) {
            violation_ =
                Violation{kind, "log of n" + std::to_string(node) + " in " +
                                    input_name(static_cast<int>(input)) + ": " + failure.what()};
        }
        return;
    }
    if (stats_.log_steps == steps_before) {
        check_released(node);
        return;  // the runtime gave the core no input (stale timer, nothing to flush, failed)
    }
    if (!violation_) {
        // A step whose storage write failed (an injected fault): the core's memory holds what the
        // storage refused, so storage is not compared with it; the process exits at once.
        const bool storage_failed = !failed_before && logs_[node]->rt.failed();
        if (auto v = log_history_.after_step(node_id(node), *actions, log_views_, log_storage_,
                                             storage_failed)) {
            violation_ = std::move(v);
        }
    }
    check_released(node);  // after the history took the step's commits
}

// Before the runtime performs a log step's actions: count, fingerprint, trace.
void Simulator::begin_log_step(std::size_t node, LogInput input, const LogActions& actions,
                               const LogMessage* received) {
    ++stats_.log_steps;
    const ReplicatedLog& log = logs_[node]->rt.log();
    fingerprint_ =
        hash_mix(fingerprint_, static_cast<std::uint64_t>(now_ms_) ^ (std::uint64_t{node} << 48) ^
                                   ((0x40 + static_cast<std::uint64_t>(input)) << 56));
    fingerprint_ = hash_mix(fingerprint_, static_cast<std::uint64_t>(log.role()) ^
                                              (log.state().term.value << 8) ^
                                              (std::uint64_t{log.state().commit_len} << 32));
    fingerprint_ = hash_mix(fingerprint_, log.entries().size() ^ (log.last_lsn().counter << 24));
    if (options_.trace) {
        trace_log(node, input, actions, received);
    }
}

void Simulator::trace_log(std::size_t node, LogInput input, const LogActions& actions,
                          const LogMessage* received) {
    const ReplicatedLog& log = logs_[node]->rt.log();
    nlohmann::json out = nlohmann::json::array();
    for (const LogAction& a : actions) {
        out.push_back(to_string(a));
    }
    nlohmann::json line{{"kind", "log"},
                        {"node", node},
                        {"input", input_name(static_cast<int>(input))},
                        {"role", to_string(log.role())},
                        {"term", log.state().term.value},
                        {"commit", to_string(log.commit_lsn())},
                        {"last", to_string(log.last_lsn())},
                        {"entries", log.entries().size()},
                        {"actions", std::move(out)}};
    if (received) {
        line["msg"] = to_string(*received);
    }
    *options_.trace << line.dump() << '\n';
}

}  // namespace conclave::sim
