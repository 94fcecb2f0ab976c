// Cold start: launch N conclaved processes at once, time until one leader is known by all, and
// count how often the first election needed more than one round.
#include <fmt/core.h>
#include <stdexcept>

#include "bench.hpp"

namespace conclave::bench {

int run_cold_start(const BenchOptions& options) {
    for (const std::string& profile : options.profiles) {
        const auto config = Config::profile(profile, 3, NodeId{0});
        if (!config) {
            throw std::runtime_error("--profile: unknown profile " + profile);
        }
        fmt::print(
            "\n== cold start, profile {} (initial wait {} ms, backoff 0-{} ms, scouting timeout "
            "{} ms); {} runs per N; /status of every node polled every 2 ms\n",
            profile, config->initial_wait.count(), config->max_random_wait.count(),
            config->scouting_result_timeout.count(), options.runs);
        for (const std::size_t n : {std::size_t{3}, std::size_t{5}, std::size_t{7}}) {
            std::vector<double> samples;
            int term_above_one = 0;
            int extra_scouting = 0;
            int failures = 0;
            for (int run = 0; run < options.runs; ++run) {
                bounce::ClusterOptions c;
                c.node_count = n;
                c.profile = profile;
                c.conclaved = options.conclaved;
                c.seed = options.seed + static_cast<std::uint64_t>(run);
                Harness h(c);
                const auto launched = Clock::now();
                h.start_all();
                const auto agreed = h.wait_agreement(all_nodes(n), 30'000, 2);
                const double elapsed = ms_since(launched);
                if (!agreed) {
                    ++failures;
                    fmt::print("  N={} run {}: no agreed leader within 30 s\n{}", n, run + 1,
                               h.log_tails());
                    continue;
                }
                samples.push_back(elapsed);
                double scouting_rounds = 0;
                for (NodeIndex i = 0; i < n; ++i) {
                    if (const auto text = h.metrics(i)) {
                        scouting_rounds +=
                            metric_sum(*text, "conclave_scouting_rounds_started_total");
                    }
                }
                term_above_one += agreed->term > 1 ? 1 : 0;
                extra_scouting += scouting_rounds > 1 ? 1 : 0;
            }
            const double wait = static_cast<double>(config->initial_wait.count());
            const double spread = static_cast<double>(config->max_random_wait.count());
            fmt::print("  N={}  launch -> leader known by all (ms): {}\n", n,
                       format_summary(summarize(samples)));
            fmt::print(
                "        more than one election (first leader's term > 1): {}/{}; more than one "
                "scouting round in the cluster: {}/{}{}\n",
                term_above_one, samples.size(), extra_scouting, samples.size(),
                failures ? fmt::format("; {} runs without a leader", failures) : std::string());
            fmt::print(
                "        floor: initial wait {:.0f} + earliest of {} backoffs (mean {:.0f}) + 2 "
                "round trips + 2 persists + process start-up = ~{:.0f} ms\n",
                wait, n, spread / static_cast<double>(n + 1),
                wait + spread / static_cast<double>(n + 1));
        }
    }
    return 0;
}

}  // namespace conclave::bench
