// SPDX-License-Identifier: Apache-2.0
// JSON (logs, traces, HTTP) and CBOR (wire) forms of the elector's message model and state.
//
// One message model everywhere: these functions are the only place that knows how a Message looks
// outside the process. Decoding validates every field and throws DecodeError with a message naming
// the offending field; it never trusts its input.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/elector/actions.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/elector/messages.hpp"

// nlohmann's conversions find to_json through ADL, so each overload lives in the namespace of its
// type: the core types' in `conclave`, the elector's in `conclave::elector`.
namespace conclave {
void to_json(nlohmann::json& j, NodeId n);
void to_json(nlohmann::json& j, Term t);
void to_json(nlohmann::json& j, const Lsn& l);
void to_json(nlohmann::json& j, const NodeSet& s);
}  // namespace conclave

namespace conclave::elector {
void to_json(nlohmann::json& j, const Message& m);
void to_json(nlohmann::json& j, const ElectorState& s);
void to_json(nlohmann::json& j, const LeadershipSnapshot& s);
void to_json(nlohmann::json& j, const DurableState& s);
}  // namespace conclave::elector

namespace conclave::codec {

/// Thrown for input that is not a valid encoding; what() names the field.
class DecodeError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// Version of the message encoding; carried in every encoded message as "v".
inline constexpr std::uint64_t kMessageFormatVersion = 1;

/// Message <-> JSON. `to` is included when given (traces record the destination).
nlohmann::json message_to_json(const elector::Message& m, std::optional<NodeId> to = std::nullopt);
/// Throws DecodeError. Does not check node ids against a cluster size; callers do. Refuses what
/// the protocol cannot produce: any term (envelope, voter_term, LSN term) >= 2^63 (kTermLimit),
/// and an ElectionResponse whose `granted` disagrees with its refusal (granted <=> None), a
/// `config_version` >= 2^63 (kConfigVersionLimit), a ScoutingResponse refusal other than
/// stale-config / not-a-voter or one with will_vote=true. `config_version` is written only when
/// not 0 and read as 0 when absent (frames from before membership, or of the default
/// configuration), so such frames and traces are unchanged.
elector::Message message_from_json(const nlohmann::json& j);

/// A step line of the trace format (docs/tla-traces.md), as the simulator and the daemon's
/// --trace-elector write it: {"kind": "step", "action", "sent", "state"} and, when given, the
/// received message ("msg", addressed to `self`), the "peer" and the "timer". `sent` lists the
/// batch's messages one per recipient: a broadcast once for each of `others`.
nlohmann::json trace_step_line(std::string_view action, const elector::Actions& actions,
                               std::span<const NodeId> others, const elector::ElectorState& state,
                               NodeId self, const elector::Message* received,
                               std::optional<NodeId> peer, std::optional<elector::TimerId> timer);

/// Throws DecodeError for an LSN term >= 2^63.
Lsn lsn_from_json(const nlohmann::json& j);
elector::DurableState durable_state_from_json(const nlohmann::json& j);

/// Deepest nesting of arrays/maps accepted in a CBOR message: messages are flat records, and the
/// bound keeps a hostile frame from exhausting the stack of the recursive parser.
inline constexpr std::size_t kMaxCborDepth = 16;

/// read_cbor_argument's value for additional information 31 (indefinite length).
inline constexpr std::uint64_t kCborIndefinite = ~std::uint64_t{0};

/// Reads the argument of a CBOR head whose additional information is `info` (its bytes follow at
/// `pos`, which advances past them); kCborIndefinite for 31. False when it is malformed.
bool read_cbor_argument(std::span<const std::uint8_t> in, std::size_t& pos, std::uint8_t info,
                        std::uint64_t& value);

/// Iterative pre-check of a CBOR item: false when it is structurally broken or nests arrays/maps
/// deeper than `max_depth` (nlohmann's recursive reader must not see such input).
bool cbor_depth_ok(std::span<const std::uint8_t> in, std::size_t max_depth);

/// The JSON document of a CBOR frame (cbor_depth_ok first) whose "v" is `format_version`;
/// throws DecodeError on malformed CBOR or another version (`family` names the messages in it).
nlohmann::json cbor_document(std::span<const std::uint8_t> bytes, std::uint64_t format_version,
                             std::string_view family);

/// CBOR wire form of a message (a JSON object with "v" = kMessageFormatVersion).
std::vector<std::uint8_t> encode_cbor(const elector::Message& m);
/// Throws DecodeError on malformed CBOR, an unknown version or type, or a bad field.
elector::Message decode_cbor(std::span<const std::uint8_t> bytes);

/// Field helpers for decoders of other message families (replication/, net handshake): each throws
/// DecodeError naming `field` when it is missing or of the wrong type.
std::uint64_t get_u64(const nlohmann::json& j, const char* field);
/// A term field: get_u64, and below kTermLimit (2^63).
Term get_term(const nlohmann::json& j, const char* field);
bool get_bool(const nlohmann::json& j, const char* field);
std::string get_string(const nlohmann::json& j, const char* field);
const nlohmann::json& get_field(const nlohmann::json& j, const char* field);

}  // namespace conclave::codec
