// SPDX-License-Identifier: Apache-2.0
#include "frame_target.hpp"

#include <cstdio>
#include <cstdlib>
#include <span>

#include "conclave/codec/json.hpp"
#include "conclave/codec/log_codec.hpp"
#include "conclave/net/frame.hpp"
#include "conclave/net/handshake.hpp"

namespace conclave::net::fuzz {

namespace {

void check(bool condition, const char* what) {
    if (!condition) {
        std::fprintf(stderr, "frame fuzz: invariant failed: %s\n", what);
        std::abort();
    }
}

/// The join decoders take control payloads above 512 bytes (with their nesting pre-pass): tried
/// on every control payload, whatever its kind; what decodes must round-trip.
void decode_join(std::span<const std::uint8_t> payload) {
    try {
        const JoinRequest r = decode_join_request(payload);
        const JoinRequest again = decode_join_request(encode_join_request(r));
        check(again.peer == r.peer && again.http == r.http, "join request round trip");
    } catch (const codec::DecodeError&) {
    }
    try {
        const JoinAnswer a = decode_join_answer(payload);
        const JoinAnswer again = decode_join_answer(encode_join_answer(a));
        check(again.status == a.status && again.detail == a.detail, "join answer round trip");
    } catch (const codec::DecodeError&) {
    }
}

void decode_payload(const Frame& frame) {
    try {
        if (frame.channel == Channel::Control) {
            decode_join(frame.payload);
            if (decode_control_kind(frame.payload) == ControlKind::Hello) {
                (void)decode_hello(frame.payload);
            }
        } else if (frame.channel == Channel::Elector) {
            const elector::Message m = codec::decode_cbor(frame.payload);
            // What decodes must re-encode and decode to the same message.
            check(codec::decode_cbor(codec::encode_cbor(m)) == m, "elector message round trip");
        } else if (frame.channel == Channel::Replication) {
            const replication::LogMessage m = codec::decode_log_cbor(frame.payload);
            check(codec::decode_log_cbor(codec::encode_log_cbor(m)) == m, "log message round trip");
        }
    } catch (const codec::DecodeError&) {
        // expected for bad input
    }
}

}  // namespace

void run_frame_input(const std::uint8_t* data, std::size_t size) {
    // A small maximum so that the oversized path is reached often.
    constexpr std::size_t kMax = 4096;
    const std::size_t chunk = size > 0 ? std::size_t{data[0]} + 1 : 1;
    const std::span<const std::uint8_t> input(data, size);
    FrameDecoder decoder(kMax);
    std::size_t consumed = 0;
    for (std::size_t offset = 0; offset < size; offset += chunk) {
        decoder.feed(input.subspan(offset, std::min(chunk, size - offset)));
        while (auto frame = decoder.next()) {
            check(frame->payload.size() + 1 <= kMax, "frame within the maximum");
            // Re-encoding a frame yields exactly the bytes it was decoded from.
            const auto again = encode_frame(frame->channel, frame->payload);
            check(consumed + again.size() <= size, "frame inside the input");
            check(std::equal(again.begin(), again.end(), data + consumed), "frame round trip");
            consumed += again.size();
            decode_payload(*frame);
        }
    }
    if (!decoder.error()) {
        check(consumed + decoder.buffered_bytes() == size, "every byte is a frame or buffered");
    }
}

}  // namespace conclave::net::fuzz
