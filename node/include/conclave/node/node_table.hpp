// SPDX-License-Identifier: Apache-2.0
// The node table a node has learnt at run time (docs/membership.md §8, R9):
// <data_dir>/members.json.
//
// The config file's `nodes` list is where a cluster starts; once a configuration adds a node
// under a new id, the table (every id ever added, in NodeId order, with the addresses known for
// it) is part of the replicated state. A node keeps its copy here, written durably BEFORE its
// mesh and elector grow (so that an elector state that names a new node always finds it at the
// next start), and a joiner writes the table its join was accepted with. At start, a stored table
// replaces the config file's `nodes` (R9: the stored configuration wins).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "conclave/node/cluster_config.hpp"
#include "conclave/replication/membership.hpp"

namespace conclave::node {

inline constexpr const char* kNodeTableFile = "members.json";

struct StoredTable {
    std::string cluster;
    std::vector<NodeEntry> nodes;  // index = NodeId
    std::vector<bool> removed;     // per node: not a member (its addresses may be placeholders)
    /// The configuration a joiner was accepted with (version, voter ids): its elector starts
    /// with it instead of the implicit "every node votes" of an empty log.
    std::uint64_t version = 0;
    std::vector<std::string> voters;
    bool operator==(const StoredTable&) const = default;

    /// Appends `id` with its addresses from `members` (a configuration's); an id that is no
    /// member (removed before this node learnt of it) keeps only its index: placeholder
    /// addresses, `removed`, never dialed.
    void append(const std::string& id, const std::vector<replication::Member>& members);
    /// The table names `id` and marks it removed (a node marks itself when it learns its
    /// removal, so that its next --join asks to be added back).
    bool marks_removed(const std::string& id) const;
};

/// An entry StoredTable::append made for an id that was no member (removed before this node
/// learnt of it): it keeps its index, with placeholder addresses, until a configuration names
/// the id again (it is added back) with its addresses.
bool is_placeholder(const NodeEntry& e);

/// nullopt when there is no file. Throws std::runtime_error naming the file and the field when
/// it cannot be read or is malformed (a node does not start on a table it cannot trust).
std::optional<StoredTable> load_node_table(const std::filesystem::path& data_dir);
/// Durable (temporary file, fsync, rename). Throws on failure (drivers::StateFileError).
void store_node_table(const std::filesystem::path& data_dir, const StoredTable& table);

/// R9 at start: `config` with the stored table in place of its `nodes` (self found again by id,
/// the elector's cluster_size and self updated). Returns why it cannot be used (another cluster,
/// this node's id missing, a config-file node with another index) or nullopt.
std::optional<std::string> apply_stored_table(ClusterConfig& config, const StoredTable& table);

}  // namespace conclave::node
