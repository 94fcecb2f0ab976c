// SPDX-License-Identifier: Apache-2.0
#include "conclave/net/membership.hpp"

#include <set>

namespace conclave::net {

std::optional<NodeId> Membership::index_of(std::string_view id) const {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].id == id) {
            return NodeId{static_cast<std::uint16_t>(i)};
        }
    }
    return std::nullopt;
}

std::optional<std::string> Membership::validate() const {
    if (cluster.empty()) {
        return "cluster: must not be empty";
    }
    if (nodes.empty() || nodes.size() > kMaxClusterSize) {
        return "nodes: must hold 1.." + std::to_string(kMaxClusterSize) + " nodes, got " +
               std::to_string(nodes.size());
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const auto& n = nodes[i];
        const std::string where = "nodes[" + std::to_string(i) + "]";
        if (n.id.empty()) {
            return where + ".id: must not be empty";
        }
        if (!seen.insert(n.id).second) {
            return where + ".id: duplicate id '" + n.id + "'";
        }
        if (n.host.empty()) {
            return where + ".host: must not be empty";
        }
    }
    return std::nullopt;
}

}  // namespace conclave::net
