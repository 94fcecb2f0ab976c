// SPDX-License-Identifier: Apache-2.0
// The vocabulary every layer shares: node ids, terms, Leader Sequence Numbers, time and node sets
// (the elector, the log, the codec, the simulator, the mesh and the daemon).
//
// Terms, node ids and Leader Sequence Numbers are distinct types so that they cannot be mixed up.
// Everything here is plain data: copyable, comparable, hashable, free of I/O.
#pragma once

#include <bit>
#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "conclave/core/check.hpp"

namespace conclave {

/// Monotonic time as supplied by the driver (milliseconds since an arbitrary epoch), and durations.
/// The core never reads a clock: every input carries `now`.
using Millis = std::chrono::milliseconds;

/// Index of a node in the cluster configuration: 0 .. cluster_size-1. The daemon maps the
/// configured string ids ("n1") to these indices; the wire carries the index plus the cluster name
/// checked at handshake.
struct NodeId {
    std::uint16_t value = 0;
    constexpr auto operator<=>(const NodeId&) const = default;
};

/// Terms (and LSN terms) the protocol can produce are below 2^63: a node raises its term by one
/// per election, so no honest cluster gets near it. Decoders and cores refuse anything at or above
/// it, the elector starts no election from the last term below it, and next() checks that it
/// stays below it, so a term can never wrap to 0 (a term regression).
inline constexpr std::uint64_t kTermLimit = std::uint64_t{1} << 63;

/// Election term. Terms never decrease on a node, including across restarts.
struct Term {
    std::uint64_t value = 0;
    constexpr auto operator<=>(const Term&) const = default;
    constexpr Term next() const {
        CONCLAVE_CHECK(value < kTermLimit - 1, "terms stay below 2^63: next() never wraps");
        return Term{value + 1};
    }
};

/// Leader Sequence Number: (term, counter), ordered term first. A new leader starts its counter
/// afresh; anything carrying an LSN older than one already seen from a newer leader is stale.
struct Lsn {
    Term term{};
    std::uint64_t counter = 0;
    constexpr auto operator<=>(const Lsn&) const = default;
};

/// Largest cluster the core supports; node sets are 64-bit masks so that the state stays plain,
/// cheap to copy and cheap to hash (the explorer hashes millions of states).
inline constexpr std::size_t kMaxClusterSize = 64;

/// A set of nodes as a bit mask.
struct NodeSet {
    std::uint64_t bits = 0;

    /// Nodes 0 .. n-1: the members of a cluster of n nodes (every node at n >= 64).
    static constexpr NodeSet first(std::size_t n) {
        return NodeSet{n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1};
    }

    constexpr bool contains(NodeId n) const { return (bits >> n.value) & 1U; }
    constexpr void insert(NodeId n) { bits |= (std::uint64_t{1} << n.value); }
    constexpr void erase(NodeId n) { bits &= ~(std::uint64_t{1} << n.value); }
    constexpr void clear() { bits = 0; }
    constexpr std::size_t size() const { return static_cast<std::size_t>(std::popcount(bits)); }
    constexpr bool empty() const { return bits == 0; }
    constexpr bool operator==(const NodeSet&) const = default;
};

std::string to_string(NodeId n);
std::string to_string(Term t);
std::string to_string(const Lsn& l);

}  // namespace conclave

template <>
struct std::hash<conclave::NodeId> {
    std::size_t operator()(conclave::NodeId n) const noexcept { return n.value; }
};
