// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/run.hpp"
#include "conclave/core/enum_names.hpp"

#include "conclave/elector/backoff.hpp"

#include <algorithm>
#include <vector>

namespace conclave::sim {
namespace {

struct Named {
    const char* name;
    bool FaultMix::*flag;
    bool in_all = true;  // part of "all"
};
constexpr Named kFaultNames[] = {
    {"loss", &FaultMix::loss},         {"dup", &FaultMix::duplication},
    {"reorder", &FaultMix::reorder},   {"latency", &FaultMix::latency},
    {"cut", &FaultMix::cut},           {"partition", &FaultMix::partition},
    {"asym", &FaultMix::asymmetric},   {"crash", &FaultMix::crash},
    {"pause", &FaultMix::pause},       {"blackhole", &FaultMix::blackhole},
    {"transfer", &FaultMix::transfer}, {"repair", &FaultMix::repair, false},
    {"wipe", &FaultMix::wipe, false},  {"isolate", &FaultMix::isolate, false},
};

NodeId random_node(Rng& rng, std::size_t nodes) {
    return NodeId{static_cast<std::uint16_t>(rng.below(nodes))};
}

std::pair<NodeId, NodeId> random_pair(Rng& rng, std::size_t nodes) {
    const NodeId a = random_node(rng, nodes);
    auto b = static_cast<std::uint16_t>((a.value + 1 + rng.below(nodes - 1)) % nodes);
    return {a, NodeId{b}};
}

/// A wipe episode: a node loses its vote record, its log or everything at `start`; its restart
/// half-way is refused (vote record lost), or it is back as a new incarnation that its peers
/// refuse; the operator repairs it at `end` in one case of two, else the HealAll at the end of
/// the window does.
void schedule_wipe(Simulator& sim, std::int64_t start, std::int64_t end) {
    Rng& rng = sim.rng();
    const NodeId a = random_node(rng, sim.size());
    const auto loss = static_cast<std::uint32_t>(rng.below(3));
    sim.schedule(Millis{start}, FaultAction{FaultKind::Wipe, a, {}, 0, loss});
    sim.schedule(Millis{(start + end) / 2}, FaultAction{FaultKind::Restart, a, {}, 0, 0});
    if (rng.below(2) == 0) {
        sim.schedule(Millis{end}, FaultAction{FaultKind::Repair, a, {}, 0, 0});
    }
}

/// One fault episode over [start, end]: schedules its beginning and its end.
struct Episode {
    Simulator& sim;
    Rng& rng;
    std::int64_t start = 0;
    std::int64_t end = 0;
    std::size_t n = 0;
    void both(FaultKind begin, FaultKind finish, FaultAction f) const {
        f.kind = begin;
        sim.schedule(Millis{start}, f);
        f.kind = finish;
        sim.schedule(Millis{end}, f);
    }
    /// Both directions of every link of `a` drop (the connections stay up).
    void silence(NodeId a, bool inbound_only) const {
        for (std::uint16_t j = 0; j < n; ++j) {
            if (j != a.value) {
                if (!inbound_only) {
                    both(FaultKind::Blackhole, FaultKind::Unblackhole,
                         FaultAction{{}, a, NodeId{j}, 0, 0});
                }
                both(FaultKind::Blackhole, FaultKind::Unblackhole,
                     FaultAction{{}, NodeId{j}, a, 0, 0});
            }
        }
    }
};

/// Loss, duplication, reordering, slowed links: true when `kind` is one of them.
bool schedule_message_fault(const Episode& e, bool FaultMix::*kind) {
    Rng& rng = e.rng;
    if (kind == &FaultMix::loss) {
        e.both(
            FaultKind::BeginLoss, FaultKind::EndLoss,
            FaultAction{{}, {}, {}, 0, static_cast<std::uint32_t>(rng.between(20'000, 300'000))});
    } else if (kind == &FaultMix::duplication) {
        e.both(
            FaultKind::BeginDuplication, FaultKind::EndDuplication,
            FaultAction{{}, {}, {}, 0, static_cast<std::uint32_t>(rng.between(20'000, 200'000))});
    } else if (kind == &FaultMix::reorder) {
        e.both(FaultKind::BeginReorder, FaultKind::EndReorder, FaultAction{});
    } else if (kind == &FaultMix::latency) {
        const auto [a, b] = random_pair(rng, e.n);
        e.both(FaultKind::SlowLink, FaultKind::UnslowLink,
               FaultAction{{}, a, b, 0, static_cast<std::uint32_t>(rng.between(20, 300))});
    } else {
        return false;
    }
    return true;
}

/// Cuts, partitions, one-way and two-way blackholes, isolations: true when `kind` is one.
bool schedule_link_fault(const Episode& e, bool FaultMix::*kind) {
    Rng& rng = e.rng;
    if (kind == &FaultMix::cut) {
        const auto [a, b] = random_pair(rng, e.n);
        e.both(FaultKind::Cut, FaultKind::Heal, FaultAction{{}, a, b, 0, 0});
    } else if (kind == &FaultMix::partition) {
        const std::uint64_t full = NodeSet::first(e.n).bits;
        const std::uint64_t mask = 1 + rng.below(full - 1);  // non-empty, not everyone
        e.both(FaultKind::Partition, FaultKind::Unpartition, FaultAction{{}, {}, {}, mask, 0});
    } else if (kind == &FaultMix::asymmetric) {
        const auto [a, b] = random_pair(rng, e.n);
        if (rng.below(2) == 0) {
            e.both(FaultKind::Blackhole, FaultKind::Unblackhole, FaultAction{{}, a, b, 0, 0});
        } else {  // a deaf node: hears nobody, everybody hears it
            e.silence(a, true);
        }
    } else if (kind == &FaultMix::blackhole) {
        // An open-connection blackhole: a-b drops every message both ways, and neither end
        // is told (no peer_down): only heartbeat checks and check-quorum can notice.
        const auto [a, b] = random_pair(rng, e.n);
        e.both(FaultKind::Blackhole, FaultKind::Unblackhole, FaultAction{{}, a, b, 0, 0});
        e.both(FaultKind::Blackhole, FaultKind::Unblackhole, FaultAction{{}, b, a, 0, 0});
    } else if (kind == &FaultMix::isolate) {
        // A node silently cut off: every link of it drops both ways, the connections stay
        // up (no peer_down anywhere): a leader keeps its lease until it ends on its own clock.
        e.silence(random_node(rng, e.n), false);
    } else {
        return false;
    }
    return true;
}

/// Crashes, repairs, wipes, transfers, pauses.
void schedule_node_fault(const Episode& e, bool FaultMix::*kind) {
    Rng& rng = e.rng;
    if (kind == &FaultMix::crash) {
        e.both(FaultKind::Crash, FaultKind::Restart,
               FaultAction{{}, random_node(rng, e.n), {}, 0, 0});
    } else if (kind == &FaultMix::repair) {
        // A crash that loses 1..12 stored entries of the log's tail, then --repair.
        const NodeId a = random_node(rng, e.n);
        e.both(FaultKind::CorruptRepair, FaultKind::Restart,
               FaultAction{{}, a, {}, 0, static_cast<std::uint32_t>(rng.between(1, 12))});
    } else if (kind == &FaultMix::wipe) {
        schedule_wipe(e.sim, e.start, e.end);
    } else if (kind == &FaultMix::transfer) {
        // The operator hands leadership over, one to three times in the episode, to a
        // random node (refused when it is not connected to the leader).
        const std::int64_t count = rng.between(1, 3);
        for (std::int64_t k = 0; k < count; ++k) {
            e.sim.schedule(Millis{rng.between(e.start, e.end)},
                           FaultAction{FaultKind::Transfer, {}, random_node(rng, e.n), 0, 0});
        }
    } else if (kind == &FaultMix::pause) {
        e.sim.schedule(Millis{e.start}, FaultAction{FaultKind::Pause,
                                                    random_node(rng, e.n),
                                                    {},
                                                    0,
                                                    static_cast<std::uint32_t>(e.end - e.start)});
    }
}

/// A bit flip in a node's durable log (storage faults, one run in two): it crashes, a restart
/// attempt is refused, and the operator repairs it at the end of the episode (HealAll repairs
/// it otherwise).
void schedule_bit_flip(Simulator& sim, std::int64_t window) {
    Rng& rng = sim.rng();
    const NodeId a = random_node(rng, sim.size());
    const std::int64_t start = rng.between(100, window - 200);
    const std::int64_t end = std::min(start + rng.between(100, 2500), window - 50);
    sim.schedule(Millis{start}, FaultAction{FaultKind::BitFlip, a, {}, 0, 0});
    sim.schedule(Millis{(start + end) / 2}, FaultAction{FaultKind::Restart, a, {}, 0, 0});
    if (rng.below(2) == 0) {
        sim.schedule(Millis{end}, FaultAction{FaultKind::Repair, a, {}, 0, 0});
    }
}

/// Schedules `options.episodes` random fault episodes and the final HealAll.
void schedule_faults(Simulator& sim, const RunOptions& options) {
    std::vector<bool FaultMix::*> enabled;
    for (const Named& n : kFaultNames) {
        if (options.faults.*n.flag) {
            enabled.push_back(n.flag);
        }
    }
    Rng& rng = sim.rng();
    const std::int64_t window = options.fault_window.count();
    const std::size_t n = options.nodes;
    for (std::size_t e = 0; e < options.episodes && !enabled.empty() && window > 400 && n > 1;
         ++e) {
        bool FaultMix::*kind = enabled[rng.below(enabled.size())];
        const std::int64_t start = rng.between(100, window - 200);
        const std::int64_t end = std::min(start + rng.between(100, 2500), window - 50);
        const Episode episode{sim, rng, start, end, n};
        if (!schedule_message_fault(episode, kind) && !schedule_link_fault(episode, kind)) {
            schedule_node_fault(episode, kind);
        }
    }
    if (options.storage_faults && options.log && n > 1 && window > 400 && rng.below(2) == 0) {
        schedule_bit_flip(sim, window);
    }
    sim.schedule(options.fault_window, FaultAction{FaultKind::HealAll, {}, {}, 0, 0});
}

}  // namespace

FaultMix FaultMix::all() {
    FaultMix m;
    for (const Named& n : kFaultNames) {
        m.*n.flag = n.in_all;
    }
    return m;
}

bool FaultMix::any() const {
    for (const Named& n : kFaultNames) {
        if (this->*n.flag) {
            return true;
        }
    }
    return false;
}

std::optional<FaultMix> FaultMix::parse(std::string_view list, std::string* error) {
    if (list == "all") {
        return all();
    }
    FaultMix m;
    if (list.starts_with("all,")) {  // "all,repair": all, plus faults outside "all"
        m = all();
        list.remove_prefix(4);
    }
    if (list == "none") {
        return m;
    }
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        bool found = false;
        for (const Named& n : kFaultNames) {
            if (item == n.name) {
                m.*n.flag = true;
                found = true;
            }
        }
        if (!found) {
            if (error) {
                *error =
                    "faults: unknown fault '" + std::string(item) +
                    "' (expected all, none, or a list of loss, dup, reorder, latency, cut, "
                    "partition, asym, crash, pause, blackhole, transfer, repair, wipe, isolate)";
            }
            return std::nullopt;
        }
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    return m;
}

std::string FaultMix::to_string() const {
    std::string out;
    bool every = true;
    std::string outside;  // set faults that "all" does not include
    for (const Named& n : kFaultNames) {
        if (this->*n.flag) {
            out += (out.empty() ? "" : ",") + std::string(n.name);
            if (!n.in_all) {
                outside += "," + std::string(n.name);
            }
        } else if (n.in_all) {
            every = false;
        }
    }
    if (every) {
        return "all" + outside;
    }
    return out.empty() ? "none" : out;
}

elector::Config run_config(const RunOptions& options) {
    elector::Config c = elector::Config::fast(options.nodes, NodeId{0});
    c.scouting = options.scouting;
    c.backoff = options.backoff;
    c.planted_bug = options.planted_bug;
    for (std::size_t i = 0; i < options.priorities.size() && i < c.priorities.size(); ++i) {
        c.priorities[i] = options.priorities[i];
    }
    if (options.preferred_stability) {
        c.preferred_stability = *options.preferred_stability;
    }
    return c;
}

Millis liveness_bound(const elector::Config& c, std::int64_t max_one_way_latency_ms) {
    // Ranked: the longest wait by rank (the last of N, no leader left out), jitter included,
    // with the slot the longest healed round trip (2 x the one-way maximum) gives, or the
    // initial slot if that is longer (before the first measurement).
    const Millis slot =
        std::max(c.rank_slot, elector::adaptive_rank_slot(
                                  c, std::chrono::microseconds{2 * max_one_way_latency_ms * 1000}));
    const Millis ranked_max =
        c.backoff == elector::Backoff::Ranked
            ? Millis{static_cast<Millis::rep>(c.cluster_size - 1) * slot.count() + slot.count() / 8}
            : Millis{0};
    const Millis round = std::max(c.max_random_wait, ranked_max) + c.scouting_result_timeout +
                         c.election_result_timeout + Millis{4 * max_one_way_latency_ms};
    return c.initial_wait + ranked_max + 2 * c.inactivity_interval() + c.heartbeat_check_period +
           kLivenessRounds * round;
}

Millis log_liveness_bound(const LogSimOptions& o, std::int64_t max_one_way_latency_ms,
                          std::size_t log_len) {
    const replication::LogConfig& c = o.config;
    const auto round_trips = static_cast<std::int64_t>(log_len / c.max_batch_entries + 4);
    // (A deferred commit point: its write starts within a flush delay and takes two fsyncs.)
    const std::int64_t meta_write = o.defer_meta ? 3 * o.flush_delay_max_ms : 0;
    return 2 * c.sync_retry_period + 2 * c.heartbeat_period +
           Millis{round_trips * (2 * max_one_way_latency_ms + o.flush_delay_max_ms) + meta_write};
}

std::vector<std::int32_t> draw_clock_drift(const RunOptions& options) {
    if (options.drift == ClockDrift::None) {
        return {};
    }
    // A generator of its own (not the simulator's): the seed's schedule stays as it is.
    Rng rng(options.seed ^ 0xd1f7c10c4d21f7ULL);
    const std::int64_t rho = std::int64_t{run_config(options).lease_drift_permille} * 1000;
    std::vector<std::int32_t> drift(options.nodes);
    for (auto& d : drift) {
        d = static_cast<std::int32_t>(rng.between(-rho, rho));
    }
    if (options.drift == ClockDrift::Beyond && options.nodes >= 2) {
        const std::size_t slow = rng.below(options.nodes);
        const std::size_t fast = (slow + 1 + rng.below(options.nodes - 1)) % options.nodes;
        drift[slow] = static_cast<std::int32_t>(-3 * rho);
        drift[fast] = static_cast<std::int32_t>(3 * rho);
    }
    return drift;
}

namespace {

/// End of a log run: the workload stops, a fresh proposal is made at the agreed leader (retried
/// until its log is ACTIVE), and the run continues until it is acknowledged and every log equals
/// the committed history, within log_liveness_bound.
void check_log_liveness(Simulator& sim, RunResult& result) {
    sim.set_workload(false);
    std::size_t longest = 0;
    for (const replication::ReplicatedLog* log : sim.logs()) {
        longest = std::max(longest, log ? log->end_len() : 0);
    }
    const SimOptions& so = sim.options();
    result.log_bound =
        log_liveness_bound(so.log_options, so.latency_max_ms + so.jitter_ms, longest);
    const Millis start = sim.now();
    const Millis deadline = start + result.log_bound;
    const Millis tick{5};
    std::optional<Lsn> fresh;
    while (!fresh && sim.now() < deadline) {
        if (auto leader = agreed_leader(sim)) {
            fresh = sim.propose_now(*leader);
        }
        if (!fresh && !sim.run_until(sim.now() + tick)) {
            return;  // a violation
        }
    }
    while (fresh && !sim.log_history().acknowledged(*fresh) && sim.now() < deadline) {
        if (!sim.run_until(sim.now() + tick)) {
            return;
        }
    }
    std::optional<Violation> diverged = sim.log_history().converged(sim.logs());
    while (diverged && sim.now() < deadline) {
        if (!sim.run_until(sim.now() + tick)) {
            return;
        }
        diverged = sim.log_history().converged(sim.logs());
    }
    if (!fresh || !sim.log_history().acknowledged(*fresh)) {
        result.violation =
            Violation{ViolationKind::LogLiveness,
                      "the healed cluster did not commit a fresh proposal within " +
                          std::to_string(result.log_bound.count()) + " ms (from " +
                          std::to_string(start.count()) + " ms; " +
                          (fresh ? "proposed " + to_string(*fresh) + ", not acknowledged"
                                 : std::string("no agreed ACTIVE leader took it")) +
                          ")"};
    } else if (diverged) {
        diverged->detail += " within " + std::to_string(result.log_bound.count()) + " ms";
        result.violation = diverged;
    } else {
        result.log_converged_after = sim.now() - start;
    }
}

}  // namespace

namespace {

/// The simulator's options for a random run.
SimOptions sim_options(const RunOptions& options) {
    SimOptions so;
    so.nodes = options.nodes;
    so.seed = options.seed;
    so.elector = run_config(options);
    so.lose_durable_state = options.lose_durable_state;
    so.runtime_bug = options.runtime_bug;
    so.history = options.history;
    so.identity_bug = options.identity_bug;
    so.trace = options.trace;
    so.log = options.log;
    so.log_options.config.planted_bug = options.log_bug;
    so.log_options.config.compact_threshold = options.log_compact;
    so.log_options.config.compact_retain = options.log_compact / 4;
    so.log_options.history = options.log_history;
    so.log_options.defer_meta = options.defer_meta;
    if (options.storage_faults) {
        so.log_options.storage_fault_ppm = RunOptions::kStorageFaultPpm;
        so.log_options.storage_faults_until_ms = options.fault_window.count();
        so.log_options.storage_latency_max_ms = RunOptions::kStorageLatencyMaxMs;
        so.storage_bug = options.storage_bug;
    }
    so.clock_drift_ppm = draw_clock_drift(options);
    return so;
}

/// The liveness bound in real time: the cores' timeouts run on their own clocks, so the slowest
/// clock stretches them (the bound unchanged without drift).
Millis real_liveness_bound(const SimOptions& so) {
    const Millis bound = liveness_bound(so.elector, so.latency_max_ms + so.jitter_ms);
    std::int64_t slowest = 0;
    for (const std::int32_t d : so.clock_drift_ppm) {
        slowest = std::min<std::int64_t>(slowest, d);
    }
    return slowest == 0
               ? bound
               : Millis{(bound.count() * 1000000 + 999999 + slowest) / (1000000 + slowest)};
}

/// Liveness (the nodes agreed on a leader within the bound after the faults) and, with the log,
/// log liveness, unless a violation or the step limit ended the run.
void check_end(Simulator& sim, const RunOptions& options, std::optional<Millis> converged_at,
               RunResult& result) {
    const Millis faults_end = options.fault_window;
    if (converged_at) {
        result.converged_after = *converged_at - faults_end;
    }
    if (!converged_at || *result.converged_after > result.liveness_bound) {
        result.violation =
            Violation{ViolationKind::Liveness, "the nodes did not agree on a leader within " +
                                                   std::to_string(result.liveness_bound.count()) +
                                                   " ms after the faults ended at " +
                                                   std::to_string(faults_end.count()) + " ms"};
        return;
    }
    if (options.log) {
        check_log_liveness(sim, result);
        if (!result.violation && sim.violation()) {
            result.violation = sim.violation();
        }
        result.violation_at = sim.now();
    }
}

/// What the run leaves: counters, the logs' compactions, the fingerprint.
void collect(const Simulator& sim, const RunOptions& options, RunResult& result) {
    result.log_committed = sim.log_history().history().size();
    result.log_acked = sim.log_history().acked();
    for (std::size_t n = 0; n < options.nodes; ++n) {
        if (const replication::ReplicatedLog* log =
                sim.log(NodeId{static_cast<std::uint16_t>(n)})) {
            result.log_compactions += log->counters().compactions;
            result.log_snapshots_installed += log->counters().snapshots_installed;
        }
    }
    result.stats = sim.stats();
    result.end = sim.now();
    result.fingerprint = sim.fingerprint();
}

}  // namespace

RunResult run_seed(const RunOptions& options) {
    Simulator sim(sim_options(options));
    RunResult result;
    result.seed = options.seed;
    result.liveness_bound = real_liveness_bound(sim.options());
    const Millis faults_end = options.fault_window;
    const Millis tail =
        options.tail.count() > 0 ? options.tail : result.liveness_bound + Millis{1000};
    const Millis end = faults_end + tail;

    LeadershipTracker tracker(options.nodes);
    std::optional<Millis> converged_at;
    sim.on_step = [&](const Simulator& s, const StepRecord& step) {
        tracker.observe(s, step);
        if (!converged_at && step.now >= faults_end && s.fault_free() && agreed_leader(s)) {
            converged_at = step.now;
        }
    };
    schedule_faults(sim, options);
    sim.start_all();
    bool truncated = false;
    if (options.max_steps == 0) {
        sim.run_until(end);
    } else {
        while (sim.stats().steps < options.max_steps && sim.step()) {
            if (sim.now() > end) {
                break;
            }
        }
        truncated = sim.stats().steps >= options.max_steps;
    }
    tracker.finish(sim.now());
    result.violation = sim.violation();
    result.violation_at = sim.now();
    if (!result.violation && !truncated) {
        check_end(sim, options, converged_at, result);
    }
    collect(sim, options, result);
    result.leadership = tracker.summary();
    return result;
}

namespace {

/// replay_command's log options.
std::string log_replay_flags(const RunOptions& o) {
    std::string cmd;
    if (o.log) {
        cmd += " --log";
    }
    if (o.log_bug != replication::PlantedLogBug::None) {
        cmd += " --log-bug " + std::string(enum_name(o.log_bug));
    }
    if (o.log && !o.defer_meta) {
        cmd += " --no-defer-meta";
    }
    if (o.log && o.log_compact != 0) {
        cmd += " --log-compact " + std::to_string(o.log_compact);
    }
    if (o.log && o.storage_faults) {
        cmd += " --storage-faults";
        if (o.storage_bug != StorageBug::None) {
            cmd += " --storage-bug " + std::string(enum_name(o.storage_bug));
        }
    }
    if (o.log && !o.log_history.check_recovered_floor) {
        cmd += " --no-floor-check";
    }
    if (o.log && !o.log_history.check_durable_quorum) {
        cmd += " --no-durable-check";
    }
    return cmd;
}

}  // namespace

std::string replay_command(std::string_view program, const RunOptions& o) {
    std::string cmd = std::string(program) + " --seed " + std::to_string(o.seed) + " --nodes " +
                      std::to_string(o.nodes) + " --faults " + o.faults.to_string() +
                      " --episodes " + std::to_string(o.episodes) + " --duration " +
                      std::to_string(o.fault_window.count());
    if (o.tail.count() > 0) {
        cmd += " --tail " + std::to_string(o.tail.count());
    }
    if (o.max_steps > 0) {
        cmd += " --steps " + std::to_string(o.max_steps);
    }
    if (!o.scouting) {
        cmd += " --no-scouting";
    }
    if (o.backoff != elector::Backoff::Uniform) {
        cmd += " --backoff " + std::string(elector::to_string(o.backoff));
    }
    if (o.planted_bug != elector::PlantedBug::None) {
        cmd += " --planted-bug " + std::string(elector::to_string(o.planted_bug));
    }
    if (!o.priorities.empty()) {
        std::string list;
        for (const std::uint32_t p : o.priorities) {
            list += (list.empty() ? "" : ",") + std::to_string(p);
        }
        cmd += " --priorities " + list;
    }
    if (o.preferred_stability) {
        cmd += " --preferred-stability " + std::to_string(o.preferred_stability->count());
    }
    if (o.lose_durable_state) {
        cmd += " --lose-durable-state";
    }
    if (o.runtime_bug == runtime::RuntimeBug::SendBeforePersist) {
        cmd += " --runtime-bug send-before-persist";
    } else if (o.runtime_bug == runtime::RuntimeBug::AckBeforeFsync) {
        cmd += " --runtime-bug ack-before-fsync";
    } else if (o.runtime_bug == runtime::RuntimeBug::AnswerBeforeMeta) {
        cmd += " --runtime-bug answer-before-meta";
    }
    if (!o.history.check_term_monotonic) {
        cmd += " --no-term-check";
    }
    if (o.drift != ClockDrift::None) {
        cmd += " --drift " + std::string(enum_name(o.drift));
    }
    if (o.identity_bug != IdentityBug::None) {
        cmd += " --identity-bug " + std::string(enum_name(o.identity_bug));
    }
    cmd += log_replay_flags(o);
    return cmd;
}

}  // namespace conclave::sim
