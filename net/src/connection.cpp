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

#include "conclave/codec/json.hpp"
#include "mesh_impl.hpp"

namespace conclave::net {

namespace asio = boost::asio;
using boost::system::error_code;

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
        s += " (peer " + owner->membership_.at(*who).id + ")";
    }
    return s;
}

void Connection::start_handshake_deadline() {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    deadline_.expires_after(owner->options_.handshake_timeout);
    deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
        if (ec || self->closed_ || self->established_) {
            return;
        }
        auto o = self->owner_.lock();
        const auto ms = o ? o->options_.handshake_timeout.count() : 0;
        self->close_refused(HandshakeRefusal::Timeout,
                            "handshake not completed within " + std::to_string(ms) + " ms");
    });
}

void Connection::start_inbound() {
    start_handshake_deadline();
    on_connected();
}

void Connection::start_outbound(const std::string& host, std::uint16_t port) {
    start_handshake_deadline();
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
    const auto role = dialed_ ? ssl::stream_base::client : ssl::stream_base::server;
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
    if (dialed_) {
        auto owner = owner_.lock();
        if (!owner) {
            return;
        }
        Hello hello = owner->own_hello();
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
    if (ec) {
        if (decoder_.mid_frame()) {
            close_bad_frame(BadFrameKind::Truncated, "connection ended inside a frame (" +
                                                         std::to_string(decoder_.buffered_bytes()) +
                                                         " bytes buffered)");
        } else {
            close(spdlog::level::info, "connection lost: " + ec.message());
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

void Connection::handle_frame(Frame& frame) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    if (!established_) {
        if (awaiting_confirmation_) {
            // Inbound: the dialer accepted our Hello and confirms with a ping (handshake.hpp).
            bool is_ping = false;
            std::vector<std::uint8_t> mac;
            if (frame.channel == Channel::Control) {
                try {
                    is_ping = decode_control_kind(frame.payload) == ControlKind::Ping;
                    if (is_ping) {
                        mac = decode_ping_mac(frame.payload);
                    }
                } catch (const DecodeError&) {
                    is_ping = false;
                }
            }
            if (!is_ping) {
                close_bad_frame(BadFrameKind::BadHandshake,
                                "expected the dialer's confirmation after the hello");
                return;
            }
            if (owner->has_secret()) {
                const auto& dialer = owner->membership_.at(*peer_).id;
                if (!mac_equal(
                        mac, owner->peer_mac(HandshakeRole::Dialer, dialer, peer_nonce_, nonce_))) {
                    close_refused(HandshakeRefusal::AuthFailed,
                                  "the confirmation of '" + dialer +
                                      "' does not prove the cluster secret (wrong or missing MAC)");
                    return;
                }
            }
            if (!channel_mismatch_.empty()) {
                close(spdlog::level::warn, "handshake refused (channel_mismatch)");  // counted
                return;
            }
            if (auto refusal = owner->on_confirmation(*this)) {
                close_refused(refusal->first, refusal->second);
                return;
            }
            establish();
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

void Connection::handle_hello(std::span<const std::uint8_t> payload) {
    auto owner = owner_.lock();
    if (!owner) {
        return;
    }
    Hello hello;
    try {
        hello = decode_hello(payload);
    } catch (const DecodeError& e) {
        close_bad_frame(BadFrameKind::BadHandshake, std::string("malformed hello: ") + e.what());
        return;
    }
    const HelloCheck check = owner->on_hello(*this, hello);
    if (check.refusal) {
        close_refused(*check.refusal, check.detail);
        return;
    }
    peer_ = check.peer;
    if (dialed_) {
        // Outbound: the acceptor's hello checks out; confirm, and the peer is up on our side.
        std::vector<std::uint8_t> mac;
        if (owner->has_secret()) {
            mac = owner->own_mac(HandshakeRole::Dialer, hello.node, nonce_, hello.nonce);
        }
        enqueue(Channel::Control, encode_confirmation(mac));
        establish();
        return;
    }
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
    channel_mismatch_ = owner->channel_mismatch(hello);
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
        return;
    }
    writing_ = true;
    auto handler = [self = shared_from_this()](const error_code& ec, std::size_t n) {
        if (self->closed_) {
            return;
        }
        if (ec) {
            self->close(spdlog::level::info, "write failed: " + ec.message());
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
    close(spdlog::level::warn, "bad frame (" + std::string(to_string(kind)) + "): " + detail);
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

void Connection::close(int level, const std::string& why) {
    if (closed_) {
        return;
    }
    closed_ = true;
    auto owner = owner_.lock();
    if (owner) {
        owner->log().log(static_cast<spdlog::level::level_enum>(level), "{} net: {}: {}",
                         owner->log_prefix(), describe(), why);
    }
    error_code ignored;
    deadline_.cancel();
    resolver_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    queue_.clear();
    queued_bytes_ = 0;
    if (owner) {
        owner->on_closed(shared_from_this());
    }
}

}  // namespace conclave::net
