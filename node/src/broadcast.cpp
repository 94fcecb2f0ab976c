// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/broadcast.hpp"

#include <algorithm>

#include "conclave/codec/json.hpp"
#include "conclave/net/handshake.hpp"

namespace conclave::node {

using admin::BroadcastMessage;
namespace {

using nlohmann::json;

constexpr std::uint64_t kBroadcastWireVersion = 1;
/// The frame's map wraps the payload: one level more than the payload's own bound.
constexpr std::size_t kMaxFrameNesting = kMaxPayloadNesting + 1;
constexpr std::size_t kBootHexDigits = 16;

/// Depth of `j` (a scalar is 0), stopping once past `limit`; false when a binary value is met.
bool PayloadShapeWithin(const json& j, std::size_t limit, std::size_t depth = 0) {
    if (j.is_binary()) {
        return false;
    }
    if (!j.is_structured()) {
        return true;
    }
    if (depth + 1 > limit) {
        return false;
    }
    return std::all_of(j.begin(), j.end(), [&](const json& child) {
        return PayloadShapeWithin(child, limit, depth + 1);
    });
}

/// The payload as compact JSON text; nullopt when a string in it is not UTF-8.
std::optional<std::string> PayloadText(const json& payload) {
    try {
        return payload.dump();
    } catch (const json::exception&) {
        return std::nullopt;
    }
}

void RejectUnknownBroadcastFields(const json& j, std::initializer_list<std::string_view> known) {
    for (const auto& [key, value] : j.items()) {
        (void)value;
        if (std::find(known.begin(), known.end(), key) == known.end()) {
            throw codec::DecodeError("broadcast: unknown field '" + key.substr(0, 64) + "'");
        }
    }
}

BroadcastMessage DecodeBroadcastMessage(const json& j) {
    RejectUnknownBroadcastFields(j, {"v", "kind", "from", "boot", "seq", "topic", "payload"});
    BroadcastMessage m;
    m.from = codec::get_string(j, "from");
    m.boot = codec::get_string(j, "boot");
    if (m.boot.size() != kBootHexDigits || !std::all_of(m.boot.begin(), m.boot.end(), [](char c) {
            return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        })) {
        throw codec::DecodeError("boot: expected 16 lowercase hex digits");
    }
    m.seq = codec::get_u64(j, "seq");
    if (m.seq == 0) {
        throw codec::DecodeError("seq: expected a sequence number from 1");
    }
    m.topic = codec::get_string(j, "topic");
    if (!j.contains("payload")) {
        throw codec::DecodeError("payload: missing");
    }
    m.payload = j.at("payload");
    if (auto refusal = check_broadcast(m.topic, m.payload)) {
        throw codec::DecodeError(refusal->detail);
    }
    return m;
}

}  // namespace

std::optional<BroadcastRefusal> check_broadcast(const std::string& topic,
                                                const nlohmann::json& payload) {
    if (topic.empty() || topic.size() > kMaxTopicBytes) {
        return BroadcastRefusal{"topic: expected 1 to " + std::to_string(kMaxTopicBytes) +
                                    " bytes, got " + std::to_string(topic.size()),
                                topic.size() > kMaxTopicBytes};
    }
    if (!PayloadText(json(topic))) {
        return BroadcastRefusal{"topic: not valid UTF-8", false};
    }
    if (payload.is_discarded() || !PayloadShapeWithin(payload, kMaxPayloadNesting)) {
        return BroadcastRefusal{"payload: expected JSON nested at most " +
                                    std::to_string(kMaxPayloadNesting) + " levels deep",
                                false};
    }
    const std::optional<std::string> text = PayloadText(payload);
    if (!text) {
        return BroadcastRefusal{"payload: a string is not valid UTF-8", false};
    }
    if (text->size() > kMaxPayloadBytes) {
        return BroadcastRefusal{"payload: " + std::to_string(text->size()) +
                                    " bytes of JSON, above the maximum " +
                                    std::to_string(kMaxPayloadBytes),
                                true};
    }
    return std::nullopt;
}

std::vector<std::uint8_t> encode_beat(const std::string& from) {
    return json::to_cbor(json{{"v", kBroadcastWireVersion}, {"kind", "beat"}, {"from", from}});
}

std::vector<std::uint8_t> encode_broadcast(const BroadcastMessage& message) {
    return json::to_cbor(json{{"v", kBroadcastWireVersion},
                              {"kind", "msg"},
                              {"from", message.from},
                              {"boot", message.boot},
                              {"seq", message.seq},
                              {"topic", message.topic},
                              {"payload", message.payload}});
}

std::variant<BroadcastBeat, BroadcastMessage> decode_broadcast_frame(
    std::span<const std::uint8_t> bytes) {
    // The recursive CBOR parser runs only on input whose nesting a non-recursive pass bounded.
    if (!net::cbor_nesting_within(bytes, kMaxFrameNesting)) {
        throw codec::DecodeError("broadcast: malformed CBOR or nested deeper than " +
                                 std::to_string(kMaxFrameNesting));
    }
    json j;
    try {
        j = json::from_cbor(bytes.begin(), bytes.end(), /*strict=*/true,
                            /*allow_exceptions=*/false);
    } catch (const json::exception& e) {
        throw codec::DecodeError(std::string("broadcast: malformed CBOR: ") + e.what());
    }
    if (j.is_discarded() || !j.is_object()) {
        throw codec::DecodeError("broadcast: not a CBOR map");
    }
    if (codec::get_u64(j, "v") != kBroadcastWireVersion) {
        throw codec::DecodeError("v: unknown broadcast format version");
    }
    const std::string kind = codec::get_string(j, "kind");
    if (kind == "beat") {
        RejectUnknownBroadcastFields(j, {"v", "kind", "from"});
        return BroadcastBeat{codec::get_string(j, "from")};
    }
    if (kind == "msg") {
        return DecodeBroadcastMessage(j);
    }
    throw codec::DecodeError("kind: expected 'beat' or 'msg'");
}

bool BroadcastDedupe::accept(const BroadcastMessage& message) {
    const std::string sender = message.from + "/" + message.boot;
    auto it = senders_.find(sender);
    if (it == senders_.end()) {
        if (senders_.size() >= kDedupeSenders) {
            senders_.erase(std::min_element(senders_.begin(), senders_.end(),
                                            [](const auto& a, const auto& b) {
                                                return a.second.last_used < b.second.last_used;
                                            }));
        }
        it = senders_.emplace(sender, Window{}).first;
    }
    Window& w = it->second;
    w.last_used = ++clock_;
    if (message.seq <= w.floor || !w.seen.insert(message.seq).second) {
        return false;
    }
    while (w.seen.size() > kDedupeWindow) {
        w.floor = *w.seen.begin();
        w.seen.erase(w.seen.begin());
    }
    return true;
}

}  // namespace conclave::node
