// SPDX-License-Identifier: Apache-2.0
#include "conclave/net/frame.hpp"
#include "conclave/core/check.hpp"
#include "conclave/core/enum_names.hpp"

#include <limits>

namespace conclave::net {

std::string_view to_string(Channel c) {
    switch (c) {
        case Channel::Control:
            return "control";
        case Channel::Elector:
            return "elector";
        case Channel::Replication:
            return "replication";
        case Channel::Broadcast:
            return "broadcast";
    }
    return "unknown";
}

std::string_view to_string(BadFrameKind k) {
    return enum_name<NameStyle::Snake>(k);
}

void encode_frame(Channel channel, std::span<const std::uint8_t> payload,
                  std::vector<std::uint8_t>& out) {
    CONCLAVE_CHECK(payload.size() < std::numeric_limits<std::uint32_t>::max(),
                   "a frame payload fits the 32-bit length prefix");
    const auto length = static_cast<std::uint32_t>(payload.size() + 1);
    out.reserve(out.size() + kFrameHeaderBytes + payload.size());
    out.push_back(static_cast<std::uint8_t>(length >> 24));
    out.push_back(static_cast<std::uint8_t>(length >> 16));
    out.push_back(static_cast<std::uint8_t>(length >> 8));
    out.push_back(static_cast<std::uint8_t>(length));
    out.push_back(static_cast<std::uint8_t>(channel));
    out.insert(out.end(), payload.begin(), payload.end());
}

std::vector<std::uint8_t> encode_frame(Channel channel, std::span<const std::uint8_t> payload) {
    std::vector<std::uint8_t> out;
    encode_frame(channel, payload, out);
    return out;
}

FrameDecoder::FrameDecoder(std::size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {
    CONCLAVE_CHECK(max_frame_bytes_ >= 1, "a frame holds at least its channel byte");
}

void FrameDecoder::feed(std::span<const std::uint8_t> bytes) {
    if (error_) {
        return;
    }
    // Compact before growing so that the buffer holds at most one partial frame plus one chunk.
    if (read_offset_ > 0 && read_offset_ * 2 >= buffer_.size()) {
        buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
        read_offset_ = 0;
    }
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

std::optional<Frame> FrameDecoder::next() {
    if (error_) {
        return std::nullopt;
    }
    const std::size_t available = buffer_.size() - read_offset_;
    if (available < 4) {
        return std::nullopt;
    }
    const std::uint8_t* p = buffer_.data() + read_offset_;
    const std::uint64_t length = (std::uint64_t{p[0]} << 24) | (std::uint64_t{p[1]} << 16) |
                                 (std::uint64_t{p[2]} << 8) | std::uint64_t{p[3]};
    if (length == 0) {
        error_ = BadFrameKind::Empty;
        return std::nullopt;
    }
    if (length > max_frame_bytes_) {
        error_ = BadFrameKind::Oversized;
        error_length_ = length;
        return std::nullopt;
    }
    if (available < 4 + length) {
        return std::nullopt;
    }
    Frame frame;
    frame.channel = static_cast<Channel>(p[4]);
    frame.payload.assign(p + kFrameHeaderBytes, p + 4 + length);
    read_offset_ += 4 + static_cast<std::size_t>(length);
    if (read_offset_ == buffer_.size()) {
        buffer_.clear();
        read_offset_ = 0;
    }
    return frame;
}

}  // namespace conclave::net
