// SPDX-License-Identifier: Apache-2.0
// Length-prefixed frames: the unit the mesh carries between nodes.
//
// Wire layout of one frame (all integers big-endian):
//
//   offset 0  u32  length   number of bytes that follow the length field (1 + payload size);
//                           1 <= length <= max_frame_bytes
//   offset 4  u8   channel  which message family the payload belongs to (see Channel)
//   offset 5  ...  payload  opaque to the framing layer (CBOR for every channel so far)
//
// The decoder is a pure byte-stream parser with no I/O, so that it can be fuzzed and replayed
// in isolation (fuzz/). It checks the length prefix against the maximum *before* buffering the
// payload, so a hostile length costs nothing.
#pragma once

#include <boost/describe/enum.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "conclave/core/enum_names.hpp"

namespace conclave::net {

/// Size of the length field plus the channel byte.
inline constexpr std::size_t kFrameHeaderBytes = 5;
/// Default largest `length` accepted: 1 MiB. Elector messages are < 200 bytes; the bound is for
/// the replication log's batches.
inline constexpr std::size_t kDefaultMaxFrameBytes = std::size_t{1} << 20;

/// Message families. A new family gets a new value; a node that receives a channel it has no
/// handler for closes the connection (bad frame "unknown_channel").
enum class Channel : std::uint8_t {
    Control = 0,      // mesh handshake (hello) and keep-alive probes; never seen by handlers
    Elector = 1,      // elector::Message, CBOR (codec/json.hpp)
    Replication = 2,  // the replicated metadata log
    Broadcast = 3,    // advisory: liveness beats and broadcasts between nodes (node/broadcast.hpp)
};
inline constexpr std::size_t kChannelCount = 4;
/// Advisory channels: announced apart from the others in the Hello ("adv"), so that peers that
/// serve them and peers that do not (an older version) still connect; a frame on one is sent only
/// to a peer that announced it (Mesh::send returns false for the others).
inline constexpr std::uint64_t kAdvisoryChannels = std::uint64_t{1}
                                                   << static_cast<unsigned>(Channel::Broadcast);
inline constexpr bool is_advisory(Channel c) {
    return static_cast<std::size_t>(c) < 64 &&
           (kAdvisoryChannels & (std::uint64_t{1} << static_cast<unsigned>(c))) != 0;
}

std::string_view to_string(Channel c);

/// Why a byte stream (or one frame in it) was rejected. Counted per kind in MeshCounters.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    BadFrameKind, std::uint8_t,
    Oversized,         // length prefix above the maximum
    Empty,             // length prefix 0 (no channel byte)
    Truncated,         // the connection ended in the middle of a frame
    UnknownChannel,    // channel byte with no registered handler
    Undecodable,       // a handler could not decode the payload (malformed CBOR, bad field, ...)
    WrongSender,       // the decoded sender differs from the peer that completed the handshake
    BadHandshake,      // malformed hello, or a non-hello frame before the handshake finished
    UnexpectedControl  // a control frame of unknown kind after the handshake
)
inline constexpr std::size_t kBadFrameKindCount = kEnumeratorCount<BadFrameKind>;

std::string_view to_string(BadFrameKind k);

struct Frame {
    Channel channel{};  // raw byte value; may be outside the enum (checked by the mesh)
    std::vector<std::uint8_t> payload;
};

/// Appends one encoded frame to `out`. Precondition: 1 + payload.size() fits in 32 bits.
void encode_frame(Channel channel, std::span<const std::uint8_t> payload,
                  std::vector<std::uint8_t>& out);
std::vector<std::uint8_t> encode_frame(Channel channel, std::span<const std::uint8_t> payload);

/// Incremental decoder: feed() arbitrary chunks, then call next() until it returns nullopt.
/// After an error the stream is broken for good: next() keeps returning nullopt.
class FrameDecoder {
  public:
    explicit FrameDecoder(std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

    void feed(std::span<const std::uint8_t> bytes);
    /// The next complete frame, or nullopt (incomplete input, or error() is set).
    std::optional<Frame> next();

    std::optional<BadFrameKind> error() const { return error_; }
    /// The length prefix that caused an error (for the log line).
    std::uint64_t error_length() const { return error_length_; }
    /// True when bytes of an incomplete frame are buffered: an end of stream now is a truncation.
    bool mid_frame() const { return buffer_.size() > read_offset_; }
    std::size_t buffered_bytes() const { return buffer_.size() - read_offset_; }

    std::size_t max_frame_bytes() const { return max_frame_bytes_; }
    /// The mesh lowers the bound during the handshake and raises it once the peer is known.
    void set_max_frame_bytes(std::size_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }

  private:
    std::size_t max_frame_bytes_;
    std::vector<std::uint8_t> buffer_;
    std::size_t read_offset_ = 0;
    std::optional<BadFrameKind> error_;
    std::uint64_t error_length_ = 0;
};

}  // namespace conclave::net
