// conclave-bench FIGURE [options]: prints benchmark figures (see bench/README.md).
#include <unistd.h>

#include <fmt/core.h>
#include <charconv>
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
options:
  --runs N          failover runs per case (default 20), cold-start runs per N (default 10)
  --profile P       fast, default or both (failover and cold-start; default both)
  --backoff B       uniform or ranked (failover and cold-start; default: the profile's)
  --duration S      jitter: seconds per case (default 60)
  --window S        cost: measuring window in seconds (default 20)
  --poll-ms MS      failover: polling period of the survivors' /status (default 1)
  --no-etcd         failover, cold-start: skip the etcd comparison
  --no-zookeeper    failover, cold-start: skip the ZooKeeper comparison
  --seed K          randomness of calm periods, proxy jitter and the floor model (default 1)
  --conclaved PATH  the daemon (default: ../tools/conclaved next to this program)
  --keep            keep the conclaved clusters' temporary directories (configs, logs) and print
                    their paths (failover, cold-start, jitter, cost)
)";

double number(const std::string& flag, const std::string& text, double low, double high) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high) {
        throw std::invalid_argument(
            fmt::format("{}: expected a number in {}..{}, got \"{}\"", flag, low, high, text));
    }
    return value;
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures appear as they are measured
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        fmt::print("{}", kUsage);
        return args.empty() ? 2 : 0;
    }
    const std::map<std::string, std::function<int(const BenchOptions&)>> figures = {
        {"failover", run_failover},
        {"cold-start", run_cold_start},
        {"jitter", run_jitter},
        {"cost", run_cost}};
    const auto figure = figures.find(args[0]);
    BenchOptions options;
    std::optional<int> runs;
    std::string profile = "both";
    std::optional<fs::path> conclaved;
    try {
        if (figure == figures.end()) {
            throw std::invalid_argument("unknown figure \"" + args[0] + "\"");
        }
        for (std::size_t i = 1; i < args.size(); ++i) {
            const std::string& flag = args[i];
            if (flag == "--no-etcd") {
                options.etcd = false;
                continue;
            }
            if (flag == "--no-zookeeper") {
                options.zookeeper = false;
                continue;
            }
            if (flag == "--keep") {
                options.keep = true;
                continue;
            }
            if (i + 1 >= args.size()) {
                throw std::invalid_argument(flag + ": missing value (or unknown option)");
            }
            const std::string& value = args[++i];
            if (flag == "--runs") {
                runs = static_cast<int>(number(flag, value, 1, 10000));
            } else if (flag == "--profile") {
                if (value != "fast" && value != "default" && value != "both") {
                    throw std::invalid_argument(
                        "--profile: expected fast, default or both, got \"" + value + "\"");
                }
                profile = value;
            } else if (flag == "--backoff") {
                if (value != "uniform" && value != "ranked") {
                    throw std::invalid_argument("--backoff: expected uniform or ranked, got \"" +
                                                value + "\"");
                }
                options.backoff = value;
            } else if (flag == "--duration") {
                options.duration_s = number(flag, value, 1, 86400);
            } else if (flag == "--window") {
                options.window_s = number(flag, value, 1, 86400);
            } else if (flag == "--poll-ms") {
                options.poll_ms = number(flag, value, 0, 1000);
            } else if (flag == "--seed") {
                options.seed = static_cast<std::uint64_t>(number(flag, value, 0, 1e15));
            } else if (flag == "--conclaved") {
                conclaved = fs::absolute(value);
            } else {
                throw std::invalid_argument("unknown option " + flag);
            }
        }
    } catch (const std::invalid_argument& e) {
        fmt::print(stderr, "conclave-bench: {}\n(conclave-bench --help for usage)\n", e.what());
        return 2;
    }
    options.runs = runs.value_or(args[0] == "cold-start" ? 10 : 20);
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
        fmt::print(stderr, "conclave-bench {}: {}\n", args[0], e.what());
        return 1;
    }
}
