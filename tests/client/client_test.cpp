// SPDX-License-Identifier: Apache-2.0
// The admin client against an in-test server (tests/support/fake_admin.hpp): the token, the
// deadline, the redirect to the leader, a batch at once, the watch stream, HTTPS with a CA made
// by conclave-certs.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <exception>
#include <filesystem>

#include "certs.hpp"
#include "conclave/client/client.hpp"
#include "conclave/client/session.hpp"
#include "conclave/client/watch.hpp"
#include "support/fake_admin.hpp"

namespace {

using namespace conclave;
using client::Clock;
using test::Canned;
using test::FakeAdmin;
namespace http = boost::beast::http;

client::Request Get(const std::string& target) {
    return {http::verb::get, target, {}, {}};
}

Canned Ok(const std::string& body) {
    Canned c;
    c.body = body;
    return c;
}

Canned Redirect(const std::string& location) {
    Canned c;
    c.status = 307;
    c.body = R"({"error":"not_leader"})";
    c.headers = {{"Location", location}};
    return c;
}

Canned Silent() {
    Canned c;
    c.silent = true;
    return c;
}

/// The error `work` throws (it must throw a client::Error).
template <class Work>
client::Error ErrorOf(Work work) {
    try {
        work();
    } catch (const client::Error& e) {
        return e;
    }
    FAIL("no client::Error thrown");
    return client::Error(client::ErrorKind::Unreachable, client::Stage::Connect, "none");
}

}  // namespace

TEST_CASE("endpoints and redirect locations parse as the admin API writes them", "[client]") {
    CHECK(client::parse_endpoint("127.0.0.1:8081") == client::Endpoint{"127.0.0.1", 8081});
    CHECK(client::parse_endpoint("[::1]:80") == client::Endpoint{"::1", 80});
    CHECK(client::to_string(client::Endpoint{"::1", 80}) == "[::1]:80");
    for (const char* bad : {"127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "::1:80", "[v4]:80",
                            "h:8x", ":80", "a b:80", "h:-1"}) {
        CAPTURE(bad);
        CHECK_FALSE(client::parse_endpoint(bad).has_value());
    }
    const auto http = client::parse_location("http://127.0.0.1:8081/metadata?from=1.2");
    REQUIRE(http.has_value());
    CHECK(http->endpoint == client::Endpoint{"127.0.0.1", 8081});
    CHECK(http->target == "/metadata?from=1.2");
    const auto https = client::parse_location("https://node-2:9000");
    REQUIRE(https.has_value());
    CHECK(https->target == "/");
    CHECK_FALSE(client::parse_location("ftp://127.0.0.1:8081/x").has_value());
    CHECK_FALSE(client::parse_location("http://localhost/metadata").has_value());
    CHECK_FALSE(client::parse_location("http://127.0.0.1:99999/metadata").has_value());
    CHECK(client::format_duration(std::chrono::milliseconds(2000)) == "2s");
    CHECK(client::format_duration(std::chrono::milliseconds(2500)) == "2500ms");
}

TEST_CASE("a request carries the method, body and token; the plain-HTTP probe does not",
          "[client]") {
    FakeAdmin node;
    node.on("GET /healthz", Ok("{}"));
    node.on("POST /metadata", Ok(R"({"lsn":{"term":2,"counter":5}})"));
    client::Settings settings;
    settings.token = "s3cret";
    const auto reply = client::request(settings, node.endpoint(),
                                       {http::verb::post, "/metadata", R"({"key":"k"})", {}});
    CHECK(reply.status == 200);
    CHECK(reply.document["lsn"]["counter"] == 5);
    const auto seen = node.seen();
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].target == "/healthz");  // the check that the port speaks HTTP, without it
    CHECK(seen[0].authorization.empty());
    CHECK(seen[1].method == "POST");
    CHECK(seen[1].body == R"({"key":"k"})");
    CHECK(seen[1].authorization == "Bearer s3cret");
}

TEST_CASE("a silent node: the request ends at its deadline, not answered", "[client]") {
    FakeAdmin node;
    node.on("GET /status", Silent());
    client::Settings settings;
    settings.timeout = std::chrono::milliseconds(300);
    const auto start = Clock::now();
    const auto e = ErrorOf([&] { client::request(settings, node.endpoint(), Get("/status")); });
    CHECK(Clock::now() - start >= settings.timeout);
    CHECK(e.kind() == client::ErrorKind::Unreachable);
    CHECK(e.stage() == client::Stage::Read);
    CHECK(std::string(e.what()) == client::to_string(node.endpoint()) + ": no answer within 300ms");
}

TEST_CASE("nothing listening: Unreachable at the connect stage", "[client]") {
    client::Endpoint closed;
    {
        FakeAdmin gone;
        closed = gone.endpoint();
    }
    client::Settings settings;
    settings.timeout = std::chrono::milliseconds(2000);
    const auto e = ErrorOf([&] { client::request(settings, closed, Get("/status")); });
    CHECK(e.kind() == client::ErrorKind::Unreachable);
    CHECK(e.stage() == client::Stage::Connect);
}

TEST_CASE("a redirect to the leader is followed, to the node that answers", "[client]") {
    FakeAdmin follower;
    FakeAdmin leader;
    const std::string at = "http://" + client::to_string(leader.endpoint());
    follower.on("POST /metadata", Redirect(at + "/metadata"));
    leader.on("POST /metadata", Ok(R"({"lsn":{"term":3,"counter":1}})"));
    const client::Settings settings;
    const client::Request put{http::verb::post, "/metadata", "{}", {}};
    CHECK(client::request(settings, follower.endpoint(), put).status == 307);
    client::Endpoint answered;
    const auto reply =
        client::request_following(settings, follower.endpoint(), put, std::nullopt, &answered);
    CHECK(reply.status == 200);
    CHECK(answered == leader.endpoint());
    CHECK(leader.count("POST", "/metadata") == 1);
    CHECK(leader.seen().at(0).body == "{}");
}

TEST_CASE("redirects: a loop stops after kMaxRedirects, a bad location is an error", "[client]") {
    FakeAdmin node;
    const std::string self = "http://" + client::to_string(node.endpoint());
    node.on("GET /loop", Redirect(self + "/loop"));
    node.on("GET /ftp", Redirect("ftp://example/x"));
    node.on("GET /bad", Redirect("http://no-port/x"));
    const client::Settings settings;
    CHECK(client::request_following(settings, node.endpoint(), Get("/loop")).status == 307);
    CHECK(node.count("GET", "/loop") == client::kMaxRedirects + 1);
    const auto ftp =
        ErrorOf([&] { client::request_following(settings, node.endpoint(), Get("/ftp")); });
    CHECK(ftp.kind() == client::ErrorKind::BadRedirect);
    CHECK_THAT(ftp.what(), Catch::Contains("redirect to an unsupported location"));
    const auto bad =
        ErrorOf([&] { client::request_following(settings, node.endpoint(), Get("/bad")); });
    CHECK_THAT(bad.what(), Catch::Contains("redirect to a malformed location"));
}

TEST_CASE("a batch: every node at once, ended early by an answer that is enough", "[client]") {
    FakeAdmin quiet;
    FakeAdmin leader;
    quiet.on("GET /status", Silent());
    leader.on("GET /status", Ok(R"({"role":"leader"})"));
    client::Settings settings;
    settings.timeout = std::chrono::milliseconds(60'000);
    const auto deadline = Clock::now() + settings.timeout;
    const auto outcomes = client::request_all(
        settings, {{quiet.endpoint(), Get("/status")}, {leader.endpoint(), Get("/status")}},
        deadline,
        [](const client::Response& r) { return r.document.value("role", "") == "leader"; });
    CHECK(Clock::now() < deadline);  // the silent node was not waited for
    REQUIRE(outcomes.size() == 2);
    REQUIRE(outcomes[0].error.has_value());
    CHECK(outcomes[0].error->kind() == client::ErrorKind::Unreachable);
    REQUIRE(outcomes[1].response.has_value());
    CHECK(outcomes[1].response->status == 200);
}

TEST_CASE("the watch stream: one call per line, keep-alives skipped, stopped by the callback",
          "[client]") {
    FakeAdmin node;
    Canned stream;
    stream.stream = true;
    stream.lines = {R"({"term":1})", "", R"({"term":2})", R"({"term":3})"};
    stream.end_stream = false;
    node.on("GET /leadership?watch=1", stream);
    std::vector<std::string> lines;
    bool streaming = false;
    client::WatchOptions options;
    options.silence = std::chrono::milliseconds(60'000);
    const auto answer = client::watch(
        client::Settings{}, node.endpoint(), options,
        [&](const std::string& line) {
            lines.push_back(line);
            return lines.size() < 2;
        },
        streaming);
    CHECK_FALSE(answer.has_value());
    CHECK(streaming);
    CHECK(lines == std::vector<std::string>{R"({"term":1})", R"({"term":2})"});
}

TEST_CASE("the watch stream ends: the end, silence and a refusal are told apart", "[client]") {
    FakeAdmin node;
    Canned ended;
    ended.stream = true;
    ended.lines = {R"({"term":1})"};
    node.on("GET /leadership?watch=1", ended);
    Canned held;
    held.stream = true;
    held.end_stream = false;
    node.on("GET /held?watch=1", held);
    node.on("GET /held", Silent());  // the snapshot asked after half the silence
    Canned unauthorized = Ok(R"({"error":"unauthorized"})");
    unauthorized.status = 401;
    node.on("GET /refused?watch=1", unauthorized);
    client::WatchOptions options;
    options.silence = std::chrono::milliseconds(60'000);
    bool streaming = false;
    const auto all = [](const std::string&) { return true; };
    const auto ended_error =
        ErrorOf([&] { client::watch({}, node.endpoint(), options, all, streaming); });
    CHECK_THAT(ended_error.what(), Catch::EndsWith("the watch stream ended"));
    CHECK(streaming);
    options.target = "/held?watch=1";
    options.ping_target = "/held";
    options.silence = std::chrono::milliseconds(400);
    const auto silent_error =
        ErrorOf([&] { client::watch({}, node.endpoint(), options, all, streaming); });
    CHECK_THAT(silent_error.what(), Catch::EndsWith("silent for 400ms"));
    CHECK(node.count("GET", "/held") == 1);
    options.target = "/refused?watch=1";
    bool refused_streaming = false;
    const auto refused = client::watch({}, node.endpoint(), options, all, refused_streaming);
    REQUIRE(refused.has_value());
    CHECK(refused->status == 401);
    CHECK_FALSE(refused_streaming);
}

namespace {

/// A cluster CA and a certificate for 127.0.0.1 in a fresh directory, removed at the end.
struct TestCa {
    std::filesystem::path dir;
    TestCa() {
        dir = std::filesystem::temp_directory_path() /
              ("conclave-client-ca-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        REQUIRE_FALSE(certs::create_ca(dir).has_value());
        REQUIRE_FALSE(certs::create_node(dir, "n1", {"127.0.0.1"}).has_value());
    }
    ~TestCa() { std::filesystem::remove_all(dir); }
    /// With `client_certificates`, the server asks for a client certificate signed by the CA.
    std::shared_ptr<boost::asio::ssl::context> server(bool client_certificates = false) const {
        namespace ssl = boost::asio::ssl;
        auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
        context->use_certificate_chain_file((dir / "n1.pem").string());
        context->use_private_key_file((dir / "n1.key").string(), ssl::context::pem);
        if (client_certificates) {
            context->load_verify_file((dir / "ca.pem").string());
            context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
        }
        return context;
    }
};

}  // namespace

TEST_CASE("HTTPS: verified with the cluster CA, the token sent; plain HTTP to it refused",
          "[client]") {
    const TestCa ca;
    FakeAdmin node(ca.server());
    node.on("GET /status", Ok(R"({"id":"n1"})"));
    client::Settings settings;
    settings.tls = client::make_tls_context((ca.dir / "ca.pem").string(), "--cacert");
    settings.token = "t0ken";
    const auto reply = client::request(settings, node.endpoint(), Get("/status"));
    CHECK(reply.document["id"] == "n1");
    CHECK(node.seen().back().authorization == "Bearer t0ken");

    client::Settings plain;  // no CA: the port is found to speak TLS, nothing is sent
    plain.token = "t0ken";
    const auto refused = ErrorOf([&] { client::request(plain, node.endpoint(), Get("/status")); });
    CHECK(refused.kind() == client::ErrorKind::Refused);
    CHECK_THAT(refused.what(), Catch::Contains("this endpoint speaks HTTPS"));
    for (const auto& seen : node.seen()) {
        CHECK((seen.authorization != "Bearer t0ken" || seen.target == "/status"));
    }
    const auto missing = ErrorOf([&] { client::make_tls_context("/nonexistent.pem", "--cacert"); });
    CHECK(missing.kind() == client::ErrorKind::Refused);
    CHECK_THAT(missing.what(), Catch::StartsWith("--cacert /nonexistent.pem: cannot load the CA"));
}

TEST_CASE("HTTPS: a certificate from another CA is refused", "[client]") {
    const TestCa ca;
    FakeAdmin node(ca.server());
    node.on("GET /status", Ok("{}"));
    const auto other = std::filesystem::temp_directory_path() /
                       ("conclave-client-other-" + std::to_string(::getpid()));
    std::filesystem::remove_all(other);
    std::filesystem::create_directories(other);
    REQUIRE_FALSE(certs::create_ca(other).has_value());
    client::Settings settings;
    settings.tls = client::make_tls_context((other / "ca.pem").string(), "--cacert");
    const auto e = ErrorOf([&] { client::request(settings, node.endpoint(), Get("/status")); });
    std::filesystem::remove_all(other);
    CHECK(e.kind() == client::ErrorKind::Unreachable);
    CHECK_THAT(e.what(), Catch::Contains("certificate verify failed"));
    CHECK(node.seen().empty());
}

TEST_CASE("HTTPS: a client certificate when the server asks for one", "[client]") {
    const TestCa ca;
    REQUIRE_FALSE(certs::create_node(ca.dir, "operator", {"127.0.0.1"}).has_value());
    FakeAdmin node(ca.server(/*client_certificates=*/true));
    node.on("GET /status", Ok("{}"));
    const std::string ca_file = (ca.dir / "ca.pem").string();
    client::Settings with;
    with.tls = client::make_tls_context(ca_file, "--cacert", (ca.dir / "operator.pem").string(),
                                        (ca.dir / "operator.key").string());
    CHECK(client::request(with, node.endpoint(), Get("/status")).status == 200);
    client::Settings without;
    without.tls = client::make_tls_context(ca_file, "--cacert");
    const auto e = ErrorOf([&] { client::request(without, node.endpoint(), Get("/status")); });
    CHECK(e.kind() == client::ErrorKind::Unreachable);
    CHECK(node.seen().size() == 1);
    const auto missing = ErrorOf(
        [&] { client::make_tls_context(ca_file, "--cacert", (ca.dir / "nope.pem").string()); });
    CHECK_THAT(missing.what(), Catch::Contains("cannot load the client certificate"));
}

namespace {

using Awaitable = boost::asio::awaitable<void>;

/// Runs the coroutine `work()` on a fresh io_context to its end (at most a minute), rethrowing
/// what it threw.
template <class Work>
void RunToEnd(Work work) {
    boost::asio::io_context io;
    bool done = false;
    std::exception_ptr failure;
    boost::asio::co_spawn(io, work(), [&](std::exception_ptr e) {
        done = true;
        failure = e;
    });
    io.run_for(std::chrono::seconds(60));
    REQUIRE(done);
    if (failure) {
        std::rethrow_exception(failure);
    }
}

/// Waits (at most 10 s) until the server has closed `n` connections.
Awaitable ClosedBy(const FakeAdmin& node, std::size_t n) {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
    for (int i = 0; i < 1000 && node.closed() < n; ++i) {
        timer.expires_after(std::chrono::milliseconds(10));
        co_await timer.async_wait(boost::asio::use_awaitable);
    }
    REQUIRE(node.closed() >= n);
}

client::Request Put(int i) {
    return {http::verb::post, "/metadata", R"({"key":"k)" + std::to_string(i) + R"("})", {}};
}

/// One request on `session`: its status. (Arguments of co_await are named variables: GCC 12
/// destroys some temporaries there twice.)
boost::asio::awaitable<unsigned> Status(client::Session& session, int i) {
    const client::Request request = Put(i);
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
    const client::Response reply = co_await session.request(request, deadline);
    co_return reply.status;
}

}  // namespace

TEST_CASE("a keep-alive session sends many requests over one connection, the token checked once",
          "[client][session]") {
    FakeAdmin node;
    node.keep_alive(100, /*announce=*/true);
    node.on("GET /healthz", Ok("{}"));
    node.on("POST /metadata", Ok(R"({"lsn":{"term":2,"counter":5}})"));
    client::Settings settings;
    settings.token = "s3cret";
    RunToEnd([&]() -> Awaitable {
        const auto executor = co_await boost::asio::this_coro::executor;
        client::Session session(executor, settings, node.endpoint());
        for (int i = 0; i < 20; ++i) {
            const client::Request request = Put(i);
            const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
            const client::Response reply = co_await session.request(request, deadline);
            CHECK(reply.status == 200);
            CHECK(reply.document["lsn"]["counter"] == 5);
        }
        CHECK(session.connections() == 1);
    });
    CHECK(node.count("POST", "/metadata") == 20);
    CHECK(node.count("GET", "/healthz") == 1);
    CHECK(node.accepted() == 2);  // the plain-HTTP check's connection, then one for all 20
    for (const auto& seen : node.seen()) {
        CHECK(seen.authorization == (seen.target == "/metadata" ? "Bearer s3cret" : ""));
    }
}

TEST_CASE("a keep-alive session reconnects after the server closed: announced, or while idle",
          "[client][session]") {
    FakeAdmin announced;
    announced.keep_alive(3, /*announce=*/true);  // "Connection: close" on the third answer
    announced.on("POST /metadata", Ok("{}"));
    FakeAdmin idle;
    idle.keep_alive(2, /*announce=*/false);  // closed after two, without a word
    idle.on("POST /metadata", Ok("{}"));
    RunToEnd([&]() -> Awaitable {
        const auto executor = co_await boost::asio::this_coro::executor;
        client::Session session(executor, {}, announced.endpoint());
        for (int i = 0; i < 7; ++i) {
            const unsigned status = co_await Status(session, i);
            CHECK(status == 200);
        }
        CHECK(session.connections() == 3);

        client::Session quiet(executor, {}, idle.endpoint());
        const unsigned status1 = co_await Status(quiet, 1);
        CHECK(status1 == 200);
        const unsigned status2 = co_await Status(quiet, 2);
        CHECK(status2 == 200);
        co_await ClosedBy(idle, 1);
        const unsigned status3 = co_await Status(quiet, 3);
        CHECK(status3 == 200);  // not an error
        CHECK(quiet.connections() == 2);
    });
    CHECK(announced.accepted() == 3);
    CHECK(announced.count("POST", "/metadata") == 7);
    CHECK(idle.accepted() == 2);
    CHECK(idle.count("POST", "/metadata") == 3);
}

TEST_CASE("a keep-alive session over HTTPS: one handshake, reopened after an idle close",
          "[client][session]") {
    const TestCa ca;
    FakeAdmin node(ca.server());
    node.keep_alive(3, /*announce=*/false);
    node.on("POST /metadata", Ok("{}"));
    client::Settings settings;
    settings.tls = client::make_tls_context((ca.dir / "ca.pem").string(), "--cacert");
    settings.token = "t0ken";
    RunToEnd([&]() -> Awaitable {
        const auto executor = co_await boost::asio::this_coro::executor;
        client::Session session(executor, settings, node.endpoint());
        for (int i = 0; i < 3; ++i) {
            const unsigned status = co_await Status(session, i);
            CHECK(status == 200);
        }
        CHECK(session.connections() == 1);
        co_await ClosedBy(node, 1);
        const unsigned status3 = co_await Status(session, 3);
        CHECK(status3 == 200);
        CHECK(session.connections() == 2);
    });
    CHECK(node.accepted() == 2);
    for (const auto& seen : node.seen()) {
        CHECK(seen.authorization == "Bearer t0ken");
    }
}

TEST_CASE("a keep-alive session pipelines requests; the rest after a closing answer come back",
          "[client][session]") {
    FakeAdmin node;
    node.keep_alive(3, /*announce=*/true);  // "Connection: close" on the third answer
    node.on("POST /metadata", [](const test::Seen& seen) {
        return Canned{200, seen.body, {}, false, false, {}, true};
    });
    RunToEnd([&]() -> Awaitable {
        const auto executor = co_await boost::asio::this_coro::executor;
        client::Session session(executor, {}, node.endpoint());
        std::vector<client::Request> batch;
        for (int i = 0; i < 5; ++i) {
            batch.push_back(Put(i));
        }
        const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
        const std::vector<client::Response> first = co_await session.pipeline(batch, deadline);
        REQUIRE(first.size() == 3);  // the third answer closed the connection
        for (int i = 0; i < 3; ++i) {
            CHECK(first[static_cast<std::size_t>(i)].document["key"] == "k" + std::to_string(i));
        }
        batch.erase(batch.begin(), batch.begin() + 3);
        const std::vector<client::Response> rest = co_await session.pipeline(batch, deadline);
        REQUIRE(rest.size() == 2);
        CHECK(rest[0].document["key"] == "k3");
        CHECK(rest[1].document["key"] == "k4");
        CHECK(session.connections() == 2);
    });
    CHECK(node.accepted() == 2);
    CHECK(node.count("POST", "/metadata") == 5);  // the two after the close were not processed
}
