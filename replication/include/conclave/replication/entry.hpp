// SPDX-License-Identifier: Apache-2.0
// Entries of the replicated metadata log and the small durable state that goes with them.
//
// Plain data: copyable, comparable, free of I/O. Shared by the log core, its storage, and (later)
// the codec, the simulator and the daemon.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conclave/core/types.hpp"

namespace conclave::replication {

/// "No entry": the LSN before the first entry of every log. Real entries have term >= 1.
inline constexpr Lsn kNoLsn{};

/// One log entry. `lsn` is its identity: two entries with the same LSN anywhere in the cluster are
/// the same entry (one leader per term, and a leader never reuses a counter). `key` names the
/// metadata item; `value` is JSON text or opaque bytes. Sync points (see is_sync_point) have an
/// empty key and value; application entries always have a non-empty key.
struct Entry {
    Lsn lsn{};
    std::string key;
    std::string value;
    bool operator==(const Entry&) const = default;
};

/// A new leader of term T re-commits the log it adopted by appending the sync point (T, 0). The
/// elector issues proposal LSNs from (T, 1) on, so counter 0 is free for it.
inline constexpr bool is_sync_point(const Lsn& lsn) {
    return lsn.counter == 0 && lsn.term.value > 0;
}
inline bool is_sync_point(const Entry& e) {
    return is_sync_point(e.lsn);
}

/// Bytes an entry costs in batches (payload, not wire framing).
inline std::size_t entry_bytes(const Entry& e) {
    return 16 + e.key.size() + e.value.size();
}

/// Compaction: the state of the committed prefix of length `len`, ending at `lsn`, that
/// replaces it. `entries` holds, for each key written in that prefix, the last entry that wrote it
/// (sync points dropped), in LSN order: replaying them gives the same key -> value map as
/// replaying the whole prefix. An empty snapshot (len 0, kNoLsn) covers nothing.
struct Snapshot {
    Lsn lsn{};
    std::size_t len = 0;
    std::vector<Entry> entries;
    bool operator==(const Snapshot&) const = default;
};

/// Payload bytes of a snapshot (what the quota counts).
inline std::size_t snapshot_bytes(const Snapshot& s) {
    std::size_t bytes = 0;
    for (const Entry& e : s.entries) {
        bytes += entry_bytes(e);
    }
    return bytes;
}

/// The checksum of a snapshot's entries, carried by its InstallSnapshot chunks: a chain of
/// CRC-32s, one per entry (of the previous value, the LSN, the key and value lengths, the key and
/// the value), starting from 0; `crc` is the value after the entries before `e`. Defined in
/// record.cpp.
std::uint32_t snapshot_crc(std::uint32_t crc, const Entry& e);

/// What the log core must find again after a crash, besides the entries.
/// `term` is a promise: once durable, this node never accepts log messages of a lower term (that
/// promise is what a new leader's sync relies on). `commit_lsn` is a lower bound of the commit
/// point (written with the term; commit is re-learnt from the leader).
/// `repaired` is the repaired marker (`conclaved --repair`): set, the node lost part of
/// its log and holds R = the highest term it may have promised before; it gives no sync promise
/// and its acknowledgements count for no commit until it holds, durably, the log of a leader of a
/// term above R up to that leader's commit point at or after its sync point.
struct LogMeta {
    LogMeta() = default;
    LogMeta(Term term_in, Lsn commit_lsn_in, std::optional<Term> repaired_in = std::nullopt)
        : term(term_in), commit_lsn(commit_lsn_in), repaired(repaired_in) {}
    Term term{};
    Lsn commit_lsn{};
    std::optional<Term> repaired;
    bool operator==(const LogMeta&) const = default;
};

}  // namespace conclave::replication
