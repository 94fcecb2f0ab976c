// SPDX-License-Identifier: Apache-2.0
// The log's message model: one envelope (sender, term) around a variant of bodies. Separate from
// the elector's messages; a driver multiplexes both over the same mesh.
//
// Requests (SyncRequest, Append, FetchRequest) are sent only by the leader of the envelope term.
// Every receiver answers a request of a lower term with the matching response in its own (higher)
// term, which deposes the stale leader's log.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "conclave/elector/messages.hpp"
#include "conclave/replication/entry.hpp"

namespace conclave::replication {

/// A new (PASSIVE) leader asks for the receiver's log position. Answering it in term T is a durable
/// promise never to accept log messages of a term below T.
struct SyncRequest {
    static constexpr std::string_view kName = "SyncRequest";
    bool operator==(const SyncRequest&) const = default;
};

/// The receiver's last and commit LSN (in the request's term), or a refusal (in a higher term).
struct SyncResponse {
    static constexpr std::string_view kName = "SyncResponse";
    Lsn last_lsn{};
    Lsn commit_lsn{};
    bool operator==(const SyncResponse&) const = default;
};

/// Replicate `entries` (possibly none: a heartbeat) that follow `prev_lsn` in the leader's log, and
/// tell the leader's commit point.
struct Append {
    static constexpr std::string_view kName = "Append";
    Lsn prev_lsn{};
    std::vector<Entry> entries;
    Lsn commit_lsn{};
    bool operator==(const Append&) const = default;
};

/// ok: the receiver's log matches the leader's up to `last_lsn` and that prefix is durable.
/// !ok: the append's `prev_lsn` was missing; `last_lsn` / `commit_lsn` are the receiver's, as
/// hints where to resume (or a refusal in a higher term).
/// `non_voting` (ok acks only): the sender is repaired (LogMeta::repaired): the leader uses the
/// ack for flow control only and never counts it towards a commit.
struct AppendAck {
    static constexpr std::string_view kName = "AppendAck";
    bool ok = false;
    Lsn prev_lsn{};  // !ok: the prev_lsn of the refused append (lets the leader spot stale
                     // refusals)
    Lsn last_lsn{};
    Lsn commit_lsn{};
    bool non_voting = false;
    bool operator==(const AppendAck&) const = default;
};

/// A PASSIVE leader pulls the entries after `after_lsn`, up to `up_to_lsn`, at most `max_entries`
/// of them, from the node that has the most advanced log.
struct FetchRequest {
    static constexpr std::string_view kName = "FetchRequest";
    Lsn after_lsn{};
    Lsn up_to_lsn{};
    std::uint32_t max_entries = 0;
    bool operator==(const FetchRequest&) const = default;
};

/// One batch of a fetch. Empty `entries` means the responder does not have `after_lsn` (or has
/// nothing more); `last_lsn` is the responder's last LSN.
struct FetchResponse {
    static constexpr std::string_view kName = "FetchResponse";
    Lsn after_lsn{};
    std::vector<Entry> entries;
    Lsn last_lsn{};
    bool operator==(const FetchResponse&) const = default;
};

/// One chunk of a snapshot (compaction): the leader sends it to a follower whose next
/// entry it has compacted away (`fetch` false: a request of the leader), or a sync source answers
/// a FetchRequest whose `after_lsn` it has compacted away (`fetch` true: a response). Chunks of
/// one snapshot carry the same (lsn, len, count, crc) and consecutive `offset`s (index of the
/// first entry in `entries` within the snapshot's `count` entries); the last has `done`. Each
/// chunk is bounded like a batch (max_batch_entries / max_batch_bytes), and the sender keeps at
/// most max_inflight_batches chunks unacknowledged (SnapshotAck), so a snapshot of any size fits
/// the frame limit and the mesh's send queue. `crc`: snapshot_crc() of all `count` entries.
struct InstallSnapshot {
    static constexpr std::string_view kName = "InstallSnapshot";
    Lsn lsn{};
    std::uint64_t len = 0;
    std::uint64_t offset = 0;
    std::vector<Entry> entries;
    bool done = false;
    bool fetch = false;
    std::uint64_t count = 0;
    std::uint32_t crc = 0;
    bool operator==(const InstallSnapshot&) const = default;
};

/// The receiver of InstallSnapshot chunks of (lsn, len) holds their first `offset` entries (a
/// response, in the chunks' term; `fetch` as theirs). Sent for every chunk collected, and for a
/// duplicate. `resend`: a chunk is missing (a gap, or a chunk of a transfer this node does not
/// hold, or no progress for a while during a fetch): send again from `offset`.
struct SnapshotAck {
    static constexpr std::string_view kName = "SnapshotAck";
    Lsn lsn{};
    std::uint64_t len = 0;
    std::uint64_t offset = 0;
    bool fetch = false;
    bool resend = false;
    bool operator==(const SnapshotAck&) const = default;
};

// Each body's fields, listed once (Boost.Describe; see the elector's messages.hpp): the printer
// (to_string.cpp) and the log codec (codec/src/log_codec.cpp, LSN checks too) derive from them.
BOOST_DESCRIBE_STRUCT(SyncRequest, (), ())
BOOST_DESCRIBE_STRUCT(SyncResponse, (), (last_lsn, commit_lsn))
BOOST_DESCRIBE_STRUCT(Append, (), (prev_lsn, entries, commit_lsn))
BOOST_DESCRIBE_STRUCT(AppendAck, (), (ok, prev_lsn, last_lsn, commit_lsn, non_voting))
BOOST_DESCRIBE_STRUCT(FetchRequest, (), (after_lsn, up_to_lsn, max_entries))
BOOST_DESCRIBE_STRUCT(FetchResponse, (), (after_lsn, entries, last_lsn))
BOOST_DESCRIBE_STRUCT(InstallSnapshot, (), (lsn, len, offset, entries, done, fetch, count, crc))
BOOST_DESCRIBE_STRUCT(SnapshotAck, (), (lsn, len, offset, fetch, resend))

using LogMessageBody = std::variant<SyncRequest, SyncResponse, Append, AppendAck, FetchRequest,
                                    FetchResponse, InstallSnapshot, SnapshotAck>;
static_assert(elector::kAllFieldsDescribed<LogMessageBody>,
              "every field of every log message body is in its BOOST_DESCRIBE_STRUCT list");

/// Names of LogMessageBody's alternatives, by index, derived from each body's `kName`.
inline constexpr std::array<std::string_view, std::variant_size_v<LogMessageBody>>
    kLogMessageNames = elector::body_names<LogMessageBody>(
        std::make_index_sequence<std::variant_size_v<LogMessageBody>>{});

struct LogMessage {
    NodeId from{};
    Term term{};
    LogMessageBody body;
    bool operator==(const LogMessage&) const = default;
};

std::string_view message_name(const LogMessageBody& body);
std::string to_string(const LogMessage& m);

}  // namespace conclave::replication
