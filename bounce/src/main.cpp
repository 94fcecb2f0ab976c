// SPDX-License-Identifier: Apache-2.0
// leader-bounce: real conclaved processes, a fault proxy on every peer link, a timeline picture.
#include <unistd.h>

#include <fmt/core.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <variant>

#include "conclave/bounce/cluster.hpp"
#include "conclave/bounce/options.hpp"
#include "conclave/bounce/report.hpp"
#include "conclave/bounce/scenarios.hpp"

namespace fs = std::filesystem;
using namespace conclave::bounce;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnsafe = 3;
constexpr int kExitInterrupted = 130;

bool write_file(const fs::path& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    out.close();
    if (!out) {
        fmt::print(stderr, "leader-bounce: cannot write {}\n", path.string());
        return false;
    }
    fmt::print("wrote {}\n", path.string());
    return true;
}

fs::path self_exe(const char* argv0) {
    std::error_code ec;
    fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path(argv0) : p;
}

/// The daemon to run: --conclaved, else found next to leader-bounce; nullopt (with the reason
/// on stderr) when there is none.
std::optional<fs::path> daemon_path(const Options& options, const char* argv0) {
    if (options.conclaved) {
        fs::path conclaved = fs::absolute(*options.conclaved);
        if (!fs::is_regular_file(conclaved) || ::access(conclaved.c_str(), X_OK) != 0) {
            fmt::print(stderr, "leader-bounce: --conclaved: {} is not an executable file\n",
                       conclaved.string());
            return std::nullopt;
        }
        return conclaved;
    }
    if (auto found = find_conclaved(self_exe(argv0))) {
        return *found;
    }
    fmt::print(stderr,
               "leader-bounce: cannot find conclaved (looked next to leader-bounce, in "
               "../tools/ and in build/release/tools/); pass --conclaved PATH\n");
    return std::nullopt;
}

/// --html, --svg, --json. False when one could not be written.
bool write_outputs(const Options& options, const std::vector<RunResult>& runs) {
    bool ok = true;
    if (options.html_path) {
        ok = write_file(*options.html_path, render_html(runs)) && ok;
    }
    if (options.svg_path) {
        ok = write_file(*options.svg_path, render_svg(runs)) && ok;
    }
    if (options.json_path) {
        nlohmann::json j = nlohmann::json::array();
        for (const RunResult& r : runs) {
            j.push_back(summary_json(r));
        }
        ok = write_file(*options.json_path, j.dump(2) + "\n") && ok;
    }
    return ok;
}

/// Reports the safety violations of the runs; true when there was one.
bool report_unsafe(const std::vector<RunResult>& runs) {
    bool unsafe = false;
    for (const RunResult& r : runs) {
        if (!r.summary.safe()) {
            fmt::print(stderr,
                       "leader-bounce: SAFETY VIOLATION: two leaders in one term ({}, "
                       "scouting {})\n",
                       to_string(r.scenario), r.scouting ? "on" : "off");
            unsafe = true;
        }
        if (r.metadata && !r.metadata->verdict.ok()) {
            fmt::print(stderr,
                       "leader-bounce: SAFETY VIOLATION: acknowledged metadata entries lost or "
                       "changed ({}, scouting {}): {} problem(s), first: {}\n",
                       to_string(r.scenario), r.scouting ? "on" : "off",
                       r.metadata->verdict.violation_count, r.metadata->verdict.violations.at(0));
            unsafe = true;
        }
    }
    return unsafe;
}

/// Reports rolling-replace runs whose replacements did not all finish; true when all did.
bool replacements_done(const std::vector<RunResult>& runs) {
    bool ok = true;
    for (const RunResult& r : runs) {
        if (!r.replacements_complete()) {
            fmt::print(stderr, "leader-bounce: {}: {} of {} nodes replaced\n",
                       to_string(r.scenario),
                       std::count_if(r.replacements.begin(), r.replacements.end(),
                                     [](const Replacement& x) { return x.complete(); }),
                       r.replacements_planned);
            ok = false;
        }
    }
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const auto parsed = parse_options(argc, argv);
    if (std::holds_alternative<HelpRequested>(parsed)) {
        fmt::print("{}", usage());
        return kExitOk;
    }
    if (const auto* error = std::get_if<std::string>(&parsed)) {
        fmt::print(stderr, "leader-bounce: {}\n(leader-bounce --help for usage)\n", *error);
        return kExitUsage;
    }
    const Options options = std::get<Options>(parsed);
    const std::optional<fs::path> conclaved = daemon_path(options, argv[0]);
    if (!conclaved) {
        return kExitUsage;
    }
    const std::vector<bool> modes =
        options.compare ? std::vector<bool>{true, false} : std::vector<bool>{options.scouting};
    std::vector<RunResult> runs;
    try {
        for (bool scouting : modes) {
            runs.push_back(run_scenario(options, scouting, *conclaved));
            if (runs.back().kept_dir) {
                fmt::print("kept {}\n", runs.back().kept_dir->string());
            }
        }
    } catch (const Interrupted&) {
        fmt::print(stderr,
                   "\nleader-bounce: interrupted; every daemon stopped, temporary files "
                   "removed\n");
        return kExitInterrupted;
    } catch (const std::exception& e) {
        fmt::print(stderr, "leader-bounce: {}\n", e.what());
        return kExitFailure;
    }
    fmt::print("{}", summary_table(runs));
    const bool written = write_outputs(options, runs);
    if (report_unsafe(runs)) {
        return kExitUnsafe;
    }
    const bool replaced = replacements_done(runs);
    return written && replaced ? kExitOk : kExitFailure;
}
