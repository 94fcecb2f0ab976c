// SPDX-License-Identifier: Apache-2.0
// Failover: SIGKILL / SIGSTOP of the leader of 3 real conclaved processes on loopback, timed from
// the signal to the moment every survivor's /status names the same new leader; next to it the
// floor the core's own timers allow, and etcd measured the same way when it is installed.
#include <signal.h>

#include <unistd.h>

#include <fmt/core.h>
#include <algorithm>
#include <map>
#include <stdexcept>

#include "bench.hpp"
#include "conclave/core/enum_names.hpp"

namespace conclave::bench {

std::optional<double> failover_once(FailoverTarget& target, int signal, double calm_ms,
                                    double poll_ms, double bound_ms, std::mt19937_64& random,
                                    double& round_total_ms, std::size_t& rounds) {
    const std::vector<NodeIndex> everyone = all_nodes(target.size());
    std::uniform_real_distribution<double> calm(calm_ms, 2 * calm_ms);
    for (;;) {
        // A leader all members agree on (after a restart the restored member must have joined).
        std::optional<NodeIndex> leader;
        const auto wait_start = Clock::now();
        while (!leader && ms_since(wait_start) < 30'000) {
            leader = target.poll_agreed(everyone);
            if (!leader) {
                sleep_ms(5);
            }
        }
        if (!leader) {
            throw std::runtime_error("no leader agreed by all members within 30 s\n" +
                                     target.log_tails());
        }
        // A random calm so that the signal lands at a random phase of the heartbeat period.
        sleep_ms(calm(random));
        leader = target.poll_agreed(everyone);
        if (!leader) {
            continue;  // the cluster moved during the calm; try again (does not count as a run)
        }
        std::vector<NodeIndex> survivors;
        for (NodeIndex m : everyone) {
            if (m != *leader) {
                survivors.push_back(m);
            }
        }
        const auto signalled = Clock::now();
        target.send_signal(*leader, signal);
        std::optional<double> elapsed_ms;
        while (ms_since(signalled) < bound_ms) {
            const auto round = Clock::now();
            const auto next = target.poll_agreed(survivors);
            round_total_ms += ms_since(round);
            ++rounds;
            if (next && *next != *leader) {
                elapsed_ms = ms_since(signalled);  // when the last survivor's answer arrived
                break;
            }
            sleep_ms(poll_ms - ms_since(round));
        }
        target.restore(*leader);
        return elapsed_ms;
    }
}

// The model follows elector.cpp for the two survivors A and B of a 3-node cluster (quorum 2):
//  - detection. SIGKILL: the leader's connections close, PeerDown -> BecomeFollower(no leader)
//    at once (D = 0). SIGSTOP: nothing closes; HeartbeatCheck fires every heartbeat_check_period
//    and counts misses, reset by each heartbeat; at heartbeat_check_misses() misses the follower
//    drops the leader. With the last heartbeat h before the signal s (s - h uniform in
//    [0, heartbeat_period)) and the check phase phi uniform in [0, check period):
//    D = phi + (misses - 1) * check - (s - h), independently for A and B.
//  - backoff: BecomeFollower arms RandomWait uniform in [0, max_random_wait] (integer ms); with
//    the ranked backoff, the first wait is rank x rank_slot + jitter in [0, rank_slot / 8]
//    (A rank 0, B rank 1: the order is the same for both survivors), later ones uniform.
//  - scouting: when A's RandomWait fires, A asks B. B says yes if it no longer knows a leader
//    (sticky leader), i.e. D_B has passed, or if it is one check short of it (corroboration, when
//    misses >= 2: B's check before D_B has passed); then A wins: two round trips (scouting,
//    proposal) and two persists (A's term and vote, B's vote), which the model leaves out.
//    Otherwise B says no; one "no" of two is not yet a lost round, so A waits
//    scouting_result_timeout, then backs off again.
std::vector<double> floor_model_ms(const elector::Config& c, bool silent, int samples,
                                   std::mt19937_64& random) {
    const double period = static_cast<double>(c.heartbeat_period.count());
    const double check = static_cast<double>(c.heartbeat_check_period.count());
    const double misses = static_cast<double>(c.heartbeat_check_misses());
    const double scouting_timeout = static_cast<double>(c.scouting_result_timeout.count());
    const double corroboration = misses >= 2 ? check : 0.0;
    std::uniform_int_distribution<std::int64_t> backoff(0, c.max_random_wait.count());
    std::uniform_real_distribution<double> unit(0, 1);
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(samples));
    for (int k = 0; k < samples; ++k) {
        double detect[2] = {0, 0};
        if (silent) {
            const double since_heartbeat = unit(random) * period;
            for (double& d : detect) {
                d = std::max(0.0, unit(random) * check + (misses - 1) * check - since_heartbeat);
            }
        }
        double attempt[2] = {detect[0] + static_cast<double>(backoff(random)),
                             detect[1] + static_cast<double>(backoff(random))};
        if (c.backoff == elector::Backoff::Ranked) {
            const std::int64_t slot = c.rank_slot.count();
            std::uniform_int_distribution<std::int64_t> jitter(0, slot / 8);
            attempt[0] = detect[0] + static_cast<double>(jitter(random));
            attempt[1] = detect[1] + static_cast<double>(slot + jitter(random));
        }
        for (int step = 0; step < 10'000; ++step) {
            const int a = attempt[0] <= attempt[1] ? 0 : 1;
            const int b = 1 - a;
            if (detect[b] - corroboration <= attempt[a]) {
                out.push_back(attempt[a]);
                break;
            }
            attempt[a] += scouting_timeout + static_cast<double>(backoff(random));
        }
    }
    return out;
}

namespace {

struct Case {
    const char* name;
    int signal;
};

std::string describe_profile(const elector::Config& c) {
    return fmt::format(
        "heartbeat {} ms, check every {} ms, {} missed checks = inactivity {} ms, backoff {}{} "
        "then 0-{} ms, scouting timeout {} ms",
        c.heartbeat_period.count(), c.heartbeat_check_period.count(), c.heartbeat_check_misses(),
        c.inactivity_interval().count(), to_string(c.backoff),
        c.backoff == elector::Backoff::Ranked ? fmt::format(" (slot {} ms)", c.rank_slot.count())
                                              : "",
        c.max_random_wait.count(), c.scouting_result_timeout.count());
}

}  // namespace

PeerSettings peer_settings(const elector::Config& c) {
    const double period = static_cast<double>(c.heartbeat_period.count());
    const double inactivity = static_cast<double>(c.inactivity_interval().count());
    PeerSettings p;
    p.etcd_heartbeat_ms = static_cast<std::uint32_t>(std::min(period, inactivity / 5));
    p.etcd_election_ms = static_cast<std::uint32_t>(inactivity);
    p.zk_sync_limit = 3;
    p.zk_tick_ms = static_cast<std::uint32_t>(inactivity / p.zk_sync_limit);
    return p;
}

Peers find_peers(const BenchOptions& options) {
    Peers peers;
    if (!options.etcd) {
        fmt::print("etcd comparison: skipped (--no-etcd)\n");
    } else if (!(peers.etcd = find_etcd())) {
        fmt::print(
            "etcd comparison: SKIPPED (no `etcd` on PATH); to enable: apt-get install -y "
            "etcd-server\n");
    }
    if (!options.zookeeper) {
        fmt::print("ZooKeeper comparison: skipped (--no-zookeeper)\n");
    } else if (!(peers.zookeeper = find_zookeeper())) {
        fmt::print(
            "ZooKeeper comparison: SKIPPED (needs `java` on PATH and "
            "/usr/share/java/zookeeper.jar); to enable: apt-get install -y zookeeper\n");
    }
    return peers;
}

namespace {

struct Contender {
    std::string name;
    std::unique_ptr<FailoverTarget> target;
    std::map<std::string, FailoverResult> results;  // by case
    double round_total_ms = 0;
    std::size_t rounds = 0;
};

}  // namespace

int run_failover(const BenchOptions& options) {
    std::mt19937_64 random(options.seed);
    const Peers peers = find_peers(options);
    const double persist_ms =
        persist_cost_ms(std::filesystem::temp_directory_path() /
                            ("conclave-bench-probe-" + std::to_string(::getpid())),
                        20);
    fmt::print("persist (write + fsync + rename + fsync dir) in {}: median {:.2f} ms\n",
               std::filesystem::temp_directory_path().string(), persist_ms);
    const Case cases[] = {{"SIGKILL", SIGKILL}, {"SIGSTOP", SIGSTOP}};
    for (const std::string& profile : options.profiles) {
        auto config = elector::Config::profile(profile, 3, NodeId{0});
        if (!config) {
            throw std::runtime_error("--profile: unknown profile " + profile);
        }
        if (!options.backoff.empty()) {
            config->backoff = *parse_enum<elector::Backoff>(options.backoff);
        }
        const double period = static_cast<double>(config->heartbeat_period.count());
        const double inactivity = static_cast<double>(config->inactivity_interval().count());
        const double bound_ms =
            10 * (inactivity + static_cast<double>(config->max_random_wait.count())) + 5000;
        const PeerSettings ps = peer_settings(*config);
        fmt::print("\n== failover, profile {} ({})\n", profile, describe_profile(*config));
        std::vector<Contender> contenders;
        contenders.push_back({"conclave", make_conclave_target(options, profile), {}, 0, 0});
        if (peers.etcd) {
            contenders.push_back(
                {"etcd",
                 make_etcd_target(*peers.etcd, 3, ps.etcd_heartbeat_ms, ps.etcd_election_ms),
                 {},
                 0,
                 0});
        }
        if (peers.zookeeper) {
            contenders.push_back(
                {"zookeeper",
                 make_zookeeper_target(*peers.zookeeper, 3, ps.zk_tick_ms, ps.zk_sync_limit),
                 {},
                 0,
                 0});
        }
        std::string names;
        for (const Contender& who : contenders) {
            names += (names.empty() ? "" : ", ") + who.name;
        }
        fmt::print(
            "   3 members each on 127.0.0.1 (conclaved through leader-bounce's proxy), {} runs per "
            "case, interleaved run by run ({}); time from the signal to the answer that completes "
            "agreement of both survivors, polled every {} ms\n",
            options.runs, names, options.poll_ms);
        for (int run = 0; run < options.runs; ++run) {
            for (const Case& c : cases) {
                for (Contender& who : contenders) {
                    const auto elapsed =
                        failover_once(*who.target, c.signal, period, options.poll_ms, bound_ms,
                                      random, who.round_total_ms, who.rounds);
                    FailoverResult& r = who.results[c.name];
                    if (elapsed) {
                        r.samples_ms.push_back(*elapsed);
                    } else {
                        ++r.failures;
                    }
                }
            }
        }
        for (Contender& who : contenders) {
            who.target.reset();  // stop the processes before printing (and before the next case)
        }
        for (const Case& c : cases) {
            const bool silent = c.signal == SIGSTOP;
            const FailoverResult& r = contenders[0].results[c.name];
            const Summary measured = summarize(r.samples_ms);
            const Summary model = summarize(floor_model_ms(*config, silent, 200'000, random));
            fmt::print("  {} of the leader (ms):\n", c.name);
            fmt::print("    conclave         {}{}\n", format_summary(measured),
                       r.failures ? fmt::format("  {} runs without a new leader", r.failures)
                                  : std::string());
            fmt::print("    floor (model)    {}  + 2 persists ({:.1f} ms) + 2.5 round trips\n",
                       format_summary(model), 2 * persist_ms);
            const double check = static_cast<double>(config->heartbeat_check_period.count());
            const double misses = static_cast<double>(config->heartbeat_check_misses());
            fmt::print(
                "    floor parts      detection {}; backoff: {}{}; 2 round trips + 2 persists\n",
                silent ? fmt::format("{:.0f}-{:.0f} ms after the signal (missed checks)",
                                     (misses - 1) * check - period, misses * check)
                       : std::string("~0 (connection loss)"),
                config->backoff == elector::Backoff::Ranked
                    ? fmt::format("rank x {} ms + jitter 0-{} ms (ranks 0 and 1)",
                                  config->rank_slot.count(), config->rank_slot.count() / 8)
                    : fmt::format("the earlier of two draws in 0-{} ms",
                                  config->max_random_wait.count()),
                silent ? "; a survivor that scouts when the other is one check short of "
                         "noticing is granted (corroboration); earlier, it is refused and "
                         "retries after the scouting timeout"
                       : "");
            for (const Contender& who : contenders) {
                const double mean_round =
                    who.rounds == 0 ? 0 : who.round_total_ms / static_cast<double>(who.rounds);
                if (who.name == "conclave") {
                    fmt::print("    polling          mean round over both survivors {:.2f} ms\n",
                               mean_round);
                    continue;
                }
                const FailoverResult& e = who.results.at(c.name);
                const Summary es = summarize(e.samples_ms);
                fmt::print("    {:<16} {}{}\n", who.name, format_summary(es),
                           e.failures ? fmt::format("  {} runs without a new leader", e.failures)
                                      : std::string());
                fmt::print(
                    "    {:<16} median x{:.2f}, p95 x{:.2f}  ({}; mean polling round {:.2f} ms)\n",
                    who.name + " / conclave",
                    measured.median > 0 ? es.median / measured.median : 0.0,
                    measured.p95 > 0 ? es.p95 / measured.p95 : 0.0,
                    who.name == "etcd"
                        ? fmt::format("heartbeat {} ms, election timeout {} ms, pre-vote on",
                                      ps.etcd_heartbeat_ms, ps.etcd_election_ms)
                        : fmt::format("tickTime {} ms, syncLimit {}", ps.zk_tick_ms,
                                      ps.zk_sync_limit),
                    mean_round);
            }
            if (profile == "fast" && !silent) {
                fmt::print("    target           median <= 30 ms: {}; p95 <= 60 ms: {}\n",
                           measured.median <= 30 ? "met" : "MISSED",
                           measured.p95 <= 60 ? "met" : "MISSED");
            }
            if (profile == "fast" && silent) {
                std::string vs_etcd = "no etcd in this run";
                for (const Contender& who : contenders) {
                    if (who.name == "etcd") {
                        const double em = summarize(who.results.at(c.name).samples_ms).median;
                        vs_etcd = fmt::format("{:.2f} x etcd's median: {}",
                                              em > 0 ? measured.median / em : 0.0,
                                              measured.median <= 0.8 * em ? "met" : "MISSED");
                    }
                }
                fmt::print("    target           median <= 260 ms: {}; <= 0.8 x etcd: {}\n",
                           measured.median <= 260 ? "met" : "MISSED", vs_etcd);
            }
            if (silent && profile != "fast") {
                const double target =
                    inactivity + static_cast<double>(config->max_random_wait.count()) / 2 + 50;
                fmt::print(
                    "    target           inactivity + mean backoff + 50 = {:.0f} ms: median {}, "
                    "p95 {}\n",
                    target, measured.median <= target ? "met" : "MISSED",
                    measured.p95 <= target ? "met" : "MISSED");
            }
        }
    }
    return 0;
}

}  // namespace conclave::bench
