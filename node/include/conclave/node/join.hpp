// SPDX-License-Identifier: Apache-2.0
// `conclaved --join HOST:PORT` (docs/membership.md §4): a node with an empty data
// directory asks a member of the cluster (the seed) to add it.
//
// It authenticates as the cluster's peers do (the mesh's join exchange, net/README.md "Join":
// TLS certificate naming its id and/or the cluster secret), sends its peer and http addresses,
// follows the seed's redirects to the leader (at most 5 per attempt) and retries while the
// answer says the leadership is moving (no leader yet, a leader still syncing, an addition whose
// outcome is unknown: asked again, a node already added is answered as a member), until
// `timeout`. The leader adds it as a learner; once that
// configuration committed the answer carries it, with the node table, which is stored in the
// data directory (node_table.hpp): the node then starts with that table, as a learner, and
// catches up from the leader. Promotion to voter is a separate operator step (POST /members).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "conclave/node/cluster_config.hpp"

namespace conclave::node {

/// How a refused join answer that is worth asking again begins (the leadership is moving).
/// Joiners of earlier versions retry only on "no leader", which these answers keep saying when
/// there is none.
inline constexpr std::string_view kJoinRetry = "retry: ";

/// nullopt once this node is in the cluster's table (joined now, or a table is already stored:
/// nothing is asked); otherwise why not.
std::optional<std::string> join_cluster(
    const ClusterConfig& config, const Endpoint& seed, spdlog::logger& log,
    std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace conclave::node
