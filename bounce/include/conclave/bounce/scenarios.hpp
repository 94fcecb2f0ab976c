// SPDX-License-Identifier: Apache-2.0
// The scenarios: each starts a cluster, waits for a leader, injects its faults, heals, and
// returns everything the run recorded.
//
// Default timings are sized for the fast profile (heartbeat 100 ms, miss count 3, random wait
// 0-300 ms) so that the README's demo (ping-pong --compare, non-sticky --compare, leader-crash)
// takes about a minute: each run is start-up (~1-2 s) + 1 s settle + the fault (--duration) +
// a few seconds to watch the aftermath.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "conclave/bounce/analysis.hpp"
#include "conclave/bounce/lease.hpp"
#include "conclave/bounce/log_check.hpp"
#include "conclave/bounce/options.hpp"
#include "conclave/bounce/preferred.hpp"

namespace conclave::bounce {

/// What the metadata proposer did during a run and what the log check found.
struct MetadataRun {
    std::vector<ProposalRecord> proposals;  // in the order the outcomes came back
    LogVerdict verdict;
    std::int64_t first_fault_ms = -1;  // -1: the run injected no fault
    std::int64_t last_fault_ms = -1;
    std::size_t acknowledged_before_faults = 0;  // before the first fault
    std::size_t acknowledged_after_faults = 0;   // after the last fault event (the heal)
    std::size_t redirects_followed = 0;          // 307 answers followed
};

/// rolling-replace: one original node replaced by a new one. Times are ms since the run began;
/// -1 means the step did not happen.
struct Replacement {
    NodeIndex old_node = 0;
    NodeIndex new_node = 0;
    NodeIndex seed = 0;           // the member whose peer address --join named
    bool old_was_leader = false;  // the old node led when its removal was asked
    std::int64_t join_ms = -1;    // the new node started with --join
    std::int64_t promoted_ms = -1;
    std::int64_t removed_ms = -1;  // the removal committed (200, or GET /members no longer has it)
    std::int64_t stopped_ms = -1;  // the old node exited after SIGTERM
    std::size_t promote_attempts = 0;
    std::size_t remove_attempts = 0;
    std::string failure;  // empty: every step done

    bool complete() const { return failure.empty() && removed_ms >= 0; }
};

struct RunResult {
    Scenario scenario = Scenario::PingPong;
    bool scouting = true;
    std::uint64_t seed = 0;  // --seed (chaos, crash-chaos and the proxy's jitter)
    std::size_t node_count = 0;
    std::int64_t end_ms = 0;
    Summary summary;
    /// Lease overlap and time without a valid lease, from the /status lease fields.
    LeaseSummary lease;
    std::vector<Observation> observations;
    std::vector<FaultEvent> faults;
    std::vector<std::string> notes;
    /// Expectations of the scenario that did not hold (no leader after a crash, a node that
    /// exited by itself, ...). Reported, but only safety decides the exit status.
    std::vector<std::string> warnings;
    /// leader-crash: a node other than the crashed leader took over.
    std::optional<bool> new_leader_after_crash;
    /// disk-full: how the node whose disk filled exited ("exited with status 1"); nullopt if it
    /// did not exit within the scenario.
    std::optional<std::string> disk_full_exit;
    /// rolling-replace: one entry per original node, in the order they were replaced.
    std::vector<Replacement> replacements;
    std::size_t replacements_planned = 0;  // rolling-replace: the original nodes
    /// preferred: the rounds and their figures.
    std::optional<PreferredSummary> preferred;
    std::optional<std::filesystem::path> kept_dir;
    /// Set when the proposer ran; `metadata_off` says why it did not.
    std::optional<MetadataRun> metadata;
    std::string metadata_off;

    /// Both safety checks: one leader per term, and no acknowledged entry lost.
    bool safe() const { return summary.safe() && (!metadata || metadata->verdict.ok()); }
    /// rolling-replace: every replacement completed (vacuously true for other scenarios).
    bool replacements_complete() const {
        return replacements.size() == replacements_planned &&
               std::all_of(replacements.begin(), replacements.end(),
                           [](const Replacement& x) { return x.complete(); });
    }
};

/// Thrown when Ctrl-C (SIGINT) or SIGTERM interrupted the run; everything is cleaned up already.
struct Interrupted : std::runtime_error {
    Interrupted() : std::runtime_error("interrupted") {}
};

/// Default fault duration of a scenario, in seconds.
double default_duration_s(Scenario s);

/// Runs one scenario with scouting on or off. Throws std::runtime_error on failures of the tool
/// or the cluster (no leader at start, a daemon that does not start), Interrupted on a signal.
RunResult run_scenario(const Options& options, bool scouting,
                       const std::filesystem::path& conclaved);

}  // namespace conclave::bounce
