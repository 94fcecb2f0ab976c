// SPDX-License-Identifier: Apache-2.0
// The admin client: one HTTP/1.1 request to a node of conclaved's admin API (client/README.md).
// HTTP or HTTPS (Asio's OpenSSL layer, the peer's certificate checked against a CA and the
// dialled host), a bearer token, a deadline per request, 307/308 redirects to the leader
// followed, every node of a cluster asked at once. Boost.Beast, one connection per request.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conclave/core/endpoint.hpp"

namespace conclave::client {

using Clock = std::chrono::steady_clock;

/// A node's admin endpoint (conclave/core/endpoint.hpp).
using conclave::Endpoint;
using conclave::parse_endpoint;
using conclave::to_string;

/// Where a redirect points: "http://host:port/target" or "https://...".
struct Location {
    Endpoint endpoint;
    std::string target;  // "/" when the location has no path
};
/// nullopt for a scheme other than http/https or a malformed authority.
std::optional<Location> parse_location(std::string_view location);

/// "500ms", "2s": whole seconds print as seconds.
std::string format_duration(std::chrono::milliseconds duration);

struct Request {
    boost::beast::http::verb method = boost::beast::http::verb::get;
    std::string target = "/";
    std::string body;  // sent as application/json when not empty
    std::vector<std::pair<std::string, std::string>> headers;
};

struct Response {
    unsigned status = 0;
    std::string body;
    std::string location;     // the Location header, if any
    nlohmann::json document;  // the body parsed as JSON, or discarded
};

enum class ErrorKind : std::uint8_t {
    /// The client would not send the request: the endpoint speaks HTTPS and no CA was given, or
    /// the token would go in clear over HTTP (a non-loopback address, or a port that does not
    /// answer HTTP). A configuration error: trying again cannot help.
    Refused,
    /// No HTTP answer: resolve, connect, TLS, write or read failed, or the deadline passed.
    Unreachable,
    /// A redirect to a location that is not http(s)://host:port/...
    BadRedirect,
};

/// How far a request got before it failed: a request that never connected was certainly not
/// processed; one that was written may have been.
enum class Stage : std::uint8_t { Connect, Write, Read };

class Error : public std::runtime_error {
  public:
    Error(ErrorKind kind, Stage stage, const std::string& message,
          boost::system::error_code code = {})
        : std::runtime_error(message), kind_(kind), stage_(stage), code_(code) {}
    ErrorKind kind() const { return kind_; }
    Stage stage() const { return stage_; }
    /// The transport's error (empty for a refusal, a redirect or the deadline).
    boost::system::error_code code() const { return code_; }

  private:
    ErrorKind kind_;
    Stage stage_;
    boost::system::error_code code_;
};

/// A redirect names the leader, which does not redirect again; a few hops cover an election.
inline constexpr int kMaxRedirects = 3;

struct Settings {
    /// HTTPS when set (make_tls_context); plain HTTP otherwise.
    std::shared_ptr<boost::asio::ssl::context> tls;
    /// Sent as "Authorization: Bearer <token>" when not empty: over HTTPS, or over plain HTTP
    /// only to a loopback address whose port answers HTTP without it (checked first).
    std::string token;
    std::string user_agent = "conclave-client";
    /// A request's default deadline is now + timeout; "no answer within <timeout>" names it.
    std::chrono::milliseconds timeout{5000};
    std::size_t body_limit = 64U << 20;
    /// After a plain HTTP request got no answer, check whether the port speaks TLS (a Refused
    /// error then says so). Costs one more connection to a node that is down.
    bool detect_https = true;
    /// Redirects request_following follows before it returns the 307 itself.
    int max_redirects = kMaxRedirects;
    /// How the user gives the CA, as refusals name it.
    std::string ca_option = "--cacert FILE";
};

/// A TLS 1.2+ client context that verifies the peer against the PEM CA in `ca_file`, with a
/// client certificate and key when given. Throws Error(Refused) naming `what` and the file.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const std::string& ca_file,
                                                            const std::string& what,
                                                            const std::string& cert_file = {},
                                                            const std::string& key_file = {});

/// One request, to be co_awaited on the caller's executor. Throws Error; the connection is
/// abandoned at `deadline`. `settings` must outlive the coroutine.
boost::asio::awaitable<Response> async_request(const Settings& settings, Endpoint endpoint,
                                               Request request, Clock::time_point deadline);

/// One request, on its own io_context, until `deadline` (default: now + settings.timeout).
Response request(const Settings& settings, const Endpoint& endpoint, const Request& request,
                 std::optional<Clock::time_point> deadline = std::nullopt);

/// The same request, following 307/308 redirects (to the leader) to http(s)://host:port/...
/// locations, at most settings.max_redirects times, spoken as the first request was (HTTP or
/// HTTPS). `answered` is the endpoint that gave the returned answer. Throws Error (BadRedirect
/// for a location that cannot be followed).
Response request_following(const Settings& settings, Endpoint endpoint, Request request,
                           std::optional<Clock::time_point> deadline = std::nullopt,
                           Endpoint* answered = nullptr);

/// request_following as a coroutine on the caller's executor (every hop ends by `deadline`).
boost::asio::awaitable<Response> async_request_following(const Settings& settings,
                                                         Endpoint endpoint, Request request,
                                                         Clock::time_point deadline);

/// One request of a batch, and what came of it.
struct Call {
    Endpoint endpoint;
    Request request;
};
struct Outcome {
    std::optional<Response> response;
    std::optional<Error> error;  // when there is no response (no answer by the deadline included)
};

/// Every call at once, until all are answered, `deadline`, or an answer for which `enough`
/// returns true (the others then end as Unreachable "no answer within ...").
std::vector<Outcome> request_all(const Settings& settings, const std::vector<Call>& calls,
                                 Clock::time_point deadline,
                                 const std::function<bool(const Response&)>& enough = {});

}  // namespace conclave::client
