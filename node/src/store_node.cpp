// SPDX-License-Identifier: Apache-2.0
// Node's side of leadership from a coordination store (config "backend": etcd or zookeeper):
// the snapshot, /status, /healthz, step-down and the store's metrics, from a StoreBackend
// (store_backend.hpp) instead of the built-in elector. The mesh and the elector driver exist but
// are never started; the metadata log is refused by the config parser.
#include "conclave/node/node.hpp"

#include "conclave/admin/admin_server.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/security.hpp"
#include "conclave/node/store_backend.hpp"

namespace conclave::node {

using admin::Counter;
using admin::Gauge;

namespace {

using StoreClock = std::chrono::steady_clock;

std::int64_t StoreAgeMs(StoreClock::time_point since, StoreClock::time_point now) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count();
}

}  // namespace

void Node::create_store() {
    cores_.store = make_store_backend(*runtime_.io, config_, logger_);
    cores_.store->on_message(
        [this](admin::BroadcastMessage message) { on_broadcast_message(std::move(message)); });
    publication_.snapshot = store_leadership();
    register_store_metrics();
}

std::optional<std::string> Node::start_store() {
    runtime_.started = true;
    if (auto banner = insecure_banner(config_)) {
        logger_->warn("{}", *banner);
    }
    cores_.store->start([this] { on_store_change(); });
    const BackendSettings& b = config_.backend;
    std::string where = b.hosts;
    for (const Endpoint& e : b.endpoints) {
        where += (where.empty() ? "" : ",") + to_string(e);
    }
    log_event(*logger_, spdlog::level::info, "node started",
              {{"cluster", config_.cluster},
               {"backend", std::string(to_string(b.kind))},
               {"store", where},
               {"ttl_ms", b.ttl_ms},
               {"http", to_string(config_.self_entry().http)}});
    return std::nullopt;
}

// Leader while this node holds the key and its lease has not ended; a follower of the holder
// the store names; a candidate while no holder is known.
Leadership Node::store_leadership() const {
    const StoreView v = cores_.store->view();
    Leadership l;
    l.reason = v.reason;
    if (runtime_.stopped || v.session == StoreSession::Stopped) {
        l.role = elector::Role::Stopped;
        return l;
    }
    const auto deadline = cores_.store->lease_deadline();
    if (v.holding && deadline && StoreClock::now() < *deadline) {
        l.role = elector::Role::Leader;
        l.lease_deadline = deadline;
    } else {
        l.role = v.holder && !v.holding ? elector::Role::Follower : elector::Role::Candidate;
        if (v.holding) {
            l.reason = elector::Reason::LeaseExpired;  // held, but not renewed in time
        }
    }
    if (v.holder && (!v.holding || l.role == elector::Role::Leader)) {
        l.leader = v.holder;
        l.fencing_token = v.fencing_token;
        l.term = v.fencing_token;
    }
    return l;
}

void Node::on_store_change() {
    if (runtime_.stopped) {
        return;
    }
    publish(store_leadership());
}

admin::StatusReport Node::store_status() {
    const StoreView v = cores_.store->view();
    const Leadership l = store_leadership();
    const auto now = StoreClock::now();
    admin::StatusReport r;
    r.id = config_.self_entry().id;
    r.cluster = config_.cluster;
    r.role = l.role;
    r.term = Term{l.term};
    r.leader = l.leader;
    r.fencing_token = l.fencing_token;
    r.incarnation = peers_.identity.incarnation;
    r.last_transition_reason = l.reason;
    r.last_transition_age_ms = StoreAgeMs(v.changed_at, now);
    if (l.is_leader() || v.holding) {
        r.lease = admin::lease_status(cores_.store->lease_deadline(), now);
    }
    admin::StoreStatus s;
    s.kind = std::string(to_string(config_.backend.kind));
    s.session = std::string(to_string(v.session));
    s.detail = v.detail;
    if (v.last_answer) {
        s.last_answer_ms = StoreAgeMs(*v.last_answer, now);
    }
    s.ttl_ms = config_.backend.ttl_ms;
    r.store = std::move(s);
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        const NodeId peer{i};
        if (peer == config_.self) {
            continue;
        }
        admin::PeerStatus p;
        p.id = config_.nodes[i].id;
        std::tie(p.last_contact_ms, p.live) = liveness_of(peer, now);
        p.up = p.live;  // no link of its own: "up" while its record beats
        r.peers.push_back(std::move(p));
    }
    r.liveness_window_ms = liveness_window().count();
    return r;
}

// Healthy only while the store answers: a node that cannot reach it cannot know who leads.
admin::HealthReport Node::store_health() {
    if (!runtime_.started || runtime_.stopped) {
        return {false, "the node is not running"};
    }
    const StoreView v = cores_.store->view();
    const std::string kind(to_string(config_.backend.kind));
    if (v.session != StoreSession::Connected) {
        return {false, kind + " session " + std::string(to_string(v.session)) +
                           (v.detail.empty() ? "" : ": " + v.detail)};
    }
    return {true, ""};
}

std::optional<std::string> Node::store_step_down() {
    auto error = cores_.store->resign();
    if (!error) {
        log_event(*logger_, spdlog::level::info, "stepping down: the leader key is released",
                  {{"backend", std::string(to_string(config_.backend.kind))}});
    }
    return error;
}

void Node::register_store_metrics() {
    const std::string kind(to_string(config_.backend.kind));
    Gauge& connected = admin_.metrics.gauge(
        "conclave_store_connected", "1 while the coordination store answers this node's requests",
        {{"backend", kind}});
    Gauge& holding = admin_.metrics.gauge(
        "conclave_store_lease_valid", "1 while this node holds the store's key with a valid lease",
        {{"backend", kind}});
    Gauge& token = admin_.metrics.gauge("conclave_store_fencing_token",
                                        "The holder's fencing token (0: no holder known)",
                                        {{"backend", kind}});
    Counter& failed = admin_.metrics.counter("conclave_store_requests_failed_total",
                                             "Requests to the store that got no usable answer",
                                             {{"backend", kind}});
    Counter& renewals =
        admin_.metrics.counter("conclave_store_renewals_total",
                               "Lease / session renewals the store confirmed", {{"backend", kind}});
    Counter& lost =
        admin_.metrics.counter("conclave_store_sessions_lost_total",
                               "Leases or sessions the store ended (expired)", {{"backend", kind}});
    Counter& releases = admin_.metrics.counter(
        "conclave_store_releases_total", "Keys released (step-down, stop)", {{"backend", kind}});
    Counter& malformed = admin_.metrics.counter(
        "conclave_store_records_malformed_total",
        "Member and broadcast records read from the store and dropped as malformed",
        {{"backend", kind}});
    admin_.metrics.on_collect(
        [this, &connected, &holding, &token, &failed, &renewals, &lost, &releases, &malformed] {
            const StoreView v = cores_.store->view();
            connected.set(v.session == StoreSession::Connected ? 1 : 0);
            holding.set(store_leadership().valid_now() ? 1 : 0);
            token.set(static_cast<double>(v.fencing_token));
            failed.set_total(static_cast<double>(v.counters.requests_failed));
            renewals.set_total(static_cast<double>(v.counters.renewals));
            lost.set_total(static_cast<double>(v.counters.sessions_lost));
            releases.set_total(static_cast<double>(v.counters.releases));
            malformed.set_total(static_cast<double>(v.counters.records_malformed));
        });
}

}  // namespace conclave::node
