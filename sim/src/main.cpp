// conclave-sim: runs seeded random schedules (or the exhaustive explorer) against the real elector
// core and reports speed and any invariant violation. Exit status: 0 no violation, 1 a violation
// (or, with --expect-violation, none), 2 bad command line.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

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
                       crash,pause,blackhole,transfer,repair (default all); blackhole: a link
                       drops both ways with the connection still up; transfer: the operator's
                       transfer_leadership to a random node, 1-3 times in an episode; repair
                       (with --log; not in all: "all,repair"): a crash whose log loses 1-12
                       stored tail entries and is marked repaired, as conclaved --repair does
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
                       must commit (3 s). --planted-bug and --log-bug apply. The last node
                       joins (node-table growth): it is in nobody's table at the start, the
                       first change after C0 adds it as a learner with the whole table, and
                       it is started (as conclaved --join) once that committed; --no-joiner:
                       every node in every table from the start
  --no-scouting        switch ElectionScouting (PreVote) off
  --backoff NAME       uniform (default) | ranked: the elector's wait after losing a leader and
                       at start (random runs only)
  --planted-bug NAME   double-vote | minority-quorum | count-stale-scouting-replies |
                       skip-sticky-leader | ignore-config-version (a deliberately broken core;
                       the last one matters only with --membership)
  --lose-durable-state restart crashed nodes with empty durable state (a broken driver)
  --runtime-bug NAME   send-before-persist (a deliberately broken runtime/: a batch's state
                       write happens after its sends; caught as not-durable) | ack-before-fsync
                       (the log runtime tells the log core entries are durable before the
                       storage flush; caught as log-not-durable or ack-lost; implies --log)
  --no-term-check      do not check that terms never decrease (to see what lost state leads to)
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

template <typename T>
bool parse_number(std::string_view text, T& out) {
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return ec == std::errc{} && ptr == end;
}

std::optional<PlantedBug> parse_bug(std::string_view name) {
    for (PlantedBug b : {PlantedBug::None, PlantedBug::DoubleVote, PlantedBug::MinorityQuorum,
                         PlantedBug::CountStaleScoutingReplies, PlantedBug::SkipStickyLeader,
                         PlantedBug::IgnoreConfigVersion}) {
        if (name == to_string(b)) {
            return b;
        }
    }
    return std::nullopt;
}

int usage_error(const std::string& message) {
    std::cerr << "conclave-sim: " << message << "\n(see conclave-sim --help)\n";
    return 2;
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

}  // namespace

int main(int argc, char** argv) {
    RunOptions run;
    ExploreOptions ex;
    std::uint64_t seeds = 100;
    bool seeds_given = false;
    bool seed_given = false;
    bool explore_mode = false;
    bool membership_mode = false;
    bool nodes_given = false;
    bool episodes_given = false;
    bool expect_violation = false;
    bool quiet = false;
    bool no_joiner = false;
    std::string trace_path;
    const std::string program = argc > 0 ? argv[0] : "conclave-sim";

    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto value = [&](std::string_view& out) {
            if (i + 1 >= argc) {
                return false;
            }
            out = argv[++i];
            return true;
        };
        auto number = [&](auto& out) {
            std::string_view text;
            return value(text) && parse_number(text, out);
        };
        auto bad = [&]() { return usage_error(std::string(arg) + ": missing or invalid value"); };
        std::string_view text;
        std::int64_t ms = 0;
        if (arg == "--help" || arg == "-h") {
            std::cout << kUsage;
            return 0;
        } else if (arg == "--seeds") {
            if (!number(seeds) || seeds == 0)
                return bad();
            seeds_given = true;
        } else if (arg == "--seed") {
            if (!number(run.seed))
                return bad();
            seed_given = true;
        } else if (arg == "--nodes") {
            nodes_given = true;
            if (!number(run.nodes) || run.nodes == 0 || run.nodes > 32) {
                return usage_error("--nodes: must be between 1 and 32");
            }
            ex.nodes = run.nodes;
        } else if (arg == "--faults") {
            std::string error;
            if (!value(text))
                return bad();
            auto mix = FaultMix::parse(text, &error);
            if (!mix)
                return usage_error(error);
            run.faults = *mix;
        } else if (arg == "--episodes") {
            episodes_given = true;
            if (!number(run.episodes) || run.episodes > 1000)
                return bad();
        } else if (arg == "--duration") {
            if (!number(ms) || ms < 0 || ms > 86'400'000)
                return bad();
            run.fault_window = Millis{ms};
        } else if (arg == "--tail") {
            if (!number(ms) || ms <= 0 || ms > 86'400'000)
                return bad();
            run.tail = Millis{ms};
        } else if (arg == "--steps") {
            if (!number(run.max_steps) || run.max_steps == 0)
                return bad();
        } else if (arg == "--trace") {
            if (!value(text))
                return bad();
            trace_path = text;
        } else if (arg == "--no-scouting") {
            run.scouting = ex.scouting = false;
        } else if (arg == "--backoff") {
            if (!value(text))
                return bad();
            auto backoff = parse_backoff(text);
            if (!backoff) {
                return usage_error("--backoff: unknown backoff '" + std::string(text) +
                                   "' (expected uniform or ranked)");
            }
            run.backoff = *backoff;
        } else if (arg == "--planted-bug") {
            if (!value(text))
                return bad();
            auto bug = parse_bug(text);
            if (!bug) {
                return usage_error("--planted-bug: unknown bug '" + std::string(text) +
                                   "' (expected double-vote, minority-quorum, "
                                   "count-stale-scouting-replies, skip-sticky-leader or "
                                   "ignore-config-version)");
            }
            run.planted_bug = ex.planted_bug = *bug;
        } else if (arg == "--runtime-bug") {
            if (!value(text))
                return bad();
            if (std::string_view(text) == "send-before-persist") {
                run.runtime_bug = runtime::RuntimeBug::SendBeforePersist;
            } else if (std::string_view(text) == "ack-before-fsync") {
                run.runtime_bug = runtime::RuntimeBug::AckBeforeFsync;
                run.log = true;
            } else {
                return usage_error("--runtime-bug: unknown bug '" + std::string(text) +
                                   "' (expected send-before-persist or ack-before-fsync)");
            }
        } else if (arg == "--lose-durable-state") {
            run.lose_durable_state = ex.lose_durable_state = true;
        } else if (arg == "--no-term-check") {
            run.history.check_term_monotonic = ex.history.check_term_monotonic = false;
        } else if (arg == "--storage-faults") {
            run.storage_faults = true;
            run.log = true;
        } else if (arg == "--storage-bug") {
            if (!value(text))
                return bad();
            auto bug = parse_storage_bug(text);
            if (!bug) {
                return usage_error("--storage-bug: unknown bug '" + std::string(text) +
                                   "' (expected silent-repair or none)");
            }
            run.storage_bug = *bug;
            run.storage_faults = true;
            run.log = true;
        } else if (arg == "--no-floor-check") {
            run.log_history.check_recovered_floor = false;
        } else if (arg == "--log") {
            run.log = true;
        } else if (arg == "--log-bug") {
            if (!value(text))
                return bad();
            auto bug = parse_log_bug(text);
            if (!bug) {
                return usage_error("--log-bug: unknown bug '" + std::string(text) +
                                   "' (expected skip-sync, commit-without-quorum, "
                                   "compact-uncommitted or count-repaired)");
            }
            run.log_bug = *bug;
            run.log = true;
        } else if (arg == "--log-compact") {
            if (!value(text))
                return bad();
            std::size_t n = 0;
            const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
            if (ec != std::errc{} || ptr != text.data() + text.size() || n < 2 || n > 1'000'000) {
                return usage_error("--log-compact: expected a number in 2..1000000, got '" +
                                   std::string(text) + "'");
            }
            run.log_compact = n;
            run.log = true;
        } else if (arg == "--no-durable-check") {
            run.log_history.check_durable_quorum = false;
        } else if (arg == "--expect-violation") {
            expect_violation = true;
        } else if (arg == "--quiet") {
            quiet = true;
        } else if (arg == "--membership") {
            membership_mode = true;
        } else if (arg == "--no-joiner") {
            no_joiner = true;
        } else if (arg == "--explore") {
            explore_mode = true;
        } else if (arg == "--max-term") {
            if (!number(ex.max_term) || ex.max_term > 200)
                return bad();
        } else if (arg == "--max-in-flight") {
            if (!number(ex.max_in_flight) || ex.max_in_flight > 64)
                return bad();
        } else if (arg == "--max-crashes") {
            if (!number(ex.max_crashes) || ex.max_crashes > 200)
                return bad();
        } else if (arg == "--max-rounds") {
            if (!number(ex.max_rounds))
                return bad();
        } else if (arg == "--max-dups") {
            if (!number(ex.max_duplications) || ex.max_duplications > 200)
                return bad();
        } else if (arg == "--max-states") {
            if (!number(ex.max_states))
                return bad();
        } else {
            return usage_error("unknown option '" + std::string(arg) + "'");
        }
    }
    if (explore_mode) {
        if (run.log) {
            return usage_error("--log: not supported by the explorer (random schedules only)");
        }
        if (ex.nodes > 5) {
            return usage_error("--nodes: the explorer supports 1..5 nodes");
        }
        return run_explorer(ex, expect_violation);
    }
    if (seed_given && !seeds_given) {
        seeds = 1;
    }
    std::ofstream trace_file;
    if (!trace_path.empty()) {
        if (seeds != 1) {
            return usage_error("--trace: needs a single seed (use --seed S without --seeds)");
        }
        trace_file.open(trace_path);
        if (!trace_file) {
            return usage_error("--trace: cannot open '" + trace_path + "' for writing");
        }
        run.trace = &trace_file;
    }
    if (membership_mode) {
        if (run.log && nodes_given && (run.nodes < 3 || run.nodes > 8)) {
            return usage_error("--membership --log: --nodes must be 3..8");
        }
        std::uint64_t failures = 0;
        // Node-table growth (through the log, with the joiner): seeds where it joined, where it
        // was promoted, and the tables grown, messages dropped between nodes outside each
        // other's tables.
        std::uint64_t joined = 0, promoted = 0, growths = 0, outside = 0, restarts = 0;
        bool joiner_runs = false;
        for (std::uint64_t k = 0; k < seeds; ++k) {
            MembershipRunOptions mo =
                run.log ? log_membership_options(run.seed + k) : MembershipRunOptions{};
            mo.seed = run.seed + k;
            mo.fault_window = run.fault_window;
            mo.tail = run.tail.count() > 0 ? run.tail : mo.tail;
            // (The model runs have always taken --episodes' default, 4; through the log: 8.)
            mo.episodes = run.log && !episodes_given ? mo.episodes : run.episodes;
            mo.trace = run.trace;
            mo.planted_bug = run.planted_bug;
            mo.log_bug = run.log_bug;
            mo.nodes = nodes_given ? run.nodes : mo.nodes;
            mo.joiner = mo.joiner && !no_joiner;
            const MembershipRunResult r =
                run.log ? run_log_membership_seed(mo) : run_membership_seed(mo);
            // Through the log, liveness is checked here: a leader followed by a majority of its
            // voters, and a fresh entry committed (the model runs leave it to their test).
            const bool live = !run.log || (r.leader_at_end && r.fresh_committed);
            joiner_runs = joiner_runs || (run.log && mo.joiner);
            joined += r.joined_at ? 1U : 0U;
            promoted += r.joiner_promotions > 0 ? 1U : 0U;
            growths += r.stats.table_growths;
            outside += r.stats.messages_outside_table;
            restarts += r.stats.joiner_restarts;
            failures += r.violation || !live ? 1U : 0U;
            if (r.violation) {
                std::cout << "VIOLATION seed=" << r.seed << " at " << r.violation_at.count()
                          << " ms: " << to_string(r.violation->kind) << ": " << r.violation->detail
                          << "\n";
            } else if (!live) {
                std::cout << "LIVENESS seed=" << r.seed << ": "
                          << (r.leader_at_end ? "no fresh entry committed within 3 s"
                                              : "no leader followed by a majority of its voters")
                          << " (committed version " << r.committed_version << "): " << r.end_state
                          << "\n";
            } else if (!quiet) {
                std::cout << "seed " << r.seed << ": ok  steps " << r.stats.steps
                          << "  committed version " << r.committed_version << "  stale-config "
                          << r.stale_config_refusals << "  not-a-voter " << r.not_a_voter_refusals;
                if (run.log) {
                    std::cout << "  config proposals " << r.config_proposals << " (passive "
                              << r.stats.config_proposals_passive << ")  notices "
                              << r.stats.config_notices << "  log steps " << r.stats.log_steps
                              << "  acked " << r.stats.proposals_acked;
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
            if ((r.violation || !live) && mo.trace == nullptr) {
                std::cout << "  replay: " << program << " --membership" << (run.log ? " --log" : "")
                          << " --seed " << r.seed << " --nodes " << mo.nodes
                          << (run.log && !mo.joiner ? " --no-joiner" : "") << " --episodes "
                          << mo.episodes << " --duration " << mo.fault_window.count() << " --tail "
                          << mo.tail.count()
                          << (mo.planted_bug != PlantedBug::None
                                  ? " --planted-bug " + std::string(to_string(mo.planted_bug))
                                  : std::string())
                          << (mo.log_bug != replication::PlantedLogBug::None
                                  ? " --log-bug " + std::string(log_bug_name(mo.log_bug))
                                  : std::string())
                          << " --trace seed-" << r.seed << ".ndjson\n";
            }
        }
        std::cout << seeds << " membership seed(s)" << (run.log ? " through the log" : "") << ", "
                  << failures << " failure(s)\n";
        if (joiner_runs) {
            std::cout << "node-table growth: the new node joined in " << joined
                      << ", was promoted in " << promoted << " seed(s); " << growths
                      << " table growth(s), " << outside
                      << " message(s) dropped between nodes outside each other's tables; the "
                      << "new node restarted " << restarts << " time(s)\n";
        }
        return failures == 0 ? (expect_violation ? 1 : 0) : (expect_violation ? 0 : 1);
    }

    const std::uint64_t first = run.seed;
    std::uint64_t events = 0;
    std::uint64_t steps = 0;
    std::uint64_t violations = 0;
    std::uint64_t sim_ms = 0;
    std::int64_t slowest_convergence_ms = 0;
    std::int64_t bound_ms = 0;
    std::uint64_t contested = 0;
    std::uint64_t split_votes = 0;
    std::uint64_t seeds_with_split_votes = 0;
    std::uint64_t elections = 0;
    std::uint64_t log_steps = 0;
    std::uint64_t committed = 0;
    std::uint64_t acked = 0;
    std::uint64_t refused = 0;
    std::uint64_t unknown = 0;
    std::uint64_t compactions = 0;
    std::uint64_t installed = 0;
    std::uint64_t storage_faults = 0;
    std::uint64_t torn_tails = 0;
    std::uint64_t bit_flips = 0;
    std::uint64_t starts_refused = 0;
    std::uint64_t flip_repairs = 0;
    std::uint64_t silent_repairs = 0;
    std::uint64_t slow_syncs = 0;
    std::uint64_t crashes = 0;
    std::int64_t slowest_log_ms = 0;
    std::int64_t log_bound_ms = 0;
    const auto started = std::chrono::steady_clock::now();
    for (std::uint64_t k = 0; k < seeds; ++k) {
        run.seed = first + k;
        const RunResult r = run_seed(run);
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
        storage_faults += r.stats.storage_faults;
        torn_tails += r.stats.torn_tails;
        bit_flips += r.stats.bit_flips;
        starts_refused += r.stats.starts_refused;
        flip_repairs += r.stats.flip_repairs;
        silent_repairs += r.stats.silent_repairs;
        slow_syncs += r.stats.slow_syncs;
        crashes += r.stats.crashes;
        if (r.log_converged_after) {
            slowest_log_ms = std::max(slowest_log_ms, r.log_converged_after->count());
            log_bound_ms = std::max(log_bound_ms, r.log_bound.count());
        }
        if (r.converged_after) {
            slowest_convergence_ms = std::max(slowest_convergence_ms, r.converged_after->count());
        }
        if (r.violation) {
            ++violations;
            std::cout << "VIOLATION seed=" << r.seed << " at " << r.violation_at.count()
                      << " ms: " << to_string(r.violation->kind) << ": " << r.violation->detail
                      << "\n  replay: " << replay_command(program, run) << " --trace seed-"
                      << r.seed << ".ndjson\n";
        } else if (!quiet && seeds <= 20) {
            std::cout << "seed " << r.seed << ": ok  events " << r.stats.events << "  steps "
                      << r.stats.steps << "  sim " << r.end.count() << " ms  converged after "
                      << (r.converged_after ? std::to_string(r.converged_after->count()) + " ms"
                                            : std::string("-"))
                      << " (bound " << r.liveness_bound.count() << " ms)  leader changes "
                      << r.leadership.leader_changes << "  split votes " << r.leadership.split_votes
                      << "  highest term " << r.leadership.highest_term.value << "  crashes "
                      << r.stats.crashes << "  transfers " << r.stats.transfers << "  dropped "
                      << r.stats.messages_dropped;
            if (run.log) {
                std::cout << "  log: committed " << r.log_committed << " acked " << r.log_acked
                          << " refused " << r.stats.proposals_refused << " unknown "
                          << r.stats.proposals_unknown << " fresh commit + convergence "
                          << (r.log_converged_after
                                  ? std::to_string(r.log_converged_after->count()) + " ms"
                                  : std::string("-"))
                          << " (bound " << r.log_bound.count() << " ms)";
            }
            std::cout << "  fingerprint " << std::hex << r.fingerprint << std::dec << "\n";
        }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf(
        "%llu seeds (faults %s, %zu nodes), %llu events (%llu core steps), %.1f s simulated, "
        "%.2f s wall: %.0f seeds/s, %.0f events/s; violations: %llu\n",
        static_cast<unsigned long long>(seeds), run.faults.to_string().c_str(), run.nodes,
        static_cast<unsigned long long>(events), static_cast<unsigned long long>(steps),
        static_cast<double>(sim_ms) / 1000.0, seconds,
        seconds > 0 ? static_cast<double>(seeds) / seconds : 0.0,
        seconds > 0 ? static_cast<double>(events) / seconds : 0.0,
        static_cast<unsigned long long>(violations));
    std::printf(
        "slowest agreement on a leader after the faults ended: %lld ms (liveness bound %lld "
        "ms)\n",
        static_cast<long long>(slowest_convergence_ms), static_cast<long long>(bound_ms));
    std::printf(
        "backoff %s: %llu elections won, %llu contested terms (two or more candidates), %llu "
        "split votes (contested, nobody won) in %llu seeds\n",
        std::string(conclave::to_string(run.backoff)).c_str(),
        static_cast<unsigned long long>(elections), static_cast<unsigned long long>(contested),
        static_cast<unsigned long long>(split_votes),
        static_cast<unsigned long long>(seeds_with_split_votes));
    if (run.log) {
        std::printf(
            "log%s: %llu log core steps, %llu entries committed, %llu proposals acknowledged, "
            "%llu refused, %llu outcome unknown; slowest fresh commit + convergence after the "
            "tail: %lld ms (bound up to %lld ms)\n",
            run.log_bug == replication::PlantedLogBug::None
                ? ""
                : (" (planted bug " + std::string(log_bug_name(run.log_bug)) + ")").c_str(),
            static_cast<unsigned long long>(log_steps), static_cast<unsigned long long>(committed),
            static_cast<unsigned long long>(acked), static_cast<unsigned long long>(refused),
            static_cast<unsigned long long>(unknown), static_cast<long long>(slowest_log_ms),
            static_cast<long long>(log_bound_ms));
        if (run.log_compact != 0) {
            std::printf(
                "compaction: %llu snapshots taken, %llu installed from a leader or source "
                "(nodes alive at the end)\n",
                static_cast<unsigned long long>(compactions),
                static_cast<unsigned long long>(installed));
        }
        if (run.storage_faults) {
            std::printf(
                "storage faults: %llu injected (ENOSPC on append, EIO on fsync), %llu crashes in "
                "all, %llu kept part of an unsynced tail\n",
                static_cast<unsigned long long>(storage_faults),
                static_cast<unsigned long long>(crashes),
                static_cast<unsigned long long>(torn_tails));
            std::printf(
                "bit flips: %llu, restarts refused by recovery %llu, repaired by the operator "
                "%llu, repaired silently (planted) %llu; slow fsyncs (up to %lld ms): %llu\n",
                static_cast<unsigned long long>(bit_flips),
                static_cast<unsigned long long>(starts_refused),
                static_cast<unsigned long long>(flip_repairs),
                static_cast<unsigned long long>(silent_repairs),
                static_cast<long long>(RunOptions::kStorageLatencyMaxMs),
                static_cast<unsigned long long>(slow_syncs));
        }
    }
    if (expect_violation) {
        return violations > 0 ? 0 : 1;
    }
    return violations > 0 ? 1 : 0;
}
