// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/simulator.hpp"

#include <algorithm>
#include <ostream>
#include <stdexcept>

#include "conclave/codec/json.hpp"
#include "conclave/core/check.hpp"
#include "conclave/sim/state_hash.hpp"

namespace conclave::sim {
namespace {

NodeId node_id(std::size_t n) {
    return NodeId{static_cast<std::uint16_t>(n)};
}

std::string node_name(NodeId n) {
    return "n" + std::to_string(n.value);
}

std::string mask_names(std::uint64_t mask) {
    std::string out = "{";
    for (std::uint16_t i = 0; i < 64; ++i) {
        if ((mask >> i) & 1U) {
            out += (out.size() > 1 ? "," : "") + node_name(NodeId{i});
        }
    }
    return out + "}";
}

}  // namespace

std::string describe(const FaultAction& f) {
    const std::string a = node_name(f.a);
    const std::string b = node_name(f.b);
    const std::string v = std::to_string(f.value);
    switch (f.kind) {
        case FaultKind::Cut:
            return "cut " + a + "-" + b;
        case FaultKind::Heal:
            return "heal " + a + "-" + b;
        case FaultKind::Partition:
            return "partition " + mask_names(f.mask) + " from the rest";
        case FaultKind::Unpartition:
            return "heal partition " + mask_names(f.mask);
        case FaultKind::Blackhole:
            return "blackhole " + a + "->" + b;
        case FaultKind::Unblackhole:
            return "end blackhole " + a + "->" + b;
        case FaultKind::SlowLink:
            return "slow " + a + "-" + b + " by " + v + " ms";
        case FaultKind::UnslowLink:
            return "end slow " + a + "-" + b;
        case FaultKind::BeginLoss:
            return "loss " + v + " ppm";
        case FaultKind::EndLoss:
            return "end loss";
        case FaultKind::BeginDuplication:
            return "duplication " + v + " ppm";
        case FaultKind::EndDuplication:
            return "end duplication";
        case FaultKind::BeginReorder:
            return "reordering";
        case FaultKind::EndReorder:
            return "end reordering";
        case FaultKind::Crash:
            return "crash " + a;
        case FaultKind::Restart:
            return "restart " + a;
        case FaultKind::Transfer:
            return "transfer leadership to " + b;
        case FaultKind::Pause:
            return "pause " + a + " for " + v + " ms";
        case FaultKind::HealAll:
            return "heal everything";
        case FaultKind::FailPersist:
            return "fail the next " + v + " state write(s) of " + a;
        case FaultKind::CorruptRepair:
            return "crash " + a + ", corrupt its log's last " + v + " entries and repair it";
        case FaultKind::BitFlip:
            return "crash " + a + " and flip a byte of its durable log";
        case FaultKind::Repair:
            return "repair " + a + " (conclaved --repair) and start it";
        case FaultKind::Wipe:
            return "crash " + a + " and lose its " +
                   (f.value == static_cast<std::uint32_t>(WipeLoss::VoteRecord) ? "vote record"
                    : f.value == static_cast<std::uint32_t>(WipeLoss::Log)      ? "log"
                                                                                : "data directory");
        case FaultKind::SetVoters: {
            std::string voters;
            for (std::uint16_t i = 0; i < 64; ++i) {
                if ((f.mask >> i) & 1U) {
                    voters += (voters.empty() ? "n" : ", n") + std::to_string(i);
                }
            }
            return a + " activates configuration " + v + " (voters " + voters + ")";
        }
    }
    return "?";
}

namespace {

/// Throws std::invalid_argument naming the field of the first bad option.
SimOptions validated(SimOptions o) {
    if (o.nodes == 0 || o.nodes > 32) {
        throw std::invalid_argument("nodes: must be between 1 and 32, got " +
                                    std::to_string(o.nodes));
    }
    if (o.latency_min_ms < 0 || o.latency_max_ms < o.latency_min_ms || o.jitter_ms < 0 ||
        o.peer_event_delay_ms < 0 || o.lsn_period_ms < 0) {
        throw std::invalid_argument(
            "latency: need 0 <= latency_min_ms <= latency_max_ms, jitter_ms >= 0, "
            "peer_event_delay_ms >= 0 and lsn_period_ms >= 0");
    }
    if (o.clock_drift_ppm.size() > o.nodes ||
        std::any_of(o.clock_drift_ppm.begin(), o.clock_drift_ppm.end(), [](std::int32_t d) {
            return d < -SimOptions::kMaxClockDriftPpm || d > SimOptions::kMaxClockDriftPpm;
        })) {
        throw std::invalid_argument("clock_drift_ppm: at most one per node, each within +-" +
                                    std::to_string(SimOptions::kMaxClockDriftPpm));
    }
    const std::size_t initial = o.initial_table != 0 ? o.initial_table : o.nodes;
    if (o.initial_table > o.nodes ||
        (o.initial_table != 0 && o.initial_table < o.nodes &&
         (!o.log || o.log_options.config.decode_configuration == nullptr))) {
        throw std::invalid_argument(
            "initial_table: at most nodes, and below it only with the log and membership on "
            "(log_options.config.decode_configuration): the table grows through configurations");
    }
    elector::Config c = o.elector;
    c.cluster_size = initial;
    c.self = NodeId{0};
    if (auto error = c.validate()) {
        throw std::invalid_argument("elector config: " + *error);
    }
    for (std::uint16_t i = 0; i < o.nodes; ++i) {
        if (o.elector.priorities[i] == 0) {
            o.history.never_lead.insert(NodeId{i});  // priorities: never leads (the history checks)
        }
    }
    if (o.log) {
        // Membership: the history's durability check reads configuration entries as the log does.
        o.log_options.history.decode_configuration = o.log_options.config.decode_configuration;
        o.log_options.history.initial_table = initial;
        replication::LogConfig lc = o.log_options.config;
        lc.cluster_size = initial;
        lc.self = NodeId{0};
        if (auto error = lc.validate()) {
            throw std::invalid_argument("log config: " + *error);
        }
        const LogSimOptions& l = o.log_options;
        if (l.flush_delay_max_ms < 0 || l.propose_interval_max_ms < 0 ||
            l.client_latency_max_ms < 1 || l.storage_latency_max_ms < 0 ||
            l.slow_sync_one_in == 0) {
            throw std::invalid_argument(
                "log options: need flush_delay_max_ms >= 0, propose_interval_max_ms >= 0, "
                "storage_latency_max_ms >= 0, slow_sync_one_in >= 1 and client_latency_max_ms >= "
                "1");
        }
    }
    return o;
}

}  // namespace

Simulator::Simulator(SimOptions options)
    : options_(validated(std::move(options))),
      rng_(options_.seed),
      history_(options_.nodes, options_.history),
      log_history_(options_.nodes, options_.log_options.history) {
    const std::size_t n = options_.nodes;
    cores_.resize(n);
    durable_.resize(n);
    persist_failures_.assign(n, 0);
    incarnation_.assign(n, 0);
    paused_until_ms_.assign(n, 0);
    drift_ppm_.assign(n, 0);
    std::copy(options_.clock_drift_ppm.begin(), options_.clock_drift_ppm.end(), drift_ppm_.begin());
    configs_.assign(n, std::nullopt);
    const std::size_t initial = options_.initial_table != 0 ? options_.initial_table : n;
    table_.assign(n, 0);
    std::fill(table_.begin(), table_.begin() + static_cast<std::ptrdiff_t>(initial), initial);
    join_config_.assign(n, std::nullopt);
    cut_count_.assign(n * n, 0);
    blackhole_count_.assign(n * n, 0);
    slow_ms_.assign(n * n, 0);
    connection_up_.assign(n * n, 0);
    round_trip_cache_.assign(n, RoundTripCache{});
    ++links_version_;
    epoch_.assign(n * n, 0);
    last_arrival_ms_.assign(n * n, 0);
    base_latency_ms_.assign(n * n, 0);
    for (auto& latency : base_latency_ms_) {
        latency = rng_.between(options_.latency_min_ms, options_.latency_max_ms);
    }
    for (std::size_t i = 0; i < initial; ++i) {  // the others join later (join())
        cores_[i] = std::make_unique<SimNode>(*this, i, config_for(i), elector::DurableState{});
    }
    logs_.resize(n);
    log_storage_.resize(n, replication::MemoryStorage(replication::FsyncPolicy::Batched));
    log_views_.assign(n, nullptr);
    flipped_.assign(n, std::nullopt);
    floor_len_.assign(n, 0);
    floor_term_.assign(n, Term{});
    init_identity();
    if (options_.log) {
        install_log_check_handler();
        workload_ = options_.log_options.propose_interval_max_ms > 0;
    }
    if (options_.trace) {
        nlohmann::json header{{"kind", "header"},
                              {"version", 1},
                              {"nodes", n},
                              {"quorum", config_for(0).effective_quorum()},
                              {"scouting", options_.elector.scouting},
                              {"check_quorum", options_.elector.check_quorum},
                              {"heartbeat_check_misses", config_for(0).heartbeat_check_misses()},
                              {"seed", options_.seed}};
        *options_.trace << header.dump() << '\n';
    }
}

Simulator::~Simulator() {
    if (options_.log) {
        conclave::set_invariant_failure_handler(previous_check_handler_);
    }
}

Simulator::SimNode::SimNode(Simulator& sim, std::size_t node, elector::Config config,
                            elector::DurableState restored)
    : env{&sim, node},
      rt(
          env, std::move(config), restored, [&sim] { return sim.rng_.next(); },
          sim.options_.runtime_bug) {}

void Simulator::ElectorEnv::send(std::span<const NodeId> to, const elector::Message& m) {
    // The wire must never show state that is not durable: a candidate's ElectionProposal leaves
    // only once its term and its vote for itself are durable (persist-before-send). Only the
    // proposal is checked: scouting messages carry the asked-about term and responses may carry
    // the asker's term, neither of which the sender persists.
    const elector::DurableState& durable = sim->durable_[node];
    if (!sim->violation_ && std::holds_alternative<elector::ElectionProposal>(m.body) &&
        (m.term != durable.term || durable.voted_for != node_id(node))) {
        sim->violation_ = Violation{
            ViolationKind::NotDurable,
            node_name(node_id(node)) + " sent " + std::string(elector::message_name(m.body)) +
                " in term " + std::to_string(m.term.value) + " while its durable term is " +
                std::to_string(durable.term.value)};
    }
    for (const NodeId peer : to) {
        sim->send(node, peer.value, m);
    }
}

std::int64_t Simulator::real_ms_at(std::size_t n, std::int64_t local) const {
    const std::int64_t d = drift_ppm_[n];
    if (d == 0) {
        return std::max(local, now_ms_);
    }
    // local_ms is non-decreasing: start from the inverse of the rate and step to the first
    // millisecond that reads `local` or more.
    std::int64_t t = std::max(now_ms_, floor_div(local * 1000000, 1000000 + d));
    while (local_ms(n, t) < local) {
        ++t;
    }
    while (t > now_ms_ && local_ms(n, t - 1) >= local) {
        --t;
    }
    return t;
}

Simulator::Event Simulator::timer_event(std::size_t n, Millis delay, EventKind kind,
                                        runtime::TimerGeneration generation) const {
    Event e;
    e.time_ms = real_ms_at(n, local_ms(n, now_ms_) + delay.count());
    e.kind = kind;
    e.node = static_cast<std::uint16_t>(n);
    e.stamp = static_cast<std::uint32_t>(generation);
    e.payload = incarnation_[n];
    return e;
}

void Simulator::ElectorEnv::arm(elector::TimerId timer, Millis delay,
                                runtime::TimerGeneration generation) {
    Event e = sim->timer_event(node, delay, EventKind::Timer, generation);
    e.timer = timer;
    sim->push(e);
}

bool Simulator::ElectorEnv::persist(const elector::DurableState& state) {
    if (sim->persist_failures_[node] > 0) {
        --sim->persist_failures_[node];
        ++sim->stats_.persist_failures;
        return false;  // EIO / ENOSPC: nothing written
    }
    sim->durable_[node] = state;
    ++sim->pending_.persisted;
    return true;
}

void Simulator::ElectorEnv::notify(const elector::LeadershipSnapshot& snapshot) {
    if (sim->logs_[node] && !sim->violation_) {
        const elector::LeadershipSnapshot copy = snapshot;
        sim->log_input(node, LogInput::OnLeadership, [&](auto& log) {
            return log.on_leadership(sim->local_now(node_id(node)), copy);
        });
    }
}

void Simulator::ElectorEnv::failed(const elector::DurableState&) {
    // Out of service: the runtime ignores every input from now on. The process then exits (a
    // crash at once); the schedule restarts it like any crashed node.
    sim->crash_now(node);
}

void Simulator::crash_now(std::size_t node) {
    // As a fault event, not at once: the runtime that failed is still on the call stack.
    fault_now(FaultAction{FaultKind::Crash, node_id(node), {}, 0, 0});
}

void Simulator::fault_now(const FaultAction& f) {
    Event e;
    e.time_ms = now_ms_;
    e.kind = EventKind::Fault;
    e.fault = static_cast<std::uint32_t>(faults_.size());
    faults_.push_back(f);
    push(e);
}

void Simulator::ElectorEnv::before_actions(const elector::Actions& actions) {
    const PendingStep& p = sim->pending_;
    sim->begin_step(node, p.action, actions, p.received, p.peer, p.timer);
    sim->pending_.begun = true;
}

template <class Call>
void Simulator::input(std::size_t node, StepAction action, Call&& call,
                      const elector::Message* received, std::optional<NodeId> peer,
                      std::optional<elector::TimerId> timer) {
    const Busy busy(*this);
    pending_ = PendingStep{action, received, peer, timer, false, 0};
    if (const auto rtt = current_round_trip(node)) {
        cores_[node]->rt.observe_round_trip(*rtt);  // the ranked backoff's slot follows the links
    }
    const elector::Actions& actions = call(cores_[node]->rt);
    if (!pending_.begun) {
        return;  // the runtime is out of service and gave the core nothing
    }
    if (cores_[node]->rt.failed()) {
        finish_failed_step(node, action, actions);  // this step's state write failed
    } else {
        finish_step(node, action, actions);
    }
}

std::optional<std::chrono::microseconds> Simulator::round_trip(std::size_t node) const {
    std::optional<std::int64_t> largest_ms;
    for (std::size_t p = 0; p < options_.nodes; ++p) {
        const std::size_t out = link(node, p);
        const std::size_t back = link(p, node);
        if (p == node || connection_up_[out] == 0) {
            continue;
        }
        const std::int64_t rtt = base_latency_ms_[out] + slow_ms_[out] + base_latency_ms_[back] +
                                 slow_ms_[back] + options_.jitter_ms;
        largest_ms = std::max(largest_ms.value_or(0), rtt);
    }
    if (!largest_ms) {
        return std::nullopt;
    }
    return std::chrono::microseconds{*largest_ms * 1000};
}

// round_trip(node), computed again only after a link's state or latency changed (it is asked
// before every input).
std::optional<std::chrono::microseconds> Simulator::current_round_trip(std::size_t node) {
    RoundTripCache& cached = round_trip_cache_[node];
    if (cached.links_version != links_version_) {
        cached = RoundTripCache{links_version_, round_trip(node)};
    }
    return cached.value;
}

elector::Config Simulator::config_for(std::size_t node) const {
    elector::Config c = options_.elector;
    c.cluster_size = table_[node] != 0 ? table_[node] : options_.nodes;
    c.self = node_id(node);
    return c;
}

const elector::ElectorState* Simulator::state(NodeId n) const {
    return cores_[n.value] ? &cores_[n.value]->state() : nullptr;
}

std::optional<Millis> Simulator::rank_slot(NodeId n) const {
    if (!cores_[n.value]) {
        return std::nullopt;
    }
    return cores_[n.value]->rt.elector().config().rank_slot;
}

bool Simulator::connected(NodeId a, NodeId b) const {
    const std::size_t ab = link(a.value, b.value);
    const std::size_t ba = link(b.value, a.value);
    return connection_up_[ab] != 0 && blackhole_count_[ab] == 0 && blackhole_count_[ba] == 0;
}

bool Simulator::healthy(NodeId n) const {
    if (!alive(n) || paused(n)) {
        return false;
    }
    std::size_t reachable = 1;
    for (std::size_t j = 0; j < options_.nodes; ++j) {
        if (j != n.value && connected(n, node_id(j))) {
            ++reachable;
        }
    }
    return reachable >= history_.majority();
}

bool Simulator::fault_free() const {
    for (std::size_t i = 0; i < options_.nodes; ++i) {
        if (!cores_[i] || paused_until_ms_[i] > now_ms_) {
            return false;
        }
    }
    auto zero = [](const auto& v) {
        return std::all_of(v.begin(), v.end(), [](auto x) { return x == 0; });
    };
    return zero(cut_count_) && zero(blackhole_count_) && zero(slow_ms_) && loss_depth_ == 0 &&
           duplication_depth_ == 0 && reorder_depth_ == 0;
}

void Simulator::push(Event e) {
    e.seq = next_seq_++;
    std::uint32_t slot = 0;
    if (free_slots_.empty()) {
        slot = static_cast<std::uint32_t>(event_pool_.size());
        event_pool_.push_back(std::move(e));
    } else {
        slot = free_slots_.back();
        free_slots_.pop_back();
        event_pool_[slot] = std::move(e);
    }
    const Event& queued = event_pool_[slot];
    queue_.push(QueuedEvent{queued.time_ms, queued.seq, slot});
}

Simulator::Event Simulator::pop() {
    const std::uint32_t slot = queue_.top().slot;
    queue_.pop();
    free_slots_.push_back(slot);
    return std::move(event_pool_[slot]);
}

void Simulator::start_all() {
    CONCLAVE_CHECK(!started_, "the nodes are started once");
    started_ = true;
    for (std::size_t i = 0; i < options_.nodes; ++i) {
        if (table_[i] == 0) {
            continue;  // in nobody's table: it joins later (join())
        }
        if (options_.log) {
            log_start(i);  // before the elector, whose start may already notify leadership
        }
        input(i, StepAction::Start, [](auto& rt) -> const elector::Actions& { return rt.start(); });
        absorb_violation();
        if (violation_) {
            return;
        }
    }
    for (std::size_t a = 0; a < options_.nodes; ++a) {
        for (std::size_t b = a + 1; b < options_.nodes; ++b) {
            update_connection(a, b);
        }
    }
    if (options_.lsn_period_ms > 0) {
        Event tick;
        tick.time_ms = now_ms_ + options_.lsn_period_ms;
        tick.kind = EventKind::LsnTick;
        push(tick);
    }
    set_workload(workload_);
}

void Simulator::schedule(Millis at, FaultAction fault) {
    CONCLAVE_CHECK(at.count() >= now_ms_, "a fault is not scheduled in the past");
    Event e;
    e.time_ms = at.count();
    e.kind = EventKind::Fault;
    e.fault = static_cast<std::uint32_t>(faults_.size());
    faults_.push_back(fault);
    push(e);
}

bool Simulator::step() {
    absorb_violation();
    if (violation_ || queue_.empty()) {
        return false;
    }
    const Event e = pop();
    CONCLAVE_CHECK(e.time_ms >= now_ms_, "an event is not scheduled in the past");
    now_ms_ = e.time_ms;
    ++stats_.events;
    dispatch(e);
    check_tables();
    absorb_violation();
    return !violation_;
}

void Simulator::check_tables() {
    if (violation_ || options_.initial_table == 0) {
        return;  // (no table grows: nothing to compare)
    }
    for (std::size_t n = 0; n < options_.nodes; ++n) {
        if (!cores_[n]) {
            continue;
        }
        const std::size_t elector = cores_[n]->rt.elector().config().cluster_size;
        const std::size_t log = logs_[n] ? logs_[n]->rt.log().config().cluster_size : table_[n];
        if (elector != table_[n] || log != table_[n]) {
            violation_ =
                Violation{ViolationKind::NodeTable,
                          node_name(node_id(n)) + "'s table holds " + std::to_string(table_[n]) +
                              " nodes, its elector's " + std::to_string(elector) +
                              ", its log core's " + std::to_string(log)};
            return;
        }
    }
}

void Simulator::absorb_violation() {
    if (violation_ && options_.keep_running_after_violations) {
        record_violation(std::move(*violation_));
        violation_.reset();
    }
}

void Simulator::record_violation(Violation v) {
    ++violation_counts_[v.kind];
    if (recorded_violations_.size() < kMaxRecordedViolations) {
        recorded_violations_.push_back(std::move(v));
    }
}

bool Simulator::run_until(Millis until) {
    absorb_violation();
    while (!violation_ && !queue_.empty() && queue_.top().time_ms <= until.count()) {
        step();
    }
    if (!violation_ && now_ms_ < until.count()) {
        now_ms_ = until.count();
    }
    return !violation_;
}

void Simulator::dispatch(const Event& e) {
    if (e.kind == EventKind::Fault) {
        apply(faults_[e.fault]);
        return;
    }
    if (e.kind == EventKind::LsnTick) {
        lsn_tick(e);
        return;
    }
    if (e.kind == EventKind::ClientTick) {
        client_tick();
        return;
    }
    const std::size_t n = e.node;
    if (!cores_[n]) {
        dispatch_to_crashed(e);
        return;
    }
    if ((e.kind == EventKind::Deliver || e.kind == EventKind::LogDeliver) && !knows(n, e.peer)) {
        // A connection is up only between nodes that hold each other, and tables only grow.
        violation_ = Violation{ViolationKind::NodeTable,
                               node_name(node_id(n)) + " (table of " + std::to_string(table_[n]) +
                                   ") got a message from " + node_name(node_id(e.peer)) +
                                   " (table of " + std::to_string(table_[e.peer]) + ")"};
        return;
    }
    if (drop_stale(e)) {
        return;
    }
    if (paused_until_ms_[n] > now_ms_) {
        Event later = e;  // a stalled process handles it when it resumes
        later.time_ms = paused_until_ms_[n];
        push(later);
        return;
    }
    deliver(e);
}

void Simulator::lsn_tick(const Event& e) {
    for (std::size_t i = 0; i < options_.nodes && !violation_; ++i) {
        if (!cores_[i] || paused_until_ms_[i] > now_ms_ ||
            cores_[i]->state().role != elector::Role::Leader) {
            continue;
        }
        const std::optional<Lsn> issued = cores_[i]->issue_lsn();
        CONCLAVE_CHECK(issued, "a running leader issues an LSN");
        ++stats_.lsns_issued;
        perform(i, StepAction::IssueLsn, elector::Actions{});
        if (!violation_) {
            if (auto v = history_.after_issue(node_id(i), *issued, cores_[i]->state())) {
                violation_ = std::move(v);
            }
        }
    }
    Event tick = e;
    tick.time_ms = now_ms_ + options_.lsn_period_ms;
    push(tick);
}

// An event addressed to a crashed node: its messages are lost, its requests refused.
void Simulator::dispatch_to_crashed(const Event& e) {
    const std::size_t n = e.node;
    if (e.kind == EventKind::Deliver) {
        ++stats_.messages_dropped;
        if (options_.trace) {
            trace_net("Drop", &e.message, n, "receiver crashed");
        }
    } else if (e.kind == EventKind::LogDeliver) {
        ++stats_.log_messages_dropped;
        take_payload(e.payload);
    } else if (e.kind == EventKind::ClientRequest) {
        dispatch_log(e);  // refused: connection refused
    }
}

// Drops a stale event (true): its connection was reset, its timer replaced or cancelled, or it
// was addressed to a previous incarnation of the process.
bool Simulator::drop_stale(const Event& e) {
    const std::size_t n = e.node;
    switch (e.kind) {
        case EventKind::Deliver:
            if (epoch_[link(e.peer, n)] != e.stamp) {
                ++stats_.messages_dropped;  // the connection it travelled on was reset
                if (options_.trace) {
                    trace_net("Drop", &e.message, n, "connection reset");
                }
                return true;
            }
            break;
        case EventKind::Timer:
            if (incarnation_[n] != e.payload ||
                static_cast<std::uint32_t>(cores_[n]->rt.generation(e.timer)) != e.stamp) {
                return true;  // a previous incarnation's, replaced or cancelled
            }
            break;
        case EventKind::LogDeliver:
            if (epoch_[link(e.peer, n)] != e.stamp) {
                ++stats_.log_messages_dropped;  // the connection it travelled on was reset
                take_payload(e.payload);
                return true;
            }
            break;
        case EventKind::LogTimerFired:
            if (!logs_[n] || incarnation_[n] != e.payload ||
                static_cast<std::uint32_t>(logs_[n]->rt.generation(e.log_timer)) != e.stamp) {
                return true;  // a previous incarnation's, replaced or cancelled
            }
            break;
        case EventKind::ClientRequest:
            break;  // a request reaches whichever incarnation is running
        default:
            if (incarnation_[n] != e.stamp) {
                return true;  // addressed to a previous incarnation of the process
            }
            break;
    }
    return false;
}

// Hands a live, running node the event addressed to it.
void Simulator::deliver(const Event& e) {
    const std::size_t n = e.node;
    const NodeId peer = node_id(e.peer);
    switch (e.kind) {
        case EventKind::Deliver:
            ++stats_.messages_delivered;
            input(
                n, action_for(e.message.body),
                [&](auto& rt) -> const elector::Actions& { return rt.receive(e.message); },
                &e.message);
            break;
        case EventKind::Timer:
            input(
                n, action_for(e.timer),
                [&](auto& rt) -> const elector::Actions& {
                    return rt.timer_fired(e.timer, rt.generation(e.timer));
                },
                nullptr, std::nullopt, e.timer);
            if (e.timer == elector::TimerId::HeartbeatBroadcast) {
                hand_back(n);
            }
            break;
        case EventKind::PeerUp:
            input(
                n, StepAction::PeerUp,
                [&](auto& rt) -> const elector::Actions& { return rt.peer_up(peer); }, nullptr,
                peer);
            if (logs_[n] && !violation_) {
                log_history_.on_peer_event(node_id(n), peer);
                log_input(n, LogInput::PeerUp,
                          [&](auto& log) { return log.peer_up(local_now(node_id(n)), peer); });
            }
            break;
        case EventKind::PeerDown:
            input(
                n, StepAction::PeerDown,
                [&](auto& rt) -> const elector::Actions& { return rt.peer_down(peer); }, nullptr,
                peer);
            if (logs_[n] && !violation_) {
                log_history_.on_peer_event(node_id(n), peer);
                log_input(n, LogInput::PeerDown,
                          [&](auto& log) { return log.peer_down(local_now(node_id(n)), peer); });
            }
            break;
        case EventKind::LogDeliver:
        case EventKind::LogTimerFired:
        case EventKind::LogFlush:
        case EventKind::LogSyncDone:
        case EventKind::LogMetaBegin:
        case EventKind::LogMetaDone:
        case EventKind::ClientRequest:
            dispatch_log(e);
            break;
        default:
            CONCLAVE_CHECK(false, "every event kind is dispatched");
    }
}

void Simulator::perform(std::size_t node, StepAction action, const elector::Actions& actions) {
    begin_step(node, action, actions, nullptr, std::nullopt, std::nullopt);
    finish_step(node, action, actions);
}

// Before the runtime performs the actions of a step: count, fingerprint, trace.
void Simulator::begin_step(std::size_t node, StepAction action, const elector::Actions& actions,
                           const elector::Message* received, std::optional<NodeId> peer,
                           std::optional<elector::TimerId> timer) {
    ++stats_.steps;
    const elector::ElectorState& state = cores_[node]->state();
    fingerprint_ =
        hash_mix(fingerprint_, static_cast<std::uint64_t>(now_ms_) ^ (std::uint64_t{node} << 48) ^
                                   (static_cast<std::uint64_t>(action) << 56));
    fingerprint_ = hash_mix(fingerprint_, hash_state(state));
    if (options_.trace) {
        trace_step(node, action, actions, state, received, peer, timer);
    }
}

// After the runtime performed them: invariants, then the observer.
void Simulator::finish_step(std::size_t node, StepAction action, const elector::Actions& actions) {
    const elector::ElectorState& state = cores_[node]->state();
    check(node, action, state, actions);
    if (on_step) {
        on_step(*this, StepRecord{now(), node_id(node), action, &state, &actions});
    }
}

// A step whose PersistState failed did not happen as the core returned it: the runtime performed
// the actions before the failed write and nothing from it on (no send, no timer), and the process
// leaves service (ElectorEnv::failed queued its crash). The term or vote the core now holds in
// memory was never written nor shown to anyone, so the history must not record it: a restart
// from the durable state legitimately "forgets" it (checking the in-memory state reported a false
// TermDecreased at the crash, and would have reported a false double vote if the restarted node
// voted otherwise in that term). The step is checked as what took effect: the durable term and
// vote, and the actions performed.
void Simulator::finish_failed_step(std::size_t node, StepAction action,
                                   const elector::Actions& actions) {
    elector::Actions performed;
    std::size_t persists = 0;
    for (const elector::Action& a : actions) {
        if (std::holds_alternative<elector::PersistState>(a) && persists++ == pending_.persisted) {
            break;  // the write that failed
        }
        performed.push_back(a);
    }
    elector::ElectorState remains;
    remains.term = durable_[node].term;
    remains.voted_for = durable_[node].voted_for;
    check(node, action, remains, performed);
    if (on_step) {
        on_step(*this, StepRecord{now(), node_id(node), action, &remains, &performed});
    }
}

void Simulator::check(std::size_t node, StepAction action, const elector::ElectorState& state,
                      const elector::Actions& actions) {
    if (violation_) {
        return;
    }
    if (auto v = history_.after_step(node_id(node), action, state, actions)) {
        violation_ = std::move(v);
        return;
    }
    check_lease_exclusive();
}

// LeaseExclusive (docs/design.md, the leader lease): at no real time do two nodes both lead with
// a lease that has not ended, each lease read on its own node's clock
// (SimOptions::clock_drift_ppm). Checked after every step: a lease only starts or is renewed at a
// step of its node. A paused node cannot act: it counts from when it resumes (and has seen what
// happened meanwhile). The simulator's cuts close a connection on both sides at once, also a paused
// leader's, which no real network does (the forged reset that docs/design.md excludes).
void Simulator::check_lease_exclusive() {
    std::optional<std::size_t> holder;
    for (std::size_t n = 0; n < cores_.size(); ++n) {
        if (!cores_[n]) {
            continue;
        }
        const elector::LeadershipSnapshot& s = cores_[n]->rt.elector().snapshot();
        // Until the instant it resumes is over: the events it missed are handled at that instant.
        // (valid_at, its cheap tests first: most steps have no leader with a lease.)
        if (s.role != elector::Role::Leader || !s.lease_end || paused_until_ms_[n] >= now_ms_ ||
            !s.valid_at(local_now(node_id(n)))) {
            continue;
        }
        if (holder) {
            violation_ = Violation{ViolationKind::LeaseExclusive,
                                   "n" + std::to_string(*holder) + " and n" + std::to_string(n) +
                                       " both hold a valid leader lease at " +
                                       std::to_string(now().count()) + " ms" + drift_note()};
            return;
        }
        holder = n;
    }
}

// The clocks' drift, for a LeaseExclusive report: the lease holds only within the bound rho.
std::string Simulator::drift_note() const {
    const std::int64_t bound = std::int64_t{options_.elector.lease_drift_permille} * 1000;
    std::string rates;
    bool beyond = false;
    for (std::size_t n = 0; n < drift_ppm_.size(); ++n) {
        if (drift_ppm_[n] != 0) {
            rates += (rates.empty() ? "" : ", ") + node_name(node_id(n)) + " " +
                     (drift_ppm_[n] > 0 ? "+" : "") + std::to_string(drift_ppm_[n]) + " ppm";
        }
        beyond = beyond || drift_ppm_[n] > bound || drift_ppm_[n] < -bound;
    }
    if (rates.empty()) {
        return "";
    }
    return " (clock drift " + rates + (beyond ? ": BEYOND" : ": within") +
           " the stated bound rho = " + std::to_string(options_.elector.lease_drift_permille) +
           " permille" + (beyond ? ", which the lease assumes" : "") + ")";
}

void Simulator::send(std::size_t from, std::size_t to, const elector::Message& m) {
    transmit(from, to, &m, nullptr);
}

// One message on the mesh: an elector message (`m`) or a log message (`log_message`), on the same
// connections with the same faults.
void Simulator::transmit(std::size_t from, std::size_t to, const elector::Message* m,
                         const replication::LogMessage* log_message) {
    ++(m ? stats_.messages_sent : stats_.log_messages_sent);
    const std::size_t l = link(from, to);
    const char* drop = nullptr;
    if (connection_up_[l] == 0) {
        drop = "no connection";
        if (!knows(from, to)) {
            drop = "outside the node table";  // the mesh of one end does not know the other
            ++stats_.messages_outside_table;
        }
    } else if (quarantine_drops(from, to, m, log_message)) {
        return;
    } else if (blackhole_count_[l] != 0) {
        drop = "blackhole";
    } else if (loss_ppm_ != 0 && rng_.chance(loss_ppm_)) {
        drop = "loss";
    }
    if (drop) {
        ++(m ? stats_.messages_dropped : stats_.log_messages_dropped);
        if (options_.trace) {
            trace_net("Drop", m, to, drop, log_message);
        }
        return;
    }
    const int copies = (duplication_ppm_ != 0 && rng_.chance(duplication_ppm_)) ? 2 : 1;
    for (int copy = 0; copy < copies; ++copy) {
        std::int64_t at =
            now_ms_ + base_latency_ms_[l] + slow_ms_[l] + rng_.between(0, options_.jitter_ms);
        if (copy == 0 && reorder_depth_ == 0) {
            at = std::max(at, last_arrival_ms_[l]);  // TCP: FIFO per direction
            last_arrival_ms_[l] = at;
        }
        if (copy == 1) {
            ++stats_.messages_duplicated;
            if (options_.trace) {
                trace_net("Duplicate", m, to, "duplicated", log_message);
            }
        }
        Event e;
        e.time_ms = at;
        e.kind = m ? EventKind::Deliver : EventKind::LogDeliver;
        e.node = static_cast<std::uint16_t>(to);
        e.peer = static_cast<std::uint16_t>(from);
        e.stamp = epoch_[l];
        if (m) {
            e.message = *m;
        } else {
            e.payload = store_payload(*log_message);
        }
        push(e);
    }
}

void Simulator::update_connection(std::size_t a, std::size_t b) {
    CONCLAVE_CHECK(a != b, "a connection joins two different nodes");
    const std::size_t ab = link(a, b);
    const std::size_t ba = link(b, a);
    bool want = started_ && cores_[a] && cores_[b] && cut_count_[ab] == 0 && knows(a, b);
    if (want == (connection_up_[ab] != 0)) {
        return;
    }
    if (want && !handshake(a, b)) {
        return;  // refused (state_lost): the connection stays down, the refused node exits
    }
    connection_up_[ab] = connection_up_[ba] = want ? 1 : 0;
    ++links_version_;
    ++epoch_[ab];
    epoch_[ba] = epoch_[ab];
    last_arrival_ms_[ab] = last_arrival_ms_[ba] = 0;
    for (const auto& [self, other] : {std::pair{a, b}, std::pair{b, a}}) {
        if (!cores_[self]) {
            continue;
        }
        Event e;
        e.time_ms = now_ms_ + options_.peer_event_delay_ms;
        e.kind = want ? EventKind::PeerUp : EventKind::PeerDown;
        e.node = static_cast<std::uint16_t>(self);
        e.peer = static_cast<std::uint16_t>(other);
        e.stamp = incarnation_[self];
        push(e);
    }
}

void Simulator::cut_pair(std::size_t a, std::size_t b, int delta) {
    std::uint16_t& count = cut_count_[link(a, b)];
    if (delta < 0 && count == 0) {
        return;
    }
    count = static_cast<std::uint16_t>(count + delta);
    cut_count_[link(b, a)] = count;
    update_connection(a, b);
}

void Simulator::crash(std::size_t n) {
    if (!cores_[n]) {
        return;
    }
    ++stats_.crashes;
    cores_[n].reset();
    log_crash(n);
    ++incarnation_[n];
    paused_until_ms_[n] = 0;
    // What the process leaves behind: its durable state, nothing else.
    elector::ElectorState remains;
    remains.term = durable_[n].term;
    remains.voted_for = durable_[n].voted_for;
    const elector::Actions none;
    ++stats_.steps;
    fingerprint_ = hash_mix(fingerprint_, static_cast<std::uint64_t>(now_ms_) ^ (n << 48) ^
                                              (std::uint64_t{0xC0} << 56));
    if (options_.trace) {
        trace_step(n, StepAction::Crash, none, remains, nullptr, std::nullopt, std::nullopt);
    }
    check(n, StepAction::Crash, remains, none);
    if (on_step) {
        on_step(*this, StepRecord{now(), node_id(n), StepAction::Crash, &remains, &none});
    }
    for (std::size_t j = 0; j < options_.nodes; ++j) {
        if (j != n) {
            update_connection(n, j);
        }
    }
}

void Simulator::restart(std::size_t n) {
    if (cores_[n] || table_[n] == 0) {
        return;  // running, or not joined yet (in nobody's table)
    }
    if (options_.log && !log_recovery_allows_start(n)) {
        return;  // recovery refused the flipped log: the process exits at once
    }
    if (!identity_allows_start(n)) {
        return;  // conclaved exits 3: its vote record is lost, or a peer refused it
    }
    if (options_.lose_durable_state) {
        durable_[n] = elector::DurableState{};
    }
    cores_[n] = std::make_unique<SimNode>(*this, n, config_for(n), durable_[n]);
    // Membership: the restarted node reads its configuration from its log; with the log running,
    // its start() does that (Env::membership, before the elector starts: R9).
    if (configs_[n] && !options_.log) {
        // Named variables, not a structured binding: Clang 14 cannot capture a binding.
        const NodeSet voters = configs_[n]->first;
        const std::uint64_t version = configs_[n]->second;
        input(n, StepAction::SetVoters, [&](auto& rt) -> const elector::Actions& {
            rt.set_voters(voters, version);
            return rt.last_actions();
        });
    }
    if (options_.log) {
        log_start(n);  // before the elector, whose start may already notify leadership
    }
    if (join_config_[n]) {
        ++stats_.joiner_restarts;
        stats_.joiner_restarts_stored +=
            logs_[n] && !logs_[n]->rt.log().active_config().from_entry ? 1U : 0U;
    }
    start_joiner_config(n);
    input(n, StepAction::Restart, [](auto& rt) -> const elector::Actions& { return rt.start(); });
    for (std::size_t j = 0; j < options_.nodes; ++j) {
        if (j != n) {
            update_connection(n, j);
        }
    }
}

bool Simulator::join(NodeId node, std::size_t table, NodeSet voters, std::uint64_t version) {
    const std::size_t n = node.value;
    if (!options_.log || n >= options_.nodes || table_[n] != 0 || table <= n ||
        table > options_.nodes || violation_) {
        return false;
    }
    // `conclaved --join`: the table and the configuration from the join answer, stored; an empty
    // log; the elector at that configuration (a learner) before it starts.
    table_[n] = table;
    join_config_[n] = std::make_pair(voters, version);
    ++stats_.joins;
    cores_[n] = std::make_unique<SimNode>(*this, n, config_for(n), durable_[n]);
    log_start(n);
    start_joiner_config(n);
    input(n, StepAction::Start, [](auto& rt) -> const elector::Actions& { return rt.start(); });
    for (std::size_t j = 0; j < options_.nodes; ++j) {
        if (j != n) {
            update_connection(n, j);
        }
    }
    check_tables();
    return !violation_;
}

void Simulator::start_joiner_config(std::size_t n) {
    if (!join_config_[n] || violation_ || !cores_[n] ||
        (logs_[n] && logs_[n]->rt.log().active_config().from_entry)) {
        return;  // not a joiner, or its log's start() handed its own configuration over (R9)
    }
    const NodeSet voters = join_config_[n]->first;  // captured below: no structured binding
    const std::uint64_t version = join_config_[n]->second;
    std::optional<std::string> error;
    input(n, StepAction::SetVoters, [&](auto& rt) -> const elector::Actions& {
        error = rt.set_voters(voters, version);
        return rt.last_actions();
    });
    if (error && !violation_) {
        violation_ = Violation{ViolationKind::MembershipRefused,
                               "joiner n" + std::to_string(n) + "'s elector refused version " +
                                   std::to_string(version) + " it joined with: " + *error};
    }
}

bool Simulator::set_voters(NodeId node, NodeSet voters, std::uint64_t version) {
    const std::size_t n = node.value;
    if (n >= options_.nodes || violation_) {
        return false;
    }
    if (!cores_[n]) {  // crashed: it finds the configuration in its log at restart
        configs_[n] = std::make_pair(voters, version);
        return true;
    }
    bool refused = false;
    input(n, StepAction::SetVoters, [&](auto& rt) -> const elector::Actions& {
        refused = rt.set_voters(voters, version).has_value();
        return rt.last_actions();
    });
    if (!refused) {
        configs_[n] = std::make_pair(voters, version);
    }
    return !refused;
}

Simulator::Busy::~Busy() {
    if (--sim.busy_ == 0 && !sim.pending_notices_.empty()) {
        sim.deliver_membership();
    }
}

// The log's active configuration goes to the elector once the input that changed it is over (its
// actions all performed): a driver hands it over between two inputs, in order, before anything
// else reaches that node. A node's elector refuses a configuration only when it is older than its
// own (voters_error); its versions come only from its own log, whose active version never goes
// back within an incarnation (and a restarted elector starts at version 0), so that refusal is
// expected only if the log's did go back: it is counted (config_notices_stale), anything else is
// a MembershipRefused violation. A joiner is the exception: its elector starts at the version it
// joined with, and its log, catching up from the first configuration, may make an older one
// active on the way; that refusal is counted apart (config_notices_behind_join).
void Simulator::deliver_membership() {
    const Busy busy(*this);  // notices raised while delivering wait for the next round
    while (!pending_notices_.empty() && !violation_) {
        const PendingNotice p = pending_notices_.front();
        pending_notices_.erase(pending_notices_.begin());
        if (!cores_[p.node] || incarnation_[p.node] != p.incarnation) {
            continue;  // crashed since: its next start reads its log again
        }
        ++stats_.config_notices;
        // §8: the table grew (the log core's first, the mesh's in log_membership): the elector's
        // now, before the voters (which may name the new node).
        if (p.table > cores_[p.node]->rt.elector().config().cluster_size &&
            !options_.skip_elector_growth) {
            if (auto error = cores_[p.node]->rt.grow_table(p.table)) {
                violation_ =
                    Violation{ViolationKind::NodeTable,
                              "n" + std::to_string(p.node) + "'s elector refused the table of " +
                                  std::to_string(p.table) + " nodes: " + *error};
                break;
            }
        }
        const std::uint64_t had = cores_[p.node]->state().config_version;
        std::optional<std::string> error;
        input(p.node, StepAction::SetVoters, [&](auto& rt) -> const elector::Actions& {
            error = rt.set_voters(p.voters, p.version);
            return rt.last_actions();
        });
        if (!error) {
            configs_[p.node] = std::make_pair(p.voters, p.version);
        } else if (join_config_[p.node] && p.version < join_config_[p.node]->second) {
            ++stats_.config_notices_behind_join;
        } else if (p.version < had) {
            ++stats_.config_notices_stale;
        } else if (!violation_) {
            violation_ =
                Violation{ViolationKind::MembershipRefused,
                          "n" + std::to_string(p.node) + "'s elector refused version " +
                              std::to_string(p.version) + " that its log made active: " + *error};
        }
    }
    pending_notices_.clear();
}

// The operator's transfer_leadership, given to every node that believes it leads (a stale leader
// of an older term too): through the runtime, as the node daemon does, so the step is traced and
// checked like any other input. A refused transfer is no step of the core.
void Simulator::transfer(std::size_t target) {
    for (std::size_t i = 0; i < options_.nodes && !violation_; ++i) {
        if (!cores_[i] || paused_until_ms_[i] > now_ms_ ||
            cores_[i]->state().role != elector::Role::Leader) {
            continue;
        }
        const std::size_t to = target == i ? (i + 1) % options_.nodes : target;
        bool refused = false;
        input(
            i, StepAction::TransferLeadership,
            [&](auto& rt) -> const elector::Actions& {
                refused = rt.transfer_leadership(node_id(to)).has_value();
                return rt.last_actions();
            },
            nullptr, node_id(to));
        ++(refused ? stats_.transfers_refused : stats_.transfers);
    }
}

void Simulator::hand_back(std::size_t node) {
    if (violation_ || !cores_[node] || !cores_[node]->rt.elector().handback_target()) {
        return;
    }
    const NodeId to = *cores_[node]->rt.elector().handback_target();
    bool handed = false;
    input(
        node, StepAction::TransferLeadership,
        [&](auto& rt) -> const elector::Actions& {
            handed = rt.hand_back().has_value();
            return rt.last_actions();
        },
        nullptr, to);
    stats_.hand_backs += handed ? 1 : 0;
}

void Simulator::apply(const FaultAction& f) {
    if (options_.trace && f.kind != FaultKind::Crash && f.kind != FaultKind::Restart &&
        f.kind != FaultKind::Transfer &&
        f.kind != FaultKind::SetVoters) {  // these are traced as the steps they cause
        const bool ends = f.kind == FaultKind::Heal || f.kind == FaultKind::Unpartition ||
                          f.kind == FaultKind::Unblackhole || f.kind == FaultKind::UnslowLink ||
                          f.kind == FaultKind::EndLoss || f.kind == FaultKind::EndDuplication ||
                          f.kind == FaultKind::EndReorder || f.kind == FaultKind::HealAll;
        *options_.trace << nlohmann::json{{"kind", "net"},
                                          {"event", ends ? "Heal" : "Partition"},
                                          {"fault", describe(f)}}
                               .dump()
                        << '\n';
    }
    if (!apply_link_fault(f) && !apply_loss_fault(f)) {
        apply_node_fault(f);
    }
}

bool Simulator::apply_link_fault(const FaultAction& f) {
    const std::size_t n = options_.nodes;
    const std::size_t a = f.a.value;
    const std::size_t b = f.b.value;
    const bool pair_ok = a < n && b < n && a != b;
    switch (f.kind) {
        case FaultKind::Cut:
        case FaultKind::Heal:
            if (pair_ok) {
                cut_pair(a, b, f.kind == FaultKind::Cut ? 1 : -1);
            }
            return true;
        case FaultKind::Partition:
        case FaultKind::Unpartition:
            for (std::size_t i = 0; i < n; ++i) {
                for (std::size_t j = 0; j < n; ++j) {
                    if (((f.mask >> i) & 1U) != 0 && ((f.mask >> j) & 1U) == 0) {
                        cut_pair(i, j, f.kind == FaultKind::Partition ? 1 : -1);
                    }
                }
            }
            return true;
        case FaultKind::Blackhole:
            if (pair_ok) {
                ++blackhole_count_[link(a, b)];
            }
            return true;
        case FaultKind::Unblackhole:
            if (pair_ok && blackhole_count_[link(a, b)] > 0) {
                --blackhole_count_[link(a, b)];
            }
            return true;
        case FaultKind::SlowLink:
        case FaultKind::UnslowLink:
            if (pair_ok) {
                const std::int64_t delta =
                    f.kind == FaultKind::SlowLink ? f.value : -std::int64_t{f.value};
                for (std::size_t l : {link(a, b), link(b, a)}) {
                    slow_ms_[l] = std::max<std::int64_t>(0, slow_ms_[l] + delta);
                }
                ++links_version_;
            }
            return true;
        default:
            return false;
    }
}

bool Simulator::apply_loss_fault(const FaultAction& f) {
    switch (f.kind) {
        case FaultKind::BeginLoss:
            ++loss_depth_;
            loss_ppm_ = std::max(loss_ppm_, f.value);
            return true;
        case FaultKind::EndLoss:
            if (loss_depth_ > 0 && --loss_depth_ == 0) {
                loss_ppm_ = 0;
            }
            return true;
        case FaultKind::BeginDuplication:
            ++duplication_depth_;
            duplication_ppm_ = std::max(duplication_ppm_, f.value);
            return true;
        case FaultKind::EndDuplication:
            if (duplication_depth_ > 0 && --duplication_depth_ == 0) {
                duplication_ppm_ = 0;
            }
            return true;
        case FaultKind::BeginReorder:
            ++reorder_depth_;
            return true;
        case FaultKind::EndReorder:
            if (reorder_depth_ > 0) {
                --reorder_depth_;
            }
            return true;
        default:
            return false;
    }
}

void Simulator::apply_node_fault(const FaultAction& f) {
    const std::size_t a = f.a.value;
    if (f.kind == FaultKind::HealAll) {
        heal_all();
        return;
    }
    if (f.kind == FaultKind::Transfer) {
        if (f.b.value < options_.nodes) {
            transfer(f.b.value);
        }
        return;
    }
    if (a >= options_.nodes) {
        return;
    }
    switch (f.kind) {
        case FaultKind::Crash:
            crash(a);
            break;
        case FaultKind::Restart:
            restart(a);
            break;
        case FaultKind::Pause:
            if (cores_[a]) {
                ++stats_.pauses;
                paused_until_ms_[a] = std::max(paused_until_ms_[a], now_ms_ + f.value);
            }
            break;
        case FaultKind::FailPersist:
            persist_failures_[a] += std::max<std::uint32_t>(1, f.value);
            break;
        case FaultKind::SetVoters:
            set_voters(f.a, NodeSet{f.mask}, f.value);
            break;
        case FaultKind::CorruptRepair:
            corrupt_repair(a, f.value);
            break;
        case FaultKind::BitFlip:
            log_bit_flip(a);
            break;
        case FaultKind::Repair:
            log_repair_flip(a);
            repair_identity(a);
            break;
        case FaultKind::Wipe:
            wipe(a, static_cast<WipeLoss>(std::min<std::uint32_t>(f.value, 2)));
            break;
        default:
            break;
    }
}

void Simulator::corrupt_repair(std::size_t a, std::uint32_t drop) {
    // Who will be told of this crash (a peer_down) but has not been yet.
    NodeSet connected;
    for (std::size_t j = 0; j < options_.nodes; ++j) {
        if (j != a && connection_up_[link(a, j)] != 0) {
            connected.insert(node_id(j));
        }
    }
    crash(a);
    log_corrupt_and_repair(a, drop, connected);
}

void Simulator::heal_all() {
    const std::size_t n = options_.nodes;
    std::fill(persist_failures_.begin(), persist_failures_.end(), 0);
    std::fill(blackhole_count_.begin(), blackhole_count_.end(), 0);
    std::fill(slow_ms_.begin(), slow_ms_.end(), 0);
    ++links_version_;
    loss_ppm_ = duplication_ppm_ = 0;
    loss_depth_ = duplication_depth_ = reorder_depth_ = 0;
    std::fill(cut_count_.begin(), cut_count_.end(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        log_repair_flip(i);  // the operator repairs every log recovery refuses
        repair_identity(i);  // and every node whose identity is refused
        restart(i);          // no-op for live nodes; brings the mesh back up
    }
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = i + 1; j < n; ++j) {
            update_connection(i, j);
        }
    }
    // A new incarnation that these handshakes refused (state_lost) stops as a fault event
    // (crash_now); the operator then repairs it, as every node whose identity is refused.
    for (std::size_t i = 0; i < n; ++i) {
        if (identity_refused_[i] != 0 && cores_[i]) {
            fault_now(FaultAction{FaultKind::Repair, node_id(i), {}, 0, 0});
        }
    }
}

void Simulator::trace_step(std::size_t node, StepAction action, const elector::Actions& actions,
                           const elector::ElectorState& state, const elector::Message* received,
                           std::optional<NodeId> peer, std::optional<elector::TimerId> timer) {
    const std::vector<NodeId> others = runtime::others_of(table_[node], node_id(node));
    nlohmann::json line = codec::trace_step_line(to_string(action), actions, others, state,
                                                 node_id(node), received, peer, timer);
    line["step"] = stats_.steps;
    line["node"] = node;
    *options_.trace << line.dump() << '\n';
}

void Simulator::trace_net(const char* event, const elector::Message* m, std::size_t to,
                          const char* detail, const replication::LogMessage* log_message) {
    nlohmann::json line{{"kind", "net"}, {"event", event}, {"detail", detail}};
    if (m) {
        line["msg"] = codec::message_to_json(*m, node_id(to));
    }
    if (log_message) {
        line["log_msg"] = to_string(*log_message);
        line["to"] = to;
    }
    *options_.trace << line.dump() << '\n';
}

// Hostile input (simulator_inject.cpp has the log side): a forged message handed straight to a
// node's elector runtime, bypassing the simulated network; the invariants are checked as after any
// input.
bool Simulator::inject(NodeId to, const elector::Message& m) {
    absorb_violation();
    const std::size_t n = to.value;
    if (!started_ || n >= options_.nodes || !cores_[n] || paused(to) || violation_) {
        return false;
    }
    input(
        n, action_for(m.body), [&](auto& rt) -> const elector::Actions& { return rt.receive(m); },
        &m);
    return true;
}

}  // namespace conclave::sim
