// SPDX-License-Identifier: Apache-2.0
// conclave-sim: runs seeded random schedules (or the exhaustive explorer) against the real elector
// core and reports speed and any invariant violation. Exit status: 0 no violation, 1 a violation
// (or, with --expect-violation, none), 2 bad command line.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "conclave/core/command_line.hpp"
#include "conclave/core/enum_names.hpp"
#include "conclave/sim/explorer.hpp"
#include "conclave/sim/membership.hpp"
#include "conclave/sim/run.hpp"

namespace {

using namespace conclave;
using namespace conclave::sim;

constexpr const char* kUsage = R"(usage: conclave-sim [options]

Runs seeded random fault schedules against N real elector cores (and, with --log, the replicated
log beside them) on a simulated network and checks the safety invariants after every step (one
leader per term, terms never decrease, one vote per node per term, leaders elected by a majority,
strictly increasing LSNs) and liveness after the faults stop (every node agrees on one leader
within a bound derived from the config).

Random schedules:
  --seeds K            number of seeds to run (default 100; 1 when --seed is given alone)
  --seed S             first seed (default 1); seeds S, S+1, ..., S+K-1 are run
  --nodes N            cluster size, 1..32 (default 3)
  --faults LIST        all | none | comma list of loss,dup,reorder,latency,cut,partition,asym,
                       crash,pause,blackhole,transfer,repair,wipe,isolate (default all);
                       blackhole: a link drops both ways with the connection still up;
                       transfer: the operator's transfer_leadership to a random node, 1-3
                       times in an episode; repair
                       (with --log; not in all: "all,repair"): a crash whose log loses 1-12
                       stored tail entries and is marked repaired, as conclaved --repair does;
                       wipe (not in all: "all,wipe"): a crash whose node loses its vote record
                       (its restarts are refused, as conclaved exits 3), its log (it starts as
                       itself on an empty log, as conclaved does; with --log reported as
                       log-truncated) or its whole data directory (a new incarnation:
                       quarantined, refused by peers that know an earlier one); the operator
                       repairs it (--repair --min-term T) at the end of the episode in one case
                       of two, else at the end of the fault window; isolate (not in all:
                       "all,isolate"): a node silently cut off, every link of it dropping both
                       ways with its connections up (no peer_down: a leader keeps its lease
                       until it ends on its own clock)
  --episodes E         fault episodes per seed (default 4)
  --duration MS        fault window in simulated ms (default 6000); a fault-free tail follows
  --tail MS            length of the fault-free tail (default: liveness bound + 1000)
  --steps K            stop each seed after K core steps (skips the liveness check)
  --trace FILE         write the run as NDJSON (trace format v1); needs a single seed
  --membership         run membership seeds instead (sim_membership's runs: 4 nodes whose voter
                       set changes, under their own fault schedule); --seed(s), --duration,
                       --episodes, --tail (default 2000 here), --trace, --quiet and
                       --expect-violation apply, the other options are ignored
                       With --log (or --log-bug): membership through the real log core
                       (4 nodes, --nodes 3..8): the first ACTIVE leader writes C0, then an
                       operator proposes single changes (remove a voter, add it back as a
                       learner, promote it) with propose_config on the ACTIVE leader; the
                       log's NotifyMembership drives each elector's set_voters; the client
                       workload runs; log invariants checked too; at the end a leader
                       followed by a majority of its voters must exist and a fresh entry
                       must commit (3 s). --planted-bug, --log-bug and --no-defer-meta
                       apply. The last node joins (node-table growth): it is in nobody's
                       table at the start, the first change after C0 adds it as a learner
                       with the whole table, and it is started (as conclaved --join) once
                       that committed; --no-joiner: every node in every table from the start
  --priorities P,P,... node priorities by index (default 1 each; 0 never stands for leader)
  --preferred-stability MS
                       the preferred leader's stability period (0: no hand-back; default:
                       the fast profile's 2000)
  --no-scouting        switch ElectionScouting (PreVote) off
  --drift MODE         none (default) | within | beyond: each node's monotonic clock runs at its
                       own rate, drawn per node per seed (the fault schedule unchanged): within
                       [1 - rho, 1 + rho] of real time (rho: lease_drift_permille, 5 %), or
                       beyond it (as within, then one node at 1 - 3 rho and another at
                       1 + 3 rho). The cores get their node's time; the leader lease is checked
                       on real time, each lease on its own node's clock (random runs only)
  --backoff NAME       uniform (default) | ranked: the elector's wait after losing a leader and
                       at start (random runs only)
  --planted-bug NAME   double-vote | minority-quorum | count-stale-scouting-replies |
                       skip-sticky-leader | ignore-config-version | lease-ignores-drift |
                       lease-kept-on-peer-down | promise-ends-on-local-close | ignore-priority
                       (a deliberately broken core; ignore-config-version matters only with
                       --membership, the lease ones break the leader lease; the simulator closes
                       no link on one side only, so promise-ends-on-local-close changes nothing
                       there; ignore-priority needs a priority 0 in --priorities)
  --lose-durable-state restart crashed nodes with empty durable state (a broken driver)
  --runtime-bug NAME   send-before-persist (a deliberately broken runtime/: a batch's state
                       write happens after its sends; caught as not-durable) | ack-before-fsync
                       (the log runtime tells the log core entries are durable before the
                       storage flush; caught as log-not-durable or ack-lost; implies --log) |
                       answer-before-meta (the log runtime answers a writer before the deferred
                       commit point covering its entry is written; caught as
                       log-answer-not-durable; implies --log)
  --no-term-check      do not check that terms never decrease (to see what lost state leads to)
  --identity-bug NAME  admit-any-incarnation: the canary of the wipe fault, peers that admit any
                       incarnation of a node (no state_lost refusal, so no quarantine holds a
                       wiped node back); caught as double-vote or two leaders in a term
  --log                run the replicated log beside every elector: a client workload proposes
                       entries (to leaders, deposed leaders and followers); checked after every
                       step: acknowledged entries never lost, committed prefixes one history,
                       ACTIVE leaders complete, the core's own invariants; at the end a fresh
                       proposal must commit and every log converge (within a bound)
  --log-bug NAME       skip-sync | commit-without-quorum | compact-uncommitted | count-repaired |
                       skip-own-term-commit (a deliberately broken log; implies --log; the
                       last one matters only with --membership)
  --log-compact N      compact each log once N committed entries follow its snapshot (keeping
                       N/4; keys repeat so snapshots replace values); checked: every snapshot is
                       the committed state up to it; implies --log
  --storage-faults     inject storage faults in the fault window: each log append fails with
                       ENOSPC and each fsync with EIO with probability 0.5 %, the node leaves
                       service (its process exits; restarted at the end of the window), and a
                       crash keeps a random prefix of the unsynced tail; slow storage: the group
                       commit is asynchronous (as in conclaved) and one fsync in 8 takes up to
                       500 ms; in one seed of two, a bit flip in a stopped node's durable log (a
                       record before the last, or the meta): its restarts are refused until the
                       operator repairs it (conclaved --repair semantics, at the latest at the
                       end of the window); checked: a node never restarts on less than it held
                       durably without the repaired marker (log-truncated); implies --log
  --storage-bug NAME   silent-repair: the canary of the bit-flip checks, a recovery that truncates
                       at the flip and starts the node as a voter, without the marker (caught as
                       log-truncated); implies --storage-faults
  --no-floor-check     do not run the log-truncated check (to see what the other log checks
                       catch of a silent repair)
  --no-durable-check   do not check that committed entries are durable on a majority (to see
                       what the other log checks catch through the consequences)
  --no-defer-meta      write a leader's commit point at once (by default it is deferred as in
                       conclaved: written after a storage delay, writers answered only then)
  --expect-violation   exit 0 if a violation is found, 1 if none (for planted-bug tests)
  --quiet              print only violations and the summary

Exhaustive exploration (3 nodes by default):
  --explore            explore every interleaving within the bounds below instead
  --max-term T         (default 1)
  --max-in-flight M    messages in flight (default 2)
  --max-crashes C      (default 1)
  --max-rounds R       scouting rounds per node incarnation (default 1)
  --max-dups D         duplications (default 0)
  --max-states S       stop after S distinct states (default 0 = no limit)
  (--nodes, --no-scouting, --planted-bug, --lose-durable-state, --no-term-check apply too)

  --help               this text
)";

int usage_error(const std::string& message) {
    std::cerr << "conclave-sim: " << message << "\n(see conclave-sim --help)\n";
    return 2;
}

/// The command line, parsed (CLI11): the run's and the explorer's options and the runner's flags.
struct SimArgs {
    RunOptions run;
    ExploreOptions ex;
    std::uint64_t seeds = 100;
    bool explore_mode = false;
    bool membership_mode = false;
    bool expect_violation = false;
    bool quiet = false;
    bool no_joiner = false;
    bool help = false;
    bool nodes_given = false;
    bool episodes_given = false;
    std::string trace_path;
    // Given as text, checked and applied by apply_named_options().
    std::string faults, backoff, planted_bug, runtime_bug, storage_bug, log_bug, identity_bug,
        drift;
    std::int64_t duration_ms = -1;
    std::int64_t tail_ms = -1;
    std::int64_t preferred_stability_ms = -1;
    std::size_t log_compact = 0;
};

/// A number option: CLI11 converts and range-checks it (the message names the option).
template <typename T>
CLI::Option* number(CLI::App& app, const char* name, T& target, T low, T high) {
    return app.add_option(name, target)->check(CLI::Range(low, high));
}

void describe(CLI::App& app, SimArgs& a) {
    constexpr std::uint64_t kMax64 = ~std::uint64_t{0};
    app.set_help_flag();  // --help prints kUsage, not CLI11's own
    app.add_flag("-h,--help", a.help);
    number<std::uint64_t>(app, "--seeds", a.seeds, 1, kMax64);
    number<std::uint64_t>(app, "--seed", a.run.seed, 0, kMax64);
    number<std::size_t>(app, "--nodes", a.run.nodes, 1, 32);
    app.add_option("--faults", a.faults);
    number<std::size_t>(app, "--episodes", a.run.episodes, 0, 1000);
    number<std::int64_t>(app, "--duration", a.duration_ms, 0, 86'400'000);
    number<std::int64_t>(app, "--tail", a.tail_ms, 1, 86'400'000);
    number<std::uint64_t>(app, "--steps", a.run.max_steps, 1, kMax64);
    app.add_option("--trace", a.trace_path);
    app.add_option("--backoff", a.backoff);
    app.add_option("--drift", a.drift);
    app.add_option("--planted-bug", a.planted_bug);
    app.add_option("--runtime-bug", a.runtime_bug);
    app.add_option("--storage-bug", a.storage_bug);
    app.add_option("--identity-bug", a.identity_bug);
    app.add_option("--log-bug", a.log_bug);
    app.add_option("--priorities", a.run.priorities)->delimiter(',')->check(CLI::Range(0, 1000000));
    app.add_option("--preferred-stability", a.preferred_stability_ms)
        ->check(CLI::Range(0, 3'600'000));
    number<std::size_t>(app, "--log-compact", a.log_compact, 2, 1'000'000);
    for (const char* flag :
         {"--no-scouting", "--lose-durable-state", "--no-term-check", "--storage-faults",
          "--no-floor-check", "--log", "--no-durable-check", "--no-defer-meta"}) {
        app.add_flag(flag);  // applied by apply_flags()
    }
    app.add_flag("--expect-violation", a.expect_violation);
    app.add_flag("--quiet", a.quiet);
    app.add_flag("--membership", a.membership_mode);
    app.add_flag("--no-joiner", a.no_joiner);
    app.add_flag("--explore", a.explore_mode);
    number<std::uint64_t>(app, "--max-term", a.ex.max_term, 0, 200);
    number<std::size_t>(app, "--max-in-flight", a.ex.max_in_flight, 0, 64);
    number<std::size_t>(app, "--max-crashes", a.ex.max_crashes, 0, 200);
    number<std::uint64_t>(app, "--max-rounds", a.ex.max_rounds, 0, kMax64);
    number<std::size_t>(app, "--max-dups", a.ex.max_duplications, 0, 200);
    number<std::uint64_t>(app, "--max-states", a.ex.max_states, 0, kMax64);
}

/// The flags, and what options imply (--storage-faults, --log-compact: --log, ...).
void apply_flags(const CLI::App& app, SimArgs& a) {
    const auto given = [&](const char* name) { return app.count(name) > 0; };
    if (given("--no-scouting")) {
        a.run.scouting = a.ex.scouting = false;
    }
    if (given("--lose-durable-state")) {
        a.run.lose_durable_state = a.ex.lose_durable_state = true;
    }
    if (given("--no-term-check")) {
        a.run.history.check_term_monotonic = a.ex.history.check_term_monotonic = false;
    }
    if (given("--no-floor-check")) {
        a.run.log_history.check_recovered_floor = false;
    }
    if (given("--no-durable-check")) {
        a.run.log_history.check_durable_quorum = false;
    }
    if (given("--no-defer-meta")) {
        a.run.defer_meta = false;
    }
    if (given("--storage-faults") || given("--storage-bug")) {
        a.run.storage_faults = true;
    }
    if (given("--log") || a.run.storage_faults || given("--log-bug") || given("--log-compact") ||
        a.runtime_bug == "ack-before-fsync" || a.runtime_bug == "answer-before-meta") {
        a.run.log = true;
    }
    a.ex.nodes = a.run.nodes;
    if (given("--duration")) {
        a.run.fault_window = Millis{a.duration_ms};
    }
    if (given("--tail")) {
        a.run.tail = Millis{a.tail_ms};
    }
    if (given("--log-compact")) {
        a.run.log_compact = a.log_compact;
    }
    if (given("--preferred-stability")) {
        a.run.preferred_stability = Millis{a.preferred_stability_ms};
    }
    a.nodes_given = given("--nodes");
    a.episodes_given = given("--episodes");
    if (given("--seed") && !given("--seeds")) {
        a.seeds = 1;
    }
}

/// Sets `out` from the option `flag`, when given, by its enumerator's name (core/enum_names.hpp).
/// Empty, or what is wrong.
template <class E>
std::string apply_enum_option(const CLI::App& app, const char* flag, const std::string& text,
                              E& out) {
    if (app.count(flag) == 0) {
        return "";
    }
    const auto value = parse_enum<E>(text);
    if (!value) {
        return std::string(flag) + ": unknown value '" + text + "' (expected " + enum_choices<E>() +
               ")";
    }
    out = *value;
    return "";
}

/// The named values (--faults, --backoff, --drift and the planted bugs). Empty, or what is wrong.
std::string apply_named_options(const CLI::App& app, SimArgs& a) {
    std::string error;
    if (app.count("--faults") > 0) {
        auto mix = FaultMix::parse(a.faults, &error);
        if (!mix) {
            return error;
        }
        a.run.faults = *mix;
    }
    for (const std::string& e :
         {apply_enum_option(app, "--backoff", a.backoff, a.run.backoff),
          apply_enum_option(app, "--drift", a.drift, a.run.drift),
          apply_enum_option(app, "--planted-bug", a.planted_bug, a.run.planted_bug),
          apply_enum_option(app, "--runtime-bug", a.runtime_bug, a.run.runtime_bug),
          apply_enum_option(app, "--storage-bug", a.storage_bug, a.run.storage_bug),
          apply_enum_option(app, "--identity-bug", a.identity_bug, a.run.identity_bug),
          apply_enum_option(app, "--log-bug", a.log_bug, a.run.log_bug)}) {
        if (!e.empty()) {
            return e;
        }
    }
    a.ex.planted_bug = a.run.planted_bug;
    return "";
}

/// Parses argv into `a`. Returns an exit status when the program should stop (help: 0, a bad
/// command line: 2 with the reason on stderr).
std::optional<int> parse_args(int argc, char** argv, SimArgs& a) {
    CLI::App app("conclave-sim", "conclave-sim");
    describe(app, a);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (asks_for_help(argc, argv)) {
            a.help = true;
        } else {
            return usage_error(e.what());
        }
    }
    if (a.help) {
        std::cout << kUsage;
        return 0;
    }
    apply_flags(app, a);
    if (std::string error = apply_named_options(app, a); !error.empty()) {
        return usage_error(error);
    }
    return std::nullopt;
}

/// The identity counters of a batch (FaultKind::Wipe).
void add_identity(SimStats& total, const SimStats& s) {
    total.wipes += s.wipes;
    total.wipes_skipped += s.wipes_skipped;
    total.identity_refused += s.identity_refused;
    total.state_lost_refusals += s.state_lost_refusals;
    total.quarantines_ended += s.quarantines_ended;
    total.quarantine_drops += s.quarantine_drops;
    total.identity_repairs += s.identity_repairs;
}

void print_identity(const SimStats& t) {
    std::printf(
        "wipes: %llu (%llu skipped: a minority wiped already), restarts refused (vote record "
        "lost) %llu, refused by a peer (state_lost) %llu, quarantines ended %llu, messages "
        "dropped by quarantine %llu, repaired by the operator %llu\n",
        static_cast<unsigned long long>(t.wipes), static_cast<unsigned long long>(t.wipes_skipped),
        static_cast<unsigned long long>(t.identity_refused),
        static_cast<unsigned long long>(t.state_lost_refusals),
        static_cast<unsigned long long>(t.quarantines_ended),
        static_cast<unsigned long long>(t.quarantine_drops),
        static_cast<unsigned long long>(t.identity_repairs));
}

int run_explorer(const ExploreOptions& o, bool expect_violation) {
    std::cout << "exploring: nodes=" << o.nodes << " max-term=" << o.max_term
              << " max-in-flight=" << o.max_in_flight << " max-crashes=" << o.max_crashes
              << " max-rounds=" << o.max_rounds << " max-dups=" << o.max_duplications
              << " scouting=" << (o.scouting ? "on" : "off")
              << " planted-bug=" << to_string(o.planted_bug)
              << (o.lose_durable_state ? " lose-durable-state" : "") << "\n";
    const ExploreResult r = explore(o);
    std::printf("states %llu  transitions %llu  max depth %llu  time %.2f s  (%.0f states/s)%s\n",
                static_cast<unsigned long long>(r.states),
                static_cast<unsigned long long>(r.transitions),
                static_cast<unsigned long long>(r.max_depth), r.seconds,
                r.seconds > 0 ? static_cast<double>(r.states) / r.seconds : 0.0,
                r.complete ? "" : "  INCOMPLETE (--max-states reached)");
    if (r.violation) {
        std::cout << "VIOLATION " << to_string(r.violation->kind) << ": " << r.violation->detail
                  << "\ncounterexample (" << r.counterexample.size() << " steps):\n";
        for (const std::string& line : r.counterexample) {
            std::cout << "  " << line << "\n";
        }
    } else {
        std::cout << "violations: 0\n";
    }
    return (r.violation.has_value() == expect_violation) ? 0 : 1;
}

/// One membership seed's options from the command line.
MembershipRunOptions membership_options(const SimArgs& a, std::uint64_t seed) {
    const RunOptions& run = a.run;
    MembershipRunOptions mo = run.log ? log_membership_options(seed) : MembershipRunOptions{};
    mo.seed = seed;
    mo.fault_window = run.fault_window;
    mo.tail = run.tail.count() > 0 ? run.tail : mo.tail;
    // (The model runs have always taken --episodes' default, 4; through the log: 8.)
    mo.episodes = run.log && !a.episodes_given ? mo.episodes : run.episodes;
    mo.trace = run.trace;
    mo.planted_bug = run.planted_bug;
    mo.log_bug = run.log_bug;
    mo.defer_meta = run.defer_meta;
    mo.nodes = a.nodes_given ? run.nodes : mo.nodes;
    mo.joiner = mo.joiner && !a.no_joiner;
    return mo;
}

/// The line of a membership seed that passed.
void print_membership_ok(const MembershipRunResult& r, const MembershipRunOptions& mo, bool log) {
    std::cout << "seed " << r.seed << ": ok  steps " << r.stats.steps << "  committed version "
              << r.committed_version << "  stale-config " << r.stale_config_refusals
              << "  not-a-voter " << r.not_a_voter_refusals;
    if (log) {
        std::cout << "  config proposals " << r.config_proposals << " (passive "
                  << r.stats.config_proposals_passive << ")  notices " << r.stats.config_notices
                  << "  log steps " << r.stats.log_steps << "  acked " << r.stats.proposals_acked;
        if (mo.joiner) {
            std::cout << "  joined "
                      << (r.joined_at ? std::to_string(r.joined_at->count()) + " ms"
                                      : std::string("never"))
                      << "  table growths " << r.stats.table_growths << "  promotions "
                      << r.joiner_promotions << "  outside-table "
                      << r.stats.messages_outside_table;
        }
    }
    std::cout << "\n";
}

/// The command line that replays a failed membership seed.
void print_membership_replay(const std::string& program, const MembershipRunResult& r,
                             const MembershipRunOptions& mo, bool log) {
    std::cout << "  replay: " << program << " --membership" << (log ? " --log" : "") << " --seed "
              << r.seed << " --nodes " << mo.nodes << (log && !mo.joiner ? " --no-joiner" : "")
              << " --episodes " << mo.episodes << " --duration " << mo.fault_window.count()
              << " --tail " << mo.tail.count()
              << (mo.planted_bug != elector::PlantedBug::None
                      ? " --planted-bug " + std::string(to_string(mo.planted_bug))
                      : std::string())
              << (mo.log_bug != replication::PlantedLogBug::None
                      ? " --log-bug " + std::string(enum_name(mo.log_bug))
                      : std::string())
              << " --trace seed-" << r.seed << ".ndjson\n";
}

/// What a batch of membership seeds adds up to (node-table growth, through the log, with the
/// joiner: seeds where it joined, where it was promoted, tables grown, messages dropped between
/// nodes outside each other's tables, restarts of the new node).
struct MembershipTotals {
    std::uint64_t failures = 0;
    std::uint64_t joined = 0, promoted = 0, growths = 0, outside = 0, restarts = 0;
    bool joiner_runs = false;
};

/// Runs one membership seed, prints its line; true when it passed.
bool membership_seed(const SimArgs& a, const std::string& program, std::uint64_t seed,
                     MembershipTotals& t) {
    const bool log = a.run.log;
    const MembershipRunOptions mo = membership_options(a, seed);
    const MembershipRunResult r = log ? run_log_membership_seed(mo) : run_membership_seed(mo);
    // Through the log, liveness is checked here: a leader followed by a majority of its
    // voters, and a fresh entry committed (the model runs leave it to their test).
    const bool live = !log || (r.leader_at_end && r.fresh_committed);
    t.joiner_runs = t.joiner_runs || (log && mo.joiner);
    t.joined += r.joined_at ? 1U : 0U;
    t.promoted += r.joiner_promotions > 0 ? 1U : 0U;
    t.growths += r.stats.table_growths;
    t.outside += r.stats.messages_outside_table;
    t.restarts += r.stats.joiner_restarts;
    if (r.violation) {
        std::cout << "VIOLATION seed=" << r.seed << " at " << r.violation_at.count()
                  << " ms: " << to_string(r.violation->kind) << ": " << r.violation->detail << "\n";
    } else if (!live) {
        std::cout << "LIVENESS seed=" << r.seed << ": "
                  << (r.leader_at_end ? "no fresh entry committed within 3 s"
                                      : "no leader followed by a majority of its voters")
                  << " (committed version " << r.committed_version << "): " << r.end_state << "\n";
    } else if (!a.quiet) {
        print_membership_ok(r, mo, log);
    }
    if ((r.violation || !live) && mo.trace == nullptr) {
        print_membership_replay(program, r, mo, log);
    }
    return !r.violation && live;
}

/// --membership: the membership seeds (sim_membership's runs, or through the log).
int run_membership(const SimArgs& a, const std::string& program) {
    const RunOptions& run = a.run;
    if (run.log && a.nodes_given && (run.nodes < 3 || run.nodes > 8)) {
        return usage_error("--membership --log: --nodes must be 3..8");
    }
    MembershipTotals t;
    for (std::uint64_t k = 0; k < a.seeds; ++k) {
        t.failures += membership_seed(a, program, run.seed + k, t) ? 0U : 1U;
    }
    std::cout << a.seeds << " membership seed(s)" << (run.log ? " through the log" : "") << ", "
              << t.failures << " failure(s)\n";
    if (t.joiner_runs) {
        std::cout << "node-table growth: the new node joined in " << t.joined
                  << ", was promoted in " << t.promoted << " seed(s); " << t.growths
                  << " table growth(s), " << t.outside
                  << " message(s) dropped between nodes outside each other's tables; the "
                  << "new node restarted " << t.restarts << " time(s)\n";
    }
    const bool failed = t.failures != 0;
    return failed == a.expect_violation ? 0 : 1;
}

/// What a batch of random seeds adds up to.
struct Totals {
    std::uint64_t events = 0, steps = 0, violations = 0, sim_ms = 0;
    std::int64_t slowest_convergence_ms = 0, bound_ms = 0;
    std::uint64_t contested = 0, split_votes = 0, seeds_with_split_votes = 0, elections = 0;
    std::uint64_t log_steps = 0, committed = 0, acked = 0, refused = 0, unknown = 0;
    std::uint64_t compactions = 0, installed = 0;
    std::int64_t slowest_log_ms = 0, log_bound_ms = 0;
    SimStats stats;  // storage and identity counters, crashes

    void add(const RunResult& r) {
        events += r.stats.events;
        steps += r.stats.steps;
        sim_ms += static_cast<std::uint64_t>(r.end.count());
        bound_ms = r.liveness_bound.count();
        contested += r.leadership.contested_terms;
        split_votes += r.leadership.split_votes;
        seeds_with_split_votes += r.leadership.split_votes > 0 ? 1 : 0;
        elections += r.leadership.elections_won;
        log_steps += r.stats.log_steps;
        committed += r.log_committed;
        acked += r.log_acked;
        refused += r.stats.proposals_refused;
        unknown += r.stats.proposals_unknown;
        compactions += r.log_compactions;
        installed += r.log_snapshots_installed;
        add_storage(r.stats);
        add_identity(stats, r.stats);
        if (r.log_converged_after) {
            slowest_log_ms = std::max(slowest_log_ms, r.log_converged_after->count());
            log_bound_ms = std::max(log_bound_ms, r.log_bound.count());
        }
        if (r.converged_after) {
            slowest_convergence_ms = std::max(slowest_convergence_ms, r.converged_after->count());
        }
        violations += r.violation ? 1U : 0U;
    }
    void add_storage(const SimStats& s) {
        stats.storage_faults += s.storage_faults;
        stats.torn_tails += s.torn_tails;
        stats.bit_flips += s.bit_flips;
        stats.starts_refused += s.starts_refused;
        stats.flip_repairs += s.flip_repairs;
        stats.silent_repairs += s.silent_repairs;
        stats.slow_syncs += s.slow_syncs;
        stats.crashes += s.crashes;
        stats.meta_writes_deferred += s.meta_writes_deferred;
        stats.meta_writes_lost += s.meta_writes_lost;
        stats.results_held += s.results_held;
    }
};

/// The line of a random seed that passed (small batches only).
void print_seed(const RunResult& r, bool log) {
    std::cout << "seed " << r.seed << ": ok  events " << r.stats.events << "  steps "
              << r.stats.steps << "  sim " << r.end.count() << " ms  converged after "
              << (r.converged_after ? std::to_string(r.converged_after->count()) + " ms"
                                    : std::string("-"))
              << " (bound " << r.liveness_bound.count() << " ms)  leader changes "
              << r.leadership.leader_changes << "  split votes " << r.leadership.split_votes
              << "  highest term " << r.leadership.highest_term.value << "  crashes "
              << r.stats.crashes << "  transfers " << r.stats.transfers << "  dropped "
              << r.stats.messages_dropped;
    if (log) {
        std::cout << "  log: committed " << r.log_committed << " acked " << r.log_acked
                  << " refused " << r.stats.proposals_refused << " unknown "
                  << r.stats.proposals_unknown << " fresh commit + convergence "
                  << (r.log_converged_after ? std::to_string(r.log_converged_after->count()) + " ms"
                                            : std::string("-"))
                  << " (bound " << r.log_bound.count() << " ms)";
    }
    std::cout << "  fingerprint " << std::hex << r.fingerprint << std::dec << "\n";
}

/// The log's part of the summary (--log).
void print_log_summary(const Totals& t, const RunOptions& run) {
    std::printf(
        "log%s: %llu log core steps, %llu entries committed, %llu proposals acknowledged, "
        "%llu refused, %llu outcome unknown; slowest fresh commit + convergence after the "
        "tail: %lld ms (bound up to %lld ms)\n",
        run.log_bug == replication::PlantedLogBug::None
            ? ""
            : (" (planted bug " + std::string(enum_name(run.log_bug)) + ")").c_str(),
        static_cast<unsigned long long>(t.log_steps), static_cast<unsigned long long>(t.committed),
        static_cast<unsigned long long>(t.acked), static_cast<unsigned long long>(t.refused),
        static_cast<unsigned long long>(t.unknown), static_cast<long long>(t.slowest_log_ms),
        static_cast<long long>(t.log_bound_ms));
    if (run.defer_meta) {
        std::printf(
            "deferred commit point: %llu written later, %llu answers held until then, %llu "
            "interrupted by a crash\n",
            static_cast<unsigned long long>(t.stats.meta_writes_deferred),
            static_cast<unsigned long long>(t.stats.results_held),
            static_cast<unsigned long long>(t.stats.meta_writes_lost));
    }
    if (run.log_compact != 0) {
        std::printf(
            "compaction: %llu snapshots taken, %llu installed from a leader or source "
            "(nodes alive at the end)\n",
            static_cast<unsigned long long>(t.compactions),
            static_cast<unsigned long long>(t.installed));
    }
    if (run.storage_faults) {
        const SimStats& s = t.stats;
        std::printf(
            "storage faults: %llu injected (ENOSPC on append, EIO on fsync), %llu crashes in "
            "all, %llu kept part of an unsynced tail\n",
            static_cast<unsigned long long>(s.storage_faults),
            static_cast<unsigned long long>(s.crashes),
            static_cast<unsigned long long>(s.torn_tails));
        std::printf(
            "bit flips: %llu, restarts refused by recovery %llu, repaired by the operator "
            "%llu, repaired silently (planted) %llu; slow fsyncs (up to %lld ms): %llu\n",
            static_cast<unsigned long long>(s.bit_flips),
            static_cast<unsigned long long>(s.starts_refused),
            static_cast<unsigned long long>(s.flip_repairs),
            static_cast<unsigned long long>(s.silent_repairs),
            static_cast<long long>(RunOptions::kStorageLatencyMaxMs),
            static_cast<unsigned long long>(s.slow_syncs));
    }
}

/// The summary of a batch of random seeds.
void print_summary(const Totals& t, const RunOptions& run, std::uint64_t seeds, double seconds) {
    std::printf(
        "%llu seeds (faults %s, %zu nodes), %llu events (%llu core steps), %.1f s simulated, "
        "%.2f s wall: %.0f seeds/s, %.0f events/s; violations: %llu\n",
        static_cast<unsigned long long>(seeds), run.faults.to_string().c_str(), run.nodes,
        static_cast<unsigned long long>(t.events), static_cast<unsigned long long>(t.steps),
        static_cast<double>(t.sim_ms) / 1000.0, seconds,
        seconds > 0 ? static_cast<double>(seeds) / seconds : 0.0,
        seconds > 0 ? static_cast<double>(t.events) / seconds : 0.0,
        static_cast<unsigned long long>(t.violations));
    std::printf(
        "slowest agreement on a leader after the faults ended: %lld ms (liveness bound %lld "
        "ms)\n",
        static_cast<long long>(t.slowest_convergence_ms), static_cast<long long>(t.bound_ms));
    std::printf(
        "backoff %s: %llu elections won, %llu contested terms (two or more candidates), %llu "
        "split votes (contested, nobody won) in %llu seeds\n",
        std::string(elector::to_string(run.backoff)).c_str(),
        static_cast<unsigned long long>(t.elections), static_cast<unsigned long long>(t.contested),
        static_cast<unsigned long long>(t.split_votes),
        static_cast<unsigned long long>(t.seeds_with_split_votes));
    if (run.drift != ClockDrift::None) {
        std::printf(
            "clock drift %s the lease's bound rho = %u permille (drawn per node per seed)\n",
            run.drift == ClockDrift::Within ? "within" : "BEYOND",
            run_config(run).lease_drift_permille);
    }
    if (run.faults.wipe) {
        print_identity(t.stats);
    }
    if (run.log) {
        print_log_summary(t, run);
    }
}

/// The random seeds (the default mode).
int run_seeds(SimArgs& a, const std::string& program) {
    RunOptions& run = a.run;
    const std::uint64_t first = run.seed;
    Totals totals;
    const auto started = std::chrono::steady_clock::now();
    for (std::uint64_t k = 0; k < a.seeds; ++k) {
        run.seed = first + k;
        const RunResult r = run_seed(run);
        totals.add(r);
        if (r.violation) {
            std::cout << "VIOLATION seed=" << r.seed << " at " << r.violation_at.count()
                      << " ms: " << to_string(r.violation->kind) << ": " << r.violation->detail
                      << "\n  replay: " << replay_command(program, run) << " --trace seed-"
                      << r.seed << ".ndjson\n";
        } else if (!a.quiet && a.seeds <= 20) {
            print_seed(r, run.log);
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    print_summary(totals, run, a.seeds, seconds);
    return (totals.violations > 0) == a.expect_violation ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    SimArgs args;
    if (const auto status = parse_args(argc, argv, args)) {
        return *status;
    }
    const std::string program = argc > 0 ? argv[0] : "conclave-sim";
    if (args.explore_mode) {
        if (args.run.log) {
            return usage_error("--log: not supported by the explorer (random schedules only)");
        }
        if (args.ex.nodes > 5) {
            return usage_error("--nodes: the explorer supports 1..5 nodes");
        }
        return run_explorer(args.ex, args.expect_violation);
    }
    std::ofstream trace_file;
    if (!args.trace_path.empty()) {
        if (args.seeds != 1) {
            return usage_error("--trace: needs a single seed (use --seed S without --seeds)");
        }
        trace_file.open(args.trace_path);
        if (!trace_file) {
            return usage_error("--trace: cannot open '" + args.trace_path + "' for writing");
        }
        args.run.trace = &trace_file;
    }
    if (args.membership_mode) {
        return run_membership(args, program);
    }
    return run_seeds(args, program);
}
