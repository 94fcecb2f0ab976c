// SPDX-License-Identifier: Apache-2.0
// JSON (logs, traces) and CBOR (wire, mesh Channel::Replication) forms of the replicated log's
// messages (replication/messages.hpp).
//
// Like the elector's codec (json.hpp): decoding validates every field and throws DecodeError
// naming the offending field. Sizes are bounded here, independently of any LogConfig, so that a
// hostile frame cannot make the decoder allocate much more than the frame itself: at most
// kMaxLogEntriesPerMessage entries, keys of at most kMaxLogKeyBytes and values of at most
// kMaxLogValueBytes. The log core checks the finer rules (LSN order, sync points, its own limits).
//
// Wire form: a CBOR map {"v": 1, "type": "Append", "from": n, "term": t, ...body fields}; entries
// are {"lsn": {"term", "counter"}, "key": bytes, "value": bytes} with key and value as CBOR byte
// strings (opaque: no UTF-8 requirement). The JSON form has the same fields with key and value
// as strings (invalid UTF-8 replaced when dumped), for log lines and traces only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "conclave/codec/json.hpp"
#include "conclave/replication/messages.hpp"

namespace conclave::codec {

/// Version of the log message encoding; carried as "v".
inline constexpr std::uint64_t kLogMessageFormatVersion = 1;
/// Bounds checked by the decoder (a frame is at most 1 MiB anyway).
inline constexpr std::size_t kMaxLogEntriesPerMessage = 65536;
inline constexpr std::size_t kMaxLogKeyBytes = 64 * 1024;
inline constexpr std::size_t kMaxLogValueBytes = 1024 * 1024;

/// JSON form for logs and traces. `to` is included when given.
nlohmann::json log_message_to_json(const replication::LogMessage& m,
                                   std::optional<NodeId> to = std::nullopt);
/// Accepts the JSON form (key/value as strings) and the wire form (as binary). Throws DecodeError,
/// also for what no node can send: a term or LSN term >= 2^63, or an LSN whose term is above the
/// message term (nodes never hold or name entries of a term they have not reached).
replication::LogMessage log_message_from_json(const nlohmann::json& j);

std::vector<std::uint8_t> encode_log_cbor(const replication::LogMessage& m);
/// Throws DecodeError on malformed CBOR, an unknown version or type, or a bad field.
replication::LogMessage decode_log_cbor(std::span<const std::uint8_t> bytes);

}  // namespace conclave::codec
