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
            int contested = 0;
            std::vector<double> spreads;
            int failures = 0;
            for (int run = 0; run < options.runs; ++run) {
                bounce::ClusterOptions c;
                c.node_count = n;
                c.profile = profile;
                c.backoff = options.backoff;
                c.conclaved = options.conclaved;
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
                    continue;
                }
                samples.push_back(elapsed);
                double candidacies = 0;
                for (NodeIndex i = 0; i < n; ++i) {
                    if (const auto text = h.metrics(i)) {
                        candidacies += metric_sum(*text, "conclave_elections_started_total");
                    }
                }
                term_above_one += agreed->term > 1 ? 1 : 0;
                contested += candidacies > 1 ? 1 : 0;
            }
            const double wait = static_cast<double>(config->initial_wait.count());
            fmt::print("  N={}  launch -> leader known by all (ms): {}\n", n,
                       format_summary(summarize(samples)));
            fmt::print(
                "        more than one round (first leader's term > 1): {}/{}; more than one "
                "candidate (sum of conclave_elections_started_total > 1): {}/{}{}\n",
                term_above_one, samples.size(), contested, samples.size(),
                failures ? fmt::format("; {} runs without a leader", failures) : std::string());
            fmt::print(
                "        launching the {} processes took {:.1f} ms (median); floor: initial wait "
                "{:.0f} ms (no backoff after it) + 2 round trips + 2 persists + start-up\n",
                n, summarize(spreads).median, wait);
        }
    }
    return 0;
}

}  // namespace conclave::bench
