// SPDX-License-Identifier: Apache-2.0
// Hostile input: messages handed straight to a node's cores, bypassing the simulated network (a
// forged frame from anywhere). The run's invariants are checked after the step as for any input.
#include "conclave/sim/simulator.hpp"

namespace conclave::sim {

// Simulator::inject (the elector side) lives in simulator.cpp, beside the input() template it uses.

bool Simulator::inject_log(NodeId to, const replication::LogMessage& m) {
    absorb_violation();
    const std::size_t n = to.value;
    if (!started_ || !options_.log || n >= options_.nodes || !logs_[n] || paused(to) ||
        violation_) {
        return false;
    }
    log_input(
        n, LogInput::Receive,
        [&](replication::ReplicatedLog& log) { return log.receive(local_now(to), m); }, &m);
    return true;
}

}  // namespace conclave::sim
