// SPDX-License-Identifier: Apache-2.0
// The mesh: listener, dialing with backoff, peer slots, frame dispatch.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <stdexcept>

#include "conclave/codec/json.hpp"
#include "conclave/core/check.hpp"
#include "mesh_impl.hpp"

namespace conclave::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

std::unique_ptr<ssl::context> make_tls_context(const TlsOptions& tls) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    if (SSL_CTX_set_cipher_list(ctx->native_handle(), kTls12Ciphers) != 1) {
        throw std::runtime_error("tls: OpenSSL offers none of the AEAD cipher suites");
    }
    const auto load = [](const char* field, const std::string& file, auto&& fn) {
        error_code ec;
        fn(ec);
        if (ec) {
            throw std::runtime_error(std::string("tls.") + field + ": cannot load '" + file +
                                     "': " + ec.message());
        }
    };
    load("ca_file", tls.ca_file, [&](error_code& ec) { ctx->load_verify_file(tls.ca_file, ec); });
    load("cert_file", tls.cert_file,
         [&](error_code& ec) { ctx->use_certificate_chain_file(tls.cert_file, ec); });
    load("key_file", tls.key_file,
         [&](error_code& ec) { ctx->use_private_key_file(tls.key_file, ssl::context::pem, ec); });
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    return ctx;
}

}  // namespace

Mesh::Impl::Impl(asio::io_context& io, Membership membership, NodeId self, MeshOptions options)
    : io_(io),
      membership_(std::move(membership)),
      self_(self),
      options_(std::move(options)),
      acceptor_(io),
      accept_retry_timer_(io),
      rng_(options_.seed ? *options_.seed : std::random_device{}()) {
    quarantined_ = options_.quarantined;
    if (auto error = membership_.validate()) {
        throw std::invalid_argument("membership: " + *error);
    }
    if (self_.value >= membership_.size()) {
        throw std::invalid_argument("self: index " + std::to_string(self_.value) +
                                    " is not in the membership table");
    }
    if (options_.max_frame_bytes < kMaxHandshakeFrameBytes ||
        options_.max_frame_bytes > (std::size_t{1} << 31)) {
        throw std::invalid_argument("max_frame_bytes: must be between " +
                                    std::to_string(kMaxHandshakeFrameBytes) + " and 2^31");
    }
    if (options_.max_queue_frames == 0 || options_.max_queue_bytes < options_.max_frame_bytes) {
        throw std::invalid_argument(
            "max_queue_frames / max_queue_bytes: must hold at least one maximal frame");
    }
    if (options_.handshake_timeout <= Millis{0} || options_.reconnect_initial <= Millis{0} ||
        options_.reconnect_max < options_.reconnect_initial) {
        throw std::invalid_argument(
            "handshake_timeout / reconnect_initial / reconnect_max: must be positive and "
            "reconnect_max >= reconnect_initial");
    }
    if (options_.secret && options_.secret->size() < kMinSecretBytes) {
        throw std::invalid_argument("secret: must be at least " + std::to_string(kMinSecretBytes) +
                                    " bytes");
    }
    if (options_.max_pending_per_source == 0 || options_.backoff_reset_after < Millis{0}) {
        throw std::invalid_argument(
            "max_pending_per_source / backoff_reset_after: must be positive");
    }
    if (!options_.logger) {
        options_.logger = spdlog::default_logger();
    }
    if (options_.tls) {
        tls_context_ = make_tls_context(*options_.tls);
    }
    for (std::size_t i = 0; i < membership_.size(); ++i) {
        peers_.push_back(std::make_unique<PeerSlot>(io_));
        peers_.back()->backoff = options_.reconnect_initial;
    }
}

std::string Mesh::Impl::log_prefix() const {
    return "[" + membership_.at(self_).id + "]";
}

Hello Mesh::Impl::own_hello() const {
    Hello hello{kProtocolVersion, membership_.cluster, membership_.at(self_).id};
    hello.channels = served_channels();
    hello.advisory = served_advisory_channels();
    hello.incarnation = options_.incarnation;
    hello.repaired = options_.repaired;
    if (options_.durable_term) {
        hello.term = options_.durable_term();
    }
    return hello;
}

std::uint64_t Mesh::Impl::handled_channels() const {
    std::uint64_t mask = 1;  // Control
    for (std::size_t i = 1; i < kChannelCount; ++i) {
        if (handlers_[i]) {
            mask |= std::uint64_t{1} << i;
        }
    }
    return mask;
}

std::uint64_t Mesh::Impl::served_channels() const {
    return handled_channels() & ~kAdvisoryChannels;
}

std::uint64_t Mesh::Impl::served_advisory_channels() const {
    return handled_channels() & kAdvisoryChannels;
}

std::string Mesh::Impl::channel_mismatch(const Hello& hello) const {
    if (!hello.channels || *hello.channels == served_channels()) {
        return "";
    }
    std::string detail = "node '" + hello.node + "' serves channels {";
    std::string mine = "this node serves {";
    for (std::size_t i = 0; i < kChannelCount; ++i) {
        const auto bit = std::uint64_t{1} << i;
        const std::string name(to_string(static_cast<Channel>(i)));
        if ((*hello.channels & bit) != 0) {
            detail += " " + name;
        }
        if ((served_channels() & bit) != 0) {
            mine += " " + name;
        }
    }
    return detail + " } but " + mine +
           " }: check that both have the same config (e.g. metadata.enabled)";
}

std::vector<std::uint8_t> Mesh::Impl::own_mac(HandshakeRole role, const std::string& peer,
                                              std::span<const std::uint8_t> nonce_dialer,
                                              std::span<const std::uint8_t> nonce_acceptor) const {
    return handshake_mac(*options_.secret, role, membership_.cluster, membership_.at(self_).id,
                         peer, nonce_dialer, nonce_acceptor);
}

std::vector<std::uint8_t> Mesh::Impl::peer_mac(HandshakeRole role, const std::string& peer,
                                               std::span<const std::uint8_t> nonce_dialer,
                                               std::span<const std::uint8_t> nonce_acceptor) const {
    return handshake_mac(*options_.secret, role, membership_.cluster, peer,
                         membership_.at(self_).id, nonce_dialer, nonce_acceptor);
}

void Mesh::Impl::release_pending(const Connection& c) {
    CONCLAVE_CHECK(pending_inbound_ > 0, "a pending inbound connection is released once");
    --pending_inbound_;
    const auto it = pending_by_source_.find(c.source());
    if (it != pending_by_source_.end() && --it->second == 0) {
        pending_by_source_.erase(it);
    }
    std::erase(pending_order_, &c);
}

bool Mesh::Impl::evicts_before(const Connection& a, const Connection& b) const {
    if (a.spoke() != b.spoke()) {
        return !a.spoke();
    }
    const auto held = [&](const Connection& c) {
        const auto it = pending_by_source_.find(c.source());
        return it == pending_by_source_.end() ? std::size_t{0} : it->second;
    };
    return held(a) > held(b);  // equal: the older one, b, stays the victim
}

void Mesh::Impl::evict_pending_for(const std::string& source) {
    const auto from_source = pending_by_source_.find(source);
    const bool source_full = from_source != pending_by_source_.end() &&
                             from_source->second >= options_.max_pending_per_source;
    // The victim: a silent connection (nothing received yet: an idle socket) before one that
    // speaks (a peer in its TLS or hello exchange); then, across sources, one from the source
    // holding the most handshakes (a flood from a few addresses, never a peer's single dial);
    // then the oldest.
    const auto oldest = [&](bool same_source) {
        auto victim = pending_order_.end();
        for (auto it = pending_order_.begin(); it != pending_order_.end(); ++it) {
            const Connection* c = *it;
            if (c->proven_joiner() || (same_source && c->source() != source)) {
                continue;
            }
            if (victim == pending_order_.end() || evicts_before(*c, **victim)) {
                victim = it;
            }
        }
        return victim;
    };
    auto victim = source_full ? oldest(true) : pending_order_.end();
    const bool by_source = victim != pending_order_.end();
    if (!by_source && pending_inbound_ >= options_.max_pending_inbound) {
        victim = oldest(false);
    }
    if (victim == pending_order_.end()) {
        return;
    }
    ++counters_.handshake_refusals[static_cast<std::size_t>(
        by_source ? HandshakeRefusal::TooManyPendingFromSource : HandshakeRefusal::TooManyPending)];
    // Debug only: a flood would flood the log; the counter shows it.
    (*victim)->close(spdlog::level::debug,
                     by_source ? "evicted: one of too many handshakes from " + source
                               : "evicted: one of too many handshakes in progress");
}

void Mesh::Impl::start() {
    CONCLAVE_CHECK(!started_, "the mesh starts once");
    started_ = true;
    const auto& me = membership_.at(self_);
    error_code ec;
    const auto address = asio::ip::make_address(me.host, ec);
    tcp::endpoint endpoint;
    if (ec) {
        tcp::resolver resolver(io_);
        endpoint = *resolver.resolve(me.host, std::to_string(me.port)).begin();
    } else {
        endpoint = tcp::endpoint(address, me.port);
    }
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    local_port_ = acceptor_.local_endpoint().port();
    log().info("{} net: listening on {}:{} (cluster '{}', {} nodes, tls {}, secret {})",
               log_prefix(), endpoint.address().to_string(), local_port_, membership_.cluster,
               membership_.size(), tls_enabled() ? "on" : "off", has_secret() ? "on" : "off");
    do_accept();
    for (std::size_t i = self_.value + 1U; i < membership_.size(); ++i) {
        dial(NodeId{static_cast<std::uint16_t>(i)});
    }
    // The lower indexes dial this node, on their backoff, which grew while it was down.
    for (std::uint16_t i = 0; i < self_.value; ++i) {
        request_dial(NodeId{i});
    }
}

void Mesh::Impl::stop() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    accept_retry_timer_.cancel();
    for (auto& slot : peers_) {
        slot->redial_timer.cancel();
    }
    const auto open = connections_;  // close() removes from the set
    for (const auto& c : open) {
        c->close(spdlog::level::info, "mesh stopped");
    }
}

void Mesh::Impl::do_accept() {
    acceptor_.async_accept([weak = weak_from_this()](const error_code& ec, tcp::socket socket) {
        auto self = weak.lock();
        if (!self || self->stopped_ || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec) {
            // e.g. out of file descriptors: retry shortly instead of spinning.
            self->log().warn("{} net: accept failed: {}", self->log_prefix(), ec.message());
            self->accept_retry_timer_.expires_after(Millis{100});
            self->accept_retry_timer_.async_wait([weak](const error_code& ec2) {
                auto s = weak.lock();
                if (s && !ec2 && !s->stopped_) {
                    s->do_accept();
                }
            });
            return;
        }
        ++self->counters_.connections_accepted;
        error_code source_ec;
        const auto source_ep = socket.remote_endpoint(source_ec);
        const std::string source = source_ec ? "?" : source_ep.address().to_string();
        // Evict rather than refuse: sockets that never finish their handshake cannot keep a
        // real peer (often at the same address) out.
        self->evict_pending_for(source);
        if (self->pending_inbound_ >= self->options_.max_pending_inbound) {
            error_code close_ec;  // every connection in its handshake is a proven joiner
            socket.close(close_ec);
        } else {
            auto c = std::make_shared<Connection>(weak, std::move(socket), self->tls_context_.get(),
                                                  std::nullopt);
            self->connections_.insert(c);
            ++self->pending_inbound_;
            ++self->pending_by_source_[source];
            self->pending_order_.push_back(c.get());
            c->set_source(source);
            c->start_inbound();
        }
        self->do_accept();
    });
}

void Mesh::Impl::dial(NodeId peer) {
    auto& slot = *peers_[peer.value];
    if (stopped_ || slot.retired) {
        return;
    }
    CONCLAVE_CHECK(!slot.connection, "one connection per peer slot");
    ++counters_.connections_dialed;
    if (slot.ever_dialed) {
        ++counters_.reconnects;
    }
    slot.ever_dialed = true;
    auto c =
        std::make_shared<Connection>(weak_from_this(), tcp::socket(io_), tls_context_.get(), peer);
    slot.connection = c;
    connections_.insert(c);
    const auto& address = membership_.at(peer);
    c->start_outbound(address.host, address.port);
}

void Mesh::Impl::schedule_redial(NodeId peer) {
    if (stopped_) {
        return;
    }
    auto& slot = *peers_[peer.value];
    const auto backoff = slot.backoff;
    std::uniform_int_distribution<Millis::rep> jitter(backoff.count() / 2, backoff.count());
    const Millis delay{jitter(rng_)};
    slot.backoff = std::min(backoff * 2, options_.reconnect_max);
    slot.redial_timer.expires_after(delay);
    slot.redial_timer.async_wait([weak = weak_from_this(), peer](const error_code& ec) {
        auto self = weak.lock();
        if (!self || ec || self->stopped_ || self->peers_[peer.value]->connection ||
            self->peers_[peer.value]->retired) {
            return;
        }
        self->dial(peer);
    });
}

void Mesh::Impl::request_dial(NodeId peer) {
    if (stopped_ || peers_[peer.value]->retired) {
        return;
    }
    ++counters_.dial_requests_sent;
    auto c =
        std::make_shared<Connection>(weak_from_this(), tcp::socket(io_), tls_context_.get(), peer);
    c->set_dial_request();
    connections_.insert(c);
    const auto& address = membership_.at(peer);
    c->start_outbound(address.host, address.port);
}

void Mesh::Impl::on_dial_request(const Connection& request) {
    const NodeId peer = *request.peer();
    auto& slot = *peers_[peer.value];
    if (stopped_ || slot.retired) {
        return;
    }
    ++counters_.dial_requests;
    slot.backoff = options_.reconnect_initial;
    replaced_by_restart(slot, request);  // closed: the dial below replaces it
    if (slot.connection) {
        // A dial in progress completes on its own; an established connection may be a dead one
        // the restarted peer left: probed (a ping makes it fail, or, retransmitting, it is
        // closed), and its redial waits reconnect_initial.
        if (slot.up) {
            probe_old_connection(slot);
        }
        return;
    }
    log().info("{} net: peer {} asks to be dialed: dialing now", log_prefix(),
               membership_.at(peer).id);
    slot.redial_timer.cancel();
    dial(peer);
}

HelloCheck Mesh::Impl::check_table(const Connection& c, const Hello& hello) const {
    // A joiner checks the seed's answer without the table: the seed need not be in it.
    HelloCheck check = c.joining() ? check_seed_hello(hello, membership_.cluster)
                                   : check_hello(hello, membership_, self_, c.dialed());
    if (check.refusal == HandshakeRefusal::WrongDirection && c.inbound()) {
        // A member this node dials asks to be dialed: the handshake proves it, then it is served.
        if (const auto index = membership_.index_of(hello.node); index && *index != self_) {
            check = HelloCheck{};
            check.peer = index;
            check.dial_request = true;
        }
    }
    return check;
}

HelloCheck Mesh::Impl::on_hello(Connection& c, const Hello& hello) {
    HelloCheck check = check_table(c, hello);
    if (check.refusal) {
        return check;
    }
    if (check.joiner && !join_handler_) {
        check.joiner = false;
        check.refusal = HandshakeRefusal::JoinRefused;
        check.detail = "this node does not accept joins";
        return check;
    }
    if (check.peer && peers_[check.peer->value]->retired) {
        check.peer.reset();
        check.refusal = HandshakeRefusal::UnknownNode;
        check.detail = "node '" + hello.node + "' was removed from the cluster";
        return check;
    }
    if (tls_enabled() && options_.tls->check_common_name) {
        std::string names;
        if (!c.certificate_names(hello.node, names)) {
            check.peer.reset();
            check.refusal = HandshakeRefusal::CertificateMismatch;
            check.detail = "hello claims '" + hello.node + "' but the certificate names " + names;
            return check;
        }
    }
    if (has_secret()) {
        bool proven = false;
        std::string why;
        if (c.inbound()) {
            // Inbound: the dialer proves itself in its confirmation; here it must send a nonce.
            proven = hello.nonce.size() == kNonceBytes;
            why = "hello without a " + std::to_string(kNonceBytes) +
                  "-byte nonce (is the peer configured with the cluster secret?)";
        } else {
            proven = hello.nonce.size() == kNonceBytes &&
                     mac_equal(hello.mac, peer_mac(HandshakeRole::Acceptor, hello.node, c.nonce(),
                                                   hello.nonce));
            why = "the answer of '" + hello.node +
                  "' does not prove the cluster secret (wrong or missing MAC)";
        }
        if (!proven) {
            check.peer.reset();
            check.refusal = HandshakeRefusal::AuthFailed;
            check.detail = why;
            return check;
        }
    }
    if (c.dialed()) {
        if (auto mismatch = channel_mismatch(hello); !mismatch.empty()) {
            check.peer.reset();
            check.refusal = HandshakeRefusal::ChannelMismatch;
            check.detail = mismatch;
            return check;
        }
    }
    // A hello for a node whose connection is up proves nothing yet (anyone can send one): the
    // handshake goes on, and only the dialer's proven confirmation may touch the established
    // connection (on_confirmation).
    return check;
}

void Mesh::Impl::probe_old_connection(PeerSlot& slot) {
    // The peer may have restarted without the old connection noticing: probe it, so that a dead
    // connection fails (RST) and the peer's next redial succeeds. A probe queued behind data that
    // is being retransmitted would go out only with the next retransmission (exponential
    // backoff, up to TCP_USER_TIMEOUT): such a stalled connection is closed instead, after the
    // hello being checked has been refused.
    if (!slot.connection) {
        return;
    }
    if (!slot.connection->retransmitting()) {
        slot.connection->enqueue(Channel::Control, encode_ping());
        return;
    }
    // This node closes it itself: no proof that the peer's process stopped (LinkLoss::Local).
    asio::post(io_, [old = slot.connection] {
        old->close(spdlog::level::info,
                   "closed: its node dialed again while data sent here went unacknowledged "
                   "(retransmitting)");
    });
}

bool Mesh::Impl::replaced_by_restart(PeerSlot& slot, const Connection& proven) {
    // A proven hello (MAC or certificate checked) of another incarnation than the established
    // connection's: the process behind that connection is gone (LinkLoss::PeerRestarted). Without
    // a secret or TLS nothing is proven, and the old connection is only probed.
    const std::shared_ptr<Connection> old = slot.connection;
    if (!slot.up || !old || !(has_secret() || tls_enabled()) || proven.peer_incarnation().empty() ||
        old->peer_incarnation().empty() || old->peer_incarnation() == proven.peer_incarnation()) {
        return false;
    }
    old->close(spdlog::level::info,
               "closed: a newer incarnation of its node proved itself (the process behind this "
               "connection restarted)",
               LinkLoss::PeerRestarted);
    return true;
}

std::optional<std::pair<HandshakeRefusal, std::string>> Mesh::Impl::on_confirmation(Connection& c) {
    const NodeId peer = *c.peer();
    auto& slot = *peers_[peer.value];
    if (!slot.up || replaced_by_restart(slot, c)) {
        return std::nullopt;
    }
    // The same process dialed again while its connection is up here: that one may be dead (the
    // peer's kernel gave up on it): probe it; the peer redials.
    probe_old_connection(slot);
    return std::make_pair(
        HandshakeRefusal::DuplicateNode,
        "node '" + membership_.at(peer).id + "' already has an established connection");
}

std::optional<std::string> Mesh::Impl::admit_incarnation(NodeId peer,
                                                         const std::string& incarnation,
                                                         bool repaired) {
    if (!options_.admit_incarnation) {
        return std::nullopt;
    }
    return options_.admit_incarnation(peer, incarnation, repaired);
}

std::optional<std::pair<HandshakeRefusal, std::string>> Mesh::Impl::admit_term(
    NodeId peer, const std::string& incarnation, std::optional<std::uint64_t> term) {
    if (!options_.durable_term) {
        return std::nullopt;
    }
    const std::string& id = membership_.at(peer).id;
    if (!term) {
        return std::make_pair(
            HandshakeRefusal::UnsupportedVersion,
            "the hello of '" + id +
                "' carries no durable term (\"term\"): a node of another version");
    }
    auto& slot = *peers_[peer.value];
    std::optional<std::uint64_t> floor;
    if (slot.announced_term && slot.announced_incarnation == incarnation) {
        floor = slot.announced_term;
    } else if (options_.remembered_term) {
        floor = options_.remembered_term(peer, incarnation);  // an earlier run's memory
    }
    if (floor && *term < *floor) {
        return std::make_pair(
            HandshakeRefusal::StateRegressed,
            "node '" + id + "' announces durable term " + std::to_string(*term) +
                ", below the term " + std::to_string(*floor) + " it announced to '" +
                membership_.at(self_).id +
                "' before: its state was restored from an older copy (a VM snapshot?); "
                "stop it and run conclaved --repair --min-term <the cluster's term>");
    }
    if (!floor || *term > *floor) {
        raise_announced_term(peer, incarnation, *term);
    } else {
        slot.announced_term = floor;
        slot.announced_incarnation = incarnation;
    }
    return std::nullopt;
}

void Mesh::Impl::note_announced_term(NodeId peer, std::optional<std::uint64_t> term) {
    // The connection's incarnation was admitted (and its hello's term remembered) at the
    // handshake; a term Ping only raises it.
    const PeerSlot& slot = *peers_[peer.value];
    if (options_.durable_term && term && slot.announced_term && *term > *slot.announced_term) {
        raise_announced_term(peer, slot.announced_incarnation, *term);
    }
}

void Mesh::Impl::raise_announced_term(NodeId peer, const std::string& incarnation,
                                      std::uint64_t term) {
    auto& slot = *peers_[peer.value];
    slot.announced_term = term;
    slot.announced_incarnation = incarnation;
    if (options_.remember_term) {
        options_.remember_term(peer, incarnation, term);
    }
}

void Mesh::Impl::announce_term() {
    if (!options_.durable_term || stopped_) {
        return;
    }
    const auto ping = encode_term_ping(options_.durable_term());
    for (const auto& slot : peers_) {
        if (slot->up && slot->connection) {
            slot->connection->enqueue(Channel::Control, ping);
        }
    }
}

void Mesh::Impl::note_admitted(NodeId peer) {
    auto& slot = *peers_[peer.value];
    if (slot.admitted) {
        return;
    }
    slot.admitted = true;
    if (options_.on_admitted_by) {
        options_.on_admitted_by(peer);
    }
}

void Mesh::Impl::on_refused_by_peer(NodeId peer, const PeerRefusal& refusal) {
    if (refusal.reason == to_string(HandshakeRefusal::UnknownNode)) {
        if (options_.on_unknown_to) {
            options_.on_unknown_to(peer, refusal.detail);
        }
        return;
    }
    if (refusal.reason == to_string(HandshakeRefusal::StateRegressed)) {
        log().critical("{} net: node '{}' refuses this node (state_regressed): {}", log_prefix(),
                       membership_.at(peer).id, refusal.detail);
        if (options_.on_state_regressed) {
            options_.on_state_regressed(peer, refusal.detail);
        }
        return;
    }
    if (refusal.reason != to_string(HandshakeRefusal::StateLost)) {
        return;
    }
    log().critical("{} net: node '{}' refuses this node (state_lost): {}", log_prefix(),
                   membership_.at(peer).id, refusal.detail);
    if (options_.on_state_lost) {
        options_.on_state_lost(peer, refusal.detail);
    }
}

void Mesh::Impl::on_established(const std::shared_ptr<Connection>& c) {
    const NodeId peer = *c->peer();
    auto& slot = *peers_[peer.value];
    CONCLAVE_CHECK(!slot.up, "a peer comes up once per connection");
    if (!c->dialed()) {
        release_pending(*c);
    } else {
        CONCLAVE_CHECK(slot.connection == c,
                       "a dialed connection that comes up is the slot's current one");
        // The backoff is reset in on_frame, once this connection has proven stable.
    }
    slot.connection = c;
    slot.up = true;
    slot.admitted = false;
    const auto now = std::chrono::steady_clock::now();
    slot.up_since = now;
    slot.last_contact = now;
    ++counters_.handshakes_completed;
    if (!c->dialed()) {
        // The dialer admitted us before it confirmed; and it learns that we admitted it from
        // our first frame (MeshOptions::on_admitted_by), this ping when nothing else is sent.
        note_admitted(peer);
        c->enqueue(Channel::Control, encode_ping());
    }
    ++counters_.peer_ups;
    log().info("{} net: peer {} up ({} {})", log_prefix(), membership_.at(peer).id,
               c->dialed() ? "dialed" : "accepted from", c->remote());
    const auto handlers = peer_handlers_;
    for (const auto& h : handlers) {
        h(peer, true, LinkLoss::Local);
    }
}

std::optional<FrameRejection> Mesh::Impl::on_frame(Connection& c, Frame& frame) {
    const NodeId peer = *c.peer();
    const auto channel_index = static_cast<std::size_t>(frame.channel);
    if (channel_index >= kChannelCount ||
        (frame.channel != Channel::Control && !handlers_[channel_index])) {
        return FrameRejection{BadFrameKind::UnknownChannel,
                              "channel " + std::to_string(channel_index) + " is not served"};
    }
    ++counters_.frames_in[channel_index];
    auto& slot = *peers_[peer.value];
    const auto now = std::chrono::steady_clock::now();
    slot.last_contact = now;
    // The acceptor reports us up (having admitted us) before it sends anything but a refusal.
    if (c.dialed() && frame.channel != Channel::Control) {
        note_admitted(peer);
    }
    if (quarantined_ && frame.channel != Channel::Control) {
        ++counters_.quarantined_frames;
        return std::nullopt;
    }
    if (c.dialed() && slot.backoff != options_.reconnect_initial && slot.up_since &&
        now - *slot.up_since >= options_.backoff_reset_after) {
        slot.backoff = options_.reconnect_initial;
    }
    if (frame.channel == Channel::Control) {
        try {
            const ControlKind kind = decode_control_kind(frame.payload);
            if (kind == ControlKind::Ping) {
                if (c.dialed()) {
                    note_admitted(peer);
                }
                note_announced_term(peer, decode_ping_term(frame.payload));
                return std::nullopt;
            }
            if (kind == ControlKind::Refused && !c.dialed()) {
                return FrameRejection{BadFrameKind::UnexpectedControl,
                                      "refusal after the handshake on an accepted connection"};
            }
            if (kind == ControlKind::Refused) {
                // The acceptor refused our confirmation (it has proven itself with its hello's
                // MAC); it closes the connection once this is written.
                on_refused_by_peer(peer, decode_refusal(frame.payload));
                return std::nullopt;
            }
            return FrameRejection{BadFrameKind::UnexpectedControl,
                                  kind == ControlKind::Hello
                                      ? "hello after the handshake"
                                      : "join frame on a member's connection"};
        } catch (const codec::DecodeError& e) {
            return FrameRejection{BadFrameKind::UnexpectedControl, e.what()};
        }
    }
    // Copy: the handler may stop the mesh or replace handlers while it runs.
    const FrameHandler handler = handlers_[channel_index];
    return handler(peer, frame.payload);
}

void Mesh::Impl::on_closed(const std::shared_ptr<Connection>& c) {
    connections_.erase(c);
    if (c->inbound() && !c->established()) {
        release_pending(*c);  // a joiner's connection stays pending until it closes
    }
    const auto who = c->established() ? c->peer() : c->dialed();
    if (!who) {
        return;
    }
    auto& slot = *peers_[who->value];
    if (slot.connection != c) {
        return;  // a refused duplicate, or a connection that never owned the slot
    }
    slot.connection.reset();
    if (slot.up) {
        slot.up = false;
        slot.up_since.reset();
        ++counters_.peer_downs;
        log().info("{} net: peer {} down ({})", log_prefix(), membership_.at(*who).id,
                   c->loss() == LinkLoss::Local        ? "closed here"
                   : c->loss() == LinkLoss::PeerClosed ? "closed by the peer"
                                                       : "replaced by a newer incarnation");
        const auto handlers = peer_handlers_;
        for (const auto& h : handlers) {
            h(*who, false, c->loss());
        }
    }
    if (c->dialed() && !slot.retired) {
        schedule_redial(*c->dialed());
    }
}

Mesh::AddedNode Mesh::Impl::add_node(NodeAddress node, bool retired) {
    Membership next = membership_;
    next.nodes.push_back(std::move(node));
    if (auto error = next.validate()) {
        return {std::nullopt, *error};
    }
    membership_ = std::move(next);
    const NodeId added{static_cast<std::uint16_t>(membership_.size() - 1)};
    peers_.push_back(std::make_unique<PeerSlot>(io_));
    peers_.back()->backoff = options_.reconnect_initial;
    peers_.back()->retired = retired;
    log().info("{} net: node {} added to the table (index {}, {}:{}{})", log_prefix(),
               membership_.at(added).id, added.value, membership_.at(added).host,
               membership_.at(added).port, retired ? ", already removed" : "");
    if (started_) {
        dial(added);  // the new node has the highest index: this node is the pair's dialer
    }
    return {added, ""};
}

void Mesh::Impl::retire_node(NodeId node) {
    CONCLAVE_CHECK(node.value < peers_.size() && node != self_,
                   "a retired node is another node of the table");
    auto& slot = *peers_[node.value];
    if (slot.retired) {
        return;
    }
    slot.retired = true;
    slot.redial_timer.cancel();
    log().info("{} net: node {} removed from the cluster: its connection is closed for good",
               log_prefix(), membership_.at(node).id);
    if (auto c = slot.connection) {
        c->close(spdlog::level::info, "node removed from the cluster");
    }
}

void Mesh::Impl::request_join(std::string host, std::uint16_t port, JoinRequest request,
                              JoinCallback done) {
    const auto fail = [this, &done](std::string error) {
        asio::post(
            io_, [done = std::move(done), error = std::move(error)] { done(std::nullopt, error); });
    };
    if (stopped_) {
        fail("mesh stopped");
        return;
    }
    if (request.peer.size() > kMaxJoinAddressBytes || request.http.size() > kMaxJoinAddressBytes) {
        fail("join request: peer and http must be at most " + std::to_string(kMaxJoinAddressBytes) +
             " bytes");
        return;
    }
    ++counters_.connections_dialed;
    auto c = std::make_shared<Connection>(weak_from_this(), tcp::socket(io_), tls_context_.get(),
                                          std::nullopt);
    c->set_join(std::move(request), std::move(done));
    connections_.insert(c);
    log().info("{} net: asking {}:{} to add this node to cluster '{}'", log_prefix(), host, port,
               membership_.cluster);
    c->start_outbound(host, port);
}

bool Mesh::Impl::send(NodeId to, Channel channel, std::span<const std::uint8_t> payload) {
    CONCLAVE_CHECK(to.value < peers_.size() && to != self_, "a send names another member");
    auto& slot = *peers_[to.value];
    if (stopped_ || !slot.up || !slot.connection || (quarantined_ && channel != Channel::Control) ||
        (is_advisory(channel) && !slot.connection->peer_serves_advisory(channel))) {
        ++counters_.sends_dropped;
        return false;
    }
    return slot.connection->enqueue(channel, payload);
}

// ---- Mesh (handle) -----------------------------------------------------------------------------

Mesh::Mesh(asio::io_context& io, Membership membership, NodeId self, MeshOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(membership), self, std::move(options))) {}

Mesh::~Mesh() {
    impl_->stop();
}

void Mesh::set_frame_handler(Channel channel, FrameHandler handler) {
    if (channel == Channel::Control || static_cast<std::size_t>(channel) >= kChannelCount) {
        throw std::invalid_argument("channel: control is reserved for the mesh");
    }
    impl_->handlers_[static_cast<std::size_t>(channel)] = std::move(handler);
}

void Mesh::add_peer_handler(PeerHandler handler) {
    impl_->peer_handlers_.push_back(std::move(handler));
}

void Mesh::set_join_handler(JoinHandler handler) {
    impl_->join_handler_ = std::move(handler);
}

void Mesh::request_join(std::string host, std::uint16_t port, JoinRequest request,
                        JoinCallback done) {
    impl_->request_join(std::move(host), port, std::move(request), std::move(done));
}

void Mesh::start() {
    impl_->start();
}
void Mesh::stop() {
    const auto keep = impl_;  // a join callback run by stop() may destroy this handle
    keep->stop();
}

void Mesh::end_quarantine() {
    if (impl_->quarantined_) {
        impl_->quarantined_ = false;
        impl_->log().info("{} net: quarantine ended: frames flow on every channel",
                          impl_->log_prefix());
    }
}

bool Mesh::quarantined() const {
    return impl_->quarantined_;
}

bool Mesh::send(NodeId to, Channel channel, std::span<const std::uint8_t> payload) {
    return impl_->send(to, channel, payload);
}

void Mesh::Impl::readmit_node(NodeId node) {
    CONCLAVE_CHECK(node.value < peers_.size() && node != self_,
                   "a readmitted node is another node of the table");
    auto& slot = *peers_[node.value];
    if (!slot.retired) {
        return;
    }
    slot.retired = false;
    slot.backoff = options_.reconnect_initial;
    log().info("{} net: node {} added back to the cluster", log_prefix(), membership_.at(node).id);
    if (started_ && self_.value < node.value && !slot.connection) {
        dial(node);
    }
}

void Mesh::set_address(NodeId node, std::string host, std::uint16_t port) {
    CONCLAVE_CHECK(node.value < impl_->peers_.size() && node != impl_->self_,
                   "an address is set for another node of the table");
    NodeAddress& address = impl_->membership_.nodes[node.value];
    address.host = std::move(host);
    address.port = port;
}

Mesh::AddedNode Mesh::add_node(NodeAddress node, bool retired) {
    return impl_->add_node(std::move(node), retired);
}
void Mesh::retire_node(NodeId node) {
    impl_->retire_node(node);
}
void Mesh::readmit_node(NodeId node) {
    impl_->readmit_node(node);
}
void Mesh::announce_term() {
    impl_->announce_term();
}

bool Mesh::is_retired(NodeId node) const {
    return node.value < impl_->peers_.size() && impl_->peers_[node.value]->retired;
}

bool Mesh::is_up(NodeId peer) const {
    return peer.value < impl_->peers_.size() && impl_->peers_[peer.value]->up;
}

std::optional<std::chrono::microseconds> Mesh::round_trip(NodeId peer) const {
    if (peer.value >= impl_->peers_.size() || peer == impl_->self_) {
        return std::nullopt;
    }
    const auto& slot = *impl_->peers_[peer.value];
    if (!slot.up || !slot.connection) {
        return std::nullopt;
    }
    return slot.connection->smoothed_round_trip();
}

PeerStatus Mesh::peer_status(NodeId peer) const {
    PeerStatus s;
    if (peer.value >= impl_->peers_.size() || peer == impl_->self_) {
        return s;
    }
    const auto& slot = *impl_->peers_[peer.value];
    s.up = slot.up;
    s.last_contact = slot.last_contact;
    s.up_since = slot.up_since;
    if (slot.up && slot.connection) {
        s.remote_address = slot.connection->remote();
    }
    return s;
}

const MeshCounters& Mesh::counters() const {
    return impl_->counters_;
}
const Membership& Mesh::membership() const {
    return impl_->membership_;
}
NodeId Mesh::self() const {
    return impl_->self_;
}
std::uint16_t Mesh::local_port() const {
    return impl_->local_port_;
}

}  // namespace conclave::net
