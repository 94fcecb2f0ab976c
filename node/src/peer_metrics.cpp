// SPDX-License-Identifier: Apache-2.0
// Peer health in /metrics: one series per other node of the membership, so that a
// dashboard shows which peer is down and how long ago it was last heard from.
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "conclave/net/mesh.hpp"
#include "conclave/node/node.hpp"

namespace conclave::node {

void Node::register_peer_metrics() {
    struct PeerSeries {
        NodeId id;
        admin::Gauge* up;
        admin::Gauge* last_contact_age;
    };
    auto series = std::make_shared<std::vector<PeerSeries>>();
    // Nodes the table gains at run time (docs/membership.md §8) get their series at the next
    // scrape: `registered` counts the table entries seen so far.
    auto registered = std::make_shared<std::size_t>(0);
    const auto register_new = [this, series, registered] {
        for (; *registered < config_.nodes.size(); ++*registered) {
            const NodeId n{static_cast<std::uint16_t>(*registered)};
            if (n == config_.self) {
                continue;
            }
            const admin::Labels labels = {{"peer", config_.nodes[n.value].id}};
            series->push_back(
                {n,
                 &admin_.metrics.gauge("conclave_peer_up",
                                       "1 while the mesh connection to the peer is up", labels),
                 &admin_.metrics.gauge(
                     "conclave_peer_last_contact_age_seconds",
                     "Time since the last frame from the peer (NaN: never heard from)", labels)});
        }
    };
    register_new();
    admin_.metrics.on_collect([this, series, register_new] {
        register_new();
        const auto now = std::chrono::steady_clock::now();
        for (const PeerSeries& s : *series) {
            const net::PeerStatus ps = cores_.mesh->peer_status(s.id);
            s.up->set(ps.up ? 1 : 0);
            s.last_contact_age->set(
                ps.last_contact ? std::chrono::duration<double>(now - *ps.last_contact).count()
                                : std::nan(""));
        }
    });
}

}  // namespace conclave::node
