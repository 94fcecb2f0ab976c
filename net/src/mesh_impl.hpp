// SPDX-License-Identifier: Apache-2.0
// Internal to net/: the mesh's state and its connections. Not installed.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "conclave/net/mesh.hpp"

namespace conclave::net {

using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;
using SteadyTime = std::chrono::steady_clock::time_point;

/// The join exchange a connection carries (net/README.md, "Join"); None for a member's.
enum class JoinPhase : std::uint8_t {
    None,
    Joining,          // outbound, this node joins: dialing, TLS, hello exchange
    AwaitingAnswer,   // outbound: confirmed and JoinRequest sent; waiting for the JoinAnswer
    JoinerHello,      // inbound from a joiner: our hello sent, waiting for its confirmation
    AwaitingRequest,  // inbound: the joiner proved itself; waiting for its JoinRequest
    AwaitingHandler,  // inbound: the join handler has the request; waiting for respond()
    Answered,         // inbound: the answer (or the refusal) is queued; closing once written
};

/// One TCP (or TLS) connection, inbound or outbound, from connect to close.
/// Owned by shared_ptr: pending asynchronous operations keep it alive; `owner_` is the mesh,
/// which may be gone by the time a cancelled operation completes (then nothing is reported).
class Connection : public std::enable_shared_from_this<Connection> {
  public:
    /// `dialed`: the peer this node dialed (outbound), nullopt for an accepted connection.
    Connection(std::weak_ptr<Mesh::Impl> owner, tcp::socket socket, ssl::context* tls,
               std::optional<NodeId> dialed);

    void start_inbound();
    void start_outbound(const std::string& host, std::uint16_t port);
    /// Makes this outbound connection a join request (before start_outbound).
    void set_join(JoinRequest request, JoinCallback done);
    /// Makes this outbound connection a dial request to `dialed` (before start_outbound): the
    /// handshake runs, then the peer closes it and dials this node (net/README.md).
    void set_dial_request() { dial_request_ = true; }
    /// Seed side: writes the handler's answer and closes once written (no-op unless waiting).
    void respond_join(JoinAnswer answer);

    /// Queues a frame. Returns false when the queue overflowed (the connection is then closed).
    bool enqueue(Channel channel, std::span<const std::uint8_t> payload);
    /// Closes once; logs `why` at `level` and reports the close to the owner.
    /// `loss`: what the closure proves (LinkLoss; told to the peer handlers when the peer was up).
    void close(int level, const std::string& why, LinkLoss loss = LinkLoss::Local);
    void close_bad_frame(BadFrameKind kind, const std::string& detail);
    void close_refused(HandshakeRefusal refusal, const std::string& detail);

    std::optional<NodeId> peer() const { return peer_; }
    /// The peer's hello announced advisory channel `c` (Hello::advisory).
    bool peer_serves_advisory(Channel c) const {
        return (peer_advisory_ & (std::uint64_t{1} << static_cast<unsigned>(c))) != 0;
    }
    std::optional<NodeId> dialed() const { return dialed_; }
    /// Accepted (not dialed by this node, whether to a member or to a seed).
    bool inbound() const { return !outbound_; }
    /// This node's join request, until the seed's hello checks out.
    bool joining() const { return join_phase_ == JoinPhase::Joining; }
    /// Inbound from a joiner that has proven itself (secret or certificate): still counted as in
    /// its handshake until it closes, but never evicted to make room.
    bool proven_joiner() const {
        return join_phase_ == JoinPhase::AwaitingRequest ||
               join_phase_ == JoinPhase::AwaitingHandler || join_phase_ == JoinPhase::Answered;
    }
    bool established() const { return established_; }
    /// Inbound: the dialer has sent something (bytes were readable); false while it is silent.
    bool spoke() const { return spoke_; }
    /// Why it closed (Local until it did): what its peer-down report tells.
    LinkLoss loss() const { return loss_; }
    /// The incarnation announced in the peer's hello ("" when none).
    const std::string& peer_incarnation() const { return peer_incarnation_; }
    bool closed() const { return closed_; }
    const std::string& remote() const { return remote_; }
    /// The kernel's smoothed round-trip time of this TCP connection (TCP_INFO tcpi_rtt: an
    /// exponentially weighted estimate over data/ACK pairs, i.e. the heartbeats and their
    /// acknowledgements); nullopt before the first sample or when the socket cannot say.
    std::optional<std::chrono::microseconds> smoothed_round_trip();
    /// Whether data sent on this connection has gone unacknowledged for at least one
    /// retransmission timeout (TCP_INFO: unacknowledged segments and a backed-off timer): the
    /// remote host vanished, or its kernel no longer knows the connection and has not yet been
    /// reached by a retransmission (which would draw an RST).
    bool retransmitting();
    /// TLS: the common name of the peer certificate ("" without TLS or without a CN).
    std::string peer_common_name();
    /// TLS: whether the peer certificate names `id` (SAN DNS entries, else the CN); `names`
    /// receives what it names, for the log line.
    bool certificate_names(const std::string& id, std::string& names);
    /// Secret handshake: this side's nonce (empty without a secret).
    const std::vector<std::uint8_t>& nonce() const { return nonce_; }
    /// Inbound: the source address counted against max_pending_per_source.
    void set_source(std::string source) { source_ = std::move(source); }
    const std::string& source() const { return source_; }

  private:
    void on_connected();
    /// The handshake's deadline, or (join) the join exchange's.
    void arm_deadline(bool join);
    void begin_hello_exchange();
    void do_read();
    void on_read(const boost::system::error_code& ec, std::size_t n);
    void handle_frame(Frame& frame);
    void handle_hello(std::span<const std::uint8_t> payload);
    /// Outbound: the acceptor's hello checked out: confirm, then establish, ask to join, or (a
    /// dial request) wait for the acceptor to close.
    void confirm_acceptor(const Hello& hello);
    void handle_confirmation(Frame& frame);
    void handle_join_frame(Frame& frame);
    /// Seed side: refuses a joiner's hello, telling it why (JoinAnswer "refused").
    void refuse_join(const std::string& detail);
    /// Tells the peer why it is refused (a Refused frame, `mac` proving this side when it is the
    /// dialer), counts and logs the refusal, and closes once the frame is written.
    void refuse_and_tell(HandshakeRefusal refusal, const std::string& detail,
                         const std::string& told, std::vector<std::uint8_t> mac = {});
    /// A Refused frame received during the handshake: logged (and acted on by the owner when the
    /// sender has proven itself), then the connection closes. `proven`: the sender's MAC checked.
    void take_refusal(std::span<const std::uint8_t> payload, bool acceptor_side);
    /// The peer's announced incarnation, offered to the owner (MeshOptions::admit_incarnation);
    /// true when admitted, else the connection is refused and closed.
    bool admit_peer(std::vector<std::uint8_t> mac);
    /// Joiner side: the seed refused in place of its hello (`payload` a JoinAnswer "refused").
    bool seed_refused(std::span<const std::uint8_t> payload);
    void finish_join(JoinAnswer answer);
    /// The id of the other side: the member's, or the joiner's / seed's claimed id.
    std::string peer_name() const;
    void establish();
    void do_write();
    void set_socket_options();
    std::string describe() const;

    std::weak_ptr<Mesh::Impl> owner_;
    tcp::socket socket_;
    std::optional<ssl::stream<tcp::socket&>> tls_;
    tcp::resolver resolver_;
    boost::asio::steady_timer deadline_;
    std::optional<NodeId> dialed_;
    std::optional<NodeId> peer_;
    bool outbound_ = false;
    JoinPhase join_phase_ = JoinPhase::None;
    std::string join_peer_;  // the joiner's id (seed side) or the seed's (joiner side)
    JoinRequest join_request_;
    JoinCallback join_done_;
    bool close_after_write_ = false;  // the join answer is queued: close once it is written
    std::string remote_;
    bool established_ = false;
    bool closed_ = false;
    bool spoke_ = false;
    LinkLoss loss_ = LinkLoss::Local;
    bool hello_sent_ = false;
    bool awaiting_confirmation_ = false;  // inbound: our hello sent, waiting for the dialer's ping
    std::vector<std::uint8_t> nonce_;     // ours (secret handshake)
    std::vector<std::uint8_t> peer_nonce_;    // inbound: the dialer's
    std::string channel_mismatch_;            // inbound: why the confirmation will be refused
    std::string peer_incarnation_;            // announced in the peer's hello
    std::optional<std::uint64_t> peer_term_;  // announced in the peer's hello
    bool peer_repaired_ = false;
    std::uint64_t peer_advisory_ = 0;  // advisory channels announced in the peer's hello
    bool refused_ = false;             // a Refused frame is queued: nothing more is read
    /// A dial request (either side): never a peer's connection, closed after the handshake.
    bool dial_request_ = false;
    bool dial_request_sent_ = false;  // outbound: confirmed; waiting for the peer to close
    std::string source_;
    FrameDecoder decoder_;
    std::array<std::uint8_t, 16384> read_buffer_{};
    std::deque<std::vector<std::uint8_t>> queue_;
    std::size_t queued_bytes_ = 0;
    bool writing_ = false;
};

struct PeerSlot {
    explicit PeerSlot(boost::asio::io_context& io) : redial_timer(io) {}
    /// The established connection, or (for a peer this node dials) the dial in progress.
    std::shared_ptr<Connection> connection;
    bool up = false;
    std::optional<SteadyTime> last_contact;
    std::optional<SteadyTime> up_since;
    boost::asio::steady_timer redial_timer;
    Millis backoff{0};
    bool ever_dialed = false;
    /// Removed from the cluster (Mesh::retire_node): never dialed again, its hellos refused.
    bool retired = false;
    /// The current connection's peer has admitted this node's incarnation (reported once).
    bool admitted = false;
    /// The highest durable term the peer announced in a proven hello, and the incarnation that
    /// announced it (MeshOptions::durable_term; recorded through MeshOptions::remember_term).
    std::optional<std::uint64_t> announced_term;
    std::string announced_incarnation;
};

struct Mesh::Impl : std::enable_shared_from_this<Mesh::Impl> {
    Impl(boost::asio::io_context& io, Membership membership, NodeId self, MeshOptions options);

    void start();
    void stop();
    bool send(NodeId to, Channel channel, std::span<const std::uint8_t> payload);

    // ---- Called by connections ----
    /// Checks a received Hello (membership, direction, TLS name, duplicates). Counts refusals.
    HelloCheck on_hello(Connection& c, const Hello& hello);
    /// A hello came for a node whose connection is up: Ping that connection, or close it when
    /// it is retransmitting (Connection::retransmitting).
    void probe_old_connection(PeerSlot& slot);
    /// The table's part of on_hello: version, cluster, id, direction; an inbound hello from a
    /// member of higher index is a dial request.
    HelloCheck check_table(const Connection& c, const Hello& hello) const;
    /// The proven connection `proven` (MAC or certificate checked) announces another incarnation
    /// than the established one of `slot`: that one is closed as LinkLoss::PeerRestarted (true).
    bool replaced_by_restart(PeerSlot& slot, const Connection& proven);
    /// Inbound: the dialer proved itself and confirmed. When its node's connection is up, it
    /// replaces it if it is a newer incarnation (replaced_by_restart), else it is refused as a
    /// duplicate and the old connection probed (probe_old_connection).
    std::optional<std::pair<HandshakeRefusal, std::string>> on_confirmation(Connection& c);
    /// MeshOptions::admit_incarnation for a proven peer (nullopt: admitted).
    std::optional<std::string> admit_incarnation(NodeId peer, const std::string& incarnation,
                                                 bool repaired);
    /// MeshOptions::durable_term: checks the durable term a proven peer announced against the
    /// highest one its incarnation announced before, and remembers it when admitted. Returns the
    /// refusal (StateRegressed, or UnsupportedVersion for a hello without a term) and its detail.
    std::optional<std::pair<HandshakeRefusal, std::string>> admit_term(
        NodeId peer, const std::string& incarnation, std::optional<std::uint64_t> term);
    /// A term Ping from the peer of `slot` (nullopt: a Ping without one): raises the remembered
    /// term (MeshOptions::durable_term).
    void note_announced_term(NodeId peer, std::optional<std::uint64_t> term);
    /// Sets the slot's announced term (and incarnation) and records the rise.
    void raise_announced_term(NodeId peer, const std::string& incarnation, std::uint64_t term);
    void announce_term();
    /// A Refused frame from `peer`, which has proven itself: a state_lost refusal is handed to
    /// MeshOptions::on_state_lost.
    bool quarantined_ = false;
    /// MeshOptions::on_admitted_by, once per connection of `peer`.
    void note_admitted(NodeId peer);
    void on_refused_by_peer(NodeId peer, const PeerRefusal& refusal);
    /// A proven peer of higher index asks to be dialed (it restarted): its backoff is reset and
    /// it is dialed now, or its established connection is probed.
    void on_dial_request(const Connection& request);
    void on_established(const std::shared_ptr<Connection>& c);
    std::optional<FrameRejection> on_frame(Connection& c, Frame& frame);
    void request_join(std::string host, std::uint16_t port, JoinRequest request, JoinCallback done);
    void on_closed(const std::shared_ptr<Connection>& c);
    bool tls_enabled() const { return tls_context_ != nullptr; }
    bool has_secret() const { return options_.secret.has_value(); }
    /// MAC computed by this node (`role`) for the handshake with `peer`.
    std::vector<std::uint8_t> own_mac(HandshakeRole role, const std::string& peer,
                                      std::span<const std::uint8_t> nonce_dialer,
                                      std::span<const std::uint8_t> nonce_acceptor) const;
    /// MAC that `peer` (`role`) must present.
    std::vector<std::uint8_t> peer_mac(HandshakeRole role, const std::string& peer,
                                       std::span<const std::uint8_t> nonce_dialer,
                                       std::span<const std::uint8_t> nonce_acceptor) const;
    /// Bit mask of the channels this node serves (Hello "channels").
    std::uint64_t served_channels() const;
    /// Bit mask of the channels with a handler (Control included).
    std::uint64_t handled_channels() const;
    /// Bit mask of the advisory channels this node serves (Hello "adv").
    std::uint64_t served_advisory_channels() const;
    /// Describes a channel mismatch with `hello`, or "" when they agree (or it is unannounced).
    std::string channel_mismatch(const Hello& hello) const;
    void release_pending(const Connection& c);
    /// Makes room for one more inbound connection from `source`: closes the oldest connection
    /// still in its handshake from that source (per-source limit reached) or from anywhere
    /// (global limit reached), a proven joiner never, a silent one (Connection::spoke) before
    /// one that speaks, one from the source holding the most before others (evicts_before).
    /// Unauthenticated sockets never lock a new connection out, and idle ones from a few
    /// addresses never push out a peer in the middle of its handshake.
    void evict_pending_for(const std::string& source);
    /// Whether pending connection `a` is evicted before `b` (b older): silent before speaking,
    /// then the one whose source holds more handshakes in progress.
    bool evicts_before(const Connection& a, const Connection& b) const;

    // ---- Internal ----
    void do_accept();
    void dial(NodeId peer);
    void schedule_redial(NodeId peer);
    /// Asks `peer` (lower index, the dialer of the pair) to dial this node now.
    void request_dial(NodeId peer);
    Mesh::AddedNode add_node(NodeAddress node, bool retired);
    void retire_node(NodeId node);
    void readmit_node(NodeId node);
    Hello own_hello() const;
    std::string log_prefix() const;
    spdlog::logger& log() const { return *options_.logger; }

    boost::asio::io_context& io_;
    Membership membership_;
    NodeId self_;
    MeshOptions options_;
    std::unique_ptr<ssl::context> tls_context_;
    tcp::acceptor acceptor_;
    boost::asio::steady_timer accept_retry_timer_;
    std::vector<std::unique_ptr<PeerSlot>> peers_;       // indexed by NodeId; self's slot unused
    std::set<std::shared_ptr<Connection>> connections_;  // every open connection
    std::size_t pending_inbound_ = 0;
    std::map<std::string, std::size_t> pending_by_source_;
    std::vector<Connection*>
        pending_order_;  // inbound connections in their handshake, oldest first
    std::array<FrameHandler, kChannelCount> handlers_;
    std::vector<PeerHandler> peer_handlers_;
    JoinHandler join_handler_;
    MeshCounters counters_;
    std::mt19937_64 rng_;
    bool started_ = false;
    bool stopped_ = false;
    std::uint16_t local_port_ = 0;
};

}  // namespace conclave::net
