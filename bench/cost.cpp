// SPDX-License-Identifier: Apache-2.0
// Cost: idle CPU (utime + stime from /proc/<pid>/stat over a window) and VmRSS of each node of an
// idle cluster at the fast profile, N = 3, 5, 9.
#include <unistd.h>

#include <fmt/core.h>
#include <stdexcept>

#include "bench.hpp"

namespace conclave::bench {

int run_cost(const BenchOptions& options) {
    fmt::print(
        "\n== cost of an idle cluster, profile fast (heartbeat 100 ms); CPU = (utime + stime) "
        "over a {:.0f} s window / window (tick {} ms), RSS = VmRSS at the end; nobody polls "
        "during the window\n",
        options.window_s, 1000 / ::sysconf(_SC_CLK_TCK));
    for (const std::size_t n : {std::size_t{3}, std::size_t{5}, std::size_t{9}}) {
        bounce::ClusterOptions c;
        c.node_count = n;
        c.profile = "fast";
        c.conclaved = options.conclaved;
        c.keep_dir = options.keep;
        c.seed = options.seed;
        Harness h(c);
        h.start_all();
        const auto agreed = h.wait_agreement(all_nodes(n), 30'000, 5);
        if (!agreed) {
            throw std::runtime_error("cost: no leader at start-up\n" + h.log_tails());
        }
        sleep_ms(2000);
        std::vector<double> before(n);
        for (NodeIndex i = 0; i < n; ++i) {
            before[i] = cpu_seconds(h.cluster().node(i).pid).value_or(0);
        }
        const auto start = Clock::now();
        sleep_ms(options.window_s * 1000);
        const double window_s = ms_since(start) / 1000;
        std::vector<double> follower_cpu;
        double leader_cpu = 0;
        double max_cpu = 0;
        std::vector<double> rss_mib;
        for (NodeIndex i = 0; i < n; ++i) {
            const int pid = h.cluster().node(i).pid;
            const double pct = (cpu_seconds(pid).value_or(0) - before[i]) / window_s * 100;
            max_cpu = std::max(max_cpu, pct);
            (i == agreed->leader ? leader_cpu : follower_cpu.emplace_back()) = pct;
            rss_mib.push_back(static_cast<double>(rss_kib(pid).value_or(0)) / 1024);
        }
        const Summary f = summarize(follower_cpu);
        const Summary r = summarize(rss_mib);
        fmt::print(
            "  N={}  CPU leader {:.2f} %, followers mean {:.2f} % (max {:.2f} %);  RSS mean {:.1f} "
            "MiB, max {:.1f} MiB\n",
            n, leader_cpu, f.mean, f.max, r.mean, r.max);
        if (n == 5) {
            fmt::print(
                "        target at N=5: <= 0.5 % CPU: {} (max {:.2f} %); <= 10 MiB RSS: {}\n",
                max_cpu <= 0.5 ? "met" : "MISSED", max_cpu, r.max <= 10 ? "met" : "MISSED");
        }
    }
    return 0;
}

}  // namespace conclave::bench
