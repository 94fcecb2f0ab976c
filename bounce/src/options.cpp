#include "conclave/bounce/options.hpp"

#include <charconv>
#include <cmath>
#include <vector>

namespace conclave::bounce {

namespace {

constexpr std::pair<Scenario, std::string_view> kScenarios[] = {
    {Scenario::NonSticky, "non-sticky"},
    {Scenario::PingPong, "ping-pong"},
    {Scenario::LeaderCrash, "leader-crash"},
    {Scenario::LeaderPause, "leader-pause"},
    {Scenario::RollingRestart, "rolling-restart"},
    {Scenario::Chaos, "chaos"},
    {Scenario::DiskFull, "disk-full"},
    {Scenario::RollingReplace, "rolling-replace"},
};

template <typename T>
bool parse_number(std::string_view s, T& out) {
    const auto* end = s.data() + s.size();
    auto [ptr, ec] = std::from_chars(s.data(), end, out);
    return ec == std::errc() && ptr == end;
}

}  // namespace

std::string_view to_string(Scenario s) {
    for (const auto& [value, name] : kScenarios) {
        if (value == s) {
            return name;
        }
    }
    return "?";
}

std::size_t Options::nodes() const {
    if (node_count != 0) {
        return node_count;
    }
    return scenario == Scenario::NonSticky || scenario == Scenario::PingPong ? 4 : 3;
}

std::size_t Options::spares() const {
    return scenario == Scenario::RollingReplace ? nodes() : 0;
}

std::string usage() {
    return R"(usage: leader-bounce SCENARIO [options]

Starts a cluster of real conclaved processes on 127.0.0.1, routes every peer link through a fault
proxy, breaks things, prints a live timeline and a summary.

Scenarios:
  non-sticky       isolate a follower B, then heal (4 nodes)
  ping-pong        cut only the link between the leader A and a follower B (4 nodes)
  leader-crash     SIGKILL the leader, restart it later
  leader-pause     SIGSTOP the leader, then SIGCONT
  rolling-restart  restart every node in turn, the leader last
  chaos            random faults for --duration seconds, reproducible with --seed
  disk-full        the leader's disk fills during writes (unprivileged: RLIMIT_FSIZE); it
                   must step down and exit 1, losing no acknowledged entry; restarted later
  rolling-replace  replace every node, the leader last, by a new one (n4, n5, n6 for 3 nodes)
                   that joins through a seed (conclaved --join), is promoted once caught up
                   (POST /members), then the old node is removed and stopped; reports the time
                   of each replacement; --duration: pause between replacements

Options:
  --scouting on|off   ElectionScouting (PreVote) in the config (default on)
  --compare           run with scouting on and off, print both summaries side by side
  --nodes N           cluster size (default 4 for non-sticky and ping-pong, 3 otherwise;
                      rolling-replace starts N more nodes, so at most 4 there)
  --profile P         fast|default timing profile (default fast)
  --duration S        how long the fault lasts, in seconds (chaos: total time; default per scenario)
  --seed K            seed for chaos and the proxy's jitter (default 1)
  --html FILE         write a self-contained HTML report with the timeline picture
  --svg FILE          write the timeline picture as SVG
  --json FILE         write the summary as JSON (for scripts and tests)
  --conclaved PATH    the daemon binary (default: next to leader-bounce, ../tools/conclaved, or
                      build/release/tools/conclaved)
  --keep              keep the temporary directory (configs, logs) and print its path
  --quiet             no live timeline, summary only
  --metadata on|off   propose entries to the metadata log during the run and check afterwards
                      that no acknowledged entry was lost (default: on when the daemon serves
                      GET /metadata)
  --rate N            metadata proposals per second (default 100, at most 4 outstanding)
  --help              this text

Exit status: 0 fine, 1 runtime failure (rolling-replace: a replacement did not finish), 2 bad command line, 3 a safety check failed,
130 interrupted.
)";
}

std::variant<Options, HelpRequested, std::string> parse_options(int argc, const char* const* argv) {
    Options o;
    std::vector<std::string_view> args(argv + 1, argv + argc);
    bool have_scenario = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        auto value = [&](std::string_view& out) -> bool {
            if (i + 1 >= args.size()) {
                return false;
            }
            out = args[++i];
            return true;
        };
        std::string_view v;
        if (a == "--help" || a == "-h") {
            return HelpRequested{};
        }
        if (a == "--compare") {
            o.compare = true;
        } else if (a == "--keep") {
            o.keep_dir = true;
        } else if (a == "--quiet") {
            o.quiet = true;
        } else if (a == "--scouting") {
            if (!value(v) || (v != "on" && v != "off")) {
                return std::string("--scouting expects 'on' or 'off'");
            }
            o.scouting = v == "on";
        } else if (a == "--metadata") {
            if (!value(v) || (v != "on" && v != "off")) {
                return std::string("--metadata expects 'on' or 'off'");
            }
            o.metadata = v == "on" ? MetadataMode::On : MetadataMode::Off;
        } else if (a == "--rate") {
            if (!value(v) || !parse_number(v, o.rate_per_s) || o.rate_per_s < 1 ||
                o.rate_per_s > 5000) {
                return std::string("--rate expects proposals per second, from 1 to 5000");
            }
        } else if (a == "--nodes") {
            if (!value(v) || !parse_number(v, o.node_count) || o.node_count < 1 ||
                o.node_count > 9) {
                return std::string("--nodes expects a number from 1 to 9");
            }
        } else if (a == "--profile") {
            if (!value(v) || (v != "fast" && v != "default")) {
                return std::string("--profile expects 'fast' or 'default'");
            }
            o.profile = std::string(v);
        } else if (a == "--duration") {
            double d = 0;
            if (!value(v) || !parse_number(v, d) || !std::isfinite(d) || d <= 0 || d > 3600) {
                return std::string("--duration expects seconds, more than 0 and at most 3600");
            }
            o.duration_s = d;
        } else if (a == "--seed") {
            if (!value(v) || !parse_number(v, o.seed)) {
                return std::string("--seed expects a non-negative integer");
            }
        } else if (a == "--html" || a == "--svg" || a == "--json" || a == "--conclaved") {
            if (!value(v) || v.empty()) {
                return std::string(a) + " expects a path";
            }
            auto& target = a == "--html"   ? o.html_path
                           : a == "--svg"  ? o.svg_path
                           : a == "--json" ? o.json_path
                                           : o.conclaved;
            target = std::filesystem::path(v);
        } else if (!a.empty() && a[0] == '-') {
            return "unknown option " + std::string(a);
        } else if (have_scenario) {
            return "more than one scenario given: " + std::string(a);
        } else {
            bool found = false;
            for (const auto& [value_, name] : kScenarios) {
                if (name == a) {
                    o.scenario = value_;
                    found = true;
                }
            }
            if (!found) {
                return "unknown scenario '" + std::string(a) +
                       "' (expected non-sticky, ping-pong, leader-crash, leader-pause, "
                       "rolling-restart, chaos, disk-full or rolling-replace)";
            }
            have_scenario = true;
        }
    }
    if (!have_scenario) {
        return std::string("no scenario given");
    }
    if (o.scenario != Scenario::Chaos && o.nodes() < 3) {
        return std::string("--nodes: this scenario needs at least 3 nodes");
    }
    if (o.nodes() + o.spares() > 9) {
        return std::string("--nodes: rolling-replace starts as many new nodes, 9 in all at most");
    }
    return o;
}

}  // namespace conclave::bounce
