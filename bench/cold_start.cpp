// SPDX-License-Identifier: Apache-2.0
// Cold start: launch N conclaved processes at once, time until one leader is known by all, and
// count how often the first election needed more than one round; etcd and ZooKeeper clusters of
// the same size at the same tolerance, interleaved run by run.
#include <fmt/core.h>
#include <functional>
#include <map>
#include <stdexcept>

#include "bench.hpp"
#include "conclave/core/enum_names.hpp"

namespace conclave::bench {

namespace {

struct PeerColdStart {
    std::vector<double> samples;
    std::map<std::uint64_t, int> terms;  // term (etcd) / epoch (ZooKeeper) of the first leader
    int failures = 0;
};

/// Launch a fresh peer cluster and poll every member every 2 ms until they agree.
void peer_cold_start(const std::function<std::unique_ptr<FailoverTarget>()>& make,
                     PeerColdStart& out) {
    const auto launched = Clock::now();
    auto target = make();
    const auto everyone = all_nodes(target->size());
    while (ms_since(launched) < 60'000) {
        const auto round = Clock::now();
        if (target->poll_agreed(everyone)) {
            out.samples.push_back(ms_since(launched));
            ++out.terms[target->last_term()];
            return;
        }
        sleep_ms(2 - ms_since(round));
    }
    ++out.failures;
}

std::string describe_terms(const std::map<std::uint64_t, int>& terms) {
    std::string out;
    for (const auto& [term, count] : terms) {
        out += fmt::format("{}{} in {}", out.empty() ? "" : ", ", term, count);
    }
    return out.empty() ? "-" : out;
}

}  // namespace

int run_cold_start(const BenchOptions& options) {
    const Peers peers = find_peers(options);
    for (const std::string& profile : options.profiles) {
        auto config = elector::Config::profile(profile, 3, NodeId{0});
        if (!config) {
            throw std::runtime_error("--profile: unknown profile " + profile);
        }
        if (!options.backoff.empty()) {
            config->backoff = *parse_enum<elector::Backoff>(options.backoff);
        }
        const PeerSettings ps = peer_settings(*config);
        fmt::print(
            "\n== cold start, profile {} (initial wait {} ms, backoff {}{}, then 0-{} ms, "
            "scouting timeout {} ms); {} runs per N, interleaved run by run with the peers; "
            "/status (srvr, maintenance/status) of every member polled every 2 ms\n",
            profile, config->initial_wait.count(), to_string(config->backoff),
            config->backoff == elector::Backoff::Ranked
                ? fmt::format(" (slot {} ms)", config->rank_slot.count())
                : "",
            config->max_random_wait.count(), config->scouting_result_timeout.count(), options.runs);
        for (const std::size_t n : {std::size_t{3}, std::size_t{5}, std::size_t{7}}) {
            std::vector<double> samples;
            int term_above_one = 0;
            int contested = 0;
            std::vector<double> spreads;
            int failures = 0;
            PeerColdStart etcd;
            PeerColdStart zk;
            for (int run = 0; run < options.runs; ++run) {
                {
                    bounce::ClusterOptions c = cluster_options(options, n, profile);
                    c.seed = options.seed + static_cast<std::uint64_t>(run);
                    Harness h(c);
                    const auto launched = Clock::now();
                    h.start_all();
                    spreads.push_back(ms_since(launched));
                    const auto agreed = h.wait_agreement(all_nodes(n), 30'000, 2);
                    const double elapsed = ms_since(launched);
                    if (!agreed) {
                        ++failures;
                        fmt::print("  N={} run {}: no agreed leader within 30 s\n{}", n, run + 1,
                                   h.log_tails());
                    } else {
                        samples.push_back(elapsed);
                        double candidacies = 0;
                        for (NodeIndex i = 0; i < n; ++i) {
                            if (const auto text = h.metrics(i)) {
                                candidacies +=
                                    metric_sum(*text, "conclave_elections_started_total");
                            }
                        }
                        term_above_one += agreed->term > 1 ? 1 : 0;
                        contested += candidacies > 1 ? 1 : 0;
                    }
                }
                if (peers.etcd) {
                    peer_cold_start(
                        [&] {
                            return make_etcd_target(*peers.etcd, n, ps.etcd_heartbeat_ms,
                                                    ps.etcd_election_ms);
                        },
                        etcd);
                }
                if (peers.zookeeper) {
                    peer_cold_start(
                        [&] {
                            return make_zookeeper_target(*peers.zookeeper, n, ps.zk_tick_ms,
                                                         ps.zk_sync_limit);
                        },
                        zk);
                }
            }
            const Summary conclave = summarize(samples);
            const double first_term =
                samples.empty()
                    ? 0
                    : 100.0 *
                          static_cast<double>(static_cast<int>(samples.size()) - term_above_one) /
                          static_cast<double>(samples.size());
            fmt::print("  N={}  launch -> leader known by all (ms): {}\n", n,
                       format_summary(conclave));
            fmt::print(
                "        elected in the first term: {:.0f} % (first leader's term > 1: {}/{}); "
                "more than one candidate (sum of conclave_elections_started_total > 1): "
                "{}/{}{}{}\n",
                first_term, term_above_one, samples.size(), contested, samples.size(),
                failures ? fmt::format("; {} runs without a leader", failures) : std::string(),
                profile == "fast"
                    ? fmt::format("; target >= 95 %: {}", first_term >= 95 ? "met" : "MISSED")
                    : std::string());
            fmt::print(
                "        launching the {} processes took {:.1f} ms (median); floor: initial wait "
                "{} ms + 2 round trips + 2 persists + start-up\n",
                n, summarize(spreads).median, config->initial_wait.count());
            auto print_peer = [&](const char* name, const PeerColdStart& p,
                                  const std::string& settings, const char* term_name) {
                const Summary s = summarize(p.samples);
                fmt::print("  N={}  {:<10} launch -> agreed leader (ms): {}{}\n", n, name,
                           format_summary(s),
                           p.failures ? fmt::format("; {} runs without a leader", p.failures)
                                      : std::string());
                fmt::print("        {} / conclave median x{:.2f}; first leader's {}: {} ({})\n",
                           name, conclave.median > 0 ? s.median / conclave.median : 0.0, term_name,
                           describe_terms(p.terms), settings);
            };
            if (peers.etcd) {
                print_peer("etcd", etcd,
                           fmt::format("heartbeat {} ms, election timeout {} ms, pre-vote on",
                                       ps.etcd_heartbeat_ms, ps.etcd_election_ms),
                           "raft term");
            }
            if (peers.zookeeper) {
                print_peer("zookeeper", zk,
                           fmt::format("tickTime {} ms, syncLimit {}; includes JVM start-up",
                                       ps.zk_tick_ms, ps.zk_sync_limit),
                           "epoch");
            }
        }
    }
    return 0;
}

}  // namespace conclave::bench
