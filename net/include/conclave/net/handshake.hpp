// The mesh handshake: the first frame each side sends on a new connection (channel Control).
//
// Three steps, all on channel Control:
//   1. the dialer (always the node with the lower index) sends its Hello;
//   2. the acceptor checks it and answers with its own Hello;
//   3. the dialer checks that the answer comes from the node it dialed, reports the peer up and
//      confirms with a Ping; the acceptor reports the peer up when the Ping arrives.
// So neither side reports a peer up that the other side refused. Hello payload (CBOR map):
//   {"kind": "hello", "v": <protocol version>, "cluster": "<name>", "node": "<string id>"}
// Ping payload: {"kind": "ping"}. After the handshake a Ping is ignored by its receiver (the mesh
// sends one to probe a connection that may be dead); any other control frame is a bad frame.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/elector/types.hpp"
#include "conclave/net/membership.hpp"

namespace conclave::net {

/// Version of the mesh protocol (framing + handshake + channel numbering). A peer announcing a
/// different version is refused.
inline constexpr std::uint64_t kProtocolVersion = 1;
/// Largest frame accepted before the handshake completes: a Hello is < 200 bytes; a hostile
/// length prefix cannot make an unauthenticated connection buffer more than this.
inline constexpr std::size_t kMaxHandshakeFrameBytes = 4096;

/// Largest control payload (hello, ping) decoded; anything longer is a bad frame. Keeps the
/// recursive CBOR parser's depth small even after the handshake, when frames may be 1 MiB.
inline constexpr std::size_t kMaxControlPayloadBytes = 512;

struct Hello {
    std::uint64_t version = kProtocolVersion;
    std::string cluster;
    std::string node;
};

enum class ControlKind : std::uint8_t { Hello, Ping };

std::vector<std::uint8_t> encode_hello(const Hello& hello);
std::vector<std::uint8_t> encode_ping();
/// Throws conclave::DecodeError naming the field.
ControlKind decode_control_kind(std::span<const std::uint8_t> payload);
/// Throws conclave::DecodeError naming the field.
Hello decode_hello(std::span<const std::uint8_t> payload);

/// Why a handshake was refused. Counted per kind in MeshCounters.
enum class HandshakeRefusal : std::uint8_t {
    WrongCluster,
    UnknownNode,
    DuplicateNode,  // the id already has an established connection
    UnsupportedVersion,
    WrongDirection,       // the dialer is not the lower index of the pair (or is this node)
    WrongPeer,            // the dialed node answered with another id
    CertificateMismatch,  // TLS: the certificate's common name is not the claimed id
    TlsFailed,            // TLS handshake failed (e.g. certificate from another CA)
    Timeout,              // handshake not completed within the deadline (slowloris)
    TooManyPending,       // too many connections still in their handshake
};
// A hello that cannot be decoded is counted as bad frame "bad_handshake", not as a refusal.
inline constexpr std::size_t kRefusalCount = 10;

std::string_view to_string(HandshakeRefusal r);

/// Checks a Hello received by `self`. `expected` is the node that was dialed (outbound) or
/// nullopt (inbound). Returns the sender's index, or the refusal.
struct HelloCheck {
    std::optional<NodeId> peer;
    std::optional<HandshakeRefusal> refusal;
    std::string detail;
};
HelloCheck check_hello(const Hello& hello, const Membership& membership, NodeId self,
                       std::optional<NodeId> expected);

}  // namespace conclave::net
