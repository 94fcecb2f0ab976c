// SPDX-License-Identifier: Apache-2.0
// Node's side of the replicated metadata log: the LogDriver's creation, propose(),
// subscribe_committed(), /status fields and metrics. Kept apart from node.cpp.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <chrono>

#include "conclave/codec/membership_codec.hpp"
#include "conclave/drivers/driver.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/node.hpp"
#include "conclave/node/security.hpp"

namespace conclave::node {

using admin::Counter;
using admin::Gauge;
using admin::MetadataProposeCallback;
using admin::MetadataProposeResult;
using admin::MetadataProposeStatus;

namespace {

MetadataProposeStatus status_of(drivers::ProposeStatus s) {
    switch (s) {
        case drivers::ProposeStatus::Committed:
            return MetadataProposeStatus::Committed;
        case drivers::ProposeStatus::NotLeader:
            return MetadataProposeStatus::NotLeader;
        case drivers::ProposeStatus::NotActive:
            return MetadataProposeStatus::NotActive;
        case drivers::ProposeStatus::InvalidEntry:
            return MetadataProposeStatus::InvalidEntry;
        case drivers::ProposeStatus::TimedOut:
            return MetadataProposeStatus::TimedOut;
        case drivers::ProposeStatus::LeadershipLost:
            return MetadataProposeStatus::LeadershipLost;
        case drivers::ProposeStatus::Stopped:
            return MetadataProposeStatus::Stopped;
        case drivers::ProposeStatus::Failed:
            return MetadataProposeStatus::Failed;
        case drivers::ProposeStatus::NoSpace:
            return MetadataProposeStatus::NoSpace;
        case drivers::ProposeStatus::ConditionFailed:
            return MetadataProposeStatus::ConditionFailed;
    }
    return MetadataProposeStatus::Failed;
}

std::string detail_of(MetadataProposeStatus s, const MetadataProposeResult& r, std::size_t max_key,
                      std::size_t max_value) {
    switch (s) {
        case MetadataProposeStatus::Committed:
            return "committed";
        case MetadataProposeStatus::NotLeader:
            return "this node is not the leader" +
                   (r.leader ? "; the leader is " + *r.leader : std::string("; no leader known"));
        case MetadataProposeStatus::NoLeader:
            return "no leader is known right now; retry later";
        case MetadataProposeStatus::NotActive:
            return "the leader is still syncing the log (passive); retry shortly";
        case MetadataProposeStatus::InvalidEntry:
            return "invalid entry: the key must be 1.." + std::to_string(max_key) +
                   " bytes, outside the reserved space _conclave/, and the value at most " +
                   std::to_string(max_value) + " bytes";
        case MetadataProposeStatus::TimedOut:
            return "not committed in time: outcome unknown (it may still commit; read "
                   "GET /metadata to find out)";
        case MetadataProposeStatus::LeadershipLost:
            return "the node stopped being leader before the entry committed: outcome unknown";
        case MetadataProposeStatus::Stopped:
            return "the node is not running";
        case MetadataProposeStatus::Disabled:
            return "the metadata log is disabled in the config (\"metadata\": {\"enabled\": "
                   "false})";
        case MetadataProposeStatus::Failed:
            return "the metadata log stopped after a storage failure on this node: outcome "
                   "unknown";
        case MetadataProposeStatus::NoSpace:
            return "NOSPACE alarm: the metadata log reached its quota (metadata.quota_bytes / "
                   "quota_entries) and compaction cannot free space; the cluster is read-only "
                   "for metadata until the quota is raised (and the leader restarted)";
        case MetadataProposeStatus::Refused:
            return "the membership change is refused";
        case MetadataProposeStatus::ConditionFailed:
            return "condition failed: the key's last write is " + to_string(r.current_lsn) +
                   " (0.0: absent) and the leader's term (fencing token) is " +
                   std::to_string(r.term) + "; nothing was appended";
    }
    return "";
}

}  // namespace

void Node::create_log_driver() {
    if (!config_.metadata.enabled) {
        return;
    }
    replication::LogConfig log;
    // The log's heartbeat carries the commit point to idle followers: follow the elector's pace,
    // within bounds.
    log.heartbeat_period = std::clamp(config_.elector.heartbeat_period, Millis{20}, Millis{500});
    log.sync_retry_period = log.heartbeat_period;
    const auto period_ms = static_cast<std::uint64_t>(log.heartbeat_period.count());
    log.propose_timeout_ticks = static_cast<std::uint32_t>(std::max<std::uint64_t>(
        1, (config_.metadata.propose_timeout_ms + period_ms - 1) / period_ms));
    log.quota_bytes = static_cast<std::size_t>(config_.metadata.quota_bytes);
    log.quota_entries = static_cast<std::size_t>(config_.metadata.quota_entries);
    log.compact_threshold = static_cast<std::size_t>(config_.metadata.compact_threshold);
    log.compact_retain = static_cast<std::size_t>(config_.metadata.compact_retain);
    // Membership: configuration entries name the ids of the config's node table.
    log.cluster_size = config_.nodes.size();
    log.self = config_.self;
    for (const NodeEntry& e : config_.nodes) {
        log.node_ids.push_back(e.id);
    }
    log.decode_configuration = &conclave::codec::decode_configuration;
    if (auto error = log.validate()) {
        throw std::invalid_argument("metadata: " + *error);
    }
    if (auto error = check_limits(log.max_key_bytes, log.max_value_bytes,
                                  net::kDefaultMaxFrameBytes)) {  // the node's mesh limit
        throw std::invalid_argument(*error);
    }
    drivers::LogDriverOptions options{
        config_.data_dir / "log", config_.metadata.fsync, log, logger_,
        [this](const std::string& what) { fail_stop("metadata log storage failed: " + what); }};
    if (options_.log_storage) {
        options.storage = options_.log_storage(options.dir, options.fsync);
    }
    options.on_membership = [this](const replication::NotifyMembership& m) { follow_table(m); };
    cores_.log_driver = std::make_unique<drivers::LogDriver>(*runtime_.io, *cores_.mesh,
                                                             *cores_.driver, std::move(options));
}

MetadataProposeResult Node::proposal_result(MetadataProposeStatus status, Lsn lsn) const {
    MetadataProposeResult r;
    r.status = status;
    r.lsn = lsn;
    const elector::LeadershipSnapshot& s = cores_.driver->snapshot();
    if (s.leader && *s.leader != config_.self) {
        r.leader = config_.node_name(*s.leader);
        r.leader_http = to_string(config_.nodes[s.leader->value].http);
    }
    if (r.status == MetadataProposeStatus::NotLeader && !r.leader) {
        r.status = MetadataProposeStatus::NoLeader;
    }
    const auto& c =
        cores_.log_driver ? cores_.log_driver->log().config() : replication::LogConfig{};
    r.detail = detail_of(r.status, r, c.max_key_bytes, c.max_value_bytes);
    return r;
}

void Node::propose(std::string key, std::string value, MetadataProposeCallback done) {
    if (must_post()) {
        boost::asio::post(*runtime_.io, [this, key = std::move(key), value = std::move(value),
                                         done = std::move(done)]() mutable {
            propose(std::move(key), std::move(value), std::move(done));
        });
        return;
    }
    propose_entry(std::move(key), std::move(value), false, {}, std::move(done));
}

void Node::propose(std::string key, std::string value, admin::MetadataCondition condition,
                   MetadataProposeCallback done) {
    if (must_post()) {
        boost::asio::post(*runtime_.io, [this, key = std::move(key), value = std::move(value),
                                         condition, done = std::move(done)]() mutable {
            propose(std::move(key), std::move(value), condition, std::move(done));
        });
        return;
    }
    propose_entry(std::move(key), std::move(value), false, condition, std::move(done));
}

void Node::propose_entry(std::string key, std::string value, bool config,
                         const admin::MetadataCondition& condition, MetadataProposeCallback done) {
    if (!cores_.log_driver) {
        return done(proposal_result(MetadataProposeStatus::Disabled, replication::kNoLsn));
    }
    if (runtime_.stopping || !runtime_.started) {
        return done(proposal_result(MetadataProposeStatus::Stopped, replication::kNoLsn));
    }
    const auto proposed_at = std::chrono::steady_clock::now();
    auto answer = [this, done = std::move(done),
                   proposed_at](const drivers::ProposeOutcome& outcome) {
        const MetadataProposeStatus status = status_of(outcome.status);
        if (status == MetadataProposeStatus::Committed && admin_.commit_latency != nullptr) {
            admin_.commit_latency->observe(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - proposed_at)
                    .count());
        }
        MetadataProposeResult r = proposal_result(status, outcome.lsn);
        if (status == MetadataProposeStatus::ConditionFailed) {
            r.current_lsn = outcome.current;
            r.term = outcome.term.value;
            r.detail = detail_of(status, r, 0, 0);
        }
        done(r);
    };
    if (config) {
        cores_.log_driver->propose_config(std::move(value), std::move(answer));
    } else {
        drivers::ProposeCondition c;
        c.expect_lsn = condition.expect_lsn;
        if (condition.fence) {
            c.fence = Term{*condition.fence};
        }
        cores_.log_driver->propose(std::move(key), std::move(value), c, std::move(answer));
    }
}

void Node::subscribe_committed(admin::CommittedCallback callback) {
    subscribe_committed(std::string(), std::move(callback));
}

void Node::subscribe_committed(std::string prefix, admin::CommittedCallback callback) {
    if (must_post()) {
        boost::asio::post(*runtime_.io, [this, prefix = std::move(prefix),
                                         callback = std::move(callback)]() mutable {
            subscribe_committed(std::move(prefix), std::move(callback));
        });
        return;
    }
    if (cores_.log_driver) {
        cores_.log_driver->subscribe_committed(std::move(callback), std::move(prefix));
    }
}

std::vector<replication::Entry> Node::committed_after(Lsn after, std::size_t max_entries) const {
    if (!cores_.log_driver) {
        return {};
    }
    return cores_.log_driver->committed_after(after, max_entries);
}

Lsn Node::commit_lsn() const {
    return cores_.log_driver ? cores_.log_driver->log().commit_lsn() : replication::kNoLsn;
}

std::optional<admin::LogStatus> Node::log_status() const {
    if (!cores_.log_driver) {
        return std::nullopt;
    }
    admin::LogStatus s;
    switch (cores_.log_driver->log().role()) {
        case replication::LogRole::LeaderPassive:
            s.leader_status = "passive";
            break;
        case replication::LogRole::LeaderActive:
            s.leader_status = "active";
            break;
        case replication::LogRole::Follower:
            break;
    }
    s.commit_lsn = cores_.log_driver->log().commit_lsn();
    if (cores_.log_driver->log().nospace_alarm()) {
        s.alarms.emplace_back("NOSPACE");
    }
    if (const auto& rollback = cores_.log_driver->log().rollback_alarm()) {
        s.alarms.emplace_back("ROLLBACK");
        s.rollback = replication::describe(*rollback, cores_.log_driver->log().config().node_ids);
    }
    s.repaired = cores_.log_driver->log().repaired();
    return s;
}

namespace {

/// Rollbacks (replication::RollbackAlarm): the alarm and how many were seen, by kind.
void register_rollback_metrics(admin::MetricsRegistry& metrics,
                               const std::unique_ptr<drivers::LogDriver>& log_driver) {
    Gauge& raised = metrics.gauge(
        "conclave_metadata_rollback_alarm",
        "1 once this node saw a rollback (a node's state restored from an older copy or lost: "
        "acknowledged entries at stake); GET /status \"rollback\" says which");
    std::vector<Counter*> by_kind;
    for (std::size_t i = 0; i < replication::kRollbackKindCount; ++i) {
        by_kind.push_back(&metrics.counter(
            "conclave_metadata_rollbacks_total",
            "Rollbacks seen, by kind (refused_truncation, leader_lacks_committed, "
            "follower_regressed)",
            {{"kind",
              std::string(replication::to_string(static_cast<replication::RollbackKind>(i)))}}));
    }
    metrics.on_collect([&log_driver, &raised, by_kind] {
        const replication::ReplicatedLog& log = log_driver->log();
        raised.set(log.rollback_alarm() ? 1.0 : 0.0);
        for (std::size_t i = 0; i < by_kind.size(); ++i) {
            by_kind[i]->set_total(static_cast<double>(log.counters().rollbacks_by_kind[i]));
        }
    });
}

/// Space and compaction of the metadata log: bytes held, the NOSPACE alarm, compactions,
/// snapshots installed, quota refusals, the repaired marker.
void register_log_space_metrics(admin::MetricsRegistry& metrics,
                                const std::unique_ptr<drivers::LogDriver>& log_driver) {
    Gauge& used_bytes = metrics.gauge(
        "conclave_metadata_log_bytes",
        "Bytes of entries held by the metadata log (snapshot + tail), as the quota counts them");
    Gauge& nospace = metrics.gauge(
        "conclave_metadata_nospace_alarm",
        "1 while the NOSPACE alarm is raised (quota reached: metadata writes refused)");
    Counter& compactions = metrics.counter("conclave_metadata_compactions_total",
                                           "Snapshots taken by compaction on this node");
    Counter& installed = metrics.counter("conclave_metadata_snapshots_installed_total",
                                         "Snapshots received from a leader and installed");
    Counter& nospace_refusals = metrics.counter("conclave_metadata_nospace_refusals_total",
                                                "Metadata writes refused by the quota");
    Gauge& repaired = metrics.gauge(
        "conclave_metadata_repaired",
        "1 while this node's log carries the repaired marker (conclaved --repair): it gives no "
        "sync promise and its acknowledgements count for no commit until it has caught up");
    metrics.on_collect(
        [&log_driver, &repaired] { repaired.set(log_driver->log().repaired() ? 1.0 : 0.0); });
    register_rollback_metrics(metrics, log_driver);
    metrics.on_collect(
        [&log_driver, &used_bytes, &nospace, &compactions, &installed, &nospace_refusals] {
            const replication::ReplicatedLog& log = log_driver->log();
            used_bytes.set(static_cast<double>(log.used_bytes()));
            nospace.set(log.nospace_alarm() ? 1.0 : 0.0);
            compactions.set_total(static_cast<double>(log.counters().compactions));
            installed.set_total(static_cast<double>(log.counters().snapshots_installed));
            nospace_refusals.set_total(static_cast<double>(log.counters().nospace_refusals));
        });
}

}  // namespace

void Node::register_metadata_metrics() {
    Gauge& storage_failed = admin_.metrics.gauge(
        "conclave_storage_failed",
        "1 once a storage failure (metadata log, elector state) took this node out of service");
    admin_.metrics.on_collect(
        [this, &storage_failed] { storage_failed.set(runtime_.storage_failure ? 1.0 : 0.0); });
    if (!cores_.log_driver) {
        return;
    }
    Counter& commits = admin_.metrics.counter("conclave_metadata_commits_total",
                                              "Metadata log entries committed (this run)");
    Counter& ok =
        admin_.metrics.counter("conclave_metadata_proposals_total",
                               "Metadata proposals answered, by outcome", {{"outcome", "ok"}});
    Counter& failed =
        admin_.metrics.counter("conclave_metadata_proposals_total",
                               "Metadata proposals answered, by outcome", {{"outcome", "failed"}});
    Counter& fsyncs =
        admin_.metrics.counter("conclave_metadata_fsyncs_total", "fsync calls on the metadata log");
    Counter& flushes = admin_.metrics.counter("conclave_metadata_group_commits_total",
                                              "Group commits (flushes) of the metadata log");
    Counter& bad =
        admin_.metrics.counter("conclave_metadata_bad_frames_total",
                               "Replication frames rejected (undecodable, wrong sender)");
    Counter& dropped =
        admin_.metrics.counter("conclave_metadata_messages_dropped_total",
                               "Log messages the mesh refused (peer down, overflow)");
    Counter& ahead = admin_.metrics.counter(
        "conclave_metadata_term_ahead_drops_total",
        "Log messages of a term this node's elector has not made durable yet, dropped (the leader "
        "re-sends once the elector has heard of the term)");
    Gauge& length = admin_.metrics.gauge("conclave_metadata_log_entries",
                                         "Entries held by the metadata log (snapshot + tail)");
    Gauge& commit_index = admin_.metrics.gauge("conclave_metadata_commit_lsn",
                                               "Counter part of the commit LSN (term.counter)");
    admin_.commit_latency = &admin_.metrics.histogram(
        "conclave_metadata_commit_latency_seconds",
        "Time from a metadata proposal reaching the leader to its commit (successful ones)",
        {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
    register_log_space_metrics(admin_.metrics, cores_.log_driver);
    admin_.metrics.on_collect([this, &commits, &ok, &failed, &fsyncs, &flushes, &bad, &dropped,
                               &ahead, &length, &commit_index] {
        const drivers::LogDriver& d = *cores_.log_driver;
        commits.set_total(static_cast<double>(d.log().counters().entries_committed));
        ok.set_total(static_cast<double>(d.counters().proposals_ok));
        failed.set_total(static_cast<double>(d.counters().proposals_failed));
        fsyncs.set_total(static_cast<double>(d.fsyncs()));
        flushes.set_total(static_cast<double>(d.counters().flushes));
        bad.set_total(static_cast<double>(d.counters().bad_frames));
        dropped.set_total(static_cast<double>(d.counters().messages_dropped));
        ahead.set_total(static_cast<double>(d.counters().ahead_of_vote_record));
        length.set(static_cast<double>(d.log().used_entries()));
        commit_index.set(static_cast<double>(d.log().commit_lsn().counter));
    });
}

}  // namespace conclave::node
