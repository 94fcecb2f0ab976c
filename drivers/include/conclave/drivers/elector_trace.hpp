// SPDX-License-Identifier: Apache-2.0
// ElectorTrace: the daemon's trace mode (conclaved --trace-elector FILE, off by default).
//
// One NDJSON line per input the elector core received, in the simulator's trace format
// (docs/tla-traces.md): the node, the action (the spec's name), the received message, the peer or
// the timer, the messages the core sent (a broadcast expanded to its recipients) and the core's
// state after the input. A process appends to the file: first a `header` line (the cluster's
// size and quorum, this node, the process id and the durable state it restored), then its steps,
// each numbered (`seq`). Every line is one write(2) to a file opened with O_APPEND, so a killed
// process leaves only complete lines behind (a torn last line needs the machine to stop, or a
// full disk). tla/merge_daemon_traces.py merges the files of a cluster by message causality.
// Written at the driver's edge, never by the core; a write error ends tracing (logged), never the
// node.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>

#include "conclave/elector/elector.hpp"
#include "conclave/runtime/elector_runtime.hpp"

namespace conclave::drivers {

class ElectorTrace {
  public:
    /// Opens `path` for appending (created if missing) and writes the process's header line.
    /// Throws std::runtime_error naming the path when it cannot.
    ElectorTrace(const std::filesystem::path& path, const elector::Config& config,
                 const elector::DurableState& restored);
    ~ElectorTrace();
    ElectorTrace(const ElectorTrace&) = delete;
    ElectorTrace& operator=(const ElectorTrace&) = delete;

    /// One input the core received; `others` are the recipients of a broadcast. Returns the
    /// error when the line could not be written (tracing then stops).
    std::optional<std::string> step(const runtime::StepInput& input,
                                    const elector::Actions& actions,
                                    const elector::ElectorState& state,
                                    std::span<const NodeId> others);
    /// issue_lsn() gave the leader an LSN (the spec's IssueLsn: no message, the state's lsn).
    std::optional<std::string> issue_lsn(const elector::ElectorState& state);
    /// Steps written by this process.
    std::uint64_t steps() const { return seq_; }

  private:
    std::optional<std::string> write(const nlohmann::json& line);

    std::filesystem::path path_;
    NodeId self_;
    int fd_ = -1;
    std::uint64_t seq_ = 0;
};

/// The spec's name of an input (Elector.tla, the simulator's StepAction): "Start",
/// "HandleScoutingRequest", "HeartbeatCheckFired", ...
std::string trace_action_name(const runtime::StepInput& input);

}  // namespace conclave::drivers
