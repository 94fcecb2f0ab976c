// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/options.hpp"
#include "conclave/core/command_line.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>
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
    {Scenario::CrashChaos, "crash-chaos"},
    {Scenario::Preferred, "preferred"},
};

/// Text given for options whose value is checked or mapped after parsing.
struct Texts {
    std::string scenario, scouting = "on", metadata, html, svg, json, conclaved, backend, trace_dir;
    double duration_s = 0;
    std::int64_t preferred_stability_ms = 0;
};

/// The CLI11 description: choices and ranges are checked by CLI11, which names the option.
void describe(CLI::App& app, Options& o, Texts& t, bool& help) {
    std::vector<std::string> names;
    for (const auto& [value, name] : kScenarios) {
        names.emplace_back(name);
    }
    app.set_help_flag();  // --help prints usage(), not CLI11's own
    app.add_flag("-h,--help", help);
    app.add_option("SCENARIO", t.scenario)->check(CLI::IsMember(names));
    app.add_flag("--compare", o.compare);
    app.add_flag("--keep", o.keep_dir);
    app.add_flag("--quiet", o.quiet);
    app.add_option("--scouting", t.scouting)->check(CLI::IsMember({"on", "off"}));
    app.add_option("--metadata", t.metadata)->check(CLI::IsMember({"on", "off"}));
    app.add_option("--rate", o.rate_per_s)->check(CLI::Range(1, 5000));
    app.add_option("--nodes", o.node_count)->check(CLI::Range(1, 9));
    app.add_option("--profile", o.profile)->check(CLI::IsMember({"fast", "default"}));
    app.add_option("--duration", t.duration_s)
        ->check(CLI::Range(0.0, 3600.0))
        ->check(CLI::Validator(
            [](const std::string& v) {
                return v.find_first_not_of("0.") == std::string::npos ? "must be more than 0" : "";
            },
            "SECONDS"));
    app.add_option("--seed", o.seed);
    app.add_option("--rounds", o.rounds)->check(CLI::Range(1, 1000));
    app.add_option("--backend", t.backend)
        ->check(CLI::Validator(
            [](const std::string& v) {
                const auto j = nlohmann::json::parse(v, nullptr, false);
                const bool store = j.is_object() && j.contains("kind") &&
                                   (j["kind"] == "etcd" || j["kind"] == "zookeeper");
                return store ? "" : R"(expects {"kind": "etcd"|"zookeeper", ...})";
            },
            "JSON"));
    app.add_option("--preferred-stability", t.preferred_stability_ms)
        ->check(CLI::Range(0, 3600000));
    for (auto [flag, text] :
         {std::pair{"--html", &t.html}, std::pair{"--svg", &t.svg}, std::pair{"--json", &t.json},
          std::pair{"--conclaved", &t.conclaved}, std::pair{"--trace-elector", &t.trace_dir}}) {
        app.add_option(flag, *text)
            ->check(CLI::Validator(
                [](const std::string& v) { return v.empty() ? "expects a path" : ""; }, "PATH"));
    }
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

std::int64_t Options::preferred_stability() const {
    if (preferred_stability_ms) {
        return *preferred_stability_ms;
    }
    return profile == "fast" ? 2000 : 10000;
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
  crash-chaos      for --duration seconds (default 90): SIGKILL a random node (leader or not),
                   restart it after 100-1500 ms, let all run 100-1500 ms, again; one node down
                   at a time; reports the SIGKILLs and the leaderless time while a quorum runs
  preferred        n1 has priority 2, the others 1: wait until n1 leads, SIGKILL it, restart it
                   after --duration (default 1 s), watch 3 x the stability period for leadership
                   to come back to n1 exactly once; --rounds times; reports the failover after
                   each kill and the hand-back time after each restart

Options:
  --scouting on|off   ElectionScouting (PreVote) in the config (default on)
  --compare           run with scouting on and off, print both summaries side by side
  --nodes N           cluster size (default 4 for non-sticky and ping-pong, 3 otherwise;
                      rolling-replace starts N more nodes, so at most 4 there)
  --profile P         fast|default timing profile (default fast)
  --duration S        how long the fault lasts, in seconds (chaos, crash-chaos: total time;
                      default per scenario)
  --seed K            seed for chaos, crash-chaos and the proxy's jitter (default 1)
  --html FILE         write a self-contained HTML report with the timeline picture
  --svg FILE          write the timeline picture as SVG
  --json FILE         write the summary as JSON (for scripts and tests)
  --conclaved PATH    the daemon binary (default: next to leader-bounce, ../tools/conclaved, or
                      build/release/tools/conclaved)
  --keep              keep the temporary directory (configs, logs) and print its path
  --trace-elector DIR every daemon records its elector's steps in DIR/<node>.ndjson (conclaved
                      --trace-elector; tla/merge_daemon_traces.py merges them for
                      tla/validate-trace.sh)
  --backend JSON      the daemons take leadership from a store the user runs, the config's
                      "backend" object (node/README.md), e.g.
                      '{"kind": "etcd", "endpoints": ["127.0.0.1:2379"], "ttl_ms": 2000}';
                      leader-crash, leader-pause and crash-chaos only
  --quiet             no live timeline, summary only
  --metadata on|off   propose entries to the metadata log during the run and check afterwards
                      that no acknowledged entry was lost (default: on when the daemon serves
                      GET /metadata)
  --rate N            metadata proposals per second (default 100, at most 4 outstanding)
  --rounds N          preferred: kill-and-restart rounds (default 3)
  --preferred-stability MS
                      preferred: timing.preferred_stability_ms in the configs (default: the
                      profile's, 2000 fast, 10000 default; 0 switches the hand-back off)
  --help              this text

Exit status: 0 fine, 1 runtime failure (rolling-replace: a replacement did not finish), 2 bad command line, 3 a safety check failed,
130 interrupted.
)";
}

std::variant<Options, HelpRequested, std::string> parse_options(int argc, const char* const* argv) {
    Options o;
    Texts t;
    bool help = false;
    CLI::App app("leader-bounce", "leader-bounce");
    describe(app, o, t, help);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (asks_for_help(argc, argv)) {
            return HelpRequested{};
        }
        return std::string(e.what());
    }
    if (help) {
        return HelpRequested{};
    }
    if (t.scenario.empty()) {
        return std::string("no scenario given");
    }
    for (const auto& [value, name] : kScenarios) {
        if (name == t.scenario) {
            o.scenario = value;
        }
    }
    o.scouting = t.scouting == "on";
    if (!t.metadata.empty()) {
        o.metadata = t.metadata == "on" ? MetadataMode::On : MetadataMode::Off;
    }
    if (app.count("--duration") > 0) {
        o.duration_s = t.duration_s;
    }
    if (app.count("--preferred-stability") > 0) {
        o.preferred_stability_ms = t.preferred_stability_ms;
    }
    for (auto [text, target] :
         {std::pair{&t.html, &o.html_path}, std::pair{&t.svg, &o.svg_path},
          std::pair{&t.json, &o.json_path}, std::pair{&t.conclaved, &o.conclaved}}) {
        if (!text->empty()) {
            *target = std::filesystem::path(*text);
        }
    }
    o.backend = t.backend;
    o.trace_dir = t.trace_dir;
    const bool process_faults_only = o.scenario == Scenario::LeaderCrash ||
                                     o.scenario == Scenario::LeaderPause ||
                                     o.scenario == Scenario::CrashChaos;
    if (!o.backend.empty() && !process_faults_only) {
        return std::string(
            "--backend: with a store backend only leader-crash, leader-pause and crash-chaos "
            "apply (the peer links carry nothing; membership and the metadata log are the "
            "built-in elector's)");
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
