// SPDX-License-Identifier: Apache-2.0
// Records every observation and fault of a run and prints the live timeline.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "conclave/bounce/analysis.hpp"
#include "conclave/bounce/faults.hpp"
#include "conclave/bounce/observation.hpp"

namespace conclave::bounce {

class Recorder {
  public:
    /// `out` may be null: record silently.
    Recorder(std::size_t node_count, std::FILE* out);

    /// Milliseconds since construction (the start of the run).
    std::int64_t now_ms() const;

    void observe(const Observation& o);
    /// Records a fault at now_ms() and prints the timeline line, unless `batch` is set: then the
    /// line waits for the next event or flush(), so that a multi-link fault prints once.
    void fault(FaultEvent e, bool batch = false);
    void flush() { print_if_changed(); }
    /// Prints a free-text line of the timeline ("n2 exited with status 1").
    void note(const std::string& text);

    /// Observations sorted by time (they arrive in the order the answers came back).
    std::vector<Observation> sorted_observations() const;
    const std::vector<FaultEvent>& faults() const { return faults_; }
    const LeaderTracker& tracker() const { return tracker_; }
    const FaultState& fault_state() const { return fault_state_; }
    const std::vector<std::string>& notes() const { return notes_; }

  private:
    void print_if_changed();

    std::size_t node_count_;
    std::FILE* out_;
    std::chrono::steady_clock::time_point start_;
    std::vector<Observation> observations_;
    std::vector<FaultEvent> faults_;
    std::vector<std::string> notes_;
    LeaderTracker tracker_;
    FaultState fault_state_;
    std::string last_line_key_;
};

/// The compact per-node cell of the timeline: "L7" leader of term 7, "F7" follower, "C8"
/// candidate, "--" unreachable, "S" stopped.
std::string timeline_cell(const Observation& o);

}  // namespace conclave::bounce
