// SPDX-License-Identifier: Apache-2.0
#include "conclave/admin/admin_server.hpp"

#include "conclave/core/check.hpp"
#include "conclave/net/mesh.hpp"
#include "request_target.hpp"

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <charconv>
#include <deque>
#include <exception>
#include <list>
#include <set>
#include <sstream>

namespace conclave::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr std::string_view kServerName = "conclaved";
/// After a failed accept (e.g. out of file descriptors), wait before trying again.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
/// Lingering close after a final response: how long and how much to discard.
constexpr std::chrono::milliseconds kDrainTimeout{1000};
constexpr std::size_t kMaxDrainBytes = 1024 * 1024;
/// The first read of a request (within the idle deadline) takes at most this much.
constexpr std::size_t kFirstReadBytes = 4096;
/// HTTP/1.1 pipelining: requests of one connection taken before the oldest is answered. Further
/// requests wait in the read buffer (and then in the socket: nothing more is read meanwhile).
constexpr std::size_t kMaxPipelinedRequests = 64;

}  // namespace

/// What AdminServer::stop() and the eviction of unauthenticated connections need of a
/// connection, whatever its stream type. Outside the anonymous namespace: AdminServer::Shared
/// holds pointers to it.
class SessionBase {
  public:
    virtual void Close() = 0;

    std::string source;  // remote address without the port
    /// Counted against the limits of unauthenticated connections, at `position` in the list.
    bool pooled = false;
    std::list<SessionBase*>::iterator position;

  protected:
    ~SessionBase() = default;
};

struct AdminServer::Shared {
    Shared(asio::io_context& io_context, AdminServerLimits server_limits,
           AdminSecurity server_security)
        : io(io_context),
          limits(server_limits),
          security(std::move(server_security)),
          acceptor(io_context),
          retry_timer(io_context) {}

    asio::io_context& io;
    AdminServerLimits limits;
    AdminSecurity security;
    /// Connections that have not presented the token, oldest first, and their count by source
    /// address. A connection that presents it leaves them for good (it is bounded by the
    /// deadlines only); one beyond a limit evicts the oldest of them instead of being refused.
    std::list<SessionBase*> unauthenticated;
    std::map<std::string, std::size_t> per_source;
    std::map<std::string, std::map<std::string, AdminHandler>> routes;  // path -> method -> handler
    // Asynchronous handlers; each also has a (never called) entry in `routes` for 404/405.
    std::map<std::string, std::map<std::string, AsyncAdminHandler>> async_routes;
    AdminServerStats stats;
    tcp::acceptor acceptor;
    asio::steady_timer retry_timer;
    std::set<SessionBase*> sessions;          // live connections
    std::shared_ptr<asio::ssl::context> tls;  // HTTPS when set
    bool stopped = false;

    void Pool(SessionBase& session) {
        session.position = unauthenticated.insert(unauthenticated.end(), &session);
        session.pooled = true;
        per_source[session.source] += 1;
    }

    void Unpool(SessionBase& session) {
        if (!session.pooled) {
            return;
        }
        session.pooled = false;
        unauthenticated.erase(session.position);
        const auto it = per_source.find(session.source);
        if (it != per_source.end() && --it->second == 0) {
            per_source.erase(it);
        }
    }

    /// Before a connection from `source` joins the unauthenticated ones: closes the oldest of
    /// them from that source (its limit reached) or from anywhere (max_connections reached).
    void MakeRoomFor(const std::string& source) {
        const auto from_source = per_source.find(source);
        const bool source_full = from_source != per_source.end() &&
                                 from_source->second >= limits.max_connections_per_source;
        if (!source_full && unauthenticated.size() < limits.max_connections) {
            return;
        }
        const auto victim =
            std::find_if(unauthenticated.begin(), unauthenticated.end(),
                         [&](const SessionBase* s) { return !source_full || s->source == source; });
        if (victim == unauthenticated.end()) {
            return;
        }
        SessionBase& session = **victim;
        Unpool(session);
        stats.connections_refused += 1;
        session.Close();
    }
};

namespace {

using Shared = AdminServer::Shared;

/// Splits the target into path and decoded query; an error message on failure.
std::optional<std::string> ParseTarget(std::string_view target, AdminRequest& request) {
    return parse_request_target(target, request.path, request.query);
}

/// The status line and headers every answer carries.
template <class Body>
void PutHead(http::response<Body>& response, const AdminResponse& admin, unsigned version) {
    response.version(version);
    response.result(admin.status);
    response.set(http::field::server, kServerName);
    response.set(http::field::content_type, admin.content_type);
    response.set(http::field::cache_control, "no-store");
    for (const auto& [name, value] : admin.headers) {
        response.set(name, value);
    }
}

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

/// One connection, over plain TCP (PlainStream) or TLS (TlsStream).
template <class Stream>
class Session : public SessionBase,
                public std::enable_shared_from_this<Session<Stream>>,
                public AdminStream {
    static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
    using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

  public:
    template <class... StreamArgs>
    Session(std::shared_ptr<Shared> shared, std::string source_address, StreamArgs&&... stream_args)
        : shared_(std::move(shared)),
          stream_(std::forward<StreamArgs>(stream_args)...),
          buffer_(shared_->limits.max_header_bytes + shared_->limits.max_body_bytes + 4096),
          write_timer_(stream_.get_executor()) {
        shared_->sessions.insert(this);
        shared_->stats.connections_active += 1;
        boost::system::error_code ec;
        const auto endpoint = Lowest().socket().remote_endpoint(ec);
        if (!ec) {
            remote_ = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
        }
        source = std::move(source_address);
        shared_->Pool(*this);
    }

    ~Session() {
        shared_->Unpool(*this);
        shared_->sessions.erase(this);
        CONCLAVE_CHECK(shared_->stats.connections_active > 0, "a session ends once it began");
        shared_->stats.connections_active -= 1;
    }

    void Start() {
        if constexpr (kTls) {
            // The TLS handshake is part of the idle deadline: a client that connects and says
            // nothing (or speaks plain HTTP) is closed like any idle one.
            Lowest().expires_after(
                std::min(shared_->limits.idle_timeout, shared_->limits.request_timeout));
            stream_.async_handshake(
                asio::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
                    if (self->shared_->stopped || ec == asio::error::operation_aborted) {
                        return;
                    }
                    if (ec) {
                        self->shared_->stats.tls_handshake_failures += 1;
                        if (ec == beast::error::timeout) {
                            self->shared_->stats.timeouts += 1;
                            self->shared_->stats.idle_timeouts += 1;
                        }
                        self->Close();
                        return;
                    }
                    self->Serve();
                });
        } else {
            Serve();
        }
    }

    void Close() override {
        boost::system::error_code ec;
        Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
        Lowest().close();
    }

  private:
    beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

    void Serve() { Read(); }

    /// Waits for the first bytes of the next request within the idle deadline, then reads the
    /// whole request within the request deadline. Only once every earlier request is answered.
    void Read() {
        if (parser_fed_) {
            parser_fed_ = false;
            ReadRequest();  // the start of the request is in the parser already
            return;
        }
        NewParser();
        if (buffer_.size() > 0) {
            ReadRequest();  // a pipelined request has begun already
            return;
        }
        Lowest().expires_after(
            std::min(shared_->limits.idle_timeout, shared_->limits.request_timeout));
        const std::size_t room = std::min(kFirstReadBytes, buffer_.max_size());
        stream_.async_read_some(buffer_.prepare(room),
                                [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                    self->OnFirstBytes(ec, n);
                                });
    }

    void NewParser() {
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(shared_->limits.max_header_bytes));
        parser_->body_limit(shared_->limits.max_body_bytes);
    }

    void OnFirstBytes(beast::error_code ec, std::size_t n) {
        if (shared_->stopped || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec == beast::error::timeout) {
            shared_->stats.timeouts += 1;
            shared_->stats.idle_timeouts += 1;
            Close();
            return;
        }
        if (ec) {
            Close();  // the client closed (between requests) or reset the connection
            return;
        }
        buffer_.commit(n);
        ReadRequest();
    }

    void ReadRequest() {
        Lowest().expires_after(shared_->limits.request_timeout);
        http::async_read(
            stream_, buffer_, *parser_,
            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
    }

    void OnRead(beast::error_code ec) {
        if (shared_->stopped || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec == http::error::end_of_stream) {
            Close();  // client closed between requests
            return;
        }
        if (ec == beast::error::timeout) {
            shared_->stats.timeouts += 1;
            Close();
            return;
        }
        if (ec && ec.category() != http::make_error_code(http::error::end_of_stream).category() &&
            ec != http::error::buffer_overflow) {
            Close();  // connection reset and the like: nobody to answer
            return;
        }
        TakeRequests(ec);
    }

    /// Answers the request the parser completed (or its parse error `ec`), then every complete
    /// request already in the read buffer (a client pipelining), up to kMaxPipelinedRequests
    /// unanswered; answers go out in request order (Flush).
    void TakeRequests(beast::error_code ec) {
        do {
            if (ec) {
                RefuseMalformed(ec);
                break;
            }
            TakeRequest();
        } while (ParseBuffered(ec));
        Flush();
    }

    /// A request that could not be parsed: answered, then the connection ends.
    void RefuseMalformed(beast::error_code ec) {
        shared_->stats.requests += 1;
        shared_->stats.bad_requests += 1;
        AdminResponse refusal;
        if (ec == http::error::body_limit) {
            refusal = json_error(413, "payload_too_large",
                                 "request body exceeds " +
                                     std::to_string(shared_->limits.max_body_bytes) + " bytes");
        } else if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
            refusal = json_error(431, "headers_too_large",
                                 "request line and headers exceed " +
                                     std::to_string(shared_->limits.max_header_bytes) + " bytes");
        } else {
            refusal = json_error(400, "bad_request", "malformed HTTP request: " + ec.message());
        }
        answers_.push_back({std::move(refusal), false, 11});
        closing_ = true;
    }

    void TakeRequest() {
        shared_->stats.requests += 1;
        served_ += 1;
        const auto& request = parser_->get();
        const bool keep_alive =
            request.keep_alive() && served_ < shared_->limits.max_requests_per_connection;
        answers_.push_back({std::nullopt, keep_alive, request.version()});
        const std::size_t sequence = answered_ + answers_.size() - 1;
        if (!keep_alive) {
            closing_ = true;  // nothing after this request is processed (RFC 9112, 9.6)
        }
        if (auto response = Dispatch(request, sequence)) {
            Answer(sequence, std::move(*response));
        }
    }

    /// Parses the next request from the read buffer alone. True when one is complete, or could
    /// not be parsed (`ec` says why); false when the buffer holds none (or only its start, kept
    /// in the parser for Read) or the connection takes no more requests now.
    bool ParseBuffered(beast::error_code& ec) {
        ec = {};
        if (closing_ || answers_.size() >= kMaxPipelinedRequests || buffer_.size() == 0) {
            return false;
        }
        NewParser();
        parser_->eager(true);
        while (buffer_.size() > 0 && !parser_->is_done()) {
            const std::size_t used = parser_->put(buffer_.data(), ec);
            buffer_.consume(used);
            if (ec == http::error::need_more) {
                ec = {};
                break;
            }
            if (ec) {
                return true;  // TakeRequests refuses it
            }
        }
        if (!parser_->is_done()) {
            parser_fed_ = true;
            return false;
        }
        return true;
    }

    /// The route of `path`: its own, else the longest subtree route ("/a/" for "/a/b/c").
    auto FindRoute(const std::string& path) const {
        auto exact = shared_->routes.find(path);
        if (exact != shared_->routes.end()) {
            return exact;
        }
        for (std::size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0;
             slash = path.rfind('/', slash - 1)) {
            auto subtree = shared_->routes.find(path.substr(0, slash + 1));
            if (subtree != shared_->routes.end()) {
                return subtree;
            }
        }
        return shared_->routes.end();
    }

    /// nullopt: an asynchronous handler answers later.
    std::optional<AdminResponse> Dispatch(const http::request<http::string_body>& request,
                                          std::size_t sequence) {
        AdminRequest admin;
        admin.method = std::string(request.method_string());
        admin.body = request.body();
        admin.remote = remote_;
        admin.scheme = kTls ? "https" : "http";
        if (auto error = ParseTarget(request.target(), admin)) {
            shared_->stats.bad_requests += 1;
            return json_error(400, "bad_request", *error);
        }
        if (auto refusal = CheckAccess(request, admin.path, admin.authenticated)) {
            return refusal;
        }
        const auto path = FindRoute(admin.path);
        if (path == shared_->routes.end()) {
            return json_error(404, "not_found", "no such endpoint: " + admin.path.substr(0, 200));
        }
        const auto handler = path->second.find(admin.method);
        if (handler == path->second.end()) {
            std::string allow;
            for (const auto& [method, unused] : path->second) {
                (void)unused;
                allow += (allow.empty() ? "" : ", ") + method;
            }
            AdminResponse response =
                json_error(405, "method_not_allowed",
                           admin.path + " does not support " + admin.method.substr(0, 20) +
                               " (allowed: " + allow + ")");
            response.headers.emplace_back("Allow", allow);
            return response;
        }
        const auto async_path = shared_->async_routes.find(path->first);
        if (async_path != shared_->async_routes.end()) {
            const auto async = async_path->second.find(admin.method);
            if (async != async_path->second.end()) {
                auto answered = std::make_shared<bool>(false);
                AdminResponder responder = [self = shared_from_this(), sequence,
                                            answered](AdminResponse response) {
                    if (*answered || self->shared_->stopped) {
                        return;
                    }
                    *answered = true;
                    self->Answer(sequence, std::move(response));
                };
                try {
                    async->second(admin, responder);
                } catch (const std::exception& e) {
                    responder(json_error(500, "internal", e.what()));
                } catch (...) {
                    responder(json_error(500, "internal", "unknown exception in handler"));
                }
                return std::nullopt;
            }
        }
        try {
            return handler->second(admin);
        } catch (const std::exception& e) {
            return json_error(500, "internal", e.what());
        } catch (...) {
            return json_error(500, "internal", "unknown exception in handler");
        }
    }

    /// Whether the request carries "Authorization: Bearer <token>" with the configured token
    /// (constant-time compare).
    bool PresentsToken(const http::request<http::string_body>& request) const {
        const auto& token = shared_->security.token;
        const auto auth = request.find(http::field::authorization);
        if (!token || auth == request.end()) {
            return false;
        }
        constexpr std::string_view kBearer = "Bearer ";
        const std::string_view header = Sv(auth->value());
        if (header.substr(0, kBearer.size()) != kBearer) {
            return false;
        }
        const std::string_view given = header.substr(kBearer.size());
        return given.size() == token->size() &&
               CRYPTO_memcmp(given.data(), token->data(), given.size()) == 0;
    }

    /// AdminSecurity's checks (header comment there); nullopt when the request may proceed.
    /// `authenticated`: set when the request presents the token (the connection then leaves the
    /// unauthenticated ones for good).
    std::optional<AdminResponse> CheckAccess(const http::request<http::string_body>& request,
                                             const std::string& path, bool& authenticated) {
        const AdminSecurity& security = shared_->security;
        if (auto refusal = CheckHostAndOrigin(request)) {
            return refusal;
        }
        const bool mutating =
            request.method() != http::verb::get && request.method() != http::verb::head;
        authenticated = PresentsToken(request);
        if (authenticated) {
            shared_->Unpool(*this);
        }
        const bool open = security.open_reads ||
                          std::find(security.public_paths.begin(), security.public_paths.end(),
                                    path) != security.public_paths.end();
        if (security.token && (mutating || !open)) {
            if (!authenticated) {
                shared_->stats.unauthorized += 1;
                AdminResponse response =
                    json_error(401, "unauthorized",
                               "this endpoint needs \"Authorization: Bearer <token>\" with the "
                               "token of admin.token_file");
                response.headers.emplace_back("WWW-Authenticate", "Bearer");
                return response;
            }
        }
        if (mutating) {
            const auto type = request.find(http::field::content_type);
            const bool has_type = type != request.end();
            const std::string_view media = has_type ? Sv(type->value()) : std::string_view();
            const bool json_type =
                has_type && beast::iequals(media.substr(0, media.find(';')), "application/json");
            if ((has_type && !json_type) || (!has_type && !request.body().empty())) {
                shared_->stats.unsupported_media += 1;
                return json_error(415, "unsupported_media_type",
                                  "request bodies must be Content-Type: application/json");
            }
        }
        return std::nullopt;
    }

    static std::string_view Sv(beast::string_view v) { return {v.data(), v.size()}; }

    struct Authority {
        std::string host;  // lower case, IPv6 without brackets
        unsigned port = 0;
    };

    /// Strict "host[:port]" or "[v6][:port]" (nothing else: no path, no user, no space); a
    /// missing port is `default_port`. nullopt when malformed.
    static std::optional<Authority> ParseAuthority(std::string_view text, unsigned default_port) {
        Authority out;
        std::string_view rest;
        if (!text.empty() && text.front() == '[') {
            const std::size_t close = text.find(']');
            if (close == std::string_view::npos || close == 1) {
                return std::nullopt;
            }
            out.host = std::string(text.substr(1, close - 1));
            rest = text.substr(close + 1);
            if (out.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
                return std::nullopt;
            }
        } else {
            const std::size_t colon = text.find(':');
            out.host = std::string(text.substr(0, colon));
            rest = colon == std::string_view::npos ? std::string_view() : text.substr(colon);
            constexpr std::string_view kHostChars =
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
            if (out.host.empty() || out.host.find_first_not_of(kHostChars) != std::string::npos) {
                return std::nullopt;
            }
        }
        out.port = default_port;
        if (!rest.empty()) {
            const std::string_view digits = rest.substr(1);
            const auto [end, ec] =
                std::from_chars(digits.data(), digits.data() + digits.size(), out.port);
            if (rest.front() != ':' || digits.empty() || digits.size() > 5 || ec != std::errc() ||
                end != digits.data() + digits.size() || out.port > 65535) {
                return std::nullopt;
            }
        }
        for (char& c : out.host) {
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        return out;
    }

    /// One Host header, strictly parsed (400 otherwise); with admin.hosts, its host must be one
    /// of them (403 forbidden_host), and an Origin must be this scheme, an allowed host and the
    /// Host header's port (403 forbidden_origin: another site, or another service on this host).
    std::optional<AdminResponse> CheckHostAndOrigin(
        const http::request<http::string_body>& request) {
        const unsigned default_port = kTls ? 443 : 80;
        const auto host = request.find(http::field::host);
        if (request.count(http::field::host) > 1) {
            shared_->stats.bad_requests += 1;
            return json_error(400, "bad_request", "more than one Host header");
        }
        std::optional<Authority> authority;
        if (host != request.end()) {
            authority = ParseAuthority(Sv(host->value()), default_port);
            if (!authority) {
                shared_->stats.bad_requests += 1;
                return json_error(400, "bad_request",
                                  "Host '" + std::string(Sv(host->value()).substr(0, 100)) +
                                      "' is not host[:port]");
            }
        }
        if (shared_->security.allowed_hosts.empty()) {
            return std::nullopt;
        }
        if (!authority || !HostAllowed(authority->host)) {
            shared_->stats.forbidden += 1;
            return json_error(403, "forbidden_host",
                              "Host '" + (authority ? authority->host.substr(0, 100) : "") +
                                  "' is not a name of this node (admin.hosts)");
        }
        const auto origin = request.find(http::field::origin);
        if (origin == request.end()) {
            return std::nullopt;
        }
        const std::string_view value = Sv(origin->value());
        const std::string_view scheme = kTls ? "https://" : "http://";
        const auto origin_authority =
            value.substr(0, scheme.size()) == scheme
                ? ParseAuthority(value.substr(scheme.size()), default_port)
                : std::nullopt;
        if (request.count(http::field::origin) > 1 || !origin_authority ||
            !HostAllowed(origin_authority->host) || origin_authority->port != authority->port) {
            shared_->stats.forbidden += 1;
            return json_error(403, "forbidden_origin",
                              "Origin '" + std::string(value.substr(0, 100)) +
                                  "' is not this node (cross-site request refused)");
        }
        return std::nullopt;
    }

    bool HostAllowed(const std::string& host) const {
        if (host.empty()) {
            return false;
        }
        for (const std::string& allowed : shared_->security.allowed_hosts) {
            if (beast::iequals(allowed, host)) {
                return true;
            }
        }
        return false;
    }

    /// The answer to request number `sequence` of this connection (counted from 0).
    void Answer(std::size_t sequence, AdminResponse admin) {
        CONCLAVE_CHECK(sequence >= answered_ && sequence - answered_ < answers_.size(),
                       "an answer belongs to a request taken and not yet answered");
        PendingAnswer& slot = answers_[sequence - answered_];
        if (admin.stream) {
            if (sequence - answered_ + 1 != answers_.size()) {
                // Requests were taken after it: a stream would leave them unanswered.
                admin = json_error(400, "bad_request",
                                   "a streamed response cannot be followed by pipelined requests");
                slot.keep_alive = false;
            }
            closing_ = true;
        }
        slot.response = std::move(admin);
        Flush();
    }

    /// Writes the answers ready at the front, in request order and in one write; once every
    /// request is answered, reads the next one.
    void Flush() {
        if (writing_ || stream_state_ != StreamState::None) {
            return;
        }
        if (answers_.empty()) {
            if (!closing_) {
                Read();
            }
            return;
        }
        if (answers_.front().response && answers_.front().response->stream) {
            PendingAnswer head = std::move(answers_.front());
            answers_.pop_front();
            answered_ += 1;
            StartStream(std::move(*head.response), head.version);
            return;
        }
        std::ostringstream out;
        std::size_t count = 0;
        bool keep_alive = true;
        for (; count < answers_.size() && keep_alive; ++count) {
            PendingAnswer& slot = answers_[count];
            if (!slot.response || slot.response->stream) {
                break;
            }
            out << MakeResponse(std::move(*slot.response), slot.keep_alive, slot.version);
            keep_alive = slot.keep_alive;
        }
        if (count == 0) {
            return;  // the oldest request is not answered yet
        }
        written_ = std::move(out).str();
        writing_ = true;
        Lowest().expires_after(shared_->limits.request_timeout);
        asio::async_write(
            stream_, asio::buffer(written_),
            [self = shared_from_this(), count, keep_alive](beast::error_code ec, std::size_t) {
                self->OnWrite(ec, count, keep_alive);
            });
    }

    http::response<http::string_body> MakeResponse(AdminResponse admin, bool keep_alive,
                                                   unsigned version) const {
        http::response<http::string_body> response;
        PutHead(response, admin, version);
        response.body() = std::move(admin.body);
        response.keep_alive(keep_alive);
        response.prepare_payload();
        return response;
    }

    void OnWrite(beast::error_code ec, std::size_t count, bool keep_alive) {
        writing_ = false;
        if (shared_->stopped || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec == beast::error::timeout) {
            shared_->stats.timeouts += 1;
        }
        if (ec) {
            Close();
            return;
        }
        answers_.erase(answers_.begin(), answers_.begin() + static_cast<std::ptrdiff_t>(count));
        answered_ += count;
        written_.clear();
        if (!keep_alive) {
            Drain();
            return;
        }
        Flush();
    }

    /// Lingering close: stop sending, then discard what the client still sends (for a bounded
    /// time and size) so that closing does not reset the connection before it reads the answer.
    void Drain() {
        boost::system::error_code ec;
        Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);  // over TLS: no close_notify
        if (ec) {
            Close();
            return;
        }
        Lowest().expires_after(std::min(shared_->limits.request_timeout, kDrainTimeout));
        DrainSome();
    }

    void DrainSome() {
        Lowest().async_read_some(
            asio::buffer(drain_buffer_),
            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                self->drained_bytes_ += n;
                if (ec || self->shared_->stopped || self->drained_bytes_ > kMaxDrainBytes) {
                    self->Close();
                    return;
                }
                self->DrainSome();
            });
    }

  public:
    // ---- AdminStream: a streamed (chunked) response; the connection ends with it ----
    bool write(std::string chunk) override {
        if (stream_state_ != StreamState::Open) {
            return false;
        }
        if (chunk.empty()) {
            return true;
        }
        if (stream_pending_bytes_ + chunk.size() > shared_->limits.max_stream_pending_bytes) {
            EndStream();  // the client does not keep up: drop it rather than buffer
            return false;
        }
        stream_pending_bytes_ += chunk.size();
        stream_queue_.push_back(std::move(chunk));
        if (!stream_writing_) {
            WriteNextChunk();
        }
        return true;
    }

    void close() override {
        if (stream_state_ != StreamState::Open) {
            return;
        }
        stream_state_ = StreamState::Ending;
        if (!stream_writing_) {
            WriteNextChunk();
        }
    }

    bool closed() const override { return stream_state_ != StreamState::Open; }

    void on_close(std::function<void()> callback) override {
        if (stream_state_ == StreamState::Closed) {
            callback();
            return;
        }
        stream_on_close_ = std::move(callback);
    }

  private:
    enum class StreamState : std::uint8_t { None, Open, Ending, Closed };

    void StartStream(AdminResponse admin, unsigned version) {
        stream_header_ = {};
        PutHead(stream_header_, admin, version);
        stream_header_.keep_alive(false);
        stream_header_.chunked(true);
        stream_serializer_.emplace(stream_header_);
        Lowest().expires_after(shared_->limits.request_timeout);
        http::async_write_header(stream_, *stream_serializer_,
                                 [self = shared_from_this(), start = std::move(admin.stream)](
                                     beast::error_code ec, std::size_t) {
                                     if (ec || self->shared_->stopped) {
                                         self->stream_state_ = StreamState::Closed;
                                         self->Close();
                                         return;
                                     }
                                     // From here on the socket is used directly with our own write
                                     // deadline: a pending read (to notice the client leaving) must
                                     // not be cut by the stream's timer.
                                     self->Lowest().expires_never();
                                     self->stream_state_ = StreamState::Open;
                                     self->WatchClient();
                                     start(self);
                                 });
    }

    /// The client sends nothing on a stream; a read completing means it left (or misbehaves).
    void WatchClient() {
        Lowest().socket().async_read_some(
            asio::buffer(drain_buffer_),
            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                self->drained_bytes_ += n;
                if (ec || self->shared_->stopped || self->drained_bytes_ > kMaxDrainBytes) {
                    self->EndStream();
                    return;
                }
                self->WatchClient();
            });
    }

    void WriteNextChunk() {
        if (stream_state_ == StreamState::Closed) {
            return;
        }
        if (stream_queue_.empty()) {
            stream_writing_ = false;
            if (stream_state_ == StreamState::Ending) {
                stream_writing_ = true;
                ArmWriteTimer();
                asio::async_write(ChunkWriter(), http::make_chunk_last(),
                                  [self = shared_from_this()](beast::error_code, std::size_t) {
                                      self->EndStream();
                                  });
            }
            return;
        }
        stream_writing_ = true;
        ArmWriteTimer();
        asio::async_write(ChunkWriter(), http::make_chunk(asio::buffer(stream_queue_.front())),
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              self->write_timer_.cancel();
                              if (ec || self->stream_state_ == StreamState::Closed) {
                                  self->EndStream();
                                  return;
                              }
                              self->stream_pending_bytes_ -= self->stream_queue_.front().size();
                              self->stream_queue_.pop_front();
                              self->WriteNextChunk();
                          });
    }

    /// Chunks bypass the stream's timer (WriteNextChunk arms its own): the raw socket, or the TLS
    /// layer over it. The client-watching read is on the raw socket in both cases.
    auto& ChunkWriter() {
        if constexpr (kTls) {
            return stream_;
        } else {
            return stream_.socket();
        }
    }

    void ArmWriteTimer() {
        write_timer_.expires_after(shared_->limits.request_timeout);
        write_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
            if (!ec) {
                self->shared_->stats.timeouts += 1;
                self->EndStream();  // a chunk not taken within the deadline: drop the client
            }
        });
    }

    void EndStream() {
        if (stream_state_ == StreamState::Closed) {
            return;
        }
        stream_state_ = StreamState::Closed;
        write_timer_.cancel();
        Close();
        if (auto callback = std::move(stream_on_close_)) {
            stream_on_close_ = nullptr;
            callback();
        }
    }

    std::shared_ptr<Shared> shared_;
    Stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    /// The parser holds the start of a request taken from the read buffer (ParseBuffered).
    bool parser_fed_ = false;
    std::string remote_;
    std::size_t served_ = 0;
    /// Pipelining: the requests taken and not yet answered on the wire, oldest first.
    struct PendingAnswer {
        std::optional<AdminResponse> response;  // nullopt: its handler has not answered yet
        bool keep_alive = true;
        unsigned version = 11;
    };
    std::deque<PendingAnswer> answers_;
    std::size_t answered_ = 0;  // requests of this connection answered on the wire
    bool closing_ = false;      // take no further request (a final answer or a stream is due)
    bool writing_ = false;
    std::string written_;  // the answers being written
    std::array<char, 4096> drain_buffer_{};
    std::size_t drained_bytes_ = 0;
    // Streamed responses (AdminStream).
    asio::steady_timer write_timer_;
    StreamState stream_state_ = StreamState::None;
    http::response<http::empty_body> stream_header_;
    std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
    std::deque<std::string> stream_queue_;
    std::size_t stream_pending_bytes_ = 0;
    bool stream_writing_ = false;
    std::function<void()> stream_on_close_;
};

void Accept(const std::shared_ptr<Shared>& shared);

void StartSession(const std::shared_ptr<Shared>& shared, tcp::socket socket, std::string source) {
    if (shared->tls) {
        std::make_shared<Session<TlsStream>>(shared, std::move(source), std::move(socket),
                                             *shared->tls)
            ->Start();
    } else {
        std::make_shared<Session<PlainStream>>(shared, std::move(source), std::move(socket))
            ->Start();
    }
}

void OnAccept(const std::shared_ptr<Shared>& shared, boost::system::error_code ec,
              tcp::socket socket) {
    if (shared->stopped || ec == asio::error::operation_aborted) {
        return;
    }
    if (ec) {
        // Typically EMFILE/ENFILE: back off instead of spinning on the error.
        shared->retry_timer.expires_after(kAcceptRetryDelay);
        shared->retry_timer.async_wait([shared](boost::system::error_code wait_ec) {
            if (!wait_ec && !shared->stopped) {
                Accept(shared);
            }
        });
        return;
    }
    shared->stats.connections_accepted += 1;
    boost::system::error_code source_ec;
    const auto endpoint = socket.remote_endpoint(source_ec);
    std::string source = source_ec ? std::string() : endpoint.address().to_string();
    // Evict rather than refuse: connections that never present the token (idle, slow, streaming)
    // cannot keep a new one out, whatever address they share with it.
    shared->MakeRoomFor(source);
    StartSession(shared, std::move(socket), std::move(source));
    Accept(shared);
}

void Accept(const std::shared_ptr<Shared>& shared) {
    shared->acceptor.async_accept(shared->io,
                                  [shared](boost::system::error_code ec, tcp::socket socket) {
                                      OnAccept(shared, ec, std::move(socket));
                                  });
}

}  // namespace

AdminResponse json_response(unsigned status, const nlohmann::json& value) {
    AdminResponse response;
    response.status = status;
    response.body = value.dump() + "\n";
    return response;
}

AdminResponse json_error(unsigned status, std::string_view error, std::string_view detail) {
    // dump() with replacement: a detail quoting client bytes must not throw on invalid UTF-8.
    nlohmann::json body = {{"error", error}, {"detail", detail}};
    AdminResponse response;
    response.status = status;
    response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    return response;
}

std::shared_ptr<asio::ssl::context> make_admin_tls_context(const std::string& cert_path,
                                                           const std::string& key_path,
                                                           const std::string& field,
                                                           std::string& error) {
    auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
    context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                         asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
    if (SSL_CTX_set_cipher_list(context->native_handle(), net::kTls12Ciphers) != 1) {
        error = field + ": OpenSSL offers none of the AEAD cipher suites";
        return nullptr;
    }
    boost::system::error_code ec;
    if (context->use_certificate_chain_file(cert_path, ec)) {
        error = field + ": cannot load the certificate '" + cert_path + "': " + ec.message();
        return nullptr;
    }
    if (context->use_private_key_file(key_path, asio::ssl::context::pem, ec)) {
        error = field + ": cannot load the key '" + key_path + "' (or it does not match '" +
                cert_path + "'): " + ec.message();
        return nullptr;
    }
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
        error = field + ": the key '" + key_path + "' does not match the certificate '" +
                cert_path + "'";
        return nullptr;
    }
    return context;
}

AdminServer::AdminServer(boost::asio::io_context& io, AdminServerLimits limits,
                         AdminSecurity security, std::shared_ptr<asio::ssl::context> tls)
    : shared_(std::make_shared<Shared>(io, limits, std::move(security))) {
    shared_->tls = std::move(tls);
    CONCLAVE_CHECK(limits.max_connections > 0 && limits.max_requests_per_connection > 0 &&
                       limits.request_timeout.count() > 0,
                   "admin limits are positive (the config validates them)");
    CONCLAVE_CHECK(limits.idle_timeout.count() > 0, "admin idle timeout is positive");
}

AdminServer::~AdminServer() {
    stop();
}

void AdminServer::route(const std::string& method, const std::string& path, AdminHandler handler) {
    CONCLAVE_CHECK(!path.empty() && path.front() == '/' && handler,
                   "a route has an absolute path and a handler");
    shared_->routes[path][method] = std::move(handler);
}

void AdminServer::route_async(const std::string& method, const std::string& path,
                              AsyncAdminHandler handler) {
    CONCLAVE_CHECK(!path.empty() && path.front() == '/' && handler,
                   "a route has an absolute path and a handler");
    shared_->async_routes[path][method] = std::move(handler);
    shared_->routes[path][method] = [](const AdminRequest&) {
        return json_error(500, "internal", "asynchronous route called synchronously");
    };
}

std::optional<std::string> AdminServer::listen(const std::string& host, std::uint16_t port) {
    const std::string name = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                             std::to_string(port);
    boost::system::error_code ec;
    tcp::endpoint endpoint;
    const auto address = asio::ip::make_address(host, ec);
    if (!ec) {
        endpoint = tcp::endpoint(address, port);
    } else {
        tcp::resolver resolver(shared_->io);
        const auto results = resolver.resolve(host, std::to_string(port), ec);
        if (ec || results.empty()) {
            return name + ": cannot resolve host: " + (ec ? ec.message() : "no address");
        }
        endpoint = results.begin()->endpoint();
    }
    tcp::acceptor& acceptor = shared_->acceptor;
    if (acceptor.open(endpoint.protocol(), ec) ||
        acceptor.set_option(asio::socket_base::reuse_address(true), ec) ||
        acceptor.bind(endpoint, ec) ||
        acceptor.listen(asio::socket_base::max_listen_connections, ec)) {
        boost::system::error_code close_ec;
        acceptor.close(close_ec);
        return name + ": " + ec.message();
    }
    shared_->stopped = false;
    Accept(shared_);
    return std::nullopt;
}

std::uint16_t AdminServer::port() const {
    boost::system::error_code ec;
    const auto endpoint = shared_->acceptor.local_endpoint(ec);
    return ec ? 0 : endpoint.port();
}

void AdminServer::stop() {
    if (shared_->stopped) {
        return;
    }
    shared_->stopped = true;
    boost::system::error_code ec;
    shared_->acceptor.close(ec);
    shared_->retry_timer.cancel();
    const std::set<SessionBase*> sessions = shared_->sessions;  // closing does not destroy them
    for (SessionBase* session : sessions) {
        session->Close();
    }
}

const AdminServerStats& AdminServer::stats() const {
    return shared_->stats;
}

const AdminServerLimits& AdminServer::limits() const {
    return shared_->limits;
}

boost::asio::io_context& AdminServer::io() {
    return shared_->io;
}

}  // namespace conclave::admin
