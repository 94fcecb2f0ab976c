// Admin API attacks of issue 15 (finding 5: CSRF / DNS rebinding / unauthenticated writes;
// finding 6: idle sockets on the admin port) and conclaved's secure-by-default start-up checks.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "conclave/node/admin_server.hpp"
#include "conclave/node/cli.hpp"
#include "conclave/node/security.hpp"

using namespace conclave::node;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Response = http::response<http::string_body>;

namespace {

constexpr std::chrono::seconds kBound{5};
const std::string kToken = "tok-0123456789abcdef0123456789abcdef";

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

struct Fixture {
    explicit Fixture(bool open_reads = true, AdminServerLimits limits = {})
        : server(io, limits, security(open_reads)) {
        server.route("GET", "/healthz", [](const AdminRequest&) {
            return json_response(200, {{"healthy", true}});
        });
        server.route("POST", "/step-down", [this](const AdminRequest&) {
            ++step_downs;
            return json_response(200, {{"accepted", true}});
        });
        REQUIRE_FALSE(server.listen("127.0.0.1", 0));
    }
    static AdminSecurity security(bool open_reads) {
        AdminSecurity s;
        s.allowed_hosts = {"127.0.0.1", "localhost", "::1", "node1.example"};
        s.token = kToken;
        s.open_reads = open_reads;
        return s;
    }
    /// One request on a fresh connection (from `source`); the status (0 when no response).
    unsigned Request(const std::string& raw, const std::string& source = "127.0.0.1") {
        tcp::socket socket(io);
        socket.open(tcp::v4());
        socket.bind(tcp::endpoint(asio::ip::make_address(source), 0));
        bool done = false;
        unsigned status = 0;
        beast::flat_buffer buffer;
        Response response;
        socket.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()),
                             [&](beast::error_code ec) {
                                 if (ec) {
                                     done = true;
                                     return;
                                 }
                                 asio::async_write(socket, asio::buffer(raw),
                                                   [&](beast::error_code ec2, std::size_t) {
                                                       if (ec2) {
                                                           done = true;
                                                           return;
                                                       }
                                                       http::async_read(
                                                           socket, buffer, response,
                                                           [&](beast::error_code ec3, std::size_t) {
                                                               if (!ec3) {
                                                                   status = response.result_int();
                                                               }
                                                               done = true;
                                                           });
                                                   });
                             });
        REQUIRE(RunUntil(io, [&] { return done; }));
        return status;
    }
    asio::io_context io;
    AdminServer server;
    int step_downs = 0;
};

std::string Post(const std::string& headers, const std::string& body = "") {
    return "POST /step-down HTTP/1.1\r\n" + headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
           body;
}

const std::string kAuth = "Authorization: Bearer " + kToken + "\r\n";

}  // namespace

TEST_CASE("finding 5: cross-site, rebinding and unauthenticated admin writes are refused") {
    Fixture f;
    // DNS rebinding: the browser sends the attacker's name as Host.
    CHECK(f.Request(Post("Host: attacker.example\r\n" + kAuth)) == 403);
    // CSRF: a page on another origin posts to localhost.
    CHECK(f.Request(Post("Host: localhost\r\nOrigin: http://evil.example\r\n" + kAuth)) == 403);
    CHECK(f.Request(Post("Host: localhost\r\nOrigin: null\r\n" + kAuth)) == 403);
    CHECK(f.server.stats().forbidden == 3);
    // No token, wrong token, a token of the right length but different bytes.
    CHECK(f.Request(Post("Host: localhost\r\n")) == 401);
    CHECK(f.Request(Post("Host: localhost\r\nAuthorization: Bearer nope\r\n")) == 401);
    std::string wrong = kToken;
    wrong.back() = 'X';
    CHECK(f.Request(Post("Host: localhost\r\nAuthorization: Bearer " + wrong + "\r\n")) == 401);
    CHECK(f.server.stats().unauthorized == 3);
    // A form-encodable body (text/plain: no CORS preflight) is refused.
    CHECK(f.Request(Post("Host: localhost\r\nContent-Type: text/plain\r\n" + kAuth, "{}")) == 415);
    CHECK(f.Request(Post("Host: localhost\r\n" + kAuth, "{}")) == 415);
    CHECK(f.server.stats().unsupported_media == 2);
    CHECK(f.step_downs == 0);
    // Canary: the well-formed request from a same-origin client with the token is served.
    CHECK(f.Request(Post("Host: localhost:8101\r\nOrigin: http://localhost:8101\r\n"
                         "Content-Type: application/json\r\n" +
                             kAuth,
                         "{}")) == 200);
    CHECK(f.Request(Post("Host: node1.example\r\n" + kAuth)) == 200);
    CHECK(f.step_downs == 2);
    // Reads stay open by default (Host still checked).
    CHECK(f.Request("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:8101\r\n\r\n") == 200);
    CHECK(f.Request("GET /healthz HTTP/1.1\r\nHost: rebind.example\r\n\r\n") == 403);
}

TEST_CASE("admin reads can require the token too") {
    Fixture f(/*open_reads=*/false);
    CHECK(f.Request("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n") == 401);
    CHECK(f.Request("GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + kAuth + "\r\n") == 200);
}

TEST_CASE("finding 6: /healthz answers while 200 idle sockets are open; idle ones are closed") {
    AdminServerLimits limits;
    limits.idle_timeout = std::chrono::milliseconds(1000);  // conclaved: admin.idle_timeout_ms
    Fixture f(/*open_reads=*/true, limits);
    const auto opened = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<tcp::socket>> idle;
    for (int i = 0; i < 200; ++i) {
        auto s = std::make_unique<tcp::socket>(f.io);
        s->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), f.server.port()));
        idle.push_back(std::move(s));
        f.io.poll();  // let the server accept as we go (the listen backlog may be small)
    }
    // The server holds at most max_connections_per_source (16) of them; the rest are closed.
    REQUIRE(RunUntil(f.io, [&] { return f.server.stats().connections_accepted == 200; }));
    CHECK(f.server.stats().connections_refused == 200 - 16);
    CHECK(f.server.stats().connections_active == 16);
    // A well-behaved client elsewhere is served at once, while the idle sockets are still open.
    CHECK(f.Request("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", "127.0.0.2") == 200);
    CHECK(f.server.stats().idle_timeouts == 0);
    // After the idle deadline the server has closed the 16 it held (each sees end of stream)...
    REQUIRE(RunUntil(f.io, [&] { return f.server.stats().connections_active == 0; }));
    CHECK(std::chrono::steady_clock::now() - opened >= limits.idle_timeout);
    CHECK(f.server.stats().idle_timeouts == 16);
    std::size_t closed_by_server = 0;
    for (auto& s : idle) {
        boost::system::error_code ec;
        std::array<char, 1> byte{};
        s->non_blocking(true);
        s->read_some(asio::buffer(byte), ec);
        closed_by_server += ec == asio::error::eof || ec == asio::error::connection_reset ? 1U : 0U;
    }
    CHECK(closed_by_server == 200);
    // ... so the same host gets its slots back.
    CHECK(f.Request("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n") == 200);
}

namespace {

struct TempFiles {
    TempFiles() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "conclave-sec-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        dir = pattern;
    }
    ~TempFiles() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }
    std::string write(const std::string& name, const std::string& text, mode_t mode) {
        const auto path = (dir / name).string();
        std::ofstream(path) << text;
        ::chmod(path.c_str(), mode);
        return path;
    }
    std::filesystem::path dir;
};

struct Prepared {
    int status = -1;
    std::string err;
};

Prepared Prepare(const std::string& config_path) {
    std::ostringstream out;
    std::ostringstream err;
    auto result = prepare_daemon({"--config", config_path, "--node-id", "n1"}, out, err);
    Prepared p;
    p.err = err.str();
    p.status =
        std::holds_alternative<StartupReady>(result) ? 0 : std::get<StartupExit>(result).status;
    return p;
}

std::string Config(const std::string& extra) {
    return R"({"cluster": "demo", "profile": "fast", "data_dir": "/tmp/x/{id}",
      "nodes": [{"id": "n1", "peer": "127.0.0.1:7101", "http": "127.0.0.1:8101"}])" +
           extra + "}";
}

}  // namespace

TEST_CASE("conclaved refuses to start unauthenticated unless the config says insecure") {
    TempFiles t;
    const std::string secret(40, 's');
    const auto good_secret = t.write("secret", secret + "\n", 0600);
    const auto good_token = t.write("token", kToken, 0600);
    const auto secure = [&](const std::string& secret_path) {
        return Config(R"(, "secret_file": ")" + secret_path + R"(", "admin": {"token_file": ")" +
                      good_token + "\"}");
    };

    const auto none = Prepare(t.write("none.json", Config(""), 0644));
    CHECK(none.status == kExitUsage);
    CHECK(none.err.find("insecure: peers would not authenticate") != std::string::npos);

    const auto no_token = Prepare(
        t.write("no-token.json", Config(R"(, "secret_file": ")" + good_secret + "\""), 0644));
    CHECK(no_token.status == kExitUsage);
    CHECK(no_token.err.find("admin.token_file") != std::string::npos);

    CHECK(Prepare(t.write("insecure.json", Config(R"(, "insecure": true)"), 0644)).status == 0);
    CHECK(Prepare(t.write("secure.json", secure(good_secret), 0644)).status == 0);

    const auto readable =
        Prepare(t.write("readable.json", secure(t.write("readable-secret", secret, 0644)), 0644));
    CHECK(readable.status == kExitUsage);
    CHECK(readable.err.find("accessible by group or others") != std::string::npos);

    const auto short_secret =
        Prepare(t.write("short.json", secure(t.write("short-secret", "abc\n", 0600)), 0644));
    CHECK(short_secret.status == kExitUsage);
    CHECK(short_secret.err.find("fewer than 32") != std::string::npos);

    const auto empty =
        Prepare(t.write("empty.json", secure(t.write("empty-secret", "", 0600)), 0644));
    CHECK(empty.err.find("is empty") != std::string::npos);

    const auto missing = Prepare(t.write("missing.json", secure((t.dir / "nope").string()), 0644));
    CHECK(missing.status == kExitUsage);
    CHECK(missing.err.find("secret_file: cannot read") != std::string::npos);
}

TEST_CASE("the insecure banner names what is open") {
    auto parsed = parse_cluster_config(Config(R"(, "insecure": true)"), "n1");
    REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
    const auto banner = insecure_banner(std::get<ClusterConfig>(parsed));
    REQUIRE(banner);
    CHECK(banner->find("INSECURE MODE") == 0);
    CHECK(banner->find("can join as any node") != std::string::npos);
    auto secure = parse_cluster_config(Config(""), "n1");
    REQUIRE(std::holds_alternative<ClusterConfig>(secure));
    CHECK_FALSE(insecure_banner(std::get<ClusterConfig>(secure)));
}

TEST_CASE("finding 7: contradicting limits are refused, naming both fields") {
    CHECK_FALSE(check_limits(1024, 64 * 1024, 1 << 20));
    const auto error = check_limits(1024, 2 << 20, 1 << 20);
    REQUIRE(error);
    CHECK(error->find("max_value_bytes (2097152)") != std::string::npos);
    CHECK(error->find("max_frame_bytes (1048576)") != std::string::npos);
}
