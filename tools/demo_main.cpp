// SPDX-License-Identifier: Apache-2.0
// conclave-demo: runs the BlazingMQ article's two 4-node scenarios (non-sticky leader, leader
// ping-pong) in the deterministic simulator, with ElectionScouting on and off, and prints a
// leadership timeline and a summary per run. Simulated time, fast profile: takes well under a
// second. Exit status 0, or 2 for a bad command line.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string_view>

#include "conclave/sim/scenarios.hpp"

namespace {

using namespace conclave;
using namespace conclave::sim;

void print(const ScenarioResult& r) {
    std::printf("\n=== %s ===\n", r.name.c_str());
    // Compact: of a run of consecutive leadership entries, show the first and last few.
    constexpr std::size_t kKeep = 4;
    const auto& t = r.timeline;
    for (std::size_t i = 0; i < t.size();) {
        std::size_t j = i;
        while (j < t.size() && t[j].text.rfind("FAULT", 0) != 0) {
            ++j;
        }
        for (std::size_t k = i; k < std::max(j, i + 1) && k < t.size(); ++k) {
            if (j - i > 2 * kKeep && k == i + kKeep) {
                std::printf("  %9s  ... %zu more leadership changes ...\n", "", j - i - 2 * kKeep);
                k = j - kKeep - 1;
                continue;
            }
            std::printf("  %6lld ms  %s\n", static_cast<long long>(t[k].at.count()),
                        t[k].text.c_str());
        }
        i = std::max(j, i + 1);
    }
    const LeadershipSummary& s = r.summary;
    std::printf(
        "  summary: leader changes %llu, needless leader changes %llu, highest term %llu, "
        "leaderless time %lld ms of %lld ms\n",
        static_cast<unsigned long long>(s.leader_changes),
        static_cast<unsigned long long>(s.needless_leader_changes),
        static_cast<unsigned long long>(s.highest_term.value),
        static_cast<long long>(s.leaderless_time.count()), static_cast<long long>(r.end.count()));
    if (r.violation) {
        std::printf("  VIOLATION %s: %s\n", std::string(to_string(r.violation->kind)).c_str(),
                    r.violation->detail.c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t seed = 7;
    bool help = false;
    CLI::App app("conclave-demo", "conclave-demo");
    app.set_help_flag();  // --help prints the text below, not CLI11's own
    app.add_flag("-h,--help", help);
    app.add_option("--seed", seed);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        std::cerr << "conclave-demo: " << e.what() << " (see --help)\n";
        return 2;
    }
    if (help) {
        std::cout << "usage: conclave-demo [--seed S]\n\n"
                     "Runs the BlazingMQ article's two 4-node scenarios in the deterministic "
                     "simulator\n(fast profile, simulated time), each with ElectionScouting on "
                     "and off, and prints\nthe leadership timeline and a summary per run.\n"
                     "  --seed S   seed of the simulated network (default 7)\n";
        return 0;
    }
    std::printf(
        "Conclave interim demo: 4 elector cores in the deterministic simulator (seed %llu).\n"
        "Nodes n0..n3; A is the leader when the fault starts, B is the next node.\n",
        static_cast<unsigned long long>(seed));
    for (Scenario scenario : {Scenario::NonStickyLeader, Scenario::PingPong}) {
        for (bool scouting : {true, false}) {
            ScenarioOptions o;
            o.scenario = scenario;
            o.scouting = scouting;
            o.seed = seed;
            print(run_scenario(o));
        }
    }
    return 0;
}
