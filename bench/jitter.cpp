// SPDX-License-Identifier: Apache-2.0
// Stability under jitter: every peer link delayed by latency +- jitter (close to the heartbeat
// period) in leader-bounce's proxy; leader changes counted from the nodes' own counters.
#include <fmt/core.h>
#include <stdexcept>

#include "bench.hpp"

namespace conclave::bench {

namespace {

struct Totals {
    double elections_won = 0;
    std::uint64_t max_term = 0;
    bool complete = true;
};

Totals read_totals(Harness& h) {
    Totals t;
    for (NodeIndex i = 0; i < h.size(); ++i) {
        const auto text = h.metrics(i);
        const StatusView s = h.status(i, std::chrono::milliseconds(1000));
        if (!text || !s.answered) {
            t.complete = false;
            continue;
        }
        t.elections_won += metric_sum(*text, "conclave_elections_won_total");
        t.max_term = std::max(t.max_term, s.term);
    }
    return t;
}

}  // namespace

int run_jitter(const BenchOptions& options) {
    const std::string profile = "fast";
    const auto config = *elector::Config::profile(profile, 3, NodeId{0});
    const auto period = static_cast<std::uint32_t>(config.heartbeat_period.count());
    // Each chunk waits uniform [latency - jitter, latency + jitter]; bytes are never reordered.
    const bounce::Delay settings[] = {
        {period, period}, {period * 3 / 2, period * 3 / 2}, {period * 2, period * 2}};
    fmt::print(
        "\n== stability under jitter, profile {} (heartbeat {} ms, leader presumed gone after {} "
        "ms of silence), 3 nodes, {:.0f} s per case; every directed peer link delayed in "
        "leader-bounce's proxy; leader changes = elections won (sum of "
        "conclave_elections_won_total over the nodes) during the window\n",
        profile, period, config.inactivity_interval().count(), options.duration_s);
    for (const bounce::Delay& delay : settings) {
        for (const bool scouting : {true, false}) {
            bounce::ClusterOptions c;
            c.node_count = 3;
            c.profile = profile;
            c.scouting = scouting;
            c.conclaved = options.conclaved;
            c.keep_dir = options.keep;
            c.seed = options.seed;
            Harness h(c);
            h.start_all();
            if (!h.wait_agreement(all_nodes(3), 30'000, 5)) {
                throw std::runtime_error("jitter: no leader at start-up\n" + h.log_tails());
            }
            h.on_proxy_thread([&](bounce::FaultProxy& proxy) {
                for (NodeIndex a = 0; a < 3; ++a) {
                    for (NodeIndex b = 0; b < 3; ++b) {
                        if (a != b) {
                            proxy.set_mode({a, b}, delay);
                        }
                    }
                }
            });
            sleep_ms(1000);  // let the delay settle in, then start the window on an agreed leader
            h.wait_agreement(all_nodes(3), 30'000, 5);
            const Totals before = read_totals(h);
            const auto start = Clock::now();
            sleep_ms(options.duration_s * 1000);
            h.wait_agreement(all_nodes(3), 30'000, 5);  // end on an agreed leader too
            const double window_s = ms_since(start) / 1000;
            const Totals after = read_totals(h);
            if (!before.complete || !after.complete) {
                throw std::runtime_error("jitter: a node did not answer /metrics or /status\n" +
                                         h.log_tails());
            }
            const double changes = after.elections_won - before.elections_won;
            fmt::print(
                "  delay {:3}+-{:3} ms  scouting {:3}:  {:4.0f} leader changes in {:.0f} s = "
                "{:8.0f} per hour   (terms {} -> {})\n",
                delay.latency_ms, delay.jitter_ms, scouting ? "on" : "off", changes, window_s,
                changes * 3600 / window_s, before.max_term, after.max_term);
        }
    }
    return 0;
}

}  // namespace conclave::bench
