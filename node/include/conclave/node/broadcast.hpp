// SPDX-License-Identifier: Apache-2.0
// Liveness beats and advisory broadcasts between the nodes of a cluster (docs/design.md,
// "Liveness and broadcast"): the wire form on the mesh's advisory channel
// (net::Channel::Broadcast), its validation, and the receiver's dedupe. Pure: no I/O, no clock; the
// Node sends and receives.
//
// Wire (CBOR map, one per frame):
//   beat:      {"v": 1, "kind": "beat", "from": "<node id>"}
//   broadcast: {"v": 1, "kind": "msg", "from": "<node id>", "boot": "<16 hex>", "seq": N,
//               "topic": "<1..kMaxTopicBytes bytes>", "payload": <any JSON>}
// A message's id is "<from>/<boot>/<seq>": `boot` is drawn at random when the sending Node is
// made (so a restart never reuses an id), `seq` counts from 1. Unknown fields are refused, the
// payload is bounded (kMaxPayloadBytes of JSON text) and the CBOR nesting is bounded.
//
// What a broadcast promises (advisory): delivered at most once to each live member up when it is
// sent; lost for a member that is down, partitioned, outside the liveness window, in quarantine,
// or whose queue overflows; no order across senders; no retry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "conclave/admin/broadcast.hpp"

namespace conclave::node {

/// Largest topic, in bytes (a topic is 1 to 256 bytes of UTF-8).
inline constexpr std::size_t kMaxTopicBytes = 256;
/// Largest payload, as compact JSON text (below the admin server's 64 KiB body bound).
inline constexpr std::size_t kMaxPayloadBytes = 32 * 1024;
/// Deepest nesting of a payload (arrays and objects).
inline constexpr std::size_t kMaxPayloadNesting = 32;
/// Ids remembered per sender (boot): a message whose seq is at or below the oldest one forgotten
/// is taken as a duplicate (dropped), so memory stays bounded.
inline constexpr std::size_t kDedupeWindow = 1024;
/// Senders (node id + boot) remembered; the least recently heard is forgotten first.
inline constexpr std::size_t kDedupeSenders = 256;

struct BroadcastBeat {
    std::string from;
};

/// Monotonic counters of the broadcast channel (metrics).
struct BroadcastCounters {
    std::uint64_t broadcasts = 0;   // Node::broadcast calls that sent
    std::uint64_t frames_sent = 0;  // messages queued, one per recipient
    std::uint64_t delivered = 0;    // received and delivered
    std::uint64_t duplicates = 0;   // received again and dropped (dedupe)
    std::uint64_t beats_received = 0;
};

/// Why a topic or payload cannot be broadcast (nullopt: fine). `too_large` tells the HTTP route
/// 413 from 400.
struct BroadcastRefusal {
    std::string detail;
    bool too_large = false;
};
std::optional<BroadcastRefusal> check_broadcast(const std::string& topic,
                                                const nlohmann::json& payload);

std::vector<std::uint8_t> encode_beat(const std::string& from);
std::vector<std::uint8_t> encode_broadcast(const admin::BroadcastMessage& message);

/// Decodes and validates one frame's payload; throws codec::DecodeError naming the field.
std::variant<BroadcastBeat, admin::BroadcastMessage> decode_broadcast_frame(
    std::span<const std::uint8_t> bytes);

/// The receiver's memory of delivered ids: each id is accepted once (bounded memory above).
class BroadcastDedupe {
  public:
    /// True the first time (from, boot, seq) is seen; false for a repeat or an id too old to be
    /// remembered.
    bool accept(const admin::BroadcastMessage& message);
    std::size_t senders() const { return senders_.size(); }

  private:
    struct Window {
        std::uint64_t floor = 0;       // every seq <= floor counts as seen
        std::set<std::uint64_t> seen;  // seqs above floor, at most kDedupeWindow
        std::uint64_t last_used = 0;
    };
    std::map<std::string, Window> senders_;  // by "<from>/<boot>"
    std::uint64_t clock_ = 0;                // use order, for eviction
};

}  // namespace conclave::node
