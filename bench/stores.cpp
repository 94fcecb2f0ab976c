// SPDX-License-Identifier: Apache-2.0
// Stores: on one 3-member etcd cluster and one 3-server ZooKeeper ensemble on 127.0.0.1, the naive
// lock recipes of the election survey (3 lock-recipe candidates each), 3 conclaved on each store
// (its store backend) and 3 conclaved with the built-in elector, run in turn: SIGKILL and SIGSTOP
// (longer than the TTL, then SIGCONT) of the leader; the time until a survivor believes it leads,
// and the longest time two processes each believed they led.
//
// Beliefs: a lock-recipe candidate prints each change with its monotonic timestamp (exact); a
// conclaved is polled (GET /status every 10 ms while its run lasts) and holds from the send time
// of an answer with a valid lease until that time + remaining_ms, or its next answer without one
// (bounce/lease.hpp; a SIGKILL ends a belief at once, a SIGSTOP does not: the process believes on
// until its lease ends or it notices).
#include <signal.h>

#include <fmt/core.h>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "bench.hpp"
#include "conclave/bounce/lease.hpp"
#include "conclave/bounce/poller.hpp"

namespace conclave::bench {

namespace {

namespace fs = std::filesystem;
using bounce::Belief;
using bounce::LeaseInterval;
using Held = std::vector<std::vector<LeaseInterval>>;

constexpr std::size_t kCandidates = 3;
constexpr double kStatusPollMs = 10;

/// The run's clock: milliseconds since `epoch`, on the monotonic clock the candidates print.
struct RunClock {
    Clock::time_point epoch = Clock::now();
    std::int64_t now_ms() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - epoch).count();
    }
    std::int64_t epoch_us() const {
        return std::chrono::duration_cast<std::chrono::microseconds>(epoch.time_since_epoch())
            .count();
    }
};

/// Three processes that each believe they lead, or not.
class Candidates {
  public:
    virtual ~Candidates() = default;
    virtual void begin_run() {}
    virtual void end_run() {}
    virtual void kill(NodeIndex i) = 0;  // SIGKILL: its belief ends now
    virtual void pause(NodeIndex i) = 0;
    virtual void resume(NodeIndex i) = 0;
    virtual void restart(NodeIndex i) = 0;
    /// Each member's belief intervals up to `now_ms`.
    virtual Held held(std::int64_t now_ms) = 0;
    /// Member i's latest word, given after `since_ms`, is that it does not lead.
    virtual bool says_not_leading(NodeIndex i, std::int64_t since_ms) = 0;
    virtual std::string log_tails() = 0;
};

// ---- The naive recipes: lock-recipe processes ---------------------------------------------------

class RecipeCandidates final : public Candidates {
  public:
    RecipeCandidates(std::vector<std::vector<std::string>> args, const RunClock& clock)
        : clock_(clock), dir_(make_temp_dir("conclave-bench-recipe")), members_(args.size()) {
        for (std::size_t i = 0; i < members_.size(); ++i) {
            members_[i].args = std::move(args[i]);
            members_[i].log = dir_ / fmt::format("c{}.log", i + 1);
            restart(i);
        }
    }
    ~RecipeCandidates() override {
        for (Member& m : members_) {
            kill_and_reap(m.pid);
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    void kill(NodeIndex i) override {
        members_[i].tool_events.push_back({clock_.now_ms(), false});
        kill_and_reap(members_[i].pid);
        members_[i].pid = 0;
    }
    void pause(NodeIndex i) override { signal_group(members_[i].pid, SIGSTOP); }
    void resume(NodeIndex i) override { signal_group(members_[i].pid, SIGCONT); }
    void restart(NodeIndex i) override {
        members_[i].pid = spawn_logged(members_[i].args, members_[i].log);
    }
    Held held(std::int64_t now_ms) override {
        Held out;
        for (NodeIndex i = 0; i < members_.size(); ++i) {
            out.push_back(bounce::belief_intervals(events(i), now_ms));
        }
        return out;
    }
    bool says_not_leading(NodeIndex i, std::int64_t) override {
        const auto e = events(i);
        return e.empty() || !e.back().leads;  // a belief lasts until the process says otherwise
    }
    std::string log_tails() override {
        std::string out;
        for (const Member& m : members_) {
            out += m.log.filename().string() + ":\n" + file_tail(m.log, 5);
        }
        return out;
    }

  private:
    struct Member {
        std::vector<std::string> args;
        fs::path log;
        int pid = 0;
        std::vector<Belief> tool_events;  // the SIGKILLs the tool sent
    };
    /// The lines the member printed, with the tool's SIGKILLs, in time order.
    std::vector<Belief> events(NodeIndex i) const {
        std::vector<Belief> said;
        std::ifstream in(members_[i].log);
        std::string line;
        while (std::getline(in, line)) {
            if (const auto b = bounce::parse_belief_line(line, clock_.epoch_us())) {
                said.push_back(*b);
            }
        }
        std::vector<Belief> all;
        const auto& tool = members_[i].tool_events;
        std::merge(said.begin(), said.end(), tool.begin(), tool.end(), std::back_inserter(all),
                   [](const Belief& a, const Belief& b) { return a.at_ms < b.at_ms; });
        return all;
    }

    const RunClock& clock_;
    fs::path dir_;
    std::vector<Member> members_;
};

// ---- conclaved: /status polled while a run lasts ------------------------------------------------

class ConclaveCandidates final : public Candidates {
  public:
    ConclaveCandidates(bounce::ClusterOptions options, const RunClock& clock)
        : clock_(clock), harness_(std::move(options)) {
        harness_.start_all();
        for (NodeIndex i = 0; i < harness_.size(); ++i) {
            pollers_.emplace_back(
                [this, i, http = harness_.cluster().node(i).http] { poll(i, http); });
        }
    }
    ~ConclaveCandidates() override {
        stop_ = true;
        for (std::thread& t : pollers_) {
            t.join();
        }
    }
    void begin_run() override {
        const std::lock_guard lock(mutex_);
        observations_.clear();
        kills_.clear();
        polling_ = true;
    }
    void end_run() override { polling_ = false; }
    void kill(NodeIndex i) override {
        bounce::FaultEvent e;
        e.at_ms = clock_.now_ms();
        e.kind = bounce::FaultKind::Kill;
        e.node = i;
        {
            const std::lock_guard lock(mutex_);
            kills_.push_back(e);
        }
        harness_.cluster().kill(i);
    }
    void pause(NodeIndex i) override { harness_.cluster().pause(i); }
    void resume(NodeIndex i) override { harness_.cluster().resume(i); }
    void restart(NodeIndex i) override { harness_.cluster().start(i); }
    Held held(std::int64_t now_ms) override {
        std::vector<bounce::Observation> obs;
        std::vector<bounce::FaultEvent> kills;
        {
            const std::lock_guard lock(mutex_);
            obs = observations_;
            kills = kills_;
        }
        std::stable_sort(obs.begin(), obs.end(),
                         [](const auto& a, const auto& b) { return a.at_ms < b.at_ms; });
        return bounce::lease_summary(harness_.size(), obs, kills, now_ms).held;
    }
    bool says_not_leading(NodeIndex i, std::int64_t since_ms) override {
        const std::lock_guard lock(mutex_);
        for (auto it = observations_.rbegin(); it != observations_.rend(); ++it) {
            if (it->node == i && it->at_ms >= since_ms &&
                it->role != bounce::ObservedRole::Unreachable) {
                return !it->lease_remaining_ms;
            }
        }
        return false;
    }
    std::string log_tails() override { return harness_.log_tails(); }

  private:
    void poll(NodeIndex i, boost::asio::ip::tcp::endpoint http) {
        HttpClient client(http);
        while (!stop_) {
            const auto round = Clock::now();
            if (!polling_) {
                sleep_ms(kStatusPollMs);
                continue;
            }
            bounce::Observation o;
            o.node = i;
            o.at_ms = clock_.now_ms();
            const auto body = client.get("/status", std::chrono::milliseconds(300));
            if (body) {
                try {
                    o = bounce::parse_status(*body, i, harness_.size());
                } catch (const std::exception&) {
                    o.role = bounce::ObservedRole::Unreachable;
                }
            }
            o.node = i;
            o.at_ms =
                std::chrono::duration_cast<std::chrono::milliseconds>(round - clock_.epoch).count();
            o.answered_ms = clock_.now_ms();
            {
                const std::lock_guard lock(mutex_);
                observations_.push_back(o);
            }
            sleep_ms(kStatusPollMs - ms_since(round));
        }
    }

    const RunClock& clock_;
    Harness harness_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> polling_{false};
    std::mutex mutex_;  // guards the two below
    std::vector<bounce::Observation> observations_;
    std::vector<bounce::FaultEvent> kills_;
    std::vector<std::thread> pollers_;
};

// ---- One run ----------------------------------------------------------------------------------

struct RunOutcome {
    std::optional<double> failover_ms;  // signal -> a survivor believes it leads
    std::int64_t overlap_ms = 0;        // the longest time two believed at once
    std::int64_t overlap_error_ms = 0;
    /// Without an overlap: how long after one belief ended the next began (the margin).
    std::optional<std::int64_t> gap_ms;
    bool noticed = true;  // SIGSTOP: after SIGCONT the old leader said it no longer leads
};

/// The one member that believes it leads at `now_ms` while every other says it does not.
std::optional<NodeIndex> sole_leader(Candidates& c, std::int64_t now_ms) {
    const Held held = c.held(now_ms);
    std::optional<NodeIndex> leader;
    for (NodeIndex i = 0; i < held.size(); ++i) {
        const bool believes = !held[i].empty() && held[i].back().end_ms >= now_ms;
        if (believes == c.says_not_leading(i, now_ms - 1000)) {
            return std::nullopt;  // neither clearly leading nor clearly not (or not answering)
        }
        if (believes) {
            if (leader) {
                return std::nullopt;
            }
            leader = i;
        }
    }
    return leader;
}

/// The earliest belief of a member other than `leader` that began at or after `from_ms`.
std::optional<std::int64_t> successor_since(const Held& held, NodeIndex leader,
                                            std::int64_t from_ms) {
    std::optional<std::int64_t> first;
    for (NodeIndex i = 0; i < held.size(); ++i) {
        for (const LeaseInterval& l : held[i]) {
            if (i != leader && l.begin_ms >= from_ms && (!first || l.begin_ms < *first)) {
                first = l.begin_ms;
            }
        }
    }
    return first;
}

/// The longest overlap of beliefs inside [from_ms, to_ms].
void measure_overlap(const Held& held, std::int64_t from_ms, std::int64_t to_ms, RunOutcome& r) {
    Held clipped(held.size());
    for (std::size_t i = 0; i < held.size(); ++i) {
        for (LeaseInterval l : held[i]) {
            l.begin_ms = std::max(l.begin_ms, from_ms);
            l.end_ms = std::min(l.end_ms, to_ms);
            if (l.end_ms > l.begin_ms) {
                clipped[i].push_back(l);
            }
        }
    }
    const auto s = bounce::interval_summary(std::move(clipped), to_ms);
    if (s.closest) {
        r.gap_ms = s.closest->length_ms;
    }
    if (s.longest_overlap) {
        r.overlap_ms = s.longest_overlap->length_ms;
        r.overlap_error_ms = s.longest_overlap->error_ms;
    }
}

struct RunPlan {
    int signal = SIGKILL;
    std::int64_t pause_ms = 0;  // SIGSTOP: how long the leader stays stopped
    std::int64_t bound_ms = 0;  // for a successor, and for the old leader to notice
};

NodeIndex wait_sole_leader(Candidates& c, const RunClock& clock, std::int64_t bound_ms) {
    const std::int64_t start = clock.now_ms();
    while (clock.now_ms() - start < bound_ms) {
        if (const auto l = sole_leader(c, clock.now_ms())) {
            return *l;
        }
        sleep_ms(20);
    }
    throw std::runtime_error(
        fmt::format("no sole leader within {} ms\n{}", bound_ms, c.log_tails()));
}

/// SIGSTOP: waits out the pause, SIGCONT, then for the old leader to say it does not lead.
bool resume_and_notice(Candidates& c, const RunClock& clock, NodeIndex leader,
                       std::int64_t signalled, const RunPlan& plan) {
    sleep_ms(static_cast<double>(signalled + plan.pause_ms - clock.now_ms()));
    c.resume(leader);
    const std::int64_t resumed = clock.now_ms();
    while (clock.now_ms() - resumed < plan.bound_ms) {
        if (c.says_not_leading(leader, resumed)) {
            return true;
        }
        sleep_ms(5);
    }
    return false;
}

RunOutcome run_once(Candidates& c, const RunPlan& plan, const RunClock& clock,
                    std::mt19937_64& random) {
    c.begin_run();
    const NodeIndex leader = wait_sole_leader(c, clock, 60'000 + plan.bound_ms);
    const std::int64_t from = clock.now_ms();
    sleep_ms(std::uniform_real_distribution<double>(200, 400)(random));
    const std::int64_t signalled = clock.now_ms();
    if (plan.signal == SIGKILL) {
        c.kill(leader);
    } else {
        c.pause(leader);
    }
    RunOutcome r;
    const std::int64_t limit = plan.signal == SIGSTOP ? plan.pause_ms : plan.bound_ms;
    while (!r.failover_ms && clock.now_ms() - signalled < limit) {
        if (const auto t = successor_since(c.held(clock.now_ms()), leader, signalled)) {
            r.failover_ms = static_cast<double>(*t - signalled);
        }
        sleep_ms(5);
    }
    if (plan.signal == SIGSTOP) {
        r.noticed = resume_and_notice(c, clock, leader, signalled, plan);
    } else {
        c.restart(leader);
    }
    const std::int64_t end = clock.now_ms();
    measure_overlap(c.held(end), from, end, r);
    c.end_run();
    return r;
}

// ---- The figure ---------------------------------------------------------------------------------

struct Contender {
    std::string name;
    std::unique_ptr<Candidates> candidates;
    std::int64_t ttl_ms = 0;
    std::map<std::string, std::vector<RunOutcome>> outcomes;  // by case
};

/// The stores, started once and shared by every contender.
struct Stores {
    std::unique_ptr<FailoverTarget> etcd;
    std::unique_ptr<FailoverTarget> zookeeper;
    std::vector<std::string> etcd_endpoints;  // host:port of each member's client URL
    std::string zookeeper_hosts;              // the connect string
};

std::string host_port(const boost::asio::ip::tcp::endpoint& e) {
    return e.address().to_string() + ":" + std::to_string(e.port());
}

void wait_store(FailoverTarget& store, const std::string& name) {
    const auto start = Clock::now();
    while (!store.poll_agreed(all_nodes(store.size()))) {
        if (ms_since(start) > 60'000) {
            throw std::runtime_error(name + ": no leader within 60 s\n" + store.log_tails());
        }
        sleep_ms(100);
    }
}

Stores start_stores(const Peers& peers) {
    Stores s;
    if (peers.etcd) {
        s.etcd = make_etcd_target(*peers.etcd, 3, 100, 1000);  // etcd's default timings
        wait_store(*s.etcd, "etcd");
        for (NodeIndex i = 0; i < 3; ++i) {
            s.etcd_endpoints.push_back(host_port(*s.etcd->client_endpoint(i)));
        }
    }
    if (peers.zookeeper) {
        // tickTime 500 ms: sessions of 1 s (2 ticks) and up; maxSessionTimeout lets a recipe
        // ask for its default 30 s (else capped at 20 ticks).
        s.zookeeper =
            make_zookeeper_target(*peers.zookeeper, 3, 500, 5, "maxSessionTimeout=120000\n");
        wait_store(*s.zookeeper, "ZooKeeper");
        for (NodeIndex i = 0; i < 3; ++i) {
            s.zookeeper_hosts += (i == 0 ? "" : ",") + host_port(*s.zookeeper->client_endpoint(i));
        }
    }
    return s;
}

std::unique_ptr<Candidates> recipe(const fs::path& binary, const std::string& store,
                                   const Stores& stores, std::int64_t ttl_ms,
                                   const RunClock& clock) {
    std::vector<std::vector<std::string>> args;
    for (std::size_t i = 0; i < kCandidates; ++i) {
        std::vector<std::string> a{binary.string(), store};
        if (store == "etcd") {
            a.insert(a.end(), {"--endpoint", stores.etcd_endpoints.at(i)});
        } else {
            a.insert(a.end(), {"--hosts", stores.zookeeper_hosts});
        }
        a.insert(a.end(), {"--ttl-ms", std::to_string(ttl_ms), "--path",
                           fmt::format("/naive-ttl{}", ttl_ms)});
        args.push_back(std::move(a));
    }
    return std::make_unique<RecipeCandidates>(std::move(args), clock);
}

std::unique_ptr<Candidates> conclaved(const BenchOptions& options, const std::string& profile,
                                      const std::string& backend, const RunClock& clock) {
    bounce::ClusterOptions c = cluster_options(options, kCandidates, profile);
    c.backend = backend;
    return std::make_unique<ConclaveCandidates>(std::move(c), clock);
}

std::vector<Contender> contenders(const BenchOptions& options, const Stores& stores,
                                  const RunClock& clock) {
    std::error_code ec;
    const fs::path recipe_binary =
        fs::read_symlink("/proc/self/exe", ec).parent_path() / "lock-recipe";
    if (ec || ::access(recipe_binary.c_str(), X_OK) != 0) {
        throw std::runtime_error("no " + recipe_binary.string() +
                                 "; build it: scripts/build.sh release lock-recipe");
    }
    const std::int64_t ttl = options.store_ttl_ms;
    std::vector<Contender> out;
    auto add = [&](std::string name, std::unique_ptr<Candidates> c, std::int64_t t) {
        out.push_back({std::move(name), std::move(c), t, {}});
    };
    const std::string profile = options.profiles.size() == 1 ? options.profiles[0] : "default";
    if (stores.zookeeper) {
        add(fmt::format("zookeeper recipe, session {} ms", ttl),
            recipe(recipe_binary, "zookeeper", stores, ttl, clock), ttl);
        const nlohmann::json b = {
            {"kind", "zookeeper"}, {"hosts", stores.zookeeper_hosts}, {"ttl_ms", ttl}};
        add(fmt::format("conclaved on zookeeper, ttl {} ms", ttl),
            conclaved(options, profile, b.dump(), clock), ttl);
    }
    if (stores.etcd) {
        add(fmt::format("etcd recipe, lease {} s", (ttl + 999) / 1000),
            recipe(recipe_binary, "etcd", stores, ttl, clock), ttl);
        const nlohmann::json b = {
            {"kind", "etcd"}, {"endpoints", stores.etcd_endpoints}, {"ttl_ms", ttl}};
        add(fmt::format("conclaved on etcd, ttl {} ms", ttl),
            conclaved(options, profile, b.dump(), clock), ttl);
    }
    const auto config = elector::Config::profile(profile, kCandidates, NodeId{0});
    add(fmt::format("conclaved, built-in elector ({})", profile),
        conclaved(options, profile, "", clock),
        std::max<std::int64_t>(ttl, config->inactivity_interval().count()));
    if (options.recipe_defaults && stores.zookeeper) {
        add("zookeeper recipe, session 30 s (default)",
            recipe(recipe_binary, "zookeeper", stores, 30'000, clock), 30'000);
    }
    if (options.recipe_defaults && stores.etcd) {
        add("etcd recipe, lease 60 s (default)",
            recipe(recipe_binary, "etcd", stores, 60'000, clock), 60'000);
    }
    return out;
}

/// One contender's runs of a case: the failovers, the overlaps and the margins without one.
void print_contender(const Contender& who, const std::vector<RunOutcome>& runs) {
    std::vector<double> failover;
    std::vector<double> overlap;
    std::vector<double> gaps;
    std::size_t with_overlap = 0;
    std::size_t not_noticed = 0;
    std::int64_t error = 0;
    for (const RunOutcome& r : runs) {
        if (r.failover_ms) {
            failover.push_back(*r.failover_ms);
        }
        if (r.gap_ms && r.overlap_ms == 0) {
            gaps.push_back(static_cast<double>(*r.gap_ms));
        }
        overlap.push_back(static_cast<double>(r.overlap_ms));
        with_overlap += r.overlap_ms > 0 ? 1 : 0;
        not_noticed += r.noticed ? 0 : 1;
        error = std::max(error, r.overlap_error_ms);
    }
    const Summary o = summarize(overlap);
    fmt::print("    {:<42} new leader after (ms)  {}{}\n", who.name,
               format_summary(summarize(failover)),
               failover.size() < runs.size()
                   ? fmt::format("  {} runs without one", runs.size() - failover.size())
                   : std::string());
    fmt::print(
        "    {:<42} two believed they led (ms): median {:.0f}  max {:.0f}  in {} of {} "
        "runs (error <= {} ms){}\n",
        "", o.median, o.max, with_overlap, runs.size(), error,
        not_noticed ? fmt::format("; {} old leaders still believed at the end", not_noticed)
                    : std::string());
    if (!gaps.empty()) {
        fmt::print(
            "    {:<42} otherwise the next belief began after the last one ended by (ms): "
            "min {:.0f}  median {:.0f}\n",
            "", summarize(gaps).min, summarize(gaps).median);
    }
}

void print_case(const std::vector<Contender>& all, const std::string& name) {
    fmt::print("  {} of the leader:\n", name);
    for (const Contender& who : all) {
        print_contender(who, who.outcomes.at(name));
    }
}

}  // namespace

int run_stores(const BenchOptions& options) {
    std::mt19937_64 random(options.seed);
    const Peers peers = find_peers(options);
    const RunClock clock;
    const Stores stores = start_stores(peers);
    std::vector<Contender> all = contenders(options, stores, clock);
    fmt::print(
        "   one 3-member etcd cluster (heartbeat 100 ms, election 1000 ms) and one 3-server "
        "ZooKeeper ensemble (tickTime 500 ms) on 127.0.0.1, shared by every contender; 3 "
        "candidates each; {} rounds, each contender in turn (SIGKILL, then SIGSTOP for TTL + 2 s "
        "then SIGCONT)\n",
        options.runs);
    const std::pair<const char*, int> cases[] = {{"SIGKILL", SIGKILL}, {"SIGSTOP", SIGSTOP}};
    for (int run = 0; run < options.runs; ++run) {
        for (const auto& [name, signal] : cases) {
            for (Contender& who : all) {
                const RunPlan plan{signal, who.ttl_ms + 2000, 2 * who.ttl_ms + 10'000};
                who.outcomes[name].push_back(run_once(*who.candidates, plan, clock, random));
            }
        }
        fmt::print("   round {} of {} done\n", run + 1, options.runs);
    }
    for (Contender& who : all) {
        who.candidates.reset();
    }
    for (const auto& c : cases) {
        print_case(all, c.first);
    }
    return 0;
}

}  // namespace conclave::bench
