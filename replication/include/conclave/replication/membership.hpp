// SPDX-License-Identifier: Apache-2.0
// Membership (docs/membership.md): configuration entries of the replicated log.
//
// A configuration is an ordinary entry under the reserved key `_conclave/members`; its value is
// the JSON of docs/membership.md §1, encoded and decoded by the codec (conclave/codec/
// membership_codec.hpp: this folder does not link nlohmann_json, so the log core receives the
// decoder as a plain function pointer in LogConfig::decode_configuration). The key space
// `_conclave/` is refused to ordinary proposals (ReplicatedLog::propose answers InvalidEntry).
//
// Node ids stay strings here; the log core maps them to NodeIds through LogConfig::node_ids (the
// cluster's id table: index = NodeId, only grows, ids never reused). A configuration naming an id
// outside the table is malformed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/core/quorum.hpp"
#include "conclave/core/types.hpp"
#include "conclave/replication/entry.hpp"

namespace conclave::replication {

/// The key of configuration entries, and the key space reserved to the membership code.
inline constexpr std::string_view kMembersKey = "_conclave/members";
inline constexpr std::string_view kReservedKeyPrefix = "_conclave/";

inline bool is_reserved_key(std::string_view key) {
    return key.starts_with(kReservedKeyPrefix);
}
inline bool is_config_entry(const Entry& e) {
    return e.key == kMembersKey;
}

/// One member: its id (the cluster's id table), its peer (mesh) and http addresses.
struct Member {
    std::string id;
    std::string peer;
    std::string http;
    bool operator==(const Member&) const = default;
};

/// The value of a configuration entry (docs/membership.md §1).
struct Configuration {
    std::uint64_t version = 0;
    std::vector<Member> voters;
    std::vector<Member> learners;
    /// The cluster's node table when this configuration was written (docs/membership.md §8):
    /// every id ever added, in NodeId order, removed ones included (ids are never reused). It
    /// must extend the table of the node reading it. Empty: the node's own table (configurations
    /// written before any node was added outside the config file's `nodes` list).
    std::vector<std::string> table;
    bool operator==(const Configuration&) const = default;
};

/// Parses a configuration entry's value; nullopt when malformed (the codec's decode, bounded and
/// checked). A plain function pointer: the core stays free of JSON.
using ConfigurationDecoder = std::optional<Configuration> (*)(std::string_view value);

/// The active configuration as the core uses it: sets of NodeIds. `from_entry` is false for the
/// implicit configuration (no configuration entry in the committed prefix: every node of the
/// cluster votes, version 0, today's behaviour).
struct ActiveConfig {
    std::uint64_t version = 0;
    NodeSet voters;
    NodeSet learners;
    bool from_entry = false;
    /// The configuration's node table (Configuration::table; empty when it has none) and its
    /// members with their addresses (voters, then learners): what a node needs to grow its mesh
    /// and elector when the configuration becomes active.
    std::vector<std::string> table;
    std::vector<Member> members;
    bool operator==(const ActiveConfig&) const = default;
    bool is_voter(NodeId n) const { return voters.contains(n); }
    bool is_member(NodeId n) const { return voters.contains(n) || learners.contains(n); }
    std::size_t quorum() const { return majority(voters.size()); }
};

}  // namespace conclave::replication
