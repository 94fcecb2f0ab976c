// SPDX-License-Identifier: Apache-2.0
// conclave-bench FIGURE [options]: prints benchmark figures (see bench/README.md).
#include <unistd.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <stdexcept>

#include "bench.hpp"

namespace fs = std::filesystem;
using namespace conclave::bench;

namespace {

constexpr const char* kUsage = R"(usage: conclave-bench FIGURE [options]
figures:
  failover     SIGKILL and SIGSTOP of the leader of 3 conclaved (and of 3 etcd members and 3
               ZooKeeper servers when installed, interleaved run by run)
  cold-start   launch N = 3, 5, 7 nodes -> one leader known by all (etcd, ZooKeeper likewise)
  jitter       leader changes per hour with jittered peer links, scouting on and off
  cost         idle CPU and RSS per node, N = 3, 5, 9, fast profile
  restart      SIGKILL and restart the highest-index node of 3 (fast profile), time until all
               its links are up at both ends (/status peers), --runs times (default 100)
  puts         writes/s and p50/p99 latency of 3 conclaved (POST /metadata, fsync before the
               acknowledgement) beside 3 etcd members (POST /v3/kv/put), same client, rounds
               interleaved (--runs rounds each, default 3; --duration S per round, default 10)
  stores       on one 3-member etcd cluster and one 3-server ZooKeeper ensemble: the naive lock
               recipes (3 lock-recipe candidates each), 3 conclaved on each store, 3 conclaved
               with the built-in elector; SIGKILL and SIGSTOP (TTL + 2 s) of the leader, time to a
               new leader and time two processes each believed they led (--runs rounds, default 3)
options:
  --runs N          failover runs per case (default 20), cold-start runs per N (default 10),
                    restarts (default 100)
  --profile P       fast, default or both (failover and cold-start; default both)
  --backoff B       uniform or ranked (failover and cold-start; default: the profile's)
  --duration S      jitter: seconds per case (default 60)
  --window S        cost: measuring window in seconds (default 20)
  --clients C       puts: concurrent connections (default 64)
  --pipeline D      puts: requests each connection sends at once (HTTP/1.1 pipelining), then
                    waits for their answers (default 1)
  --batch B         puts: writes per request: conclaved's POST /metadata {"entries": [B writes]}
                    (each its own log entry), etcd's POST /v3/kv/txn with B puts (default 1: one
                    write per request, POST /v3/kv/put); a commit is one write
  --value-bytes V   puts: bytes per value; keys are 8 bytes (default 256)
  --keys K          puts: distinct keys, written in turn (default 100000)
  --poll-ms MS      failover, restart: polling period of /status (default 1)
  --downtime-min-ms MS, --downtime-max-ms MS
                    restart: the killed node stays down a time drawn uniformly from
                    [min, max] (default 100, 1500)
  --ttl-ms MS       stores: TTL of the recipes and of conclaved's store backend (default 2000)
  --recipe-defaults stores: also the recipes at their default TTLs (etcd lease 60 s, ZooKeeper
                    session 30 s); adds minutes per round
  --no-etcd         failover, cold-start: skip the etcd comparison
  --no-zookeeper    failover, cold-start: skip the ZooKeeper comparison
  --seed K          randomness of calm periods, proxy jitter and the floor model (default 1)
  --conclaved PATH  the daemon (default: ../tools/conclaved next to this program)
  --keep            keep the conclaved clusters' temporary directories (configs, logs) and print
                    their paths (failover, cold-start, jitter, cost)
)";

/// The command line (CLI11): the FIGURE and its options; range and choice checks name the option.
struct Args {
    std::string figure;
    int runs = 0;  // 0: the figure's default
    std::string profile = "both";
    std::string conclaved;
    bool help = false;
};

void describe(CLI::App& app, Args& a, BenchOptions& options) {
    app.set_help_flag();  // --help prints kUsage, not CLI11's own
    app.add_flag("-h,--help", a.help);
    app.add_option("FIGURE", a.figure)
        ->check(CLI::IsMember(
            {"failover", "cold-start", "jitter", "cost", "restart", "puts", "stores"}));
    app.add_flag_function("--no-etcd", [&options](std::int64_t) { options.etcd = false; });
    app.add_flag_function("--no-zookeeper",
                          [&options](std::int64_t) { options.zookeeper = false; });
    app.add_flag("--keep", options.keep);
    app.add_option("--runs", a.runs)->check(CLI::Range(1, 10000));
    app.add_option("--profile", a.profile)->check(CLI::IsMember({"fast", "default", "both"}));
    app.add_option("--backoff", options.backoff)->check(CLI::IsMember({"uniform", "ranked"}));
    app.add_option("--duration", options.duration_s)->check(CLI::Range(1.0, 86400.0));
    app.add_option("--window", options.window_s)->check(CLI::Range(1.0, 86400.0));
    app.add_option("--clients", options.clients)->check(CLI::Range(1, 4096));
    app.add_option("--pipeline", options.pipeline)->check(CLI::Range(1, 64));
    // etcd refuses a txn of more than --max-txn-ops (128 by default) operations.
    app.add_option("--batch", options.batch)->check(CLI::Range(1, 128));
    app.add_option("--value-bytes", options.value_bytes)
        ->check(CLI::Range(std::size_t{1}, std::size_t{65536}));
    app.add_option("--keys", options.keys)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 28));
    app.add_option("--poll-ms", options.poll_ms)->check(CLI::Range(0.0, 1000.0));
    app.add_option("--downtime-min-ms", options.downtime_min_ms)->check(CLI::Range(0.0, 60000.0));
    app.add_option("--downtime-max-ms", options.downtime_max_ms)->check(CLI::Range(0.0, 60000.0));
    app.add_option("--seed", options.seed)
        ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1'000'000'000'000'000}));
    app.add_option("--conclaved", a.conclaved);
    app.add_option("--ttl-ms", options.store_ttl_ms)
        ->check(CLI::Range(std::int64_t{1000}, std::int64_t{600'000}));
    app.add_flag("--recipe-defaults", options.recipe_defaults);
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures appear as they are measured
    const std::map<std::string, std::function<int(const BenchOptions&)>> figures = {
        {"failover", run_failover}, {"cold-start", run_cold_start}, {"jitter", run_jitter},
        {"cost", run_cost},         {"restart", run_restart},       {"puts", run_puts},
        {"stores", run_stores}};
    BenchOptions options;
    Args a;
    CLI::App app("conclave-bench", "conclave-bench");
    describe(app, a, options);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        fmt::print(stderr, "conclave-bench: {}\n(conclave-bench --help for usage)\n", e.what());
        return 2;
    }
    if (a.help || a.figure.empty()) {
        fmt::print("{}", kUsage);
        return a.help ? 0 : 2;
    }
    const auto figure = figures.find(a.figure);
    const std::string& profile = a.profile;
    std::optional<fs::path> conclaved;
    if (!a.conclaved.empty()) {
        conclaved = fs::absolute(a.conclaved);
    }
    options.runs = a.runs > 0 ? a.runs
                              : (a.figure == "cold-start"                     ? 10
                                 : a.figure == "restart"                      ? 100
                                 : a.figure == "puts" || a.figure == "stores" ? 3
                                                                              : 20);
    if (a.figure == "puts" && app.count("--duration") == 0) {
        options.duration_s = 10;
    }
    options.profiles = profile == "both" ? std::vector<std::string>{"fast", "default"}
                                         : std::vector<std::string>{profile};
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!conclaved) {
        conclaved = conclave::bounce::find_conclaved(ec ? fs::path(argv[0]) : self);
    }
    if (!conclaved || ::access(conclaved->c_str(), X_OK) != 0) {
        fmt::print(stderr,
                   "conclave-bench: cannot find an executable conclaved; build it "
                   "(scripts/build.sh release) or pass --conclaved PATH\n");
        return 2;
    }
    options.conclaved = *conclaved;
    try {
        return figure->second(options);
    } catch (const std::exception& e) {
        fmt::print(stderr, "conclave-bench {}: {}\n", a.figure, e.what());
        return 1;
    }
}
