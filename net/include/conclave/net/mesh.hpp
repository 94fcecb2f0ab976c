// SPDX-License-Identifier: Apache-2.0
// The TCP full mesh: one connection per pair of nodes, carrying typed frames.
//
// The mesh knows nothing about elections. It
//   - listens on this node's endpoint and dials every peer with a higher index (the lower index
//     of a pair dials, so each pair has exactly one connection), redialing with exponential
//     backoff plus jitter while the peer is down;
//   - at start, asks every peer with a lower index to dial it now (a dial request: a handshake
//     that proves both sides, then closes), so that a restarted node does not wait for its
//     peers' grown backoff;
//   - runs the handshake (optional mutual TLS, then Hello, see handshake.hpp) under a deadline;
//   - reports peer up (after the handshake) and peer down (connection lost, and whether the
//     peer's side closed it) to its listeners; a hello for a peer that is up touches its
//     connection only once the dialer has proven itself;
//   - hands each received frame to the handler registered for its channel; a handler returns a
//     rejection to have the connection closed as a bad frame;
//   - keeps a bounded send queue per peer: when it overflows the connection is reset (see
//     net/README.md), never blocking the other peers;
//   - runs the join exchange (net/README.md, "Join"): as a seed, it hands a joiner's JoinRequest
//     to the join handler and writes its answer; as a joiner, request_join() asks a seed.
// Every bad input closes only the connection it came on, is logged once with the peer address
// and is counted in MeshCounters.
//
// Threading: everything runs on the io_context passed in; all methods must be called from the
// thread running it. Callbacks are invoked on it, possibly from inside send() or stop().
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "conclave/core/link_loss.hpp"
#include "conclave/core/types.hpp"
#include "conclave/net/frame.hpp"
#include "conclave/net/handshake.hpp"
#include "conclave/net/membership.hpp"

namespace spdlog {
class logger;
}  // namespace spdlog

namespace conclave::net {

/// Mutual TLS with a cluster CA. Every node presents a certificate signed by the CA and
/// requires one from its peer.
struct TlsOptions {
    std::string ca_file;    // PEM: the cluster CA
    std::string cert_file;  // PEM: this node's certificate (chain)
    std::string key_file;   // PEM: this node's private key
    /// Require the peer certificate to name the node id it claims in its Hello: a DNS entry of
    /// its subjectAltName equal to the id or, only for a certificate without subjectAltName,
    /// its common name (RFC 6125: the SAN takes precedence).
    bool check_common_name = true;
};

/// The TLS 1.2 cipher suites Conclave's servers and clients accept: AEAD with forward secrecy
/// only (no CBC, no SHA-1 MACs). TLS 1.3 suites are all AEAD and stay OpenSSL's defaults.
inline constexpr const char* kTls12Ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL";

struct MeshOptions {
    std::size_t max_frame_bytes = kDefaultMaxFrameBytes;
    /// Per peer: frames and bytes waiting to be written. Overflow resets that peer's connection.
    std::size_t max_queue_frames = 1024;
    std::size_t max_queue_bytes = std::size_t{8} << 20;
    /// A connection must finish connect + TLS + Hello within this time (slowloris bound).
    Millis handshake_timeout{2000};
    /// Inbound connections allowed in their handshake at once; one more evicts (closes) the
    /// oldest of them, so sockets that never finish their handshake cannot lock a peer out.
    std::size_t max_pending_inbound = 64;
    /// Of those, from one source address; one more from it evicts its oldest (each is also
    /// closed by handshake_timeout). Peers on one host, or behind one NAT, share an address.
    std::size_t max_pending_per_source = 8;
    /// Cluster secret (raw bytes, >= kMinSecretBytes): when set, every handshake is a mutual
    /// HMAC-SHA256 challenge-response (handshake.hpp); a peer that cannot prove it is refused
    /// (auth_failed). Usable with or without TLS.
    std::optional<std::string> secret{};
    /// Redial backoff: first delay, doubled per failed attempt up to the maximum; each delay is
    /// drawn uniformly from [delay/2, delay] (jitter).
    Millis reconnect_initial{50};
    Millis reconnect_max{2000};
    /// The backoff returns to reconnect_initial only once a dialed connection has been up and
    /// carrying frames for this long: a peer that accepts the handshake and then drops the
    /// connection (a frame it rejects) is redialed with a growing delay, not in a storm.
    Millis backoff_reset_after{1000};
    /// TCP keepalive: idle time before probing, probe interval, probes before the kernel drops
    /// the connection (detects a vanished host whose connection never closed).
    std::chrono::seconds keepalive_idle{10};
    std::chrono::seconds keepalive_interval{2};
    int keepalive_probes = 3;
    std::optional<TlsOptions> tls;
    /// Seed of the jitter RNG; std::random_device when unset.
    std::optional<std::uint64_t> seed;
    /// Join exchange: a joiner waits this long for the seed's answer after the handshake; a seed
    /// closes a joiner's connection that has not been answered this long after its handshake.
    Millis join_timeout{10000};
    /// This node's incarnation and whether it is repaired, announced in every Hello
    /// (handshake.hpp); empty: not announced.
    std::string incarnation{};
    bool repaired = false;
    /// Called once a peer has proven itself (MAC checked), before it is reported up, with the
    /// incarnation it announced: returns why it is refused (HandshakeRefusal::StateLost, told to
    /// the peer in a Refused frame), or nullopt once the incarnation is durably remembered.
    /// Unset: every incarnation is taken.
    std::function<std::optional<std::string>(NodeId peer, const std::string& incarnation,
                                             bool repaired)>
        admit_incarnation{};
    /// Called when a proven peer refuses this node as state_lost: its peers know it by an
    /// earlier incarnation. The owner stops the node: it must not come back as its old self.
    std::function<void(NodeId peer, const std::string& detail)> on_state_lost{};
    /// This node's durable term, read for every Hello it sends (handshake.hpp "term") and by
    /// announce_term(). When set, the mesh also remembers the highest term each peer (id +
    /// incarnation) has announced (in a hello or a term Ping) and refuses a proven peer whose
    /// hello announces a lower one (HandshakeRefusal::StateRegressed, told in a Refused frame):
    /// its state was restored from an older copy. A member's hello without a term is then
    /// refused (unsupported_version). Unset: no term is announced or checked.
    std::function<std::uint64_t()> durable_term{};
    /// With durable_term: what an earlier run of this node remembered (the highest term
    /// `incarnation` of `peer` announced; nullopt: nothing), consulted before the first hello of
    /// that incarnation in this run; and where each rise is recorded (durably, by the owner).
    /// Unset: the memory lasts as long as the process.
    std::function<std::optional<std::uint64_t>(NodeId peer, const std::string& incarnation)>
        remembered_term{};
    std::function<void(NodeId peer, const std::string& incarnation, std::uint64_t term)>
        remember_term{};
    /// Called when a proven peer refuses this node as state_regressed (its durable term is below
    /// one it announced to that peer before). The owner reports it; the mesh keeps redialing.
    std::function<void(NodeId peer, const std::string& detail)> on_state_regressed{};
    /// Called when a peer this node dialed answers that its table does not hold this node
    /// (unknown_node: removed while this node was down, or never added). The refusal comes
    /// before any proof, so it is reported, never acted on.
    std::function<void(NodeId peer, const std::string& detail)> on_unknown_to{};
    /// Quarantine (a node with a new incarnation, not yet admitted by enough peers): handshakes
    /// run, but frames on every channel but Control are dropped both ways, so the node neither
    /// votes nor acknowledges. Ended by Mesh::end_quarantine().
    bool quarantined = false;
    /// Called once per connection when `peer` has admitted this node's incarnation: at once for
    /// a connection the peer dialed (it admits before confirming), at its first frame for one
    /// this node dialed (the acceptor admits before it reports the peer up, then pings).
    std::function<void(NodeId peer)> on_admitted_by{};
    /// Where the mesh logs (listening, peer up/down, closed connections); spdlog's default
    /// logger when unset. A daemon passes its own, so that these lines honour its format/level.
    std::shared_ptr<spdlog::logger> logger{};
};

/// Counters for the /metrics layer. Monotonic.
struct MeshCounters {
    std::array<std::uint64_t, kChannelCount> frames_in{};  // by channel
    std::array<std::uint64_t, kChannelCount> frames_out{};
    std::uint64_t bytes_in = 0;
    std::uint64_t bytes_out = 0;
    std::array<std::uint64_t, kBadFrameKindCount> bad_frames{};     // by BadFrameKind
    std::array<std::uint64_t, kRefusalCount> handshake_refusals{};  // by HandshakeRefusal
    std::uint64_t connections_accepted = 0;
    std::uint64_t connections_dialed = 0;  // connect attempts, first ones included
    std::uint64_t reconnects = 0;          // dial attempts after a failure or a loss
    std::uint64_t connect_failures = 0;
    std::uint64_t handshakes_completed = 0;
    std::uint64_t peer_ups = 0;
    std::uint64_t peer_downs = 0;
    std::uint64_t queue_overflows = 0;     // connections reset because their queue was full
    std::uint64_t sends_dropped = 0;       // send() to a peer that is not up, or in quarantine
    std::uint64_t quarantined_frames = 0;  // frames received and dropped in quarantine
    std::uint64_t join_requests = 0;       // JoinRequests received from joiners (seed side)
    std::uint64_t dial_requests_sent = 0;  // dial requests sent to lower-index peers at start
    std::uint64_t dial_requests = 0;       // dial requests received from proven peers

    std::uint64_t bad_frame(BadFrameKind k) const {
        return bad_frames[static_cast<std::size_t>(k)];
    }
    std::uint64_t refusal(HandshakeRefusal r) const {
        return handshake_refusals[static_cast<std::size_t>(r)];
    }
};

/// Per-peer view for /status.
struct PeerStatus {
    bool up = false;
    /// Last time a frame arrived from the peer (steady clock); nullopt if never.
    std::optional<std::chrono::steady_clock::time_point> last_contact;
    std::optional<std::chrono::steady_clock::time_point> up_since;
    std::string remote_address;  // "ip:port" of the current connection, empty when down
};

/// Returned by a frame handler to reject a frame: the connection is closed and counted.
struct FrameRejection {
    BadFrameKind kind = BadFrameKind::Undecodable;
    std::string detail;
};
using FrameHandler =
    std::function<std::optional<FrameRejection>(NodeId from, std::span<const std::uint8_t>)>;
/// A peer came up, or went down for the reason `loss` (LinkLoss::Local when up): only a closure
/// by the peer's side of an established connection (LinkLoss::PeerClosed) or a proven hello of a
/// newer incarnation (LinkLoss::PeerRestarted) proves that its process can no longer act on it.
using PeerHandler = std::function<void(NodeId peer, bool up, LinkLoss loss)>;
/// Seed side: a joiner `id` (authenticated, not in the table) asks to be added. `respond` writes
/// the answer and closes the connection once it is written; it may be called later, or never
/// (join_timeout then closes the connection); calling it again, or after the connection closed,
/// does nothing. Like every mesh call, `respond` must run on the io_context's thread. An answer
/// above kMaxJoinAnswerBytes is logged and replaced by a "refused" one.
using JoinHandler = std::function<void(std::string id, JoinRequest request,
                                       std::function<void(JoinAnswer)> respond)>;
/// Joiner side: runs exactly once, with the seed's answer (error empty) or with nullopt and an
/// error (handshake refused by either side, connect failure, connection closed, timeout, mesh
/// stopped).
using JoinCallback = std::function<void(std::optional<JoinAnswer> answer, std::string error)>;

class Mesh {
  public:
    /// `membership` must validate; `self` indexes it. Throws std::invalid_argument otherwise,
    /// and std::runtime_error when the TLS files cannot be loaded.
    Mesh(boost::asio::io_context& io, Membership membership, NodeId self, MeshOptions options = {});
    ~Mesh();
    Mesh(const Mesh&) = delete;
    Mesh& operator=(const Mesh&) = delete;

    /// Register before start(). One handler per channel (Control is reserved).
    void set_frame_handler(Channel channel, FrameHandler handler);
    void add_peer_handler(PeerHandler handler);
    /// Take joins: without a handler, a joiner's hello is refused (join_refused).
    void set_join_handler(JoinHandler handler);

    /// Asks the seed at host:port to add this node (membership().at(self()).id, which must not
    /// be in the seed's table) at the addresses in `request`. Works whether or not this mesh
    /// was started (it needs no listener; a joiner typically runs a mesh whose table holds only
    /// itself); uses the mesh's TLS, secret, handshake_timeout and join_timeout. `done` runs
    /// exactly once, on the io_context, never inside this call; stop() (and the destructor)
    /// complete a pending join with the error "mesh stopped".
    void request_join(std::string host, std::uint16_t port, JoinRequest request, JoinCallback done);

    /// Binds the listening socket and dials the peers. Throws boost::system::system_error if
    /// the endpoint cannot be bound (e.g. port in use).
    void start();
    /// Closes the listener and every connection; each up peer is reported down. Idempotent.
    void stop();

    /// Queues one frame for `to`. Returns false (and counts it) when the peer is not up, or when
    /// the queue overflowed and the connection was reset.
    /// Sends this node's durable term (MeshOptions::durable_term) in a Ping to every up peer, so
    /// that a term reached while a connection stays up is remembered by the peer as a hello's
    /// would be. The owner calls it once its durable term has risen (after the write).
    void announce_term();
    /// Ends the quarantine (MeshOptions::quarantined): frames flow on every channel.
    void end_quarantine();
    bool quarantined() const;
    bool send(NodeId to, Channel channel, std::span<const std::uint8_t> payload);

    /// Membership changes (docs/membership.md §8): the node table grows at run time. add_node
    /// appends `node` (it takes the next index; the table is validated as at construction) and,
    /// once started, dials it (the lower index of a pair dials, and a new node has the highest).
    /// Returns the new index, or why the table refused it. `retired`: the node was removed
    /// before this node learnt of it (a table entry that only keeps its index): never dialed.
    struct AddedNode {
        std::optional<NodeId> index;
        std::string error;
    };
    AddedNode add_node(NodeAddress node, bool retired = false);
    /// The node was removed from the cluster: its connection is closed, it is never dialed
    /// again, and its hellos are refused (unknown_node, "removed from the cluster"). Its index
    /// is kept (ids are never reused). Idempotent; `self` cannot be retired.
    void retire_node(NodeId node);
    /// A retired node was added back (same id, same index): it is connected again.
    void readmit_node(NodeId node);
    /// The addresses of a node this table kept only by index (removed before this node learnt
    /// of it) became known: a configuration that adds it back names them. Used by the next dial.
    void set_address(NodeId node, std::string host, std::uint16_t port);
    bool is_retired(NodeId node) const;

    bool is_up(NodeId peer) const;
    /// The smoothed round trip to an up peer, as the kernel measures it on the peer's TCP
    /// connection (TCP_INFO; an exponentially weighted estimate over the heartbeat traffic and
    /// its ACKs); nullopt when the peer is down or nothing was measured yet.
    std::optional<std::chrono::microseconds> round_trip(NodeId peer) const;
    PeerStatus peer_status(NodeId peer) const;
    const MeshCounters& counters() const;
    const Membership& membership() const;
    NodeId self() const;
    /// The bound listening port (useful when configured with port 0). 0 before start().
    std::uint16_t local_port() const;

    struct Impl;

  private:
    std::shared_ptr<Impl> impl_;
};

}  // namespace conclave::net
