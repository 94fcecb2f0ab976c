// SPDX-License-Identifier: Apache-2.0
// The cluster membership table: which nodes exist, their string ids and their peer endpoints.
// The position of a node in `nodes` is its NodeId index in the elector core.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/core/types.hpp"

namespace conclave::net {

struct NodeAddress {
    std::string id;    // "n1": what operators, configs and the handshake use
    std::string host;  // IP literal or host name, resolved when dialing
    std::uint16_t port = 0;
};

struct Membership {
    std::string cluster;  // must match in every handshake
    std::vector<NodeAddress> nodes;

    std::optional<NodeId> index_of(std::string_view id) const;
    const NodeAddress& at(NodeId n) const { return nodes.at(n.value); }
    std::size_t size() const { return nodes.size(); }
    /// Empty when usable; otherwise a message naming the offending field (empty cluster name,
    /// duplicate or empty ids, too many nodes, port 0 for a peer).
    std::optional<std::string> validate() const;
};

}  // namespace conclave::net
