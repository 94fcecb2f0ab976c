// SPDX-License-Identifier: Apache-2.0
// What a run leaves behind: the summary table, a JSON summary, an SVG/HTML timeline picture.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "conclave/bounce/scenarios.hpp"

namespace conclave::bounce {

/// One column per run (with --compare: scouting on and off side by side).
std::string summary_table(const std::vector<RunResult>& runs);
nlohmann::json summary_json(const RunResult& run);
/// rolling-replace: one line per replacement, with the time of each step.
std::string describe(const Replacement& x);
/// preferred: one line for round i (its kill, failover, restart and hand-back).
std::string describe_round(const PreferredSummary& p, std::size_t i);
/// One picture for all runs, stacked: a lane per node coloured by role, faults shaded, leader
/// changes marked (red: needless).
std::string render_svg(const std::vector<RunResult>& runs);
/// A self-contained HTML page: the summary table and the picture.
std::string render_html(const std::vector<RunResult>& runs);

}  // namespace conclave::bounce
