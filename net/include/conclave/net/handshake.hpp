// The mesh handshake: the first frame each side sends on a new connection (channel Control).
//
// Three steps, all on channel Control:
//   1. the dialer (always the node with the lower index) sends its Hello;
//   2. the acceptor checks it and answers with its own Hello;
//   3. the dialer checks that the answer comes from the node it dialed, reports the peer up and
//      confirms with a Ping; the acceptor reports the peer up when the Ping arrives.
// So neither side reports a peer up that the other side refused. Hello payload (CBOR map):
//   {"kind": "hello", "v": <protocol version>, "cluster": "<name>", "node": "<string id>"}
// With a cluster secret (MeshOptions::secret) the hello exchange is also a mutual
// challenge-response: each Hello carries a fresh 32-byte random "nonce"; the acceptor's Hello
// carries "mac" = HMAC-SHA256(secret, "conclave-acceptor" | cluster | acceptor | dialer |
// nonce_dialer | nonce_acceptor) and the dialer's confirming Ping carries "mac" = HMAC-SHA256(
// secret, "conclave-dialer" | cluster | dialer | acceptor | nonce_dialer | nonce_acceptor). The
// secret never crosses the wire, both nonces are fresh (a recorded handshake proves nothing on a
// new connection) and the labels differ (a MAC cannot be reflected back). MACs are compared with
// CRYPTO_memcmp. Each Hello also carries "channels", the bit mask of the channels its sender
// serves: a mismatch (metadata log on at one node, off at the other) is refused at the handshake
// on both sides instead of as a bad frame after it.
// Ping payload: {"kind": "ping"} (+ "mac" when confirming). After the handshake a Ping is ignored
// by its receiver (the mesh sends one to probe a connection that may be dead); any other control
// frame is a bad frame.
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

/// Size of the handshake nonces and of an HMAC-SHA256.
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;
/// Shortest cluster secret accepted.
inline constexpr std::size_t kMinSecretBytes = 32;

struct Hello {
    std::uint64_t version = kProtocolVersion;
    std::string cluster;
    std::string node;
    std::vector<std::uint8_t> nonce{};  // empty when the sender has no secret
    std::vector<std::uint8_t> mac{};    // acceptor's answer only, with a secret
    /// Bit i set: the sender serves channel i. nullopt: not announced (older sender).
    std::optional<std::uint64_t> channels{};
};

enum class ControlKind : std::uint8_t { Hello, Ping };

std::vector<std::uint8_t> encode_hello(const Hello& hello);
std::vector<std::uint8_t> encode_ping();
/// The dialer's confirmation: a Ping carrying its MAC (empty: none).
std::vector<std::uint8_t> encode_confirmation(std::span<const std::uint8_t> mac);
/// The "mac" of a Ping (empty when it has none). Throws conclave::DecodeError.
std::vector<std::uint8_t> decode_ping_mac(std::span<const std::uint8_t> payload);

/// Which side of the handshake computes a MAC (the label of handshake_mac's input).
enum class HandshakeRole : std::uint8_t { Dialer, Acceptor };
/// HMAC-SHA256(secret, label(role) | cluster | from | to | nonce_dialer | nonce_acceptor), every
/// variable-length field length-prefixed. `from` is the node computing it as `role`.
std::vector<std::uint8_t> handshake_mac(std::string_view secret, HandshakeRole role,
                                        std::string_view cluster, std::string_view from,
                                        std::string_view to,
                                        std::span<const std::uint8_t> nonce_dialer,
                                        std::span<const std::uint8_t> nonce_acceptor);
/// Constant-time comparison (CRYPTO_memcmp); false when the sizes differ.
bool mac_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);
/// kNonceBytes from OpenSSL's CSPRNG. Throws std::runtime_error if it fails.
std::vector<std::uint8_t> random_nonce();
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
    WrongDirection,            // the dialer is not the lower index of the pair (or is this node)
    WrongPeer,                 // the dialed node answered with another id
    CertificateMismatch,       // TLS: the certificate (SAN, else CN) does not name the claimed id
    TlsFailed,                 // TLS handshake failed (e.g. certificate from another CA)
    Timeout,                   // handshake not completed within the deadline (slowloris)
    TooManyPending,            // too many connections still in their handshake
    AuthFailed,                // cluster secret: missing or wrong MAC / nonce
    ChannelMismatch,           // the peers serve different channels (e.g. metadata on vs off)
    TooManyPendingFromSource,  // too many handshakes in progress from one source address
};
// A hello that cannot be decoded is counted as bad frame "bad_handshake", not as a refusal.
inline constexpr std::size_t kRefusalCount = 13;

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
