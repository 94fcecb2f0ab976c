// conclavectl: the operator's command-line client of conclaved's HTTP admin API (node/README.md,
// "conclavectl"). Synchronous Boost.Beast HTTP/1.1 client (HTTPS with --cacert or a config whose
// admin API speaks TLS, through Asio's OpenSSL layer), nlohmann_json.
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
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

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitAuth = 3;
constexpr int kExitUnreachable = 4;
constexpr int kMaxRedirects = 3;

std::string UsageText() {
    return R"(Usage: conclavectl (--endpoints HOST:PORT,... | --config FILE) [options] COMMAND [ARGS]
       conclavectl --help | --version

Operates a Conclave cluster through the nodes' HTTP admin endpoints.

Commands:
  status              one line per node: id, endpoint, role, term, leader, fencing
                      token, commit LSN, health, storage (ok, or failed: /status
                      storage.reason and .since with -o json), last contact (ms
                      since the node was last heard from by another node,
                      smallest value)
  watch               one line per leadership change (with the reason) as seen by
                      the first node (GET /leadership?watch=1; the next one when it
                      is unreachable), until interrupted (^C) or --count
  transfer --to ID    ask the leader to hand leadership to node ID and wait until
                      ID leads (at most --timeout)
  step-down           ask the leader to hand leadership to another node
  put KEY VALUE       append KEY=VALUE to the metadata log (VALUE is JSON if it
                      parses as JSON, else a string); prints the committed LSN
  get [--from LSN]    print the committed metadata entries after LSN (TERM.COUNTER,
                      default: from the start), read from the leader
  members             the active configuration (GET /members, from the leader:
                      id, role, peer, http, acknowledged entries, lag, connected)
  members OP ID       a membership change, OP = add-learner | promote | remove
                      (POST /members; waits until it commits; prints the version)

Options:
  --endpoints LIST    comma-separated admin endpoints (host:port) of the nodes
  --config FILE       conclaved's cluster config: its nodes' "http" endpoints
  --token-file FILE   send "Authorization: Bearer <token>" (the file's first line)
  --cacert FILE       speak HTTPS, trusting node certificates signed by this CA
                      (PEM) and checking that they name the endpoint's host;
                      with --config whose "admin" has "tls", its "tls.ca" is used
                      unless --cacert is given
  -o, --output FMT    "table" (default) or "json" (status, get, watch, members)
  --timeout SECONDS   per-request timeout (default 5; transfer waits as long)
  --count N           watch: exit 0 after N lines
  --help, --version
Options also accept the --option=VALUE form. 307 redirects (to the leader) are
followed (http:// or https://, spoken as the first request was).

Exit status:
  0  success
  1  the operation failed (refused, no leader, server error, timeout)
  2  bad command line
  3  unauthorized: the node answered 401 or 403 (check --token-file)
  4  no node reachable (status: some node unreachable or unhealthy)
)";
}

struct Options {
    std::vector<Endpoint> endpoints;
    std::shared_ptr<asio::ssl::context> tls;  // HTTPS when set
    std::vector<std::string> ids;             // from --config; else empty (ids come from /status)
    std::string token;
    std::string output = "table";
    std::chrono::milliseconds timeout{5000};
    std::string command;
    std::vector<std::string> args;
    std::string to;
    std::string from;
    std::optional<std::uint64_t> count;
};

/// A failure that ends the command with one line and an exit status.
struct Failure : std::runtime_error {
    Failure(int status_code, const std::string& message)
        : std::runtime_error(message), status(status_code) {}
    int status;
};

struct Reply {
    unsigned status = 0;
    std::string body;
    std::string location;
    json document;  // body parsed as JSON, or discarded
};

std::string Name(const Endpoint& e) {
    return conclave::node::to_string(e);
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

/// Connects (and, over TLS, handshakes, checking the certificate names endpoint.host).
void Connect(asio::io_context& io, beast::tcp_stream& stream, const Options& options,
             const Endpoint& endpoint) {
    tcp::resolver resolver(io);
    stream.expires_after(options.timeout);
    stream.connect(resolver.resolve(endpoint.host, std::to_string(endpoint.port)));
}

void Connect(asio::io_context& io, TlsStream& stream, const Options& options,
             const Endpoint& endpoint) {
    Connect(io, beast::get_lowest_layer(stream), options, endpoint);
    // No SNI: a node serves one certificate. The name checked is the one we dialled.
    stream.set_verify_callback(asio::ssl::host_name_verification(endpoint.host));
    beast::get_lowest_layer(stream).expires_after(options.timeout);
    stream.handshake(asio::ssl::stream_base::client);
}

/// One HTTP request; throws Failure(kExitUnreachable) when the node cannot be reached.
template <class Stream>
Reply RequestOn(asio::io_context& io, Stream& stream, const Options& options,
                const Endpoint& endpoint, http::verb method, const std::string& target,
                const std::string& body) {
    try {
        Connect(io, stream, options, endpoint);
        http::request<http::string_body> request{method, target, 11};
        request.set(http::field::host, Name(endpoint));
        request.set(http::field::user_agent, "conclavectl");
        if (!options.token.empty()) {
            request.set(http::field::authorization, "Bearer " + options.token);
        }
        if (!body.empty()) {
            request.set(http::field::content_type, "application/json");
            request.body() = body;
        }
        request.prepare_payload();
        beast::get_lowest_layer(stream).expires_after(options.timeout);
        http::write(stream, request);
        beast::flat_buffer buffer;
        http::response_parser<http::string_body> parser;
        parser.body_limit(64 * 1024 * 1024);
        beast::get_lowest_layer(stream).expires_after(options.timeout);
        http::read(stream, buffer, parser);
        boost::system::error_code ignored;
        beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
        const auto& response = parser.get();
        Reply reply;
        reply.status = response.result_int();
        reply.body = response.body();
        if (auto it = response.find(http::field::location); it != response.end()) {
            reply.location = std::string(it->value());
        }
        reply.document = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
        return reply;
    } catch (const boost::system::system_error& e) {
        const std::string what =
            e.code() == beast::error::timeout ? std::string("timed out") : e.code().message();
        throw Failure(kExitUnreachable, Name(endpoint) + ": " + what);
    }
}

Reply Request(const Options& options, const Endpoint& endpoint, http::verb method,
              const std::string& target, const std::string& body = {}) {
    asio::io_context io;
    if (options.tls) {
        TlsStream stream(io, *options.tls);
        return RequestOn(io, stream, options, endpoint, method, target, body);
    }
    beast::tcp_stream stream(io);
    return RequestOn(io, stream, options, endpoint, method, target, body);
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
        throw Failure(kExitAuth, line + " (check --token-file)");
    }
    throw Failure(kExitFailure, line);
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

std::vector<NodeView> Survey(const Options& options, bool with_health) {
    std::vector<NodeView> views;
    for (const Endpoint& endpoint : options.endpoints) {
        NodeView view;
        view.endpoint = endpoint;
        try {
            const Reply reply = Request(options, endpoint, http::verb::get, "/status");
            if (reply.status == 401 || reply.status == 403) {
                Fail(endpoint, reply);
            }
            if (reply.status != 200 || !reply.document.is_object()) {
                view.error = "HTTP " + std::to_string(reply.status) + ": " + Detail(reply);
            } else {
                view.status = reply.document;
            }
            if (with_health) {
                const Reply health = Request(options, endpoint, http::verb::get, "/healthz");
                view.health =
                    health.status == 200 ? std::string("ok") : "unhealthy: " + Detail(health);
            }
        } catch (const Failure& e) {
            if (e.status == kExitAuth) {
                throw;
            }
            view.error = e.what();
            view.health = "unreachable";
        }
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
    return it->dump();
}

/// The leader's admin endpoint as the nodes report it: the node whose role is "leader".
std::optional<Endpoint> FindLeader(const Options& options, std::string* leader_id = nullptr) {
    for (const NodeView& view : Survey(options, false)) {
        if (view.status && Str(*view.status, "role") == "leader") {
            if (leader_id) {
                *leader_id = Str(*view.status, "id");
            }
            return view.endpoint;
        }
    }
    return std::nullopt;
}

int Status(const Options& options) {
    std::vector<NodeView> views = Survey(options, true);
    // Last contact of node X: the smallest peers[].last_contact_ms another node reports for X.
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
    bool all_ok = true;
    json out = json::array();
    for (std::size_t i = 0; i < views.size(); ++i) {
        const NodeView& view = views[i];
        json row = {{"endpoint", Name(view.endpoint)}, {"health", view.health}};
        if (view.status) {
            const json& s = *view.status;
            for (const char* key :
                 {"id", "role", "term", "leader", "fencing_token", "commit_lsn", "storage"}) {
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
        std::cout << out.dump(2) << "\n";
    } else {
        const std::vector<std::pair<const char*, const char*>> columns = {
            {"ID", "id"},
            {"ENDPOINT", "endpoint"},
            {"ROLE", "role"},
            {"TERM", "term"},
            {"LEADER", "leader"},
            {"TOKEN", "fencing_token"},
            {"COMMIT", "commit_lsn"},
            {"HEALTH", "health"},
            {"STORAGE", "storage"},
            {"LAST-CONTACT-MS", "last_contact_ms"}};
        std::vector<std::vector<std::string>> cells;
        std::vector<std::size_t> width(columns.size(), 0);
        cells.emplace_back();
        for (const auto& [title, key] : columns) {
            (void)key;
            cells.back().push_back(title);
        }
        for (const json& row : out) {
            cells.emplace_back();
            for (const auto& [title, key] : columns) {
                (void)title;
                cells.back().push_back(Str(row, key));
            }
        }
        for (const auto& line : cells) {
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
        for (const json& row : out) {
            if (row.contains("error")) {
                std::cerr << "conclavectl: " << row["error"].get<std::string>() << "\n";
            }
        }
    }
    return all_ok ? kExitOk : kExitUnreachable;
}

std::string Now() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::ostringstream text;
    text << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
    return text.str();
}

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

/// Follows GET /leadership?watch=1 on one node until the stream ends, fails, or `count` lines
/// were printed. Throws Failure on errors.
template <class Stream>
void WatchOn(asio::io_context& io, Stream& stream, const Options& options, const Endpoint& endpoint,
             std::optional<json>& last, std::uint64_t& printed) {
    try {
        Connect(io, stream, options, endpoint);
        http::request<http::empty_body> request{http::verb::get, "/leadership?watch=1", 11};
        request.set(http::field::host, Name(endpoint));
        request.set(http::field::user_agent, "conclavectl");
        if (!options.token.empty()) {
            request.set(http::field::authorization, "Bearer " + options.token);
        }
        http::write(stream, request);
        beast::flat_buffer buffer;
        http::response_parser<http::string_body> parser;
        parser.body_limit(boost::none);
        http::read_header(stream, buffer, parser);
        if (parser.get().result_int() != 200 || !parser.chunked()) {
            http::read(stream, buffer, parser);
            Reply reply;
            reply.status = parser.get().result_int();
            reply.body = parser.get().body();
            reply.document = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
            Fail(endpoint, reply);
        }
        std::string pending;
        bool enough = false;
        auto on_body = [&](std::uint64_t, std::string_view body, beast::error_code&) {
            pending.append(body);
            for (std::size_t nl = pending.find('\n'); nl != std::string::npos;
                 nl = pending.find('\n')) {
                const std::string line = pending.substr(0, nl);
                pending.erase(0, nl + 1);
                if (line.empty() || enough) {
                    continue;  // keep-alive
                }
                const json s = json::parse(line, nullptr, /*allow_exceptions=*/false);
                if (s.is_object() && PrintChange(options, s, last)) {
                    printed += 1;
                    enough = options.count && printed >= *options.count;
                }
            }
            if (pending.size() > 1024 * 1024) {
                pending.clear();  // no newline in a megabyte: not NDJSON
            }
            return body.size();
        };
        parser.on_chunk_body(on_body);
        while (!parser.is_done() && !enough) {
            // The node writes a blank line every 15 s: silence for longer means it is gone.
            beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(45));
            http::read_some(stream, buffer, parser);
        }
        if (!enough) {
            throw Failure(kExitUnreachable, Name(endpoint) + ": the watch stream ended");
        }
    } catch (const boost::system::system_error& e) {
        const std::string what =
            e.code() == beast::error::timeout ? std::string("timed out") : e.code().message();
        throw Failure(kExitUnreachable, Name(endpoint) + ": " + what);
    }
}

void WatchOne(const Options& options, const Endpoint& endpoint, std::optional<json>& last,
              std::uint64_t& printed) {
    asio::io_context io;
    if (options.tls) {
        TlsStream stream(io, *options.tls);
        WatchOn(io, stream, options, endpoint, last, printed);
        return;
    }
    beast::tcp_stream stream(io);
    WatchOn(io, stream, options, endpoint, last, printed);
}

int Watch(const Options& options) {
    std::optional<json> last;
    std::uint64_t printed = 0;
    std::size_t next = 0;  // endpoint to follow
    std::size_t failures_in_row = 0;
    while (!options.count || printed < *options.count) {
        try {
            WatchOne(options, options.endpoints[next], last, printed);
        } catch (const Failure& e) {
            if (e.status == kExitAuth) {
                throw;
            }
            std::cerr << "conclavectl: " << e.what() << "; following the next node" << std::endl;
            next = (next + 1) % options.endpoints.size();
            failures_in_row += 1;
            if (failures_in_row >= options.endpoints.size()) {
                failures_in_row = 0;
                std::this_thread::sleep_for(std::chrono::seconds(1));
            }
            continue;
        }
        failures_in_row = 0;
    }
    return kExitOk;
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
    std::cout << leader_id << ": " << Detail(reply) << std::endl;
    // Wait until another node (or the requested one) leads.
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        std::string now_id;
        if (FindLeader(options, &now_id) &&
            (expect_leader.empty() ? now_id != leader_id : now_id == expect_leader)) {
            std::cout << "leader is now " << now_id << std::endl;
            return kExitOk;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw Failure(kExitFailure,
                  "accepted, but " +
                      (expect_leader.empty() ? std::string("no other node") : expect_leader) +
                      " leads after " + std::to_string(options.timeout.count()) + " ms");
}

/// POSTs `body` to `path` on the first node that answers (a follower redirects to the leader);
/// the 200 reply, else a Failure.
Reply PostAnywhere(const Options& options, const std::string& path, const json& body) {
    std::string last_error;
    for (const Endpoint& endpoint : options.endpoints) {
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

int Put(const Options& options) {
    const std::string& key = options.args[0];
    json value = json::parse(options.args[1], nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
        value = options.args[1];
    }
    const Reply reply = PostAnywhere(options, "/metadata", {{"key", key}, {"value", value}});
    std::cout << "committed at " << Str(reply.document, "lsn") << std::endl;
    return kExitOk;
}

int Members(const Options& options) {
    if (options.args.size() == 2) {
        const Reply reply =
            PostAnywhere(options, "/members", {{"op", options.args[0]}, {"id", options.args[1]}});
        std::cout << options.args[0] << " " << options.args[1]
                  << ": committed, configuration version " << Str(reply.document, "version")
                  << std::endl;
        return kExitOk;
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
    for (const json& m : view.value("members", json::array())) {
        std::cout << Str(m, "id") << " " << Str(m, "role") << " " << Str(m, "peer") << " "
                  << Str(m, "http");
        if (m.contains("catch_up")) {
            const json& c = m["catch_up"];
            std::cout << " acknowledged=" << Str(c, "acknowledged_len")
                      << " lag=" << Str(c, "lag_entries") << " connected=" << Str(c, "connected");
        }
        std::cout << "\n";
    }
    std::cout.flush();
    return kExitOk;
}

int Get(const Options& options) {
    std::optional<Endpoint> source = FindLeader(options);
    if (!source) {
        source = options.endpoints.front();  // no leader: read what the first node committed
    }
    std::string from = options.from;
    json all = json::array();
    for (;;) {
        std::string target = "/metadata";
        if (!from.empty()) {
            target += "?from=" + from;
        }
        Endpoint answered;
        const Reply reply =
            RequestFollowing(options, *source, http::verb::get, target, {}, &answered);
        if (reply.status != 200 || !reply.document.is_object()) {
            Fail(answered, reply);
        }
        const json& page = reply.document;
        const json entries = page.value("entries", json::array());
        for (const json& e : entries) {
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

std::string ReadTokenFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        throw Failure(kExitUsage, "--token-file " + path + ": cannot read the file");
    }
    std::string token;
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) {
        token.pop_back();
    }
    if (token.empty()) {
        throw Failure(kExitUsage, "--token-file " + path + ": the first line is empty");
    }
    return token;
}

void LoadConfig(const std::string& path, Options& options) {
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
    // An admin API served over HTTPS is verified with the cluster CA of the same config.
    if (config.security.admin_tls != conclave::node::SecuritySettings::AdminTls::Off &&
        !options.tls) {
        if (!config.tls) {
            throw Failure(kExitUsage, "--config " + path +
                                          ": the admin API speaks HTTPS (admin.tls) and the "
                                          "config has no \"tls.ca\": give --cacert FILE");
        }
        options.tls = MakeTlsContext(config.tls->ca_path, "--config " + path + ": tls.ca");
    }
}

Options Parse(const std::vector<std::string>& args, bool& help, bool& version) {
    Options options;
    std::map<std::string, int> seen;
    std::string endpoints, config, token_file, timeout, count, cacert;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string arg = args[i];
        std::string value;
        bool inline_value = false;
        if (arg.rfind("--", 0) == 0) {
            const std::size_t eq = arg.find('=');
            if (eq != std::string::npos) {
                value = arg.substr(eq + 1);
                arg = arg.substr(0, eq);
                inline_value = true;
            }
        }
        if (arg == "-o") {
            arg = "--output";
        }
        const auto take = [&](std::string& target) {
            if (seen[arg]++ > 0) {
                throw Failure(kExitUsage, arg + " given more than once");
            }
            if (!inline_value) {
                if (i + 1 >= args.size()) {
                    throw Failure(kExitUsage, arg + " needs a value");
                }
                value = args[++i];
            }
            if (value.empty()) {
                throw Failure(kExitUsage, arg + " needs a non-empty value");
            }
            target = value;
        };
        if (arg == "--endpoints") {
            take(endpoints);
        } else if (arg == "--config") {
            take(config);
        } else if (arg == "--token-file") {
            take(token_file);
        } else if (arg == "--cacert") {
            take(cacert);
        } else if (arg == "--output") {
            take(options.output);
        } else if (arg == "--timeout") {
            take(timeout);
        } else if (arg == "--count") {
            take(count);
        } else if (arg == "--to") {
            take(options.to);
        } else if (arg == "--from") {
            take(options.from);
        } else if (arg == "--help" || arg == "-h") {
            help = true;
        } else if (arg == "--version") {
            version = true;
        } else if (arg.rfind("-", 0) == 0) {
            throw Failure(kExitUsage, "unknown option " + arg);
        } else if (options.command.empty()) {
            options.command = arg;
        } else {
            options.args.push_back(arg);
        }
    }
    if (help || version) {
        return options;
    }
    if (options.command.empty()) {
        throw Failure(kExitUsage,
                      "missing COMMAND (status, watch, transfer, step-down, put, get, members)");
    }
    const std::map<std::string, std::size_t> arity = {
        {"status", 0}, {"watch", 0}, {"transfer", 0}, {"step-down", 0},
        {"put", 2},    {"get", 0},   {"members", 0}};
    const auto it = arity.find(options.command);
    if (it == arity.end()) {
        throw Failure(kExitUsage, "unknown command \"" + options.command + "\"");
    }
    if (options.command == "members" && options.args.size() == 2) {
        const std::string& op = options.args[0];
        if (op != "add-learner" && op != "promote" && op != "remove") {
            throw Failure(kExitUsage,
                          "members: expected add-learner, promote or remove, got \"" + op + "\"");
        }
    } else if (options.args.size() != it->second) {
        throw Failure(kExitUsage, options.command + ": expected " + std::to_string(it->second) +
                                      " argument(s), got " + std::to_string(options.args.size()));
    }
    if (options.command == "transfer" && options.to.empty()) {
        throw Failure(kExitUsage, "transfer: missing --to ID");
    }
    for (const char c : options.to) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
            throw Failure(kExitUsage, "--to: not a node id: \"" + options.to + "\"");
        }
    }
    if (options.command != "transfer" && !options.to.empty()) {
        throw Failure(kExitUsage, "--to is only for transfer");
    }
    if (options.command != "get" && !options.from.empty()) {
        throw Failure(kExitUsage, "--from is only for get");
    }
    if (options.command != "watch" && !count.empty()) {
        throw Failure(kExitUsage, "--count is only for watch");
    }
    if (!options.from.empty() && options.from.find('.') == std::string::npos) {
        throw Failure(kExitUsage,
                      "--from: expected TERM.COUNTER (e.g. 3.17), got \"" + options.from + "\"");
    }
    if (options.output != "table" && options.output != "json") {
        throw Failure(kExitUsage,
                      "--output: expected \"table\" or \"json\", got \"" + options.output + "\"");
    }
    const auto number = [](const std::string& name, const std::string& text, std::uint64_t max) {
        std::uint64_t n = 0;
        std::size_t used = 0;
        try {
            n = std::stoull(text, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != text.size() || text.empty() || n == 0 || n > max || text[0] == '-') {
            throw Failure(kExitUsage, name + ": expected an integer in 1.." + std::to_string(max) +
                                          ", got \"" + text + "\"");
        }
        return n;
    };
    if (!timeout.empty()) {
        options.timeout = std::chrono::seconds(number("--timeout", timeout, 3600));
    }
    if (!count.empty()) {
        options.count = number("--count", count, 1'000'000'000);
    }
    if (endpoints.empty() == config.empty()) {
        throw Failure(kExitUsage, "give exactly one of --endpoints HOST:PORT,... or --config FILE");
    }
    if (!cacert.empty()) {
        options.tls = MakeTlsContext(cacert, "--cacert");
    }
    if (!endpoints.empty()) {
        std::stringstream list(endpoints);
        std::string item;
        while (std::getline(list, item, ',')) {
            const auto endpoint = conclave::node::parse_endpoint(item);
            if (!endpoint) {
                throw Failure(kExitUsage,
                              "--endpoints: expected host:port with a port in 1..65535, got \"" +
                                  item + "\"");
            }
            options.endpoints.push_back(*endpoint);
        }
        if (options.endpoints.empty()) {
            throw Failure(kExitUsage, "--endpoints: empty list");
        }
    } else {
        LoadConfig(config, options);
    }
    if (!token_file.empty()) {
        options.token = ReadTokenFile(token_file);
    }
    return options;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    try {
        bool help = false;
        bool version = false;
        const Options options = Parse(args, help, version);
        if (help) {
            std::cout << UsageText();
            return kExitOk;
        }
        if (version) {
            std::cout << "conclavectl " << conclave::node::conclave_version() << "\n";
            return kExitOk;
        }
        if (options.command == "status") {
            return Status(options);
        }
        if (options.command == "watch") {
            return Watch(options);
        }
        if (options.command == "transfer") {
            return Command(options, "/transfer-leadership?to=" + options.to, "transfer",
                           options.to);
        }
        if (options.command == "step-down") {
            return Command(options, "/step-down", "step down", "");
        }
        if (options.command == "put") {
            return Put(options);
        }
        if (options.command == "members") {
            return Members(options);
        }
        return Get(options);
    } catch (const Failure& e) {
        std::cerr << "conclavectl: " << e.what() << "\n";
        if (e.status == kExitUsage) {
            std::cerr << "Try 'conclavectl --help' for more information.\n";
        }
        return e.status;
    } catch (const std::exception& e) {
        std::cerr << "conclavectl: " << e.what() << "\n";
        return kExitFailure;
    }
}
