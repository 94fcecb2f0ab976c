// SPDX-License-Identifier: Apache-2.0
// conclavectl: the operator's command-line client of conclaved's HTTP admin API (node/README.md,
// "conclavectl"). Asynchronous Boost.Beast HTTP/1.1 client: every exchange runs on an io_context
// that stops at the command's deadline (--timeout), so no node (paused, blackholed, half-open TLS)
// can hold it longer. HTTPS through Asio's OpenSSL layer, CLI11 for the command line,
// nlohmann_json.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "conclave/node/cli.hpp"
#include "conclave/node/cluster_config.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using conclave::node::Endpoint;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitAuth = 3;
constexpr int kExitUnreachable = 4;
constexpr int kMaxRedirects = 3;
constexpr std::size_t kBodyLimitBytes = 64U << 20;

constexpr std::string_view kUsage =
    R"(Usage: conclavectl [--endpoints HOST:PORT,... | --config FILE] [options] COMMAND [ARGS]
       conclavectl --help | --version

Operates a Conclave cluster through the nodes' HTTP admin endpoints.

Commands:
  status              one line per node: id, endpoint, role, term, leader, fencing
                      token, lease (a leader's remaining lease in ms, "-" when it
                      holds none), commit LSN, health, storage (ok, or failed: /status
                      storage.reason and .since with -o json), last contact (ms
                      since the node was last heard from by another node,
                      smallest value)
  watch               one line per leadership change (with the reason) as seen by
                      the first node (GET /leadership?watch=1). A node silent for
                      --timeout is left for the next one; with no node to follow
                      for --timeout, exits 4. Runs until interrupted (^C) or --count
  transfer --to ID    ask the leader to hand leadership to node ID and wait until
                      ID leads
  step-down           ask the leader to hand leadership to another node and wait
                      until another node leads
  put KEY VALUE       append KEY=VALUE to the metadata log (VALUE is JSON if it
                      parses as JSON, else a string); prints the committed LSN
  get [--from LSN]    print the committed metadata entries after LSN (TERM.COUNTER,
                      default: from the start), read from the leader
  get KEY [--consistency linearizable|serializable]
                      print KEY's value, the LSN of its last write and the commit
                      LSN the answer reflects (GET /metadata/KEY); linearizable
                      (default): answered by the leader once it confirmed its
                      leadership; serializable: the first node's own state,
                      possibly behind. Exit 1 when the key does not exist
  members             the active configuration (GET /members, from the leader:
                      id, role, peer, http, acknowledged entries, lag, connected,
                      live and ms since last heard, as the leader sees them)
  set-priority ID N   node ID's priority is N (0: never stands for leader) on every
                      node (POST /priority on each endpoint; the leader records it in
                      the metadata log, so it outlives restarts and reaches nodes that
                      were down)
  members OP ID       a membership change, OP = add-learner | promote | remove
                      (POST /members; waits until it commits; prints the version)
  broadcast TOPIC JSON
                      an advisory message to every live member (POST /broadcast;
                      JSON that does not parse is sent as a string); prints its id
                      and the members it was sent to

Options (flag, else environment variable, else default):
  --endpoints LIST    comma-separated admin endpoints (host:port) of the nodes
                      [CONCLAVECTL_ENDPOINTS]
  --config FILE       conclaved's cluster config: its nodes' "http" endpoints, its
                      "admin.token_file" and, when "admin" has "tls", its "tls.ca"
                      [CONCLAVECTL_CONFIG]
  --token-file FILE   send "Authorization: Bearer <token>" (the file's first line)
                      [CONCLAVECTL_TOKEN_FILE]; default: --config's admin.token_file.
                      The token is sent over HTTPS, or over plain HTTP only to a
                      loopback address that answers HTTP without it
  --cacert FILE       speak HTTPS, trusting node certificates signed by this CA
                      (PEM) and checking that they name the endpoint's host
                      [CONCLAVECTL_CACERT]
  -o, --output FMT    "table" (default) or "json", every command [CONCLAVECTL_OUTPUT]
  --timeout DURATION  deadline of the whole command, e.g. 500ms, 2s, 1m (a bare
                      number is seconds; default 5s) [CONCLAVECTL_TIMEOUT]; for
                      watch: the longest silence of the node followed
  --count N           watch: exit 0 after N lines
  --help, --version
Options also accept the --option=VALUE form. 307 redirects (to the leader) are
followed (http:// or https://, spoken as the first request was).

Exit status:
  0  success
  1  the operation failed (refused, server error, no leader or a leader still
     syncing its log until the deadline: put and members retry those, which
     appended nothing, the new leader not seen before the deadline)
  2  bad command line or config (also: an endpoint speaks HTTPS and no --cacert
     was given; a token would go over plain HTTP to a non-loopback address)
  3  unauthorized: the node answered 401 or 403 (check --token-file)
  4  no node answered before the deadline (status: some node unreachable or
     unhealthy; watch: no node to follow for --timeout)
)";

std::string UsageText() {
    return std::string(kUsage);
}

struct Options {
    std::vector<Endpoint> endpoints;
    std::shared_ptr<asio::ssl::context> tls;  // HTTPS when set
    std::vector<std::string> ids;             // from --config; else empty (ids come from /status)
    std::string token;
    std::string token_note;  // why no token is sent although the config names one
    std::string output = "table";
    std::chrono::milliseconds timeout{5000};
    Clock::time_point deadline;  // start + timeout
    std::string command;
    std::vector<std::string> args;
    std::string to;
    std::string from;
    std::optional<std::uint64_t> count;
};

/// A failure that ends the command with one line and an exit status.
struct Failure : std::runtime_error {
    Failure(int status_code, const std::string& message, std::string http_error = {})
        : std::runtime_error(message), status(status_code), error(std::move(http_error)) {}
    int status;
    std::string error;  // the "error" code of an HTTP answer, when there was one
};

struct Reply {
    unsigned status = 0;
    std::string body;
    std::string location;
    json document;  // body parsed as JSON, or discarded
};

/// One HTTP request to make.
struct Call {
    http::verb method = http::verb::get;
    std::string target;
    std::string body;
};

std::string Name(const Endpoint& e) {
    return conclave::node::to_string(e);
}

/// "500ms", "2s", "1m"; a bare number is seconds.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text) {
    std::uint64_t n = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (ec != std::errc{} || ptr == text.data() || n > 3'600'000) {
        return std::nullopt;
    }
    const std::string_view unit(ptr, static_cast<std::size_t>(end - ptr));
    const std::uint64_t ms = unit == "ms"                  ? n
                             : unit == "s" || unit.empty() ? n * 1000
                             : unit == "m"                 ? n * 60'000
                                                           : 0;
    if (ms == 0 || ms > 3'600'000) {
        return std::nullopt;
    }
    return std::chrono::milliseconds(ms);
}

std::string FormatDuration(std::chrono::milliseconds d) {
    return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s"
                                 : std::to_string(d.count()) + "ms";
}

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

/// HTTPS client context: TLS 1.2 and up, peer verification against the CA in `ca_path`.
std::shared_ptr<asio::ssl::context> MakeTlsContext(const std::string& ca_path,
                                                   const std::string& what) {
    auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
    context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                         asio::ssl::context::no_tlsv1_1);
    context->set_verify_mode(asio::ssl::verify_peer);
    boost::system::error_code ec;
    if (context->load_verify_file(ca_path, ec)) {
        throw Failure(kExitUsage, what + " " + ca_path + ": cannot load the CA: " + ec.message());
    }
    return context;
}

// ---- Transport: coroutines on an io_context that the caller runs until a deadline. ----

Failure PlainTokenRefused(const Endpoint& endpoint) {
    return Failure(kExitUsage, Name(endpoint) +
                                   ": refusing to send the token over plain HTTP to a non-loopback "
                                   "address: serve the admin API over HTTPS (admin.tls) and pass "
                                   "--cacert FILE");
}

/// Resolves and connects; with `loopback_only`, refuses (before connecting) a name that resolves
/// to any address that is not loopback.
asio::awaitable<void> Dial(beast::tcp_stream& stream, const Endpoint& endpoint,
                           bool loopback_only = false) {
    tcp::resolver resolver(co_await asio::this_coro::executor);
    // Arguments of co_await are named variables: GCC 12 destroys some temporaries there twice.
    const std::string port = std::to_string(endpoint.port);
    const auto results = co_await resolver.async_resolve(endpoint.host, port, asio::use_awaitable);
    for (const auto& entry : results) {
        if (loopback_only && !entry.endpoint().address().is_loopback()) {
            throw PlainTokenRefused(endpoint);
        }
    }
    co_await stream.async_connect(results, asio::use_awaitable);
}

/// Whether `endpoint` completes a TLS handshake (certificate not checked): what a plain HTTP
/// request that got no HTTP answer was talking to.
asio::awaitable<bool> SpeaksTls(const Endpoint& endpoint) {
    asio::ssl::context context(asio::ssl::context::tls_client);
    context.set_verify_mode(asio::ssl::verify_none);
    TlsStream stream(co_await asio::this_coro::executor, context);
    try {
        co_await Dial(beast::get_lowest_layer(stream), endpoint);
        co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
    } catch (const boost::system::system_error&) {
        co_return false;
    }
    co_return true;
}

Failure SpeaksHttps(const Endpoint& endpoint) {
    return Failure(kExitUsage, Name(endpoint) +
                                   ": this endpoint speaks HTTPS: pass --cacert FILE "
                                   "(the cluster CA); no token was sent");
}

Reply ToReply(const http::response<http::string_body>& response) {
    Reply reply;
    reply.status = response.result_int();
    reply.body = response.body();
    if (auto it = response.find(http::field::location); it != response.end()) {
        reply.location = std::string(it->value());
    }
    reply.document = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
    return reply;
}

http::request<http::string_body> MakeRequest(const Endpoint& endpoint, const Call& call,
                                             const std::string* token) {
    http::request<http::string_body> request{call.method, call.target, 11};
    request.set(http::field::host, Name(endpoint));
    request.set(http::field::user_agent, "conclavectl");
    if (token && !token->empty()) {
        request.set(http::field::authorization, "Bearer " + *token);
    }
    if (!call.body.empty()) {
        request.set(http::field::content_type, "application/json");
        request.body() = call.body;
    }
    request.prepare_payload();
    return request;
}

template <class Stream>
asio::awaitable<Reply> Exchange(Stream& stream, const Endpoint& endpoint, const Call& call,
                                const std::string* token) {
    auto request = MakeRequest(endpoint, call, token);
    co_await http::async_write(stream, request, asio::use_awaitable);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kBodyLimitBytes);
    co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
    beast::error_code ignored;
    beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
    co_return ToReply(parser.get());
}

/// Before a token goes over plain HTTP: the address must be loopback, and the port must answer
/// HTTP to a request without the token (a port that speaks TLS would get the token in clear).
asio::awaitable<void> CheckPlainForToken(const Endpoint& endpoint) {
    beast::tcp_stream stream(co_await asio::this_coro::executor);
    co_await Dial(stream, endpoint, /*loopback_only=*/true);
    bool http_answer = true;
    try {
        const Call probe{http::verb::get, "/healthz", {}};
        const Reply answer = co_await Exchange(stream, endpoint, probe, nullptr);
    } catch (const boost::system::system_error&) {
        http_answer = false;
    }
    if (!http_answer) {
        if (co_await SpeaksTls(endpoint)) {
            throw SpeaksHttps(endpoint);
        }
        throw Failure(kExitUnreachable,
                      Name(endpoint) + ": no HTTP answer (the token was not sent)");
    }
}

/// Connects (plain or TLS, checking the certificate names endpoint.host).
asio::awaitable<void> Open(beast::tcp_stream& stream, const Options& options,
                           const Endpoint& endpoint) {
    if (!options.token.empty()) {
        co_await CheckPlainForToken(endpoint);
    }
    co_await Dial(stream, endpoint, /*loopback_only=*/!options.token.empty());
}

asio::awaitable<void> Open(TlsStream& stream, const Options&, const Endpoint& endpoint) {
    co_await Dial(beast::get_lowest_layer(stream), endpoint);
    // No SNI: a node serves one certificate. The name checked is the one we dialled.
    stream.set_verify_callback(asio::ssl::host_name_verification(endpoint.host));
    co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
}

asio::awaitable<Reply> PlainRequest(const Options& options, const Endpoint& endpoint,
                                    const Call& call) {
    beast::tcp_stream stream(co_await asio::this_coro::executor);
    co_await Open(stream, options, endpoint);
    std::exception_ptr failed;
    try {
        co_return co_await Exchange(stream, endpoint, call, &options.token);
    } catch (const boost::system::system_error&) {
        failed = std::current_exception();
    }
    if (co_await SpeaksTls(endpoint)) {
        throw SpeaksHttps(endpoint);
    }
    std::rethrow_exception(failed);
}

asio::awaitable<Reply> TlsRequest(const Options& options, const Endpoint& endpoint,
                                  const Call& call) {
    TlsStream stream(co_await asio::this_coro::executor, *options.tls);
    co_await Open(stream, options, endpoint);
    co_return co_await Exchange(stream, endpoint, call, &options.token);
}

/// One request; a transport error becomes Failure(kExitUnreachable).
asio::awaitable<Reply> RequestCoro(const Options& options, Endpoint endpoint, Call call) {
    try {
        if (options.tls) {
            co_return co_await TlsRequest(options, endpoint, call);
        }
        co_return co_await PlainRequest(options, endpoint, call);
    } catch (const boost::system::system_error& e) {
        throw Failure(kExitUnreachable, Name(endpoint) + ": " + e.code().message());
    }
}

/// What a coroutine launched with Launch ended with.
template <class T>
struct Outcome {
    bool done = false;
    std::optional<T> value;
    std::exception_ptr error;
};

template <class T>
void Launch(asio::io_context& io, asio::awaitable<T> work, Outcome<T>& out,
            std::type_identity_t<std::function<void(const Outcome<T>&)>> then = {}) {
    asio::co_spawn(io, std::move(work), [&out, then](std::exception_ptr error, T value) {
        out.done = true;
        if (error) {
            out.error = error;
        } else {
            out.value = std::move(value);
        }
        if (then) {
            then(out);
        }
    });
}

/// The reply, or the failure: thrown, or (no answer before the deadline) made up.
Reply Take(const Outcome<Reply>& out, const Options& options, const Endpoint& endpoint) {
    if (!out.done) {
        throw Failure(kExitUnreachable,
                      Name(endpoint) + ": no answer within " + FormatDuration(options.timeout));
    }
    if (out.error) {
        std::rethrow_exception(out.error);
    }
    return *out.value;
}

Reply Request(const Options& options, const Endpoint& endpoint, http::verb method,
              const std::string& target, const std::string& body = {}) {
    asio::io_context io;
    Outcome<Reply> out;
    Launch(io, RequestCoro(options, endpoint, Call{method, target, body}), out);
    io.run_until(options.deadline);
    return Take(out, options, endpoint);
}

std::string Detail(const Reply& reply) {
    if (reply.document.is_object()) {
        const auto error = reply.document.find("error");
        const auto detail = reply.document.find("detail");
        std::string text;
        if (error != reply.document.end() && error->is_string()) {
            text = error->get<std::string>();
        }
        if (detail != reply.document.end() && detail->is_string()) {
            text += (text.empty() ? "" : ": ") + detail->get<std::string>();
        }
        if (!text.empty()) {
            return text;
        }
    }
    std::string body = reply.body.substr(0, 200);
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) {
        body.pop_back();
    }
    return body;
}

/// Throws the one-line failure for an unsuccessful reply (401/403 get their own exit status).
[[noreturn]] void Fail(const Endpoint& endpoint, const Reply& reply) {
    const std::string line =
        Name(endpoint) + ": HTTP " + std::to_string(reply.status) + ": " + Detail(reply);
    if (reply.status == 401 || reply.status == 403) {
        throw Failure(kExitAuth, line);
    }
    std::string error;
    if (reply.status == 503 && reply.document.is_object() && reply.document.contains("error") &&
        reply.document["error"].is_string()) {
        error = reply.document["error"].get<std::string>();
    }
    throw Failure(kExitFailure, line, error);
}

/// Same request, following 307/308 redirects to "http://host:port/..." (at most kMaxRedirects).
Reply RequestFollowing(const Options& options, Endpoint endpoint, http::verb method,
                       std::string target, const std::string& body, Endpoint* answered = nullptr) {
    for (int hop = 0;; ++hop) {
        Reply reply = Request(options, endpoint, method, target, body);
        if ((reply.status != 307 && reply.status != 308) || hop == kMaxRedirects) {
            if (answered) {
                *answered = endpoint;
            }
            return reply;
        }
        const std::string prefix =
            reply.location.rfind("https://", 0) == 0 ? "https://" : "http://";
        if (reply.location.rfind(prefix, 0) != 0) {
            throw Failure(kExitFailure, Name(endpoint) +
                                            ": redirect to an unsupported location \"" +
                                            reply.location.substr(0, 200) + "\"");
        }
        const std::string rest = reply.location.substr(prefix.size());
        const std::size_t slash = rest.find('/');
        const auto next = conclave::node::parse_endpoint(rest.substr(0, slash));
        if (!next) {
            throw Failure(kExitFailure, Name(endpoint) + ": redirect to a malformed location \"" +
                                            reply.location.substr(0, 200) + "\"");
        }
        endpoint = *next;
        target = slash == std::string::npos ? "/" : rest.substr(slash);
    }
}

struct NodeView {
    Endpoint endpoint;
    std::optional<json> status;  // GET /status, when reachable
    std::string error;           // why not
    std::string health;          // "ok", "unhealthy: ...", "unreachable"
};

/// The reply of a survey request, or why there is none (a failure other than "unreachable",
/// and a 401/403, end the command).
std::optional<Reply> Answer(const Outcome<Reply>& out, const Options& options,
                            const Endpoint& endpoint, std::string& error) {
    try {
        Reply reply = Take(out, options, endpoint);
        if (reply.status == 401 || reply.status == 403) {
            Fail(endpoint, reply);
        }
        return reply;
    } catch (const Failure& e) {
        if (e.status != kExitUnreachable) {
            throw;
        }
        error = e.what();
        return std::nullopt;
    }
}

/// GET /status (and /healthz) of every node at once, until all answered, the deadline, or a
/// status for which `enough` is true.
std::vector<NodeView> Survey(const Options& options, bool with_health,
                             const std::function<bool(const json&)>& enough = {},
                             std::optional<Clock::time_point> until = std::nullopt) {
    const std::size_t n = options.endpoints.size();
    asio::io_context io;
    std::vector<Outcome<Reply>> status(n);
    std::vector<Outcome<Reply>> health(n);
    for (std::size_t i = 0; i < n; ++i) {
        const Endpoint& endpoint = options.endpoints[i];
        Launch(io, RequestCoro(options, endpoint, Call{http::verb::get, "/status", {}}), status[i],
               [&io, &enough](const Outcome<Reply>& out) {
                   if (enough && out.value && out.value->status == 200 &&
                       out.value->document.is_object() && enough(out.value->document)) {
                       io.stop();
                   }
               });
        if (with_health) {
            Launch(io, RequestCoro(options, endpoint, Call{http::verb::get, "/healthz", {}}),
                   health[i]);
        }
    }
    io.run_until(std::min(options.deadline, until.value_or(options.deadline)));
    std::vector<NodeView> views;
    for (std::size_t i = 0; i < n; ++i) {
        NodeView view;
        view.endpoint = options.endpoints[i];
        if (const auto reply = Answer(status[i], options, view.endpoint, view.error)) {
            if (reply->status != 200 || !reply->document.is_object()) {
                view.error = "HTTP " + std::to_string(reply->status) + ": " + Detail(*reply);
            } else {
                view.status = reply->document;
            }
        }
        std::string health_error;
        const auto checked =
            with_health ? Answer(health[i], options, view.endpoint, health_error) : std::nullopt;
        view.health = !checked                 ? std::string("unreachable")
                      : checked->status == 200 ? std::string("ok")
                                               : "unhealthy: " + Detail(*checked);
        views.push_back(std::move(view));
    }
    return views;
}

std::string Str(const json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return "-";
    }
    if (it->is_string()) {
        return it->get<std::string>();
    }
    if (it->is_object() && it->contains("state") && (*it)["state"].is_string()) {
        return (*it)["state"].get<std::string>();  // "storage": {"state": ..., ...}
    }
    if (it->is_object() && it->contains("term") && it->contains("counter")) {
        return (*it)["term"].dump() + "." + (*it)["counter"].dump();
    }
    if (it->is_object() && it->contains("valid") && it->contains("remaining_ms")) {
        // "lease": the remaining milliseconds of a valid leader lease, "-" when it is not valid
        return (*it)["valid"] == true ? (*it)["remaining_ms"].dump() : "-";
    }
    return it->dump();
}

bool IsLeader(const json& status) {
    return Str(status, "role") == "leader";
}

/// The admin endpoint of a node that reports `is_leader` (by default: role "leader"). No node
/// answering at all is a Failure(kExitUnreachable).
std::optional<Endpoint> FindLeader(const Options& options, std::string* leader_id = nullptr,
                                   const std::function<bool(const json&)>& is_leader = IsLeader,
                                   std::optional<Clock::time_point> until = std::nullopt) {
    std::string error;
    bool answered = false;
    for (const NodeView& view : Survey(options, false, is_leader, until)) {
        answered = answered || view.status.has_value();
        if (error.empty()) {
            error = view.error;
        }
        if (view.status && is_leader(*view.status)) {
            if (leader_id) {
                *leader_id = Str(*view.status, "id");
            }
            return view.endpoint;
        }
    }
    if (!answered) {
        throw Failure(kExitUnreachable, "no node reachable (" + error + ")");
    }
    return std::nullopt;
}

/// Aligned columns, two spaces apart; the first row is the header.
void PrintTable(const std::vector<std::vector<std::string>>& cells) {
    std::vector<std::size_t> width;
    for (const auto& line : cells) {
        width.resize(std::max(width.size(), line.size()), 0);
        for (std::size_t c = 0; c < line.size(); ++c) {
            width[c] = std::max(width[c], line[c].size());
        }
    }
    for (const auto& line : cells) {
        std::string text;
        for (std::size_t c = 0; c < line.size(); ++c) {
            text += line[c];
            if (c + 1 < line.size()) {
                text += std::string(width[c] - line[c].size() + 2, ' ');
            }
        }
        std::cout << text << "\n";
    }
    std::cout.flush();
}

/// Last contact of node X: the smallest peers[].last_contact_ms another node reports for X.
std::map<std::string, std::int64_t> LastContacts(const std::vector<NodeView>& views) {
    std::map<std::string, std::int64_t> contact;
    for (const NodeView& view : views) {
        if (!view.status) {
            continue;
        }
        for (const json& peer : view.status->value("peers", json::array())) {
            if (!peer.is_object() || !peer.contains("id") || !peer["id"].is_string() ||
                !peer.contains("last_contact_ms") || !peer["last_contact_ms"].is_number_integer()) {
                continue;
            }
            const std::string id = peer["id"].get<std::string>();
            const auto ms = peer["last_contact_ms"].get<std::int64_t>();
            auto [it, inserted] = contact.emplace(id, ms);
            if (!inserted && ms < it->second) {
                it->second = ms;
            }
        }
    }
    return contact;
}

int Status(const Options& options) {
    const std::vector<NodeView> views = Survey(options, true);
    std::map<std::string, std::int64_t> contact = LastContacts(views);
    bool all_ok = true;
    json out = json::array();
    for (std::size_t i = 0; i < views.size(); ++i) {
        const NodeView& view = views[i];
        json row = {{"endpoint", Name(view.endpoint)}, {"health", view.health}};
        if (view.status) {
            const json& s = *view.status;
            for (const char* key : {"id", "role", "priority", "term", "leader", "fencing_token",
                                    "lease", "commit_lsn", "storage"}) {
                row[key] = s.contains(key) ? s[key] : json(nullptr);
            }
        } else {
            row["id"] = i < options.ids.size() ? json(options.ids[i]) : json(nullptr);
            row["error"] = view.error;
        }
        const std::string id = row["id"].is_string() ? row["id"].get<std::string>() : "";
        row["last_contact_ms"] = contact.count(id) ? json(contact[id]) : json(nullptr);
        all_ok = all_ok && view.status && view.health == "ok";
        out.push_back(std::move(row));
    }
    if (options.output == "json") {
        std::cout << out.dump(2) << std::endl;
        return all_ok ? kExitOk : kExitUnreachable;
    }
    const std::vector<std::pair<const char*, const char*>> columns = {
        {"ID", "id"},
        {"ENDPOINT", "endpoint"},
        {"ROLE", "role"},
        {"PRIORITY", "priority"},
        {"TERM", "term"},
        {"LEADER", "leader"},
        {"TOKEN", "fencing_token"},
        {"LEASE", "lease"},
        {"COMMIT", "commit_lsn"},
        {"HEALTH", "health"},
        {"STORAGE", "storage"},
        {"LAST-CONTACT-MS", "last_contact_ms"}};
    std::vector<std::vector<std::string>> cells(1);
    for (const auto& column : columns) {
        cells[0].push_back(column.first);
    }
    for (const json& row : out) {
        cells.emplace_back();
        for (const auto& column : columns) {
            cells.back().push_back(Str(row, column.second));
        }
    }
    PrintTable(cells);
    for (const json& row : out) {
        if (row.contains("error")) {
            std::cerr << "conclavectl: " << row["error"].get<std::string>() << "\n";
        }
    }
    return all_ok ? kExitOk : kExitUnreachable;
}

// ---- watch ----

std::string Now() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::ostringstream text;
    text << std::put_time(&tm, "%Y-%m-%dT%H:%M:%S") << '.' << std::setw(3) << std::setfill('0')
         << ms << 'Z';
    return text.str();
}

struct WatchState {
    std::optional<json> last;  // the last snapshot printed, without the node id
    std::uint64_t printed = 0;
};

/// Prints `s` if it differs from the last one printed (the node id aside). true when printed.
bool PrintChange(const Options& options, const json& s, std::optional<json>& last) {
    json key = s;
    key.erase("id");
    if (last && *last == key) {
        return false;
    }
    last = key;
    if (options.output == "json") {
        json line = s;
        line["time"] = Now();
        std::cout << line.dump() << std::endl;
    } else {
        std::cout << Now() << " leader=" << Str(s, "leader") << " token=" << Str(s, "fencing_token")
                  << " term=" << Str(s, "term") << " reason=" << Str(s, "reason") << " (seen by "
                  << Str(s, "id") << ": " << Str(s, "role") << ")" << std::endl;
    }
    return true;
}

/// NDJSON lines of a watch stream: prints the changes; true once --count lines were printed.
class LineSink {
  public:
    LineSink(const Options& options, WatchState& state) : options_(options), state_(state) {}

    bool Add(std::string_view body) {
        pending_.append(body);
        for (std::size_t nl = pending_.find('\n'); nl != std::string::npos;
             nl = pending_.find('\n')) {
            const std::string line = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            if (line.empty() || Enough()) {
                continue;  // keep-alive
            }
            const json s = json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (s.is_object() && PrintChange(options_, s, state_.last)) {
                state_.printed += 1;
            }
        }
        if (pending_.size() > 1024 * 1024) {
            pending_.clear();  // no newline in a megabyte: not NDJSON
        }
        return Enough();
    }

    bool Enough() const { return options_.count && state_.printed >= *options_.count; }

  private:
    const Options& options_;
    WatchState& state_;
    std::string pending_;
};

/// Follows GET /leadership?watch=1 on one node until the stream ends or fails (throws), or
/// --count lines were printed. `heard` is the time of the last byte from the node.
template <class Stream>
asio::awaitable<void> Follow(Stream& stream, const Options& options, const Endpoint& endpoint,
                             WatchState& state, Clock::time_point& heard, bool& streaming) {
    co_await Open(stream, options, endpoint);
    auto request =
        MakeRequest(endpoint, Call{http::verb::get, "/leadership?watch=1", {}}, &options.token);
    co_await http::async_write(stream, request, asio::use_awaitable);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
    heard = Clock::now();
    if (parser.get().result_int() != 200 || !parser.chunked()) {
        parser.body_limit(kBodyLimitBytes);
        co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
        Fail(endpoint, ToReply(parser.get()));
    }
    streaming = true;
    LineSink sink(options, state);
    bool enough = false;
    auto on_body = [&](std::uint64_t, std::string_view body, beast::error_code&) {
        enough = sink.Add(body);
        return body.size();
    };
    parser.on_chunk_body(on_body);
    while (!parser.is_done() && !enough) {
        co_await http::async_read_some(stream, buffer, parser, asio::use_awaitable);
        heard = Clock::now();
    }
    if (!enough) {
        throw Failure(kExitUnreachable, Name(endpoint) + ": the watch stream ended");
    }
}

/// Any answer to GET /leadership counts as hearing from the node.
asio::awaitable<void> Ping(const Options& options, Endpoint endpoint, Clock::time_point& heard) {
    const Call snapshot{http::verb::get, "/leadership", {}};
    const Reply answer = co_await RequestCoro(options, endpoint, snapshot);
    heard = Clock::now();
}

/// Closes the stream (`close`) once the node was silent for --timeout. After half of it, a
/// snapshot request (GET /leadership, answered at once) tells a quiet node from a gone one.
asio::awaitable<void> Watchdog(const Options& options, Endpoint endpoint, Clock::time_point& heard,
                               std::function<void()> close, bool& silent) {
    const auto executor = co_await asio::this_coro::executor;
    asio::steady_timer timer(executor);
    const auto half = options.timeout / 2;
    for (;;) {
        timer.expires_at(heard + half);
        co_await timer.async_wait(asio::use_awaitable);
        if (Clock::now() - heard < half) {
            continue;
        }
        asio::co_spawn(executor, Ping(options, endpoint, heard), [](std::exception_ptr) {});
        timer.expires_at(heard + options.timeout);
        co_await timer.async_wait(asio::use_awaitable);
        if (Clock::now() - heard >= options.timeout) {
            silent = true;
            close();
            co_return;
        }
    }
}

template <class Stream>
void WatchOn(asio::io_context& io, Stream& stream, const Options& options, const Endpoint& endpoint,
             WatchState& state, bool& streaming) {
    Clock::time_point heard = Clock::now();
    bool silent = false;
    Outcome<bool> followed;
    auto follow = [&]() -> asio::awaitable<bool> {
        co_await Follow(stream, options, endpoint, state, heard, streaming);
        co_return true;
    };
    Launch(io, follow(), followed, [&io](const Outcome<bool>&) { io.stop(); });
    auto close = [&stream] {
        boost::system::error_code ignored;
        beast::get_lowest_layer(stream).socket().close(ignored);
    };
    asio::co_spawn(io, Watchdog(options, endpoint, heard, close, silent),
                   [](std::exception_ptr) {});
    io.run();
    if (silent) {
        throw Failure(kExitUnreachable,
                      Name(endpoint) + ": silent for " + FormatDuration(options.timeout));
    }
    try {
        if (followed.error) {
            std::rethrow_exception(followed.error);
        }
    } catch (const boost::system::system_error& e) {
        throw Failure(kExitUnreachable, Name(endpoint) + ": " + e.code().message());
    }
}

/// Follows one node; `streaming` is set once it answered the watch with a stream.
void WatchOne(const Options& options, const Endpoint& endpoint, WatchState& state,
              bool& streaming) {
    asio::io_context io;
    if (options.tls) {
        TlsStream stream(io, *options.tls);
        WatchOn(io, stream, options, endpoint, state, streaming);
        return;
    }
    beast::tcp_stream stream(io);
    WatchOn(io, stream, options, endpoint, state, streaming);
}

int Watch(const Options& options) {
    WatchState state;
    std::size_t next = 0;  // endpoint to follow
    std::size_t failures_in_row = 0;
    auto followed_at = Clock::now();          // when a node last streamed to us
    std::map<std::string, std::string> told;  // the last error reported per endpoint
    while (!options.count || state.printed < *options.count) {
        const Endpoint& endpoint = options.endpoints[next];
        bool streaming = false;
        try {
            WatchOne(options, endpoint, state, streaming);
            continue;  // --count reached
        } catch (const Failure& e) {
            if (e.status != kExitUnreachable) {
                throw;
            }
            if (streaming) {
                followed_at = Clock::now();
                failures_in_row = 0;
                told.erase(Name(endpoint));
            }
            failures_in_row += 1;
            next = (next + 1) % options.endpoints.size();
            if (failures_in_row >= options.endpoints.size() &&
                Clock::now() - followed_at >= options.timeout) {
                throw Failure(kExitUnreachable, "no node to follow for " +
                                                    FormatDuration(options.timeout) +
                                                    " (last: " + e.what() + ")");
            }
            if (std::exchange(told[Name(endpoint)], e.what()) != e.what()) {
                std::cerr << "conclavectl: " << e.what() << "; following "
                          << Name(options.endpoints[next]) << std::endl;
            }
        }
        if (failures_in_row >= options.endpoints.size()) {
            std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
                std::chrono::milliseconds(200), options.timeout / 4));
        }
    }
    return kExitOk;
}

// ---- commands that change the cluster ----

/// `text` for a table, `document` for -o json.
void Print(const Options& options, const std::string& text, const json& document) {
    if (options.output == "json") {
        std::cout << document.dump(2) << std::endl;
    } else {
        std::cout << text << std::endl;
    }
}

/// set-priority ID N: POST /priority?node=ID&value=N to every node; exit 0 when all accepted.
int SetPriority(const Options& options) {
    const std::string target = "/priority?node=" + options.args[0] + "&value=" + options.args[1];
    bool all = true;
    json out = json::array();
    for (const Endpoint& endpoint : options.endpoints) {
        json row = {{"endpoint", Name(endpoint)}};
        try {
            const Reply reply = Request(options, endpoint, http::verb::post, target);
            row["accepted"] = reply.status == 202;
            row["detail"] = Detail(reply);
        } catch (const Failure& e) {
            row["accepted"] = false;
            row["detail"] = e.what();
        }
        all = all && row["accepted"].get<bool>();
        if (options.output != "json") {
            std::cout << Name(endpoint) << ": " << row["detail"].get<std::string>() << "\n";
        }
        out.push_back(std::move(row));
    }
    if (options.output == "json") {
        std::cout << out.dump(2) << std::endl;
    }
    std::cout.flush();
    return all ? kExitOk : kExitFailure;
}

int Command(const Options& options, const std::string& path, const std::string& what,
            const std::string& expect_leader) {
    std::string leader_id;
    const auto leader = FindLeader(options, &leader_id);
    if (!leader) {
        throw Failure(kExitFailure, "no node reports itself leader; nothing to " + what);
    }
    const Reply reply = RequestFollowing(options, *leader, http::verb::post, path, {});
    if (reply.status != 202) {
        Fail(*leader, reply);
    }
    if (options.output != "json") {
        std::cout << leader_id << ": " << Detail(reply) << std::endl;
    }
    const auto is_new_leader = [&](const json& s) {
        const std::string id = Str(s, "id");
        return IsLeader(s) && (expect_leader.empty() ? id != leader_id : id == expect_leader);
    };
    // Wait until another node (or the requested one) leads, until the deadline.
    while (Clock::now() < options.deadline) {
        std::string now_id;
        try {
            // One poll waits at most a second for a node (a silent one must not take it all).
            const auto until = Clock::now() + std::chrono::seconds(1);
            if (FindLeader(options, &now_id, is_new_leader, until)) {
                Print(options, "leader is now " + now_id,
                      {{"from", leader_id}, {"to", now_id}, {"accepted", Detail(reply)}});
                return kExitOk;
            }
        } catch (const Failure& e) {
            if (e.status != kExitUnreachable) {
                throw;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw Failure(kExitFailure,
                  "accepted, but " +
                      (expect_leader.empty() ? std::string("no other node") : expect_leader) +
                      " leads after " + FormatDuration(options.timeout));
}

/// POSTs `body` to `path` on the leader (found by asking every node at once, so that a silent
/// node costs nothing), else on the first node that answers (a follower redirects to the
/// leader); the 200 reply, else a Failure.
Reply PostOnce(const Options& options, const std::string& path, const json& body) {
    std::vector<Endpoint> order = options.endpoints;
    if (const auto leader = FindLeader(options)) {
        order.insert(order.begin(), *leader);
    }
    std::string last_error;
    for (const Endpoint& endpoint : order) {
        try {
            Endpoint answered;
            const Reply reply =
                RequestFollowing(options, endpoint, http::verb::post, path, body.dump(), &answered);
            if (reply.status != 200) {
                Fail(answered, reply);
            }
            return reply;
        } catch (const Failure& e) {
            if (e.status != kExitUnreachable) {
                throw;
            }
            last_error = e.what();
        }
    }
    throw Failure(kExitUnreachable, "no node reachable (last: " + last_error + ")");
}

/// A 503 that says the proposal was never appended: no leader yet, or a leader still syncing its
/// log. Sending the same request again cannot apply it twice.
bool NotAppended(const Failure& failure) {
    return failure.error == "no_leader" || failure.error == "not_active";
}

/// PostOnce, sent again while the cluster is electing or its new leader syncs (a 503 that appended
/// nothing), until the deadline; then the last answer's failure.
Reply PostAnywhere(const Options& options, const std::string& path, const json& body) {
    for (;;) {
        try {
            return PostOnce(options, path, body);
        } catch (const Failure& e) {
            const auto pause = std::chrono::milliseconds(50);
            if (!NotAppended(e) || Clock::now() + pause >= options.deadline) {
                throw;
            }
            std::this_thread::sleep_for(pause);
        }
    }
}

int Put(const Options& options) {
    const std::string& key = options.args[0];
    json value = json::parse(options.args[1], nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
        value = options.args[1];
    }
    const Reply reply = PostAnywhere(options, "/metadata", {{"key", key}, {"value", value}});
    json document = reply.document.is_object() ? reply.document : json::object();
    document["key"] = key;
    Print(options, "committed at " + Str(reply.document, "lsn"), document);
    return kExitOk;
}

/// broadcast TOPIC JSON: POST /broadcast (advisory: to the members live at that moment).
int Broadcast(const Options& options) {
    json payload = json::parse(options.args[1], nullptr, /*allow_exceptions=*/false);
    if (payload.is_discarded()) {
        payload = options.args[1];
    }
    const Reply reply =
        PostOnce(options, "/broadcast", {{"topic", options.args[0]}, {"payload", payload}});
    std::string to;
    for (const json& id : reply.document.value("sent_to", json::array())) {
        to += (to.empty() ? "" : ", ") + (id.is_string() ? id.get<std::string>() : id.dump());
    }
    Print(options, "sent " + Str(reply.document, "id") + " to " + (to.empty() ? "no member" : to),
          reply.document);
    return kExitOk;
}

int ChangeMembers(const Options& options) {
    const Reply reply =
        PostAnywhere(options, "/members", {{"op", options.args[0]}, {"id", options.args[1]}});
    json document = reply.document.is_object() ? reply.document : json::object();
    document["op"] = options.args[0];
    document["id"] = options.args[1];
    Print(options,
          options.args[0] + " " + options.args[1] + ": committed, configuration version " +
              Str(reply.document, "version"),
          document);
    return kExitOk;
}

int Members(const Options& options) {
    if (options.args.size() == 2) {
        return ChangeMembers(options);
    }
    const Endpoint source = FindLeader(options).value_or(options.endpoints.front());
    Endpoint answered;
    const Reply reply =
        RequestFollowing(options, source, http::verb::get, "/members", {}, &answered);
    if (reply.status != 200 || !reply.document.is_object()) {
        Fail(answered, reply);
    }
    const json& view = reply.document;
    if (options.output == "json") {
        std::cout << view.dump(2) << std::endl;
        return kExitOk;
    }
    std::cout << "configuration version " << Str(view, "version")
              << (view.value("from_entry", false) ? "" : " (implicit: no change made yet)") << "\n";
    std::vector<std::vector<std::string>> cells = {
        {"ID", "ROLE", "PEER", "HTTP", "ACKNOWLEDGED", "LAG", "CONNECTED", "LIVE", "HEARD_MS"}};
    for (const json& m : view.value("members", json::array())) {
        const json c = m.value("catch_up", json::object());
        cells.push_back({Str(m, "id"), Str(m, "role"), Str(m, "peer"), Str(m, "http"),
                         Str(c, "acknowledged_len"), Str(c, "lag_entries"), Str(c, "connected"),
                         Str(m, "live"), Str(m, "last_heartbeat_ms")});
    }
    PrintTable(cells);
    return kExitOk;
}

/// A key as a path part: unreserved characters and '/' as they are, the rest %XX.
std::string EncodeKey(const std::string& key) {
    std::string out;
    for (const char c : key) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
            out += c;
        } else {
            static constexpr char kHex[] = "0123456789ABCDEF";
            out += '%';
            out += kHex[u >> 4];
            out += kHex[u & 0xF];
        }
    }
    return out;
}

/// get KEY [--consistency ...]: GET /metadata/KEY from the leader (linearizable) or the first
/// node (serializable).
int GetKey(const Options& options) {
    const std::string& key = options.args[0];
    const bool linearizable = options.args[1] == "linearizable";
    const Endpoint source = linearizable ? FindLeader(options).value_or(options.endpoints.front())
                                         : options.endpoints.front();
    Endpoint answered;
    const Reply reply = RequestFollowing(
        options, source, http::verb::get,
        "/metadata/" + EncodeKey(key) + "?consistency=" + options.args[1], {}, &answered);
    if (reply.status == 404 && reply.document.is_object()) {
        throw Failure(kExitFailure, Name(answered) + ": " + key + ": no such key (commit " +
                                        Str(reply.document, "commit_lsn") + ")");
    }
    if (reply.status != 200 || !reply.document.is_object()) {
        Fail(answered, reply);
    }
    const json& d = reply.document;
    Print(options,
          key + " = " + (d.contains("value") ? d["value"].dump() : "null") + " (written at " +
              Str(d, "lsn") + ", commit " + Str(d, "commit_lsn") + ")",
          d);
    return kExitOk;
}

int Get(const Options& options) {
    if (!options.args.empty()) {
        return GetKey(options);
    }
    // No leader: read what the first node committed.
    const Endpoint source = FindLeader(options).value_or(options.endpoints.front());
    std::string from = options.from;
    json all = json::array();
    for (;;) {
        std::string target = "/metadata";
        if (!from.empty()) {
            target += "?from=" + from;
        }
        Endpoint answered;
        const Reply reply =
            RequestFollowing(options, source, http::verb::get, target, {}, &answered);
        if (reply.status != 200 || !reply.document.is_object()) {
            Fail(answered, reply);
        }
        const json& page = reply.document;
        for (const json& e : page.value("entries", json::array())) {
            if (options.output == "json") {
                all.push_back(e);
            } else {
                std::cout << Str(e, "lsn") << " " << Str(e, "key") << " "
                          << (e.contains("value") ? e["value"].dump() : "null") << "\n";
            }
        }
        const std::string next = Str(page, "next_from");
        if (next == from || next == "-" || next == Str(page, "commit_lsn")) {
            break;
        }
        from = next;
    }
    if (options.output == "json") {
        std::cout << all.dump(2) << "\n";
    }
    std::cout.flush();
    return kExitOk;
}

// ---- the command line ----

/// The token: the file's first line. nullopt with `why` when it cannot be read.
std::optional<std::string> ReadToken(const std::string& path, std::string& why) {
    std::ifstream in(path);
    if (!in) {
        why = "cannot read the file";
        return std::nullopt;
    }
    std::string token;
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) {
        token.pop_back();
    }
    if (token.empty()) {
        why = "the first line is empty";
        return std::nullopt;
    }
    return token;
}

/// The nodes, the token file and the CA of a cluster config; the paths in it are resolved
/// against its directory by the config's parser.
void LoadConfig(const std::string& path, Options& options, std::string& token_file,
                std::string& cacert) {
    std::ifstream in(path);
    if (!in) {
        throw Failure(kExitUsage, "--config " + path + ": cannot read the file");
    }
    // conclaved's own parser validates it; it needs a node id: take the first one.
    const json document = json::parse(in, nullptr, /*allow_exceptions=*/false);
    std::string first;
    if (document.is_object() && document.contains("nodes") && document["nodes"].is_array() &&
        !document["nodes"].empty() && document["nodes"][0].is_object() &&
        document["nodes"][0].contains("id") && document["nodes"][0]["id"].is_string()) {
        first = document["nodes"][0]["id"].get<std::string>();
    }
    auto loaded = conclave::node::load_cluster_config(path, first);
    if (auto* error = std::get_if<conclave::node::ConfigError>(&loaded)) {
        throw Failure(kExitUsage, "bad config: " + error->message);
    }
    const auto& config = std::get<conclave::node::ClusterConfig>(loaded);
    for (const auto& node : config.nodes) {
        options.endpoints.push_back(node.http);
        options.ids.push_back(node.id);
    }
    if (token_file.empty() && !config.security.admin_token_file.empty()) {
        std::string why;
        if (auto token = ReadToken(config.security.admin_token_file, why)) {
            options.token = *token;
        } else {
            options.token_note = "--config's admin.token_file " + config.security.admin_token_file +
                                 ": " + why + ", so no token was sent (give --token-file)";
        }
    }
    // An admin API served over HTTPS is verified with the cluster CA of the same config.
    if (config.security.admin_tls != conclave::node::SecuritySettings::AdminTls::Off &&
        cacert.empty()) {
        if (!config.tls) {
            throw Failure(kExitUsage, "--config " + path +
                                          ": the admin API speaks HTTPS (admin.tls) and the "
                                          "config has no \"tls.ca\": give --cacert FILE");
        }
        options.tls = MakeTlsContext(config.tls->ca_path, "--config " + path + ": tls.ca");
    }
}

/// What the command line says, before the environment and the config fill the gaps.
struct Flags {
    std::string endpoints, config, token_file, cacert, output, timeout, count;
    std::string key, value, op, id;  // put KEY VALUE, members OP ID, get KEY
    std::string consistency;         // get KEY --consistency
    bool help = false;
    bool version = false;
};

/// `value` if given, else the environment variable `name` (if set and not empty).
void FromEnvironment(std::string& value, const char* name) {
    const char* set = std::getenv(name);
    if (value.empty() && set != nullptr) {
        value = set;
    }
}

void ParseEndpoints(const std::string& list_text, Options& options) {
    std::stringstream list(list_text);
    std::string item;
    while (std::getline(list, item, ',')) {
        const auto endpoint = conclave::node::parse_endpoint(item);
        if (!endpoint) {
            throw Failure(
                kExitUsage,
                "--endpoints: expected host:port with a port in 1..65535, got \"" + item + "\"");
        }
        options.endpoints.push_back(*endpoint);
    }
    if (options.endpoints.empty()) {
        throw Failure(kExitUsage, "--endpoints: empty list");
    }
}

/// The CLI11 description of the command line; fills `flags` and `options` when parsed.
void Describe(CLI::App& app, Flags& flags, Options& options) {
    app.set_help_flag();  // --help prints UsageText()
    app.add_flag("-h,--help", flags.help);
    app.add_flag("--version", flags.version);
    app.add_option("--endpoints", flags.endpoints);
    app.add_option("--config", flags.config);
    app.add_option("--token-file", flags.token_file);
    app.add_option("--cacert", flags.cacert);
    app.add_option("-o,--output", flags.output);
    app.add_option("--timeout", flags.timeout);
    app.require_subcommand(0, 1);
    const auto command = [&](const char* name) {
        CLI::App* sub = app.add_subcommand(name);
        sub->fallthrough();  // the options above may follow the command
        sub->callback([&options, name] { options.command = name; });
        return sub;
    };
    command("status");
    command("watch")->add_option("--count", flags.count);
    command("transfer")->add_option("--to", options.to)->required();
    command("step-down");
    CLI::App* put = command("put");
    put->add_option("KEY", flags.key)->required();
    put->add_option("VALUE", flags.value)->required();
    CLI::App* get = command("get");
    get->add_option("--from", options.from);
    get->add_option("KEY", flags.key);
    get->add_option("--consistency", flags.consistency);
    CLI::App* priority = command("set-priority");
    priority->add_option("ID", flags.key)->required();
    priority->add_option("N", flags.value)->required();
    CLI::App* broadcast = command("broadcast");
    broadcast->add_option("TOPIC", flags.key)->required();
    broadcast->add_option("JSON", flags.value)->required();
    CLI::App* members = command("members");
    members->add_option("OP", flags.op);
    members->add_option("ID", flags.id);
}

void Validate(const Options& options, const Flags& flags) {
    if (options.command.empty()) {
        throw Failure(kExitUsage,
                      "missing COMMAND (status, watch, transfer, step-down, set-priority, put, "
                      "get, members, broadcast)");
    }
    if (options.command == "members" && !flags.op.empty()) {
        const std::string& op = flags.op;
        if (flags.id.empty()) {
            throw Failure(kExitUsage, "members " + op + ": missing ID");
        }
        if (op != "add-learner" && op != "promote" && op != "remove") {
            throw Failure(kExitUsage,
                          "members: expected add-learner, promote or remove, got \"" + op + "\"");
        }
    }
    for (const char c : options.to) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
            throw Failure(kExitUsage, "--to: not a node id: \"" + options.to + "\"");
        }
    }
    if (options.command == "get" && !flags.consistency.empty() &&
        flags.consistency != "linearizable" && flags.consistency != "serializable") {
        throw Failure(kExitUsage, "--consistency: expected linearizable or serializable, got \"" +
                                      flags.consistency + "\"");
    }
    if (options.command == "get" && !flags.key.empty() && !options.from.empty()) {
        throw Failure(kExitUsage, "get: give KEY or --from, not both");
    }
    if (!options.from.empty() && options.from.find('.') == std::string::npos) {
        throw Failure(kExitUsage,
                      "--from: expected TERM.COUNTER (e.g. 3.17), got \"" + options.from + "\"");
    }
    if (options.output != "table" && options.output != "json") {
        throw Failure(kExitUsage,
                      "--output: expected \"table\" or \"json\", got \"" + options.output + "\"");
    }
    if (!flags.endpoints.empty() && !flags.config.empty()) {
        throw Failure(kExitUsage, "give one of --endpoints and --config, not both");
    }
    if (flags.endpoints.empty() && flags.config.empty()) {
        throw Failure(kExitUsage,
                      "give --endpoints HOST:PORT,... or --config FILE (or set "
                      "CONCLAVECTL_ENDPOINTS or CONCLAVECTL_CONFIG)");
    }
}

/// Flags over environment variables over the config; the config's token file and CA last.
void Resolve(Flags& flags, Options& options) {
    if (flags.endpoints.empty() && flags.config.empty()) {
        FromEnvironment(flags.endpoints, "CONCLAVECTL_ENDPOINTS");
        FromEnvironment(flags.config, "CONCLAVECTL_CONFIG");
    }
    FromEnvironment(flags.token_file, "CONCLAVECTL_TOKEN_FILE");
    FromEnvironment(flags.cacert, "CONCLAVECTL_CACERT");
    FromEnvironment(flags.output, "CONCLAVECTL_OUTPUT");
    FromEnvironment(flags.timeout, "CONCLAVECTL_TIMEOUT");
    if (!flags.output.empty()) {
        options.output = flags.output;
    }
    if (!flags.timeout.empty()) {
        const auto timeout = ParseDuration(flags.timeout);
        if (!timeout) {
            throw Failure(kExitUsage,
                          "--timeout: expected a duration from 1ms to 1h such as "
                          "500ms, 2s or 1m, got \"" +
                              flags.timeout + "\"");
        }
        options.timeout = *timeout;
    }
    if (!flags.count.empty()) {
        std::uint64_t n = 0;
        const auto [ptr, ec] =
            std::from_chars(flags.count.data(), flags.count.data() + flags.count.size(), n);
        if (ec != std::errc{} || ptr != flags.count.data() + flags.count.size() || n == 0) {
            throw Failure(kExitUsage,
                          "--count: expected a positive integer, got \"" + flags.count + "\"");
        }
        options.count = n;
    }
    Validate(options, flags);
    if (options.command == "put" || options.command == "set-priority" ||
        options.command == "broadcast") {
        options.args = {flags.key, flags.value};
    } else if (options.command == "members" && !flags.op.empty()) {
        options.args = {flags.op, flags.id};
    } else if (options.command == "get" && !flags.key.empty()) {
        options.args = {
            flags.key, flags.consistency.empty() ? std::string("linearizable") : flags.consistency};
    }
    if (!flags.cacert.empty()) {
        options.tls = MakeTlsContext(flags.cacert, "--cacert");
    }
    if (!flags.endpoints.empty()) {
        ParseEndpoints(flags.endpoints, options);
    } else {
        LoadConfig(flags.config, options, flags.token_file, flags.cacert);
    }
    if (!flags.token_file.empty()) {
        std::string why;
        const auto token = ReadToken(flags.token_file, why);
        if (!token) {
            throw Failure(kExitUsage, "--token-file " + flags.token_file + ": " + why);
        }
        options.token = *token;
    }
}

Options Parse(int argc, char** argv, bool& help, bool& version) {
    Options options;
    Flags flags;
    CLI::App app("conclavectl", "conclavectl");
    Describe(app, flags, options);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (std::find(argv + 1, argv + argc, std::string("--help")) != argv + argc ||
            std::find(argv + 1, argv + argc, std::string("-h")) != argv + argc) {
            help = true;
            return options;
        }
        throw Failure(kExitUsage, e.what());
    }
    help = flags.help;
    version = flags.version;
    if (help || version) {
        return options;
    }
    Resolve(flags, options);
    options.deadline = Clock::now() + options.timeout;
    return options;
}

int Run(const Options& options) {
    if (options.command == "status") {
        return Status(options);
    }
    if (options.command == "watch") {
        return Watch(options);
    }
    if (options.command == "transfer") {
        return Command(options, "/transfer-leadership?to=" + options.to, "transfer", options.to);
    }
    if (options.command == "step-down") {
        return Command(options, "/step-down", "step down", "");
    }
    if (options.command == "put") {
        return Put(options);
    }
    if (options.command == "set-priority") {
        return SetPriority(options);
    }
    if (options.command == "members") {
        return Members(options);
    }
    if (options.command == "broadcast") {
        return Broadcast(options);
    }
    return Get(options);
}

int Report(const Failure& e, const std::string& token_note) {
    std::cerr << "conclavectl: " << e.what();
    if (e.status == kExitAuth) {
        std::cerr << " (" << (token_note.empty() ? std::string("check --token-file") : token_note)
                  << ")";
    }
    std::cerr << "\n";
    if (e.status == kExitUsage) {
        std::cerr << "Try 'conclavectl --help' for more information.\n";
    }
    return e.status;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    try {
        bool help = false;
        bool version = false;
        options = Parse(argc, argv, help, version);
        if (help) {
            std::cout << UsageText();
            return kExitOk;
        }
        if (version) {
            std::cout << "conclavectl " << conclave::node::conclave_version() << "\n";
            return kExitOk;
        }
        return Run(options);
    } catch (const Failure& e) {
        return Report(e, options.token_note);
    } catch (const std::exception& e) {
        std::cerr << "conclavectl: " << e.what() << "\n";
        return kExitFailure;
    }
}
