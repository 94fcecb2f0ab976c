// SPDX-License-Identifier: Apache-2.0
// The admin HTTP server over real loopback sockets (127.0.0.1, port 0), driven by an async Beast
// client on the same io_context. Every wait is bounded (RunUntil); timeouts are configured short.
#include <catch2/catch.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "admin/fake_admin_source.hpp"
#include "conclave/admin/admin_routes.hpp"
#include "conclave/admin/admin_server.hpp"
#include "conclave/admin/prometheus_text.hpp"

using namespace conclave::admin;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Response = http::response<http::string_body>;

namespace {

/// Upper bound for any single wait in these tests; never reached when the code is right.
constexpr std::chrono::seconds kBound{5};

/// Runs the io_context until `done()` or the bound; returns done().
template <typename Predicate>
bool RunUntil(asio::io_context& io, Predicate done) {
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        if (io.stopped()) {
            io.restart();
        }
        io.run_one_for(std::chrono::milliseconds(20));
    }
    return done();
}

class Client {
  public:
    Client(asio::io_context& io, std::uint16_t port) : io_(io), socket_(io) {
        bool done = false;
        socket_.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                              [&](beast::error_code ec) {
                                  connect_error_ = ec;
                                  done = true;
                              });
        REQUIRE(RunUntil(io_, [&] { return done; }));
        REQUIRE_FALSE(connect_error_);
    }

    void Send(const std::string& raw) {
        bool done = false;
        beast::error_code error;
        asio::async_write(socket_, asio::buffer(raw), [&](beast::error_code ec, std::size_t) {
            error = ec;
            done = true;
        });
        REQUIRE(RunUntil(io_, [&] { return done; }));
        REQUIRE_FALSE(error);
    }

    /// Reads one response; nullopt when the connection ends without one.
    std::optional<Response> Read() {
        bool done = false;
        beast::error_code error;
        Response response;
        http::async_read(socket_, buffer_, response, [&](beast::error_code ec, std::size_t) {
            error = ec;
            done = true;
        });
        REQUIRE(RunUntil(io_, [&] { return done; }));
        if (error) {
            return std::nullopt;
        }
        return response;
    }

    std::optional<Response> Request(const std::string& raw) {
        Send(raw);
        return Read();
    }

    /// True when the server closes the connection (EOF or reset) within the bound.
    bool WaitClosed() {
        bool done = false;
        beast::error_code error;
        socket_.async_read_some(asio::buffer(scratch_), [&](beast::error_code ec, std::size_t) {
            error = ec;
            done = true;
        });
        if (!RunUntil(io_, [&] { return done; })) {
            socket_.cancel();
            RunUntil(io_, [&] { return done; });
            return false;
        }
        return error == asio::error::eof || error == asio::error::connection_reset;
    }

    void Close() { socket_.close(); }

  private:
    asio::io_context& io_;
    tcp::socket socket_;
    beast::flat_buffer buffer_;
    std::array<char, 256> scratch_{};
    beast::error_code connect_error_;
};

std::string Get(const std::string& target) {
    return "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
}

std::string Post(const std::string& target) {
    return "POST " + target + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n";
}

std::string PostJson(const std::string& target, const std::string& body) {
    return "POST " + target +
           " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

json JsonBody(const Response& response) {
    CHECK(response[http::field::content_type] == "application/json");
    return json::parse(response.body());
}

/// A server with the standard routes on a fake source, on 127.0.0.1 port 0.
struct Fixture {
    explicit Fixture(AdminServerLimits limits = {}) : server(io, limits) {
        register_admin_routes(server, source);
        const auto error = server.listen("127.0.0.1", 0);
        REQUIRE_FALSE(error);
        REQUIRE(server.port() != 0);
    }
    asio::io_context io;
    testing::FakeAdminSource source;
    AdminServer server;
};

}  // namespace

TEST_CASE("admin routes over loopback", "[admin]") {
    Fixture f;
    Client client(f.io, f.server.port());

    SECTION("GET /status is the status JSON") {
        auto response = client.Request(Get("/status"));
        REQUIRE(response);
        CHECK(response->result_int() == 200);
        const json body = JsonBody(*response);
        CHECK(body == status_to_json(f.source.report));
        CHECK(body["role"] == "leader");
    }
    SECTION("GET /metrics is Prometheus text that parses") {
        auto response = client.Request(Get("/metrics"));
        REQUIRE(response);
        CHECK(response->result_int() == 200);
        CHECK((*response)[http::field::content_type] == MetricsRegistry::kContentType);
        auto parsed = parse_prometheus_text(response->body());
        REQUIRE(std::holds_alternative<PrometheusExposition>(parsed));
        CHECK(std::get<PrometheusExposition>(parsed).value("conclave_elections_started_total") ==
              3);
    }
    SECTION("GET /healthz: ok, then unhealthy") {
        auto ok = client.Request(Get("/healthz"));
        REQUIRE(ok);
        CHECK(ok->result_int() == 200);
        CHECK(JsonBody(*ok) == json{{"status", "ok"}});
        f.source.health_report = {false, "mesh not listening"};
        auto bad = client.Request(Get("/healthz"));
        REQUIRE(bad);
        CHECK(bad->result_int() == 503);
        CHECK(JsonBody(*bad) == json{{"error", "unhealthy"}, {"detail", "mesh not listening"}});
    }
    SECTION("POST /transfer-leadership validates ?to=") {
        f.source.transfer_result = {CommandResult::Outcome::Accepted, "transferring to n2"};
        auto accepted = client.Request(Post("/transfer-leadership?to=n2"));
        REQUIRE(accepted);
        CHECK(accepted->result_int() == 202);
        CHECK(JsonBody(*accepted)["status"] == "accepted");
        CHECK(f.source.transfers == std::vector<std::string>{"n2"});

        auto unknown = client.Request(Post("/transfer-leadership?to=n9"));
        REQUIRE(unknown);
        CHECK(unknown->result_int() == 400);
        CHECK(JsonBody(*unknown)["detail"] == "to: \"n9\" is not a configured node (n1, n2, n3)");

        auto missing = client.Request(Post("/transfer-leadership"));
        REQUIRE(missing);
        CHECK(missing->result_int() == 400);
        CHECK(JsonBody(*missing)["error"] == "bad_request");

        auto extra = client.Request(Post("/transfer-leadership?to=n2&force=1"));
        REQUIRE(extra);
        CHECK(extra->result_int() == 400);
        CHECK(JsonBody(*extra)["detail"] == "query: unknown parameter \"force\" (allowed: to)");

        auto twice = client.Request(Post("/transfer-leadership?to=n2&to=n3"));
        REQUIRE(twice);
        CHECK(twice->result_int() == 400);

        auto bad_escape = client.Request(Post("/transfer-leadership?to=%zz"));
        REQUIRE(bad_escape);
        CHECK(bad_escape->result_int() == 400);
        // A bad query is still a well-formed HTTP request: the connection stays open.
        f.source.transfer_result = {CommandResult::Outcome::Refused, "not the leader"};
        auto refused = client.Request(Post("/transfer-leadership?to=n%33"));  // %33 = '3'
        REQUIRE(refused);
        CHECK(refused->result_int() == 409);
        CHECK(JsonBody(*refused) == json{{"error", "refused"}, {"detail", "not the leader"}});
        CHECK(f.source.transfers == std::vector<std::string>{"n2", "n3"});
    }
    SECTION("POST /step-down") {
        auto accepted = client.Request(Post("/step-down"));
        REQUIRE(accepted);
        CHECK(accepted->result_int() == 202);
        f.source.step_down_result = {CommandResult::Outcome::Unavailable, "stopping"};
        auto unavailable = client.Request(Post("/step-down"));
        REQUIRE(unavailable);
        CHECK(unavailable->result_int() == 503);
        CHECK(f.source.step_downs == 2);
    }
    SECTION("/members without a metadata log: 503 disabled; bad bodies are 400 first") {
        auto get = client.Request(Get("/members"));
        REQUIRE(get);
        CHECK(get->result_int() == 503);
        CHECK(JsonBody(*get)["error"] == "disabled");
        auto post = client.Request(PostJson("/members", R"({"op": "remove", "id": "n2"})"));
        REQUIRE(post);
        CHECK(post->result_int() == 503);
        CHECK(JsonBody(*post)["error"] == "disabled");
        for (const auto& [body, detail] : std::vector<std::pair<std::string, std::string>>{
                 {"{", "body: expected a JSON object"},
                 {R"({"op": "grow", "id": "n2"})", "body.op: unknown op \"grow\""},
                 {R"({"op": "remove"})", "body.id: expected a non-empty node id"},
                 {R"({"op": "remove", "id": "n2", "x": 1})", "body.x: unknown field"},
                 {R"({"op": "add-learner", "id": "n9", "peer": "h:1", "http": "h:2"})",
                  "body.http: a node that is not in the node table joins with conclaved --join"}}) {
            INFO(body);
            auto bad = client.Request(PostJson("/members", body));
            REQUIRE(bad);
            CHECK(bad->result_int() == 400);
            CHECK(JsonBody(*bad)["detail"].get<std::string>().rfind(detail, 0) == 0);
        }
    }
    SECTION("/broadcast: bodies and parameters are checked before the source is asked") {
        for (const auto& [body, detail] : std::vector<std::pair<std::string, std::string>>{
                 {"[1]", "body: expected a JSON object"},
                 {R"({"payload": 1})", "body.topic: expected a string"},
                 {R"({"topic": 7, "payload": 1})", "body.topic: expected a string"},
                 {R"({"topic": "t"})", "body.payload: missing"},
                 {R"({"topic": "t", "payload": 1, "x": 1})", "body.x: unknown field"}}) {
            INFO(body);
            auto bad = client.Request(PostJson("/broadcast", body));
            REQUIRE(bad);
            CHECK(bad->result_int() == 400);
            CHECK(JsonBody(*bad)["detail"].get<std::string>().rfind(detail, 0) == 0);
        }
        auto query = client.Request(PostJson("/broadcast?x=1", R"({"topic": "t", "payload": 1})"));
        REQUIRE(query);
        CHECK(query->result_int() == 400);
        // The fake cannot broadcast (AdminSource's default): 503.
        auto unavailable =
            client.Request(PostJson("/broadcast", R"({"topic": "t", "payload": 1})"));
        REQUIRE(unavailable);
        CHECK(unavailable->result_int() == 503);
        for (const std::string target :
             {"/broadcast", "/broadcast?watch=2", "/broadcast?watch=1&x=1"}) {
            INFO(target);
            auto get = client.Request(Get(target));
            REQUIRE(get);
            CHECK(get->result_int() == 400);
        }
    }
    SECTION("metadata by key: paths, parameters and bodies are checked; answers and redirects") {
        for (const auto& [target, detail] : std::vector<std::pair<std::string, std::string>>{
                 {"/metadata/", "path: expected /metadata/<key>"},
                 {"/metadata/k?consistency=strong", "consistency: expected linearizable or"},
                 {"/metadata/k?from=1.1", "query: unknown parameter \"from\""},
                 {"/metadata?prefix=a&max=0", "max: expected an integer in 1..10000"},
                 {"/metadata?prefix=a&watch=2", "watch: expected 1"},
                 {"/metadata?watch=1&from=x", "from: expected TERM.COUNTER"},
                 {"/metadata?watch=1&max=3", "query: unknown parameter \"max\""}}) {
            INFO(target);
            auto bad = client.Request(Get(target));
            REQUIRE(bad);
            CHECK(bad->result_int() == 400);
            CHECK(JsonBody(*bad)["detail"].get<std::string>().rfind(detail, 0) == 0);
        }
        for (const auto& [body, detail] : std::vector<std::pair<std::string, std::string>>{
                 {R"({"key": "k", "value": 1, "expect_lsn": "7"})", "body.expect_lsn: expected"},
                 {R"({"key": "k", "value": 1, "expect_lsn": 7})", "body.expect_lsn: expected"},
                 {R"({"key": "k", "value": 1, "fence": -1})", "body.fence: expected"},
                 {R"({"key": "k", "value": 1, "fence": "7"})", "body.fence: expected"},
                 {R"({"key": "k", "value": 1, "if": 1})", "body.if: unknown field"}}) {
            INFO(body);
            auto bad = client.Request(PostJson("/metadata", body));
            REQUIRE(bad);
            CHECK(bad->result_int() == 400);
            CHECK(JsonBody(*bad)["detail"].get<std::string>().rfind(detail, 0) == 0);
        }
        // No metadata log behind the routes (the defaults): 503 disabled.
        for (const char* target : {"/metadata/k", "/metadata?prefix=a", "/metadata?watch=1"}) {
            INFO(target);
            auto disabled = client.Request(Get(target));
            REQUIRE(disabled);
            CHECK(disabled->result_int() == 503);
            CHECK(JsonBody(*disabled)["error"] == "disabled");
        }
        auto conditional = client.Request(
            PostJson("/metadata", R"({"key": "k", "value": 1, "expect_lsn": "0.0", "fence": 7})"));
        REQUIRE(conditional);
        CHECK(conditional->result_int() == 503);
        auto wrong = client.Request(Post("/metadata/k"));
        REQUIRE(wrong);
        CHECK(wrong->result_int() == 405);
        CHECK((*wrong)[http::field::allow] == "GET");

        // A key read: the key percent-decoded, the answer with both LSNs.
        MetadataReadResult answer;
        answer.outcome.lsn = conclave::Lsn{conclave::Term{7}, 44};
        answer.entries.push_back({conclave::Lsn{conclave::Term{7}, 40}, "a/b c", R"({"x":1})"});
        f.source.read_result = answer;
        auto served = client.Request(Get("/metadata/a%2Fb%20c?consistency=serializable"));
        REQUIRE(served);
        CHECK(served->result_int() == 200);
        CHECK(
            JsonBody(*served) ==
            json{{"key", "a/b c"}, {"value", {{"x", 1}}}, {"lsn", "7.40"}, {"commit_lsn", "7.44"}});
        REQUIRE_FALSE(f.source.reads.empty());
        CHECK(f.source.reads.back().key == "a/b c");
        CHECK_FALSE(f.source.reads.back().prefix);
        CHECK(f.source.reads.back().consistency == ReadConsistency::Serializable);
        auto listed = client.Request(Get("/metadata?prefix=a/"));
        REQUIRE(listed);
        CHECK(JsonBody(*listed)["keys"][0]["lsn"] == "7.40");
        CHECK(f.source.reads.back().prefix);
        CHECK(f.source.reads.back().consistency == ReadConsistency::Linearizable);
        answer.entries.clear();
        f.source.read_result = answer;
        auto absent = client.Request(Get("/metadata/k"));
        REQUIRE(absent);
        CHECK(absent->result_int() == 404);
        CHECK(JsonBody(*absent)["commit_lsn"] == "7.44");
        // A follower: 307 to the leader, the query kept.
        answer.outcome.status = MetadataProposeStatus::NotLeader;
        answer.outcome.leader = "n2";
        answer.outcome.leader_http = "127.0.0.1:8102";
        f.source.read_result = answer;
        auto redirect = client.Request(Get("/metadata?prefix=a%20b&max=5"));
        REQUIRE(redirect);
        CHECK(redirect->result_int() == 307);
        CHECK((*redirect)[http::field::location] ==
              "http://127.0.0.1:8102/metadata?max=5&prefix=a%20b");
        CHECK(JsonBody(*redirect)["error"] == "not_leader");
    }
    SECTION("unknown path 404, wrong method 405 with Allow") {
        auto missing = client.Request(Get("/nope"));
        REQUIRE(missing);
        CHECK(missing->result_int() == 404);
        CHECK(JsonBody(*missing) ==
              json{{"error", "not_found"}, {"detail", "no such endpoint: /nope"}});
        auto wrong = client.Request(Post("/status"));
        REQUIRE(wrong);
        CHECK(wrong->result_int() == 405);
        CHECK((*wrong)[http::field::allow] == "GET");
        CHECK(JsonBody(*wrong)["error"] == "method_not_allowed");
        auto get_step_down = client.Request(Get("/step-down"));
        REQUIRE(get_step_down);
        CHECK(get_step_down->result_int() == 405);
        CHECK((*get_step_down)[http::field::allow] == "POST");
    }
    SECTION("keep-alive: many requests on one connection, then Connection: close") {
        for (int i = 0; i < 5; ++i) {
            auto response = client.Request(Get("/healthz"));
            REQUIRE(response);
            CHECK(response->result_int() == 200);
            CHECK(response->keep_alive());
        }
        auto last = client.Request("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        REQUIRE(last);
        CHECK_FALSE(last->keep_alive());
        CHECK(client.WaitClosed());
    }
}

TEST_CASE("malformed requests get 400 with a JSON error and the server carries on", "[admin]") {
    Fixture f;
    const std::vector<std::string> garbage = {
        "GARBAGE\r\n\r\n",
        "GET /status HTTP/9.9\r\n\r\n",
        "GET /status HTTP/1.1\r\nHost x\r\n\r\n",                   // header without colon
        "POST /step-down HTTP/1.1\r\nContent-Length: abc\r\n\r\n",  // bad length
        "POST /step-down HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  // bad chunk
        "GET http://example.com/status HTTP/1.1\r\nHost: x\r\n\r\n",  // absolute-form target
        std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + "\r\n\r\n",  // TLS hello
    };
    for (const std::string& raw : garbage) {
        INFO(raw);
        Client client(f.io, f.server.port());
        auto response = client.Request(raw);
        REQUIRE(response);
        CHECK(response->result_int() == 400);
        const json body = JsonBody(*response);
        CHECK(body["error"] == "bad_request");
        CHECK(body["detail"].is_string());
    }
    Client after(f.io, f.server.port());
    auto ok = after.Request(Get("/healthz"));
    REQUIRE(ok);
    CHECK(ok->result_int() == 200);
    CHECK(f.server.stats().bad_requests == garbage.size());
}

TEST_CASE("oversize bodies get 413 and oversize headers 431", "[admin]") {
    AdminServerLimits limits;
    limits.max_body_bytes = 1024;
    limits.max_header_bytes = 2048;
    Fixture f(limits);
    {
        // Refused on the Content-Length alone, before the body is sent.
        Client client(f.io, f.server.port());
        auto response =
            client.Request("POST /step-down HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
        REQUIRE(response);
        CHECK(response->result_int() == 413);
        CHECK(JsonBody(*response) ==
              json{{"error", "payload_too_large"}, {"detail", "request body exceeds 1024 bytes"}});
        CHECK_FALSE(response->keep_alive());
        CHECK(client.WaitClosed());
    }
    {
        // A body that is sent in full is drained, so the client still reads the answer.
        Client client(f.io, f.server.port());
        auto response =
            client.Request("POST /step-down HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" +
                           std::string(5000, 'x'));
        REQUIRE(response);
        CHECK(response->result_int() == 413);
    }
    {
        Client client(f.io, f.server.port());
        auto response = client.Request(
            "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4096, 'a') + "\r\n\r\n");
        REQUIRE(response);
        CHECK(response->result_int() == 431);
        CHECK(JsonBody(*response)["error"] == "headers_too_large");
    }
    CHECK(f.source.step_downs == 0);
}

TEST_CASE("a connection beyond the limit evicts the oldest unauthenticated one", "[admin]") {
    AdminServerLimits limits;
    limits.max_connections = 2;
    Fixture f(limits);
    Client first(f.io, f.server.port());
    Client second(f.io, f.server.port());
    REQUIRE(RunUntil(f.io, [&] { return f.server.stats().connections_active == 2; }));

    // The third is served; the first (the oldest, idle) is closed to make room.
    Client third(f.io, f.server.port());
    auto served = third.Request(Get("/healthz"));
    REQUIRE(served);
    CHECK(served->result_int() == 200);
    CHECK(first.WaitClosed());
    CHECK(f.server.stats().connections_refused == 1);

    // The second is still served.
    auto ok = second.Request(Get("/healthz"));
    REQUIRE(ok);
    CHECK(ok->result_int() == 200);
}

TEST_CASE("slow and idle clients are cut off by the request timeout", "[admin]") {
    AdminServerLimits limits;
    limits.request_timeout = std::chrono::milliseconds(200);
    Fixture f(limits);

    Client slow(f.io, f.server.port());
    slow.Send("GET /status HTTP/1.1\r\nHost: x\r\n");  // headers never finished
    CHECK(slow.WaitClosed());

    Client idle(f.io, f.server.port());
    auto response = idle.Request(Get("/healthz"));
    REQUIRE(response);
    CHECK(response->keep_alive());
    CHECK(idle.WaitClosed());  // keep-alive idleness is bounded too

    CHECK(f.server.stats().timeouts == 2);
    CHECK(f.server.stats().connections_active == 0);
}

TEST_CASE("a throwing handler gives 500; stop() closes every connection", "[admin]") {
    asio::io_context io;
    AdminServer server(io);
    server.route("GET", "/boom",
                 [](const AdminRequest&) -> AdminResponse { throw std::runtime_error("kaboom"); });
    server.route("GET", "/echo", [](const AdminRequest& request) {
        return json_response(200, {{"query", request.query}, {"remote", request.remote}});
    });
    REQUIRE_FALSE(server.listen("127.0.0.1", 0));
    Client client(io, server.port());
    auto boom = client.Request(Get("/boom"));
    REQUIRE(boom);
    CHECK(boom->result_int() == 500);
    CHECK(JsonBody(*boom) == json{{"error", "internal"}, {"detail", "kaboom"}});

    auto echo = client.Request(Get("/echo?a=1&b=x+y%2Fz&&c"));
    REQUIRE(echo);
    const json body = JsonBody(*echo);
    CHECK(body["query"] == json{{"a", "1"}, {"b", "x y/z"}, {"c", ""}});
    CHECK(body["remote"].get<std::string>().rfind("127.0.0.1:", 0) == 0);

    // Another server cannot take the same port; the error names the endpoint.
    AdminServer other(io);
    const auto error = other.listen("127.0.0.1", server.port());
    REQUIRE(error);
    CHECK(error->rfind("127.0.0.1:" + std::to_string(server.port()) + ": ", 0) == 0);

    server.stop();
    CHECK(client.WaitClosed());
    CHECK(RunUntil(io, [&] { return server.stats().connections_active == 0; }));
}

TEST_CASE("streamed responses: chunks reach the client; a client that does not read is dropped",
          "[admin][stream]") {
    AdminServerLimits limits;
    limits.max_stream_pending_bytes = 4096;
    limits.request_timeout = std::chrono::milliseconds(500);
    asio::io_context io;
    AdminServer server(io, limits);
    std::shared_ptr<AdminStream> opened;
    bool closed = false;
    server.route("GET", "/stream", [&](const AdminRequest&) {
        AdminResponse response;
        response.content_type = "application/x-ndjson";
        response.stream = [&](std::shared_ptr<AdminStream> stream) {
            opened = stream;
            stream->on_close([&] { closed = true; });
        };
        return response;
    });
    REQUIRE_FALSE(server.listen("127.0.0.1", 0));

    // A reading client gets the header, then each chunk, then the end of the body.
    {
        Client client(io, server.port());
        client.Send(Get("/stream"));
        REQUIRE(RunUntil(io, [&] { return opened != nullptr; }));
        CHECK(opened->write("{\"n\":1}\n"));
        CHECK(opened->write("{\"n\":2}\n"));
        opened->close();
        CHECK_FALSE(opened->write("late"));
        auto response = client.Read();
        REQUIRE(response);
        CHECK(response->chunked());
        CHECK((*response)[http::field::content_type] == "application/x-ndjson");
        CHECK(response->body() == "{\"n\":1}\n{\"n\":2}\n");
        CHECK(RunUntil(io, [&] { return closed; }));
    }
    // A client that never reads: the queue bound (or the write deadline) drops it; it is never
    // buffered without bound.
    opened.reset();
    closed = false;
    {
        Client client(io, server.port());
        client.Send(Get("/stream"));
        REQUIRE(RunUntil(io, [&] { return opened != nullptr; }));
        const std::string chunk(1024, 'x');
        std::size_t accepted = 0;
        const auto deadline = std::chrono::steady_clock::now() + kBound;
        while (opened->write(chunk) && std::chrono::steady_clock::now() < deadline) {
            accepted += chunk.size();
            io.poll();
        }
        CHECK(opened->closed());
        CHECK(RunUntil(io, [&] { return closed; }));
        INFO("bytes accepted before the drop: " << accepted);
        CHECK(accepted < 256 * 1024 * 1024);
    }
    // The client leaving closes the stream.
    opened.reset();
    closed = false;
    {
        Client client(io, server.port());
        client.Send(Get("/stream"));
        REQUIRE(RunUntil(io, [&] { return opened != nullptr; }));
        client.Close();
        CHECK(RunUntil(io, [&] { return closed; }));
        CHECK(opened->closed());
    }
    opened.reset();  // the last reference to the connection
    CHECK(RunUntil(io, [&] { return server.stats().connections_active == 0; }));
}

TEST_CASE("pipelined requests are taken together and answered in request order", "[admin]") {
    Fixture f;
    std::vector<std::pair<std::string, AdminResponder>> waiting;
    f.server.route_async("GET", "/later", [&](const AdminRequest& request, AdminResponder answer) {
        waiting.emplace_back(request.query.at("n"), std::move(answer));
    });
    Client client(f.io, f.server.port());
    // One write: two requests answered later, one answered at once between them, and the start
    // of a fourth.
    const std::string fourth = Get("/later?n=4");
    client.Send(Get("/later?n=1") + Get("/healthz") + Get("/later?n=3") + fourth.substr(0, 10));
    REQUIRE(RunUntil(f.io, [&] { return waiting.size() == 2; }));
    CHECK(waiting[0].first == "1");
    CHECK(waiting[1].first == "3");
    // The third is answered first; nothing may go out before the first is.
    waiting[1].second(json_response(200, json{{"n", 3}}));
    f.io.run_for(std::chrono::milliseconds(50));
    waiting[0].second(json_response(200, json{{"n", 1}}));
    auto first = client.Read();
    auto second = client.Read();
    auto third = client.Read();
    REQUIRE((first && second && third));
    CHECK(JsonBody(*first)["n"] == 1);
    CHECK(second->result_int() == 200);
    CHECK(JsonBody(*third)["n"] == 3);
    // The fourth, sent in two parts, is taken once its rest arrives.
    client.Send(fourth.substr(10));
    REQUIRE(RunUntil(f.io, [&] { return waiting.size() == 3; }));
    CHECK(waiting[2].first == "4");
    waiting[2].second(json_response(200, json{{"n", 4}}));
    auto last = client.Read();
    REQUIRE(last);
    CHECK(JsonBody(*last)["n"] == 4);
    CHECK(f.server.stats().requests == 4);
}

TEST_CASE("pipelining: nothing after a final answer is processed; a flood waits its turn",
          "[admin]") {
    Fixture f;
    int taken = 0;
    f.server.route_async("POST", "/count", [&](const AdminRequest&, AdminResponder answer) {
        ++taken;
        answer(json_response(200, json{{"taken", taken}}));
    });
    {
        // "Connection: close" on the second request: the third is never processed.
        Client client(f.io, f.server.port());
        const std::string close =
            "POST /count HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            "Content-Length: 0\r\n\r\n";
        client.Send(Post("/count") + close + Post("/count"));
        auto first = client.Read();
        auto second = client.Read();
        REQUIRE((first && second));
        CHECK_FALSE(second->keep_alive());
        CHECK_FALSE(client.Read());
        CHECK(taken == 2);
    }
    {
        // More requests in one write than are taken at once (and a malformed one at the end):
        // every well-formed one is answered in order, then the 400, then the connection ends.
        Client client(f.io, f.server.port());
        std::string flood;
        for (int i = 0; i < 150; ++i) {
            flood += Post("/count");
        }
        client.Send(flood + "GARBAGE\r\n\r\n");
        for (int i = 0; i < 150; ++i) {
            auto response = client.Read();
            REQUIRE(response);
            REQUIRE(JsonBody(*response)["taken"] == 3 + i);
        }
        auto refusal = client.Read();
        REQUIRE(refusal);
        CHECK(refusal->result_int() == 400);
        CHECK(client.WaitClosed());
    }
}

TEST_CASE("a committed write's answer is the LSN's JSON, at every size", "[admin]") {
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{7}, ~std::uint64_t{0}}) {
        MetadataProposeResult r;
        r.status = MetadataProposeStatus::Committed;
        r.lsn = conclave::Lsn{conclave::Term{n}, n / 3};
        const AdminResponse answer = propose_response(r, "http", "/metadata");
        CHECK(answer.status == 200);
        CHECK(answer.content_type == "application/json");
        CHECK(answer.body == json{{"lsn", lsn_to_json(r.lsn)}}.dump() + "\n");
    }
}
