// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/recorder.hpp"

#include <fmt/core.h>
#include <algorithm>

namespace conclave::bounce {

Recorder::Recorder(std::size_t node_count, std::FILE* out)
    : node_count_(node_count),
      out_(out),
      start_(std::chrono::steady_clock::now()),
      tracker_(node_count),
      fault_state_(node_count) {}

std::int64_t Recorder::now_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start_)
        .count();
}

std::string timeline_cell(const Observation& o) {
    switch (o.role) {
        case ObservedRole::Unreachable:
            return "--";
        case ObservedRole::Stopped:
            return "S";
        case ObservedRole::Follower:
            return "F" + std::to_string(o.term);
        case ObservedRole::Candidate:
            return "C" + std::to_string(o.term);
        case ObservedRole::Leader:
            return "L" + std::to_string(o.term);
    }
    return "?";
}

void Recorder::observe(const Observation& o) {
    observations_.push_back(o);
    tracker_.observe(o);
    print_if_changed();
}

void Recorder::fault(FaultEvent e, bool batch) {
    e.at_ms = now_ms();
    faults_.push_back(e);
    fault_state_.apply(e);
    if (!batch) {
        print_if_changed();
    }
}

void Recorder::note(const std::string& text) {
    notes_.push_back(fmt::format("{:7.2f}s  {}", static_cast<double>(now_ms()) / 1000.0, text));
    if (out_ != nullptr) {
        fmt::print(out_, "{}\n", notes_.back());
        std::fflush(out_);
    }
}

void Recorder::print_if_changed() {
    std::string cells;
    for (const Observation& o : tracker_.latest) {
        cells += fmt::format(" {}:{:<4}", node_name(o.node), timeline_cell(o));
    }
    const auto leader = tracker_.effective();
    const std::string who =
        leader ? fmt::format("leader {} term {}", node_name(leader->node), leader->term)
               : std::string("no leader");
    const std::string faults = fault_state_.describe();
    const std::string key = cells + "|" + faults;
    if (key == last_line_key_) {
        return;
    }
    last_line_key_ = key;
    if (out_ != nullptr) {
        fmt::print(out_, "{:7.2f}s  {:<22} |{} | {}\n", static_cast<double>(now_ms()) / 1000.0, who,
                   cells, faults.empty() ? "no faults" : faults);
        std::fflush(out_);
    }
}

std::vector<Observation> Recorder::sorted_observations() const {
    std::vector<Observation> out = observations_;
    std::stable_sort(out.begin(), out.end(),
                     [](const Observation& a, const Observation& b) { return a.at_ms < b.at_ms; });
    return out;
}

}  // namespace conclave::bounce
