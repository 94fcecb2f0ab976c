// SPDX-License-Identifier: Apache-2.0
// Test helpers shared by the log core's cell tests: pick actions of one type out of a batch.
#pragma once

#include <variant>
#include <vector>

#include "conclave/replication/actions.hpp"

namespace conclave::replication::testing {

/// The actions of type T in `actions`, in order.
template <class T>
std::vector<T> ActionsOf(const LogActions& actions) {
    std::vector<T> out;
    for (const auto& a : actions) {
        if (const auto* x = std::get_if<T>(&a)) {
            out.push_back(*x);
        }
    }
    return out;
}

/// Bodies of type B sent (SendLog) to `to`, in order.
template <class B>
std::vector<B> SentBodies(const LogActions& actions, NodeId to) {
    std::vector<B> out;
    for (const auto& s : ActionsOf<SendLog>(actions)) {
        if (s.to == to && std::holds_alternative<B>(s.message.body)) {
            out.push_back(std::get<B>(s.message.body));
        }
    }
    return out;
}

/// A chunk of the snapshot whose entries are `all` (count and crc as a sender computes them),
/// holding `n` of them from `offset`; `done` when it reaches the end.
inline InstallSnapshot SnapshotChunk(Lsn lsn, std::uint64_t len, const std::vector<Entry>& all,
                                     std::size_t offset, std::size_t n, bool fetch = false) {
    std::uint32_t crc = 0;
    for (const Entry& e : all) {
        crc = snapshot_crc(crc, e);
    }
    InstallSnapshot chunk{lsn, len, offset, {}, false, fetch, all.size(), crc};
    for (std::size_t i = offset; i < offset + n && i < all.size(); ++i) {
        chunk.entries.push_back(all[i]);
    }
    chunk.done = offset + chunk.entries.size() == all.size();
    return chunk;
}

}  // namespace conclave::replication::testing
