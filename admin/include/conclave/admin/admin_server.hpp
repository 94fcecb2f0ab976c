// SPDX-License-Identifier: Apache-2.0
// A small HTTP/1.1 server for the admin interface (Boost.Beast), on a caller-supplied io_context.
//
// Routes are (method, exact path) -> handler; a handler gets the decoded request and returns a
// status, content type and body. The server owns everything else, with limits that make it safe to
// expose to a hostile client on the admin port:
//   - header and body size limits (431 / 413); caps on connections that have not presented the
//     token, in all and per source address: one more evicts (closes) the oldest of them, so idle,
//     slow or streaming connections never lock out a new one; a connection that presents the
//     token leaves those caps for good (its deadlines still bound it),
//   - an idle deadline (a connection that sends nothing, on accept or between keep-alive
//     requests, is closed after it), a deadline per request (from its first byte until it is
//     fully read, so a slowloris client that trickles bytes is cut off) and per response write,
//   - keep-alive with a bounded number of requests per connection,
//   - malformed requests get 400; unknown paths 404; wrong methods 405 with an Allow header. Every
//     error body is JSON: {"error": "<kind>", "detail": "<what>"}.
// A handler that throws produces a 500 (the server keeps running).
//
// Threading: everything runs on the io_context's thread(s) without locks; run the io_context on
// one thread (the node's design) or call every member from inside it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace conclave::admin {

struct AdminRequest {
    std::string method;                        // "GET", "POST", ...
    std::string path;                          // target up to '?', not decoded
    std::map<std::string, std::string> query;  // percent-decoded; keys unique
    std::string body;
    std::string remote;           // peer address, "127.0.0.1:54321"
    std::string scheme = "http";  // "https" when the server speaks TLS
    /// The request presents the token (AdminSecurity::token).
    bool authenticated = false;
};

class AdminStream;

struct AdminResponse {
    unsigned status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // extra headers
    /// When set, the response is streamed: the server sends the status and headers with
    /// "Transfer-Encoding: chunked" (body ignored), then calls this with the stream to write to.
    /// The connection is not reused afterwards.
    std::function<void(std::shared_ptr<AdminStream>)> stream;
};

/// A streamed (chunked) response body, e.g. NDJSON. Every member runs on the io_context thread.
/// Bounded: at most AdminServerLimits::max_stream_pending_bytes queued for a slow client, and a
/// chunk not written within request_timeout; beyond either the stream is closed (dropped).
class AdminStream {
  public:
    virtual ~AdminStream() = default;
    /// Queues one chunk (empty chunks are ignored). false when the stream is closed, or closes it
    /// now because the client does not keep up.
    virtual bool write(std::string chunk) = 0;
    /// Ends the body and closes the connection. Idempotent.
    virtual void close() = 0;
    virtual bool closed() const = 0;
    /// `callback` runs once when the stream closes for any reason (client gone, too slow, server
    /// stopped, close()); at once if it is already closed. Drop references to the stream there.
    virtual void on_close(std::function<void()> callback) = 0;
};

/// `value` serialised as the body, status as given.
AdminResponse json_response(unsigned status, const nlohmann::json& value);
/// {"error": error, "detail": detail}
AdminResponse json_error(unsigned status, std::string_view error, std::string_view detail);

using AdminHandler = std::function<AdminResponse(const AdminRequest&)>;
/// Asynchronous handlers answer later (e.g. once a proposal commits) by calling the responder
/// once, on the io_context thread. Calls after the first, or after the server stopped, are
/// ignored. The request deadline does not run while the handler works; the handler bounds it.
using AdminResponder = std::function<void(AdminResponse)>;
using AsyncAdminHandler = std::function<void(const AdminRequest&, AdminResponder)>;

struct AdminServerLimits {
    /// Request line plus headers.
    std::size_t max_header_bytes = 16 * 1024;
    std::size_t max_body_bytes = 64 * 1024;
    /// Connections that have not presented the token, at once; one more evicts the oldest.
    std::size_t max_connections = 64;
    /// Deadline for reading one whole request, counted from its first byte, and for writing one
    /// response.
    std::chrono::milliseconds request_timeout{10'000};
    /// A connection that sends no byte of a request for this long (after accept, or after a
    /// keep-alive response) is closed (at most request_timeout), so idle sockets do not hold
    /// admin slots for long.
    std::chrono::milliseconds idle_timeout{2'000};
    std::size_t max_requests_per_connection = 1000;
    /// Of those, from one source address; one more from it evicts its oldest (counted refused),
    /// so idle sockets from one host cannot take the slots of everybody else.
    std::size_t max_connections_per_source = 16;
    /// Streamed responses: bytes queued for a client that does not read before it is dropped.
    std::size_t max_stream_pending_bytes = 64 * 1024;
};

/// Who may use the admin API (SECURITY.md). Checked before routing, in this order:
///   403 forbidden_host   the Host header (port ignored) is not in `allowed_hosts` (DNS rebinding)
///   403 forbidden_origin an Origin header whose host is not in `allowed_hosts` (CSRF)
///   401 unauthorized     a mutating request (not GET/HEAD), or a GET/HEAD outside
///                        `public_paths` when !open_reads, without "Authorization: Bearer
///                        <token>" (constant-time compare)
///   415 unsupported_media_type  a mutating request with a body (or a Content-Type) that is not
///                        application/json
/// An empty `allowed_hosts` disables the Host/Origin checks; no token disables the 401.
struct AdminSecurity {
    std::vector<std::string> allowed_hosts;  // compared case-insensitively
    std::optional<std::string> token;
    bool open_reads = false;
    /// Paths whose GET/HEAD never need the token (conclaved: /healthz and /metrics).
    std::vector<std::string> public_paths;
};

struct AdminServerStats {
    std::uint64_t connections_accepted = 0;
    std::uint64_t connections_refused = 0;     // evicted: over max_connections(_per_source)
    std::uint64_t requests = 0;                // requests read (served or refused with 4xx)
    std::uint64_t bad_requests = 0;            // malformed, oversize (400, 413, 431)
    std::uint64_t timeouts = 0;                // connections cut off by a deadline (idle included)
    std::uint64_t idle_timeouts = 0;           // ... of which: nothing sent within idle_timeout
    std::uint64_t forbidden = 0;               // 403: foreign Host or Origin
    std::uint64_t unauthorized = 0;            // 401: missing or wrong bearer token
    std::uint64_t unsupported_media = 0;       // 415: non-JSON body on a mutating request
    std::uint64_t tls_handshake_failures = 0;  // HTTPS: plain HTTP, a bad or no TLS handshake
    std::size_t connections_active = 0;
};

/// HTTPS for the admin API: a TLS server context (TLS 1.2 and up) with the certificate chain
/// and key of these PEM files. nullptr and `error` set (naming `field` and the file) when a file
/// cannot be read or the key does not match the certificate.
std::shared_ptr<boost::asio::ssl::context> make_admin_tls_context(const std::string& cert_path,
                                                                  const std::string& key_path,
                                                                  const std::string& field,
                                                                  std::string& error);

class AdminServer {
  public:
    /// With `tls` the server speaks HTTPS only: a client that does not complete a TLS handshake
    /// within the idle deadline (plain HTTP included) is closed, counted in tls_handshake_failures.
    explicit AdminServer(boost::asio::io_context& io, AdminServerLimits limits = {},
                         AdminSecurity security = {},
                         std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
    /// Stops (closes the listener and every connection).
    ~AdminServer();
    AdminServer(const AdminServer&) = delete;
    AdminServer& operator=(const AdminServer&) = delete;

    /// Registers the handler for `method` (upper case, e.g. "GET") on the exact `path`. A path
    /// ending in '/' ("/metadata/") is a subtree route: it also serves every path below it that
    /// has no route of its own (the handler reads the rest from AdminRequest::path).
    void route(const std::string& method, const std::string& path, AdminHandler handler);
    /// Same, for a handler that answers asynchronously.
    void route_async(const std::string& method, const std::string& path, AsyncAdminHandler handler);

    /// Binds host:port (port 0: any free port) and starts accepting. Returns an error message
    /// naming the endpoint on failure ("127.0.0.1:8101: Address already in use").
    std::optional<std::string> listen(const std::string& host, std::uint16_t port);

    /// The bound port (after a successful listen).
    std::uint16_t port() const;

    /// Closes the listener and every open connection. Idempotent.
    void stop();

    const AdminServerStats& stats() const;
    const AdminServerLimits& limits() const;
    /// The io_context the server runs on (for handlers that need timers).
    boost::asio::io_context& io();

    struct Shared;  // state shared with the connections (outlives the server if needed)

  private:
    std::shared_ptr<Shared> shared_;
};

}  // namespace conclave::admin
