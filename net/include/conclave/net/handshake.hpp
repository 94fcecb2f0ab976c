// SPDX-License-Identifier: Apache-2.0
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
// on both sides instead of as a bad frame after it. The advisory channels (kAdvisoryChannels) are
// announced apart, in "adv": they take no part in that check, and a node sends on one only to a
// peer that announced it.
// With MeshOptions::durable_term each Hello also carries "term", the sender's durable term: a
// peer refuses one below the highest that incarnation announced before (StateRegressed).
// Ping payload: {"kind": "ping"} (+ "mac" when confirming, + "term" when announcing a durable
// term that rose: Mesh::announce_term). After the handshake a Ping changes nothing but the term
// remembered for its sender (the mesh sends one to probe a connection that may be dead); any
// other control frame is a bad frame.
//
// Join (net/README.md, "Join"): a node that is not in the table dials a member (a seed) with
// Hello{..., "join": true}; the seed checks it like a member's hello minus the table and direction
// checks (JoinRefused when it takes no joins), answers with its Hello
// (MAC included), the joiner confirms (Ping + MAC), then sends one JoinRequest
//   {"kind": "join_request", "peer": "host:port", "http": "host:port"}
// and the seed answers with one JoinAnswer and closes:
//   {"kind": "join_answer", "status": "accepted"|"redirect"|"refused", "detail": "..."}
// A JoinRefused is told to the joiner as a JoinAnswer "refused" in place of the seed's Hello.
#pragma once

#include <boost/describe/enum.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/core/enum_names.hpp"
#include "conclave/core/types.hpp"
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
/// Largest JoinRequest payload (two strings of at most kMaxJoinAddressBytes and the keys).
inline constexpr std::size_t kMaxJoinRequestBytes = 1024;
/// Largest "peer" / "http" string of a JoinRequest.
inline constexpr std::size_t kMaxJoinAddressBytes = 256;
/// Largest JoinAnswer payload: its detail carries a configuration (JSON text) when accepted.
/// Accepted only on a joiner's connection waiting for its answer.
inline constexpr std::size_t kMaxJoinAnswerBytes = std::size_t{64} << 10;
/// Deepest nesting (maps and arrays) of a control payload larger than kMaxControlPayloadBytes,
/// checked by a non-recursive pre-pass before the recursive parser runs.
inline constexpr std::size_t kMaxControlNesting = 2;

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
    /// A joiner's hello: the sender is not in the table and asks to be added (encoded only
    /// when true).
    bool join = false;
    /// The sender's incarnation ("inc"; empty: not announced): a random id created with its data
    /// directory. Its peers remember it and refuse another one (StateLost): a node whose state
    /// was lost cannot come back as its old self. At most kMaxIncarnationBytes.
    std::string incarnation{};
    /// The sender is repaired (`conclaved --repair`, "rep", encoded only when true): a new
    /// incarnation is then taken in place of the remembered one.
    bool repaired = false;
    /// The sender's durable term ("term", u64; nullopt: not announced, e.g. a bare mesh or a
    /// joiner). Its peers remember the highest one each incarnation announced and refuse a lower
    /// one (StateRegressed): the node's state was restored from an older copy.
    std::optional<std::uint64_t> term{};
    /// Bit i set: the sender serves advisory channel i (kAdvisoryChannels; "adv", encoded when
    /// not 0). Not part of the channel-mismatch check: older senders announce none.
    std::uint64_t advisory = 0;
};

/// Longest incarnation accepted in a Hello.
inline constexpr std::size_t kMaxIncarnationBytes = 64;

enum class ControlKind : std::uint8_t { Hello, Ping, JoinRequest, JoinAnswer, Refused };

/// A refusal told to the other side before closing:
///   {"kind": "refused", "reason": "<HandshakeRefusal name>", "detail": "...", "mac": ...}
/// Sent for the refusals the other side can act on (wrong cluster, unknown node, state lost,
/// state regressed).
/// A refusal from a side that has not proven the cluster secret is only logged by its receiver;
/// "mac" (the dialer's confirmation MAC, when the dialer refuses) lets an acceptor check it.
struct PeerRefusal {
    std::string reason;
    std::string detail;
    std::vector<std::uint8_t> mac{};
};
/// Longest detail of a Refused frame.
inline constexpr std::size_t kMaxRefusalDetailBytes = 300;

/// What a joiner asks for: to be added at these addresses ("host:port" each).
struct JoinRequest {
    std::string peer;
    std::string http;
};

BOOST_DEFINE_FIXED_ENUM_CLASS(JoinStatus, std::uint8_t, Accepted, Redirect, Refused)
std::string_view to_string(JoinStatus s);

/// The seed's answer. The mesh carries `detail` only; the node layer decides its content (a
/// configuration when accepted, the leader's address when redirecting, a reason when refused).
struct JoinAnswer {
    JoinStatus status = JoinStatus::Refused;
    std::string detail;
};

std::vector<std::uint8_t> encode_hello(const Hello& hello);
std::vector<std::uint8_t> encode_ping();
/// The dialer's confirmation: a Ping carrying its MAC (empty: none).
std::vector<std::uint8_t> encode_confirmation(std::span<const std::uint8_t> mac);
/// The "mac" of a Ping (empty when it has none). Throws conclave::codec::DecodeError.
std::vector<std::uint8_t> decode_ping_mac(std::span<const std::uint8_t> payload);
/// A Ping announcing the sender's durable term after the handshake ({"kind": "ping", "term": t}:
/// Mesh::announce_term).
std::vector<std::uint8_t> encode_term_ping(std::uint64_t term);
/// The "term" of a Ping (nullopt when it has none). Throws conclave::codec::DecodeError (not a
/// ping, a term that is not an integer below 2^63).
std::optional<std::uint64_t> decode_ping_term(std::span<const std::uint8_t> payload);

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
/// Throws conclave::codec::DecodeError naming the field. Payloads above kMaxControlPayloadBytes are
/// refused (a JoinRequest or JoinAnswer is decoded by its own function, with its own bound).
ControlKind decode_control_kind(std::span<const std::uint8_t> payload);
/// Throws conclave::codec::DecodeError naming the field.
Hello decode_hello(std::span<const std::uint8_t> payload);

/// The detail is cut to kMaxRefusalDetailBytes.
std::vector<std::uint8_t> encode_refusal(const PeerRefusal& refusal);
/// Throws conclave::codec::DecodeError naming the field.
PeerRefusal decode_refusal(std::span<const std::uint8_t> payload);

/// Throws std::invalid_argument when a string is longer than kMaxJoinAddressBytes.
std::vector<std::uint8_t> encode_join_request(const JoinRequest& request);
/// Throws conclave::codec::DecodeError (payload above kMaxJoinRequestBytes, nesting, fields).
JoinRequest decode_join_request(std::span<const std::uint8_t> payload);
/// Throws std::invalid_argument when the payload would exceed kMaxJoinAnswerBytes.
std::vector<std::uint8_t> encode_join_answer(const JoinAnswer& answer);
/// Throws conclave::codec::DecodeError (payload above kMaxJoinAnswerBytes, nesting, fields).
JoinAnswer decode_join_answer(std::span<const std::uint8_t> payload);
/// Whether a CBOR payload nests maps and arrays at most `max_depth` deep, decided without
/// recursion beyond that depth (a 60,000-deep array is refused at level max_depth + 1). False
/// for malformed CBOR too.
bool cbor_nesting_within(std::span<const std::uint8_t> payload, std::size_t max_depth);

/// Why a handshake was refused. Counted per kind in MeshCounters.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    HandshakeRefusal, std::uint8_t, WrongCluster, UnknownNode,
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
    JoinRefused,               // a joiner's hello: this node takes no joins (or an empty id)
    StateLost,  // the peer is remembered with another incarnation: its state was lost or replaced
    StateRegressed  // the peer's durable term is below one it announced before: an older copy
)
// A hello that cannot be decoded is counted as bad frame "bad_handshake", not as a refusal.
inline constexpr std::size_t kRefusalCount = kEnumeratorCount<HandshakeRefusal>;

std::string_view to_string(HandshakeRefusal r);

/// Checks a Hello received by `self`. `expected` is the node that was dialed (outbound) or
/// nullopt (inbound). Returns the sender's index, or the refusal. An inbound hello with `join`
/// passes the version and cluster checks, then is refused (JoinRefused) when its id is in the
/// table, else accepted with `joiner` set and no `peer` (whether this node takes joins at all is
/// the mesh's check). On an outbound connection `join` is ignored.
struct HelloCheck {
    std::optional<NodeId> peer;
    std::optional<HandshakeRefusal> refusal;
    std::string detail;
    bool joiner = false;
    /// Inbound from a member of higher index, which this node dials: not a connection for the
    /// pair but a dial request (net/README.md, "Dial requests"), served once the peer is proven.
    bool dial_request = false;
};
HelloCheck check_hello(const Hello& hello, const Membership& membership, NodeId self,
                       std::optional<NodeId> expected);
/// A joiner's check of the seed's answer: version and cluster only (the seed's id need not be in
/// the joiner's table; the mesh then checks its certificate and MAC against the id it claims).
HelloCheck check_seed_hello(const Hello& hello, const std::string& cluster);

}  // namespace conclave::net
