// SPDX-License-Identifier: Apache-2.0
// One mesh connection: connect or accept, optional TLS, Hello exchange, then frames both ways.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <cstddef>
#include <stdexcept>

#include "conclave/codec/json.hpp"
#include "mesh_impl.hpp"

namespace conclave::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// The peer's side ended the connection: its FIN (end of stream, a TLS close_notify, or a TLS
// stream that ended without one) or its RST. Anything else (a timeout of this node's kernel, a
// TLS record that does not decrypt) is decided here and proves nothing about the peer.
bool closed_by_peer(const error_code& ec) {
    return ec == asio::error::eof || ec == asio::error::connection_reset ||
           ec == asio::error::broken_pipe || ec == ssl::error::stream_truncated;
}

}  // namespace

Connection::Connection(std::weak_ptr<Mesh::Impl> owner, tcp::socket socket, ssl::context* tls,
                       std::optional<NodeId> dialed)
    : owner_(std::move(owner)),
      socket_(std::move(socket)),
      resolver_(socket_.get_executor()),
      deadline_(socket_.get_executor()),
      dialed_(dialed),
      decoder_(kMaxHandshakeFrameBytes) {
    if (tls != nullptr) {
        tls_.emplace(socket_, *tls);
    }
}

std::string Connection::describe() const {
    std::string s = "connection ";
    s += remote_.empty() ? std::string("(unconnected)") : remote_;
    auto owner = owner_.lock();
    const auto who = peer_ ? peer_ : dialed_;
    if (owner && who) {
        s += " (peer " + owner->membership_.at(*who).id + (dial_request_ ? ", dial request)" : ")");
    } else if (join_phase_ != JoinPhase::None) {
        s += outbound_ ? " (join request" : " (joiner";
        s += join_peer_.empty() ? std::string(")") : " '" + join_peer_ + "')";
    }
    return s;
}

std::string Connection::peer_name() const {
    if (!join_peer_.empty()) {
        return join_peer_;
    }
    auto owner = owner_.lock();
    const auto who = peer_ ? peer_ : dialed_;
    return owner && who ? owner->membership_.at(*who).id : std::string("?");
}

void Connection::set_join(JoinRequest request, JoinCallback done) {
    join_phase_ = JoinPhase::Joining;
    join_request_ = std::move(request);
    join_done_ = std::move(done);
}

void Connection::arm_deadline(bool join) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    // Connect + TLS + hello, then (join connections) the join exchange. Re-arming replaces the
    // previous wait (expires_after cancels it).
    const Millis timeout = join ? owner->options_.join_timeout : owner->options_.handshake_timeout;
    deadline_.expires_after(timeout);
    deadline_.async_wait([self = shared_from_this(), join,
                          ms = std::to_string(timeout.count())](const error_code& ec) {
        if (ec || self->closed_ || (!join && self->established_)) {
            return;
        }
        if (!join) {
            self->close_refused(HandshakeRefusal::Timeout,
                                "handshake not completed within " + ms + " ms");
        } else if (self->outbound_) {
            self->close(spdlog::level::warn,
                        "join: timeout: no answer from the seed within " + ms + " ms");
        } else {
            self->close(spdlog::level::warn, "join: timeout: the request of '" + self->join_peer_ +
                                                 "' was not answered within " + ms + " ms");
        }
    });
}

void Connection::start_inbound() {
    arm_deadline(/*join=*/false);
    // Wait for the dialer's first bytes (its TLS hello or its Hello): until then it is silent,
    // and the first to be evicted when too many handshakes are in progress (Mesh::Impl::
    // evict_pending_for), so that idle sockets never push out a peer that is speaking.
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
        if (self->closed_) {
            return;
        }
        self->spoke_ = !ec;
        self->on_connected();
    });
}

void Connection::start_outbound(const std::string& host, std::uint16_t port) {
    outbound_ = true;
    arm_deadline(/*join=*/false);
    remote_ = host + ":" + std::to_string(port);
    resolver_.async_resolve(
        host, std::to_string(port),
        [self = shared_from_this()](const error_code& ec, tcp::resolver::results_type results) {
            if (self->closed_) {
                return;
            }
            if (ec) {
                self->close(spdlog::level::debug, "resolve failed: " + ec.message());
                return;
            }
            asio::async_connect(
                self->socket_, results, [self](const error_code& ec2, const tcp::endpoint&) {
                    if (self->closed_) {
                        return;
                    }
                    if (ec2) {
                        if (auto o = self->owner_.lock()) {
                            ++o->counters_.connect_failures;
                        }
                        self->close(spdlog::level::debug, "connect failed: " + ec2.message());
                        return;
                    }
                    self->on_connected();
                });
        });
}

void Connection::set_socket_options() {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.set_option(asio::socket_base::keep_alive(true), ec);
    const int fd = socket_.native_handle();
    const int idle = static_cast<int>(owner->options_.keepalive_idle.count());
    const int interval = static_cast<int>(owner->options_.keepalive_interval.count());
    const int probes = owner->options_.keepalive_probes;
    // Best effort: failures only lose the faster detection of vanished hosts.
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
    // Keepalive probes only run while nothing is unacknowledged; a vanished host that we keep
    // sending to (a leader's heartbeats) would otherwise hold the connection "up" for the
    // kernel's whole retransmission budget (tcp_retries2: about 15 minutes). TCP_USER_TIMEOUT
    // bounds that by the same time keepalive allows a silent connection.
    const unsigned user_timeout_ms =
        static_cast<unsigned>(std::chrono::milliseconds(owner->options_.keepalive_idle +
                                                        owner->options_.keepalive_interval * probes)
                                  .count());
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

std::optional<std::chrono::microseconds> Connection::smoothed_round_trip() {
    if (closed_ || !socket_.is_open()) {
        return std::nullopt;
    }
    tcp_info info{};
    socklen_t length = sizeof info;
    if (::getsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &length) != 0 ||
        length < offsetof(tcp_info, tcpi_rtt) + sizeof info.tcpi_rtt || info.tcpi_rtt == 0) {
        return std::nullopt;
    }
    return std::chrono::microseconds{info.tcpi_rtt};
}

bool Connection::retransmitting() {
    if (closed_ || !socket_.is_open()) {
        return false;
    }
    tcp_info info{};
    socklen_t length = sizeof info;
    if (::getsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &length) != 0 ||
        length < offsetof(tcp_info, tcpi_unacked) + sizeof info.tcpi_unacked) {
        return false;
    }
    return info.tcpi_backoff > 0 && info.tcpi_unacked > 0;
}

void Connection::on_connected() {
    error_code ec;
    const auto endpoint = socket_.remote_endpoint(ec);
    if (!ec) {
        remote_ = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    }
    set_socket_options();
    if (!tls_) {
        begin_hello_exchange();
        return;
    }
    const auto role = outbound_ ? ssl::stream_base::client : ssl::stream_base::server;
    tls_->async_handshake(role, [self = shared_from_this()](const error_code& ec2) {
        if (self->closed_) {
            return;
        }
        if (ec2) {
            self->close_refused(HandshakeRefusal::TlsFailed,
                                "TLS handshake failed: " + ec2.message());
            return;
        }
        self->begin_hello_exchange();
    });
}

void Connection::begin_hello_exchange() {
    // The dialer speaks first; the acceptor answers once it has checked the dialer's Hello.
    if (outbound_) {
        auto owner = owner_.lock();
        if (!owner) {
            return;
        }
        Hello hello = owner->own_hello();
        hello.join = join_phase_ == JoinPhase::Joining;
        if (owner->has_secret()) {
            nonce_ = random_nonce();
            hello.nonce = nonce_;
        }
        hello_sent_ = true;
        enqueue(Channel::Control, encode_hello(hello));
    }
    do_read();
}

std::string Connection::peer_common_name() {
    if (!tls_) {
        return "";
    }
    X509* cert = SSL_get1_peer_certificate(tls_->native_handle());
    if (cert == nullptr) {
        return "";
    }
    std::array<char, 256> name{};
    const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName,
                                            name.data(), static_cast<int>(name.size()));
    X509_free(cert);
    if (n <= 0) {
        return "";
    }
    return std::string(name.data(), static_cast<std::size_t>(n));
}

bool Connection::certificate_names(const std::string& id, std::string& names) {
    if (!tls_) {
        names = "(no certificate)";
        return false;
    }
    X509* cert = SSL_get1_peer_certificate(tls_->native_handle());
    if (cert == nullptr) {
        names = "(no certificate)";
        return false;
    }
    bool match = false;
    auto* sans =
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    X509_free(cert);
    if (sans == nullptr) {
        // No subjectAltName: the common name is the identity.
        const std::string cn = peer_common_name();
        names = "CN '" + cn + "'";
        return !cn.empty() && cn == id;
    }
    names = "SAN {";
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
        const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans, i);
        if (name->type != GEN_DNS) {
            continue;
        }
        const ASN1_STRING* dns = name->d.dNSName;
        const std::string value(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                                static_cast<std::size_t>(ASN1_STRING_length(dns)));
        names += " DNS:" + value;
        match = match || value == id;
    }
    names += " }";
    GENERAL_NAMES_free(sans);
    return match;
}

void Connection::do_read() {
    auto handler = [self = shared_from_this()](const error_code& ec, std::size_t n) {
        self->on_read(ec, n);
    };
    if (tls_) {
        tls_->async_read_some(asio::buffer(read_buffer_), std::move(handler));
    } else {
        socket_.async_read_some(asio::buffer(read_buffer_), std::move(handler));
    }
}

void Connection::on_read(const error_code& ec, std::size_t n) {
    if (closed_) {
        return;
    }
    if (ec && dial_request_sent_) {
        close(spdlog::level::debug, "dial request delivered");
        return;
    }
    if (ec) {
        loss_ = closed_by_peer(ec) ? LinkLoss::PeerClosed : LinkLoss::Local;
        if (decoder_.mid_frame()) {
            close_bad_frame(BadFrameKind::Truncated, "connection ended inside a frame (" +
                                                         std::to_string(decoder_.buffered_bytes()) +
                                                         " bytes buffered)");
        } else {
            close(spdlog::level::info, "connection lost: " + ec.message(), loss_);
        }
        return;
    }
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    owner->counters_.bytes_in += n;
    decoder_.feed(std::span<const std::uint8_t>(read_buffer_.data(), n));
    while (!closed_) {
        auto frame = decoder_.next();
        if (!frame) {
            break;
        }
        handle_frame(*frame);
    }
    if (closed_) {
        return;
    }
    if (const auto error = decoder_.error()) {
        std::string detail(to_string(*error));
        if (*error == BadFrameKind::Oversized) {
            detail = "length prefix " + std::to_string(decoder_.error_length()) +
                     " above the maximum " + std::to_string(decoder_.max_frame_bytes());
        } else if (*error == BadFrameKind::Empty) {
            detail = "length prefix 0";
        }
        close_bad_frame(*error, detail);
        return;
    }
    do_read();
}

namespace {

bool is_refusal(std::span<const std::uint8_t> payload) {
    try {
        return decode_control_kind(payload) == ControlKind::Refused;
    } catch (const codec::DecodeError&) {
        return false;
    }
}

// What a dialer refused at its hello is told: only refusals it can act on, in words that give
// away nothing of this node (not its cluster's name).
std::optional<std::string> told_to_dialer(HandshakeRefusal r) {
    switch (r) {
        case HandshakeRefusal::WrongCluster:
            return "this node belongs to another cluster (check the config's \"cluster\")";
        case HandshakeRefusal::UnknownNode:
            return "this node's table does not hold your id (removed, or never added: use --join)";
        case HandshakeRefusal::UnsupportedVersion:
            return "unsupported mesh protocol version";
        default:
            return std::nullopt;
    }
}

// A joiner is also told the refusals it can only fix in its own config, so that it stops asking
// (a member's dialer is not: it redials on its backoff, and its operator reads the peer's log).
std::optional<std::string> told_to_joiner(HandshakeRefusal r) {
    switch (r) {
        case HandshakeRefusal::AuthFailed:
            return "your hello does not prove the cluster secret (no nonce: is secret_file set?)";
        case HandshakeRefusal::CertificateMismatch:
            return "your certificate does not name the id your hello claims";
        default:
            return told_to_dialer(r);
    }
}

}  // namespace

void Connection::handle_frame(Frame& frame) {
    auto owner = owner_.lock();
    if (!owner || refused_) {
        return;  // refused: only the Refused frame is still being written
    }
    switch (join_phase_) {
        case JoinPhase::AwaitingAnswer:
        case JoinPhase::AwaitingRequest:
        case JoinPhase::AwaitingHandler:
        case JoinPhase::Answered:
            handle_join_frame(frame);
            return;
        default:
            break;
    }
    if (dial_request_sent_) {
        close_bad_frame(BadFrameKind::BadHandshake, "frame after the dial request's confirmation");
        return;
    }
    if (!established_) {
        if (awaiting_confirmation_) {
            handle_confirmation(frame);
            return;
        }
        if (frame.channel != Channel::Control) {
            close_bad_frame(BadFrameKind::BadHandshake,
                            "frame on channel " +
                                std::to_string(static_cast<unsigned>(frame.channel)) +
                                " before the handshake");
            return;
        }
        handle_hello(frame.payload);
        return;
    }
    if (auto rejection = owner->on_frame(*this, frame)) {
        close_bad_frame(rejection->kind, rejection->detail);
    }
}

void Connection::handle_confirmation(Frame& frame) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    // Inbound: the dialer accepted our Hello and confirms with a ping (handshake.hpp), or refuses
    // this node with a Refused frame (e.g. state_lost).
    if (frame.channel == Channel::Control && is_refusal(frame.payload)) {
        take_refusal(frame.payload, /*acceptor_side=*/true);
        return;
    }
    bool is_ping = false;
    std::vector<std::uint8_t> mac;
    if (frame.channel == Channel::Control) {
        try {
            is_ping = decode_control_kind(frame.payload) == ControlKind::Ping;
            if (is_ping) {
                mac = decode_ping_mac(frame.payload);
            }
        } catch (const codec::DecodeError&) {
            is_ping = false;
        }
    }
    if (!is_ping) {
        close_bad_frame(BadFrameKind::BadHandshake,
                        "expected the dialer's confirmation after the hello");
        return;
    }
    if (owner->has_secret()) {
        const std::string dialer = peer_name();
        if (!mac_equal(mac, owner->peer_mac(HandshakeRole::Dialer, dialer, peer_nonce_, nonce_))) {
            refuse_and_tell(HandshakeRefusal::AuthFailed,
                            "the confirmation of '" + dialer +
                                "' does not prove the cluster secret (wrong or missing MAC)",
                            "the cluster secret does not match this node's");
            return;
        }
    }
    if (dial_request_) {
        // The peer proved itself: serve its request; this connection never carries frames.
        close(spdlog::level::debug, "dial request served");
        owner->on_dial_request(*this);
        return;
    }
    if (join_phase_ == JoinPhase::JoinerHello) {
        // The joiner proved itself (with a secret); it is not a peer: wait for its request.
        awaiting_confirmation_ = false;
        join_phase_ = JoinPhase::AwaitingRequest;
        arm_deadline(/*join=*/true);
        return;
    }
    if (!channel_mismatch_.empty()) {
        close(spdlog::level::warn, "handshake refused (channel_mismatch)");  // counted
        return;
    }
    if (!admit_peer({})) {
        return;
    }
    if (auto refusal = owner->on_confirmation(*this)) {
        close_refused(refusal->first, refusal->second);
        return;
    }
    establish();
}

void Connection::handle_hello(std::span<const std::uint8_t> payload) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    if (joining() && seed_refused(payload)) {
        return;
    }
    if (outbound_ && is_refusal(payload)) {  // the acceptor refused our hello and says why
        take_refusal(payload, /*acceptor_side=*/false);
        return;
    }
    Hello hello;
    try {
        hello = decode_hello(payload);
    } catch (const codec::DecodeError& e) {
        close_bad_frame(BadFrameKind::BadHandshake, std::string("malformed hello: ") + e.what());
        return;
    }
    const HelloCheck check = owner->on_hello(*this, hello);
    if (check.refusal) {
        if (*check.refusal == HandshakeRefusal::JoinRefused) {
            join_peer_ = hello.node;
            refuse_join(check.detail);
        } else if (const auto told =
                       hello.join ? told_to_joiner(*check.refusal) : told_to_dialer(*check.refusal);
                   inbound() && told) {
            refuse_and_tell(*check.refusal, check.detail, *told);
        } else {
            close_refused(*check.refusal, check.detail);
        }
        return;
    }
    peer_ = check.peer;
    peer_incarnation_ = hello.incarnation;
    peer_repaired_ = hello.repaired;
    peer_term_ = hello.term;
    peer_advisory_ = hello.advisory;
    if (outbound_) {
        confirm_acceptor(hello);
        return;
    }
    if (check.joiner) {
        join_peer_ = hello.node;
        join_phase_ = JoinPhase::JoinerHello;
    }
    dial_request_ = check.dial_request;
    // Inbound: answer with our hello; the peer is up once the dialer confirms it.
    Hello answer = owner->own_hello();
    if (owner->has_secret()) {
        peer_nonce_ = hello.nonce;
        nonce_ = random_nonce();
        answer.nonce = nonce_;
        answer.mac = owner->own_mac(HandshakeRole::Acceptor, hello.node, peer_nonce_, nonce_);
    }
    // A channel mismatch is refused on both sides: the dialer refuses our hello (it sees our
    // channels), and we refuse its confirmation should it come anyway. Said here, once, clearly.
    channel_mismatch_ =
        check.joiner || check.dial_request ? std::string() : owner->channel_mismatch(hello);
    if (!channel_mismatch_.empty()) {
        ++owner->counters_
              .handshake_refusals[static_cast<std::size_t>(HandshakeRefusal::ChannelMismatch)];
        owner->log().error("{} net: {}: handshake refused (channel_mismatch): {}",
                           owner->log_prefix(), describe(), channel_mismatch_);
    }
    hello_sent_ = true;
    awaiting_confirmation_ = true;
    enqueue(Channel::Control, encode_hello(answer));
}

void Connection::confirm_acceptor(const Hello& hello) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    // The acceptor's hello checks out (and proves the secret): confirm.
    std::vector<std::uint8_t> mac;
    if (owner->has_secret()) {
        mac = owner->own_mac(HandshakeRole::Dialer, hello.node, nonce_, hello.nonce);
    }
    if (dial_request_) {
        // The peer admits nothing here (its own dial does): confirm, wait for it to close.
        dial_request_sent_ = true;
        enqueue(Channel::Control, encode_confirmation(mac));
        return;
    }
    if (!joining() && !admit_peer(mac)) {
        return;
    }
    enqueue(Channel::Control, encode_confirmation(mac));
    if (!joining()) {
        establish();  // the peer is up on our side
        return;
    }
    // Joiner: ask, and wait for the answer. Only the answer may be this large (it carries a
    // configuration).
    join_peer_ = hello.node;
    enqueue(Channel::Control, encode_join_request(join_request_));
    join_phase_ = JoinPhase::AwaitingAnswer;
    decoder_.set_max_frame_bytes(1 + kMaxJoinAnswerBytes);
    arm_deadline(/*join=*/true);
    owner->log().info("{} net: {}: join request sent", owner->log_prefix(), describe());
}

void Connection::refuse_and_tell(HandshakeRefusal refusal, const std::string& detail,
                                 const std::string& told, std::vector<std::uint8_t> mac) {
    auto owner = owner_.lock();
    if (!owner || closed_) {
        return;
    }
    ++owner->counters_.handshake_refusals[static_cast<std::size_t>(refusal)];
    owner->log().warn("{} net: {}: handshake refused ({}): {}", owner->log_prefix(), describe(),
                      to_string(refusal), detail);
    refused_ = true;
    close_after_write_ = true;
    enqueue(Channel::Control,
            encode_refusal(PeerRefusal{std::string(to_string(refusal)), told, std::move(mac)}));
}

void Connection::take_refusal(std::span<const std::uint8_t> payload, bool acceptor_side) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    PeerRefusal refusal;
    try {
        refusal = decode_refusal(payload);
    } catch (const codec::DecodeError& e) {
        close_bad_frame(BadFrameKind::BadHandshake, std::string("malformed refusal: ") + e.what());
        return;
    }
    // Proven: the dialer's refusal carries its confirmation MAC (checked like the ping's); a
    // refusal in place of the acceptor's hello comes before the acceptor has proven anything.
    bool proven = !owner->has_secret();
    if (acceptor_side && owner->has_secret()) {
        proven = mac_equal(
            refusal.mac, owner->peer_mac(HandshakeRole::Dialer, peer_name(), peer_nonce_, nonce_));
    }
    if (acceptor_side && peer_ && proven) {
        owner->on_refused_by_peer(*peer_, refusal);
    } else if (!acceptor_side && dialed_ &&
               refusal.reason == to_string(HandshakeRefusal::UnknownNode)) {
        owner->on_refused_by_peer(*dialed_, refusal);  // reported, never acted on (unproven)
    }
    close(spdlog::level::err, "refused by the peer (" + refusal.reason + "): " + refusal.detail +
                                  (proven && acceptor_side ? "" : " [not authenticated]"));
}

bool Connection::admit_peer(std::vector<std::uint8_t> mac) {
    auto owner = owner_.lock();
    if (!owner || !peer_) {
        return false;
    }
    if (auto why = owner->admit_incarnation(*peer_, peer_incarnation_, peer_repaired_)) {
        refuse_and_tell(HandshakeRefusal::StateLost, *why, *why, std::move(mac));
        return false;
    }
    if (auto refusal = owner->admit_term(*peer_, peer_incarnation_, peer_term_)) {
        refuse_and_tell(refusal->first, refusal->second, refusal->second, std::move(mac));
        return false;
    }
    return true;
}

void Connection::refuse_join(const std::string& detail) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    // Counted and logged like every refusal; the joiner is told why (a refusal proves nothing,
    // so it needs no authentication), then the connection closes once that is written.
    join_phase_ = JoinPhase::Answered;
    ++owner->counters_.handshake_refusals[static_cast<std::size_t>(HandshakeRefusal::JoinRefused)];
    owner->log().warn("{} net: {}: handshake refused (join_refused): {}", owner->log_prefix(),
                      describe(), detail);
    close_after_write_ = true;
    enqueue(Channel::Control,
            encode_join_answer(JoinAnswer{JoinStatus::Refused, "join_refused: " + detail}));
}

bool Connection::seed_refused(std::span<const std::uint8_t> payload) {
    JoinAnswer answer;
    try {
        answer = decode_join_answer(payload);
    } catch (const codec::DecodeError&) {
        return false;  // not an answer: the seed's hello (checked next)
    }
    if (answer.status != JoinStatus::Refused) {
        // Nothing but a refusal may come before the seed has proven itself.
        close_bad_frame(
            BadFrameKind::BadHandshake,
            "join answer '" + std::string(to_string(answer.status)) + "' before the seed's hello");
        return true;
    }
    close(spdlog::level::warn, "join refused by the seed at the handshake: " + answer.detail);
    return true;
}

namespace {

/// Decodes a join frame; on DecodeError closes `c` as a bad frame and returns nullopt.
template <typename Decode>
auto decode_or_close(Connection& c, Decode decode, std::span<const std::uint8_t> payload,
                     const char* what) -> std::optional<decltype(decode(payload))> {
    try {
        return decode(payload);
    } catch (const codec::DecodeError& e) {
        c.close_bad_frame(BadFrameKind::Undecodable, std::string(what) + ": " + e.what());
        return std::nullopt;
    }
}

}  // namespace

void Connection::handle_join_frame(Frame& frame) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    if (frame.channel != Channel::Control) {
        close_bad_frame(BadFrameKind::UnexpectedControl,
                        "frame on channel " + std::to_string(static_cast<unsigned>(frame.channel)) +
                            " on a join connection");
        return;
    }
    if (join_phase_ == JoinPhase::AwaitingAnswer) {
        if (is_refusal(frame.payload)) {
            take_refusal(frame.payload, /*acceptor_side=*/false);
            return;
        }
        if (auto answer =
                decode_or_close(*this, decode_join_answer, frame.payload, "join answer")) {
            finish_join(std::move(*answer));
        }
        return;
    }
    if (join_phase_ != JoinPhase::AwaitingRequest) {
        close_bad_frame(BadFrameKind::UnexpectedControl,
                        "frame from joiner '" + join_peer_ + "' after its request");
        return;
    }
    auto request = decode_or_close(*this, decode_join_request, frame.payload, "join request");
    if (!request) {
        return;
    }
    ++owner->counters_.join_requests;
    join_phase_ = JoinPhase::AwaitingHandler;
    owner->log().info("{} net: {}: join request (peer {}, http {})", owner->log_prefix(),
                      describe(), request->peer, request->http);
    const JoinHandler handler = owner->join_handler_;  // copy: it may replace itself
    if (!handler) {
        respond_join(JoinAnswer{JoinStatus::Refused, "this node does not accept joins"});
        return;
    }
    handler(join_peer_, std::move(*request), [weak = weak_from_this()](JoinAnswer answer) {
        if (auto self = weak.lock()) {
            self->respond_join(std::move(answer));
        }
    });
}

void Connection::respond_join(JoinAnswer answer) {
    if (closed_ || join_phase_ != JoinPhase::AwaitingHandler) {
        return;
    }
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    std::vector<std::uint8_t> payload;
    try {
        payload = encode_join_answer(answer);
    } catch (const std::invalid_argument& e) {
        owner->log().error("{} net: {}: cannot send the join answer: {}", owner->log_prefix(),
                           describe(), e.what());
        answer = JoinAnswer{JoinStatus::Refused, "the seed's answer was too large to send"};
        payload = encode_join_answer(answer);
    }
    join_phase_ = JoinPhase::Answered;
    close_after_write_ = true;
    owner->log().info("{} net: {}: join answered ({})", owner->log_prefix(), describe(),
                      to_string(answer.status));
    enqueue(Channel::Control, payload);
}

void Connection::finish_join(JoinAnswer answer) {
    auto done = std::move(join_done_);
    join_done_ = nullptr;
    close(spdlog::level::info, "join answered: " + std::string(to_string(answer.status)));
    if (done) {
        done(std::move(answer), "");
    }
}

void Connection::establish() {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    established_ = true;
    awaiting_confirmation_ = false;
    deadline_.cancel();
    decoder_.set_max_frame_bytes(owner->options_.max_frame_bytes);
    owner->on_established(shared_from_this());
}

bool Connection::enqueue(Channel channel, std::span<const std::uint8_t> payload) {
    if (closed_) {
        return false;
    }
    auto owner = owner_.lock();
    if (!owner) {
        return false;
    }
    const std::size_t bytes = kFrameHeaderBytes + payload.size();
    if (queue_.size() >= owner->options_.max_queue_frames ||
        queued_bytes_ + bytes > owner->options_.max_queue_bytes) {
        ++owner->counters_.queue_overflows;
        close(spdlog::level::warn, "send queue full (" + std::to_string(queue_.size()) +
                                       " frames, " + std::to_string(queued_bytes_) +
                                       " bytes): resetting the connection");
        return false;
    }
    queue_.push_back(encode_frame(channel, payload));
    queued_bytes_ += bytes;
    ++owner->counters_.frames_out[static_cast<std::size_t>(channel)];
    if (!writing_) {
        do_write();
    }
    return true;
}

void Connection::do_write() {
    if (closed_ || queue_.empty()) {
        writing_ = false;
        if (!closed_ && close_after_write_) {
            close(spdlog::level::debug, "join answer written");
        }
        return;
    }
    writing_ = true;
    auto handler = [self = shared_from_this()](const error_code& ec, std::size_t n) {
        if (self->closed_) {
            return;
        }
        if (ec) {
            self->close(spdlog::level::info, "write failed: " + ec.message(),
                        closed_by_peer(ec) ? LinkLoss::PeerClosed : LinkLoss::Local);
            return;
        }
        if (auto o = self->owner_.lock()) {
            o->counters_.bytes_out += n;
        }
        self->queued_bytes_ -= self->queue_.front().size();
        self->queue_.pop_front();
        self->do_write();
    };
    if (tls_) {
        asio::async_write(*tls_, asio::buffer(queue_.front()), std::move(handler));
    } else {
        asio::async_write(socket_, asio::buffer(queue_.front()), std::move(handler));
    }
}

void Connection::close_bad_frame(BadFrameKind kind, const std::string& detail) {
    if (closed_) {
        return;
    }
    if (auto owner = owner_.lock()) {
        ++owner->counters_.bad_frames[static_cast<std::size_t>(kind)];
    }
    close(spdlog::level::warn, "bad frame (" + std::string(to_string(kind)) + "): " + detail,
          loss_);  // Local, unless the peer's side ended the stream inside a frame
}

void Connection::close_refused(HandshakeRefusal refusal, const std::string& detail) {
    if (closed_) {
        return;
    }
    if (auto owner = owner_.lock()) {
        ++owner->counters_.handshake_refusals[static_cast<std::size_t>(refusal)];
    }
    close(spdlog::level::warn,
          "handshake refused (" + std::string(to_string(refusal)) + "): " + detail);
}

void Connection::close(int level, const std::string& why, LinkLoss loss) {
    if (closed_) {
        return;
    }
    closed_ = true;
    loss_ = loss;
    auto owner = owner_.lock();
    if (owner) {
        owner->log().log(static_cast<spdlog::level::level_enum>(level), "{} net: {}: {}",
                         owner->log_prefix(), describe(), why);
    }
    error_code ignored;
    deadline_.cancel();
    resolver_.cancel();
    queue_.clear();
    queued_bytes_ = 0;
    // The owner hears of it before the socket closes: a leader drops the peer from its lease
    // before the peer can see this side's FIN or RST (docs/design.md, assumption 3).
    if (owner) {
        owner->on_closed(shared_from_this());
    }
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    if (join_done_) {
        // A join that ends without an answer: the reason is the error.
        auto done = std::move(join_done_);
        join_done_ = nullptr;
        done(std::nullopt, why);
    }
}

}  // namespace conclave::net
