// SPDX-License-Identifier: Apache-2.0
// Uses the installed headers and libraries: parses a config, builds a Node, and a FencingGate.
#include <conclave/elector/fencing.hpp>
#include <conclave/node/node.hpp>
#include <iostream>
#include <variant>

int main() {
    auto parsed = conclave::node::parse_cluster_config(
        R"({"cluster": "c", "nodes": [{"id": "n1", "peer": "127.0.0.1:1", "http": "127.0.0.1:2"}],
            "data_dir": "/nonexistent/{id}"})",
        "n1");
    conclave::elector::FencingGate gate;
    const bool ok = std::holds_alternative<conclave::node::ClusterConfig>(parsed) && gate.admit(1);
    std::cout << (ok ? "consumer ok" : "consumer failed") << "\n";
    return ok ? 0 : 1;
}
