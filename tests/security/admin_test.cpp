// SPDX-License-Identifier: Apache-2.0
// Admin API attacks (finding 5: CSRF / DNS rebinding / unauthenticated writes;
// finding 6: idle sockets on the admin port) and conclaved's secure-by-default start-up checks.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
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

#include "conclave/admin/admin_server.hpp"
#include "conclave/drivers/state_file.hpp"
#include "conclave/node/cli.hpp"
#include "conclave/node/data_dir_lock.hpp"
#include "conclave/node/security.hpp"

using namespace conclave::admin;
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
        // A stream that never ends (as GET /leadership?watch=1 does).
        server.route("GET", "/watch", [](const AdminRequest&) {
            AdminResponse response = json_response(200, {});
            response.stream = [](const std::shared_ptr<AdminStream>& stream) {
                stream->write("{}\n");
            };
            return response;
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

TEST_CASE("one strict Host header; an Origin on another port of this host is another site") {
    Fixture f;
    const std::string ok_type = "Content-Type: application/json\r\n" + kAuth;
    // Two Host headers (the first used to win), a Host that is not host[:port].
    CHECK(f.Request(Post("Host: localhost\r\nHost: attacker.example\r\n" + kAuth)) == 400);
    CHECK(f.Request(Post("Host: localhost:80x\r\n" + kAuth)) == 400);
    CHECK(f.Request(Post("Host: user@localhost\r\n" + kAuth)) == 400);
    // A page served by another local service (port 9999) posting to this node (port 8101).
    CHECK(f.Request(Post("Host: localhost:8101\r\nOrigin: http://localhost:9999\r\n" + ok_type,
                         "{}")) == 403);
    CHECK(f.Request(Post("Host: localhost:8101\r\nOrigin: https://localhost:8101\r\n" + ok_type,
                         "{}")) == 403);
    CHECK(f.step_downs == 0);
    // Same scheme, host and port: served (a missing port is the scheme's default).
    CHECK(f.Request(Post("Host: localhost:8101\r\nOrigin: http://localhost:8101\r\n" + ok_type,
                         "{}")) == 200);
    CHECK(f.Request(Post("Host: localhost\r\nOrigin: http://localhost:80\r\n" + ok_type, "{}")) ==
          200);
    CHECK(f.Request(Post("Host: [::1]:8101\r\nOrigin: http://[::1]:8101\r\n" + ok_type, "{}")) ==
          200);
    CHECK(f.step_downs == 3);
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

/// A connection from `source` to the fixture's server that sends `bytes` and then holds on.
std::unique_ptr<tcp::socket> Hold(Fixture& f, const std::string& source, const std::string& bytes) {
    auto s = std::make_unique<tcp::socket>(f.io);
    s->open(tcp::v4());
    s->bind(tcp::endpoint(asio::ip::make_address(source), 0));
    s->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), f.server.port()));
    if (!bytes.empty()) {
        asio::write(*s, asio::buffer(bytes));
    }
    f.io.poll();  // let the server accept as we go (the listen backlog may be small)
    return s;
}

}  // namespace

TEST_CASE(
    "streams, idle and slow connections from the client's own address never starve the "
    "token") {
    Fixture f(/*open_reads=*/true);
    std::vector<std::unique_ptr<tcp::socket>> held;
    // 16 watch streams (the per-source limit), 500 idle sockets and 64 slowloris requests from
    // 127.0.0.1 and three more addresses: the authorised client also connects from 127.0.0.1.
    for (int i = 0; i < 16; ++i) {
        held.push_back(Hold(f, "127.0.0.1", "GET /watch HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    }
    REQUIRE(RunUntil(f.io, [&] { return f.server.stats().requests == 16; }));
    for (int i = 0; i < 500; ++i) {
        held.push_back(Hold(f, "127.0.0.1", ""));
    }
    for (int i = 0; i < 64; ++i) {
        held.push_back(Hold(f, "127.0.0." + std::to_string(1 + i % 4),
                            "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "));
    }
    for (int i = 0; i < 5; ++i) {
        const auto started = std::chrono::steady_clock::now();
        CHECK(f.Request(Post("Host: localhost\r\n" + kAuth)) == 200);
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
    }
    CHECK(f.step_downs == 5);
    // Nothing without the token outgrows the limits: the oldest made room for the newest.
    CHECK(f.server.stats().connections_active <= 64 + 5);
    CHECK(f.server.stats().connections_refused >= 16 + 500 + 64 - 64);
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
    const std::string secret = "0123456789abcdef0123456789abcdef-secret";
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

TEST_CASE(
    "secrets, keys and the data directory must be this user's, in directories only it "
    "writes") {
    TempFiles t;
    const std::string secret = "0123456789abcdef0123456789abcdef-secret";
    const auto good_token = t.write("token", kToken, 0600);
    const auto with_secret = [&](const std::string& secret_path, const std::string& extra = "") {
        return Config(R"(, "secret_file": ")" + secret_path + R"(", "admin": {"token_file": ")" +
                      good_token + "\"}" + extra);
    };
    const auto refused = [&](const std::string& name, const std::string& config,
                             const std::string& expected) {
        const auto p = Prepare(t.write(name + ".json", config, 0644));
        INFO(name << ": " << p.err);
        CHECK(p.status == kExitUsage);
        CHECK(p.err.find(expected) != std::string::npos);
        CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);  // one line
    };
    // A directory others can write (mode 0777, not sticky): they could replace the secret.
    std::filesystem::create_directory(t.dir / "shared");
    ::chmod((t.dir / "shared").c_str(), 0777);
    refused("shared-dir", with_secret(t.write("shared/secret", secret, 0600)),
            "which group or others can write (mode 0777)");
    // Not a secret: 32 NUL bytes, a process's environment.
    refused("nul", with_secret(t.write("nul-secret", std::string(32, '\0'), 0600)),
            "control characters");
    refused("environ", with_secret("/proc/self/environ"), "'/proc/self/environ'");
    // A TLS key others can read.
    const auto ca = t.write("ca.pem", "x", 0644);
    const auto cert = t.write("cert.pem", "x", 0644);
    const auto key = t.write("key.pem", "x", 0644);
    refused("key",
            with_secret(t.write("secret", secret, 0600), R"(, "tls": {"ca": ")" + ca +
                                                             R"(", "cert": ")" + cert +
                                                             R"(", "key": ")" + key + "\"}"),
            "tls.key: '" + key + "' is accessible by group or others (mode 0644): chmod 600");
    ::chmod(key.c_str(), 0600);
    CHECK(Prepare(t.write("key-ok.json",
                          with_secret(t.dir / "secret", R"(, "tls": {"ca": ")" + ca +
                                                            R"(", "cert": ")" + cert +
                                                            R"(", "key": ")" + key + "\"}"),
                          0644))
              .status == 0);
    // The data directory: a symbolic link, or writable by others.
    const auto data_config = [&](const std::filesystem::path& dir) {
        std::string config = with_secret(t.dir / "secret");
        const std::string from = "/tmp/x/{id}";
        return config.replace(config.find(from), from.size(), dir.string());
    };
    std::filesystem::create_directory(t.dir / "real");
    ::chmod((t.dir / "real").c_str(), 0700);
    std::filesystem::create_directory_symlink(t.dir / "real", t.dir / "link");
    refused("data-link", data_config(t.dir / "link"), "is a symbolic link");
    refused("data-shared", data_config(t.dir / "shared"),
            "data_dir: '" + (t.dir / "shared").string() + "' is writable by group or others");
    CHECK(Prepare(t.write("data-ok.json", data_config(t.dir / "real"), 0644)).status == 0);
    if (::geteuid() == 0) {
        // Owned by another user (root can make one): the secret, and the data directory.
        const auto foreign = t.write("foreign-secret", secret, 0600);
        REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);
        refused("foreign", with_secret(foreign), "is owned by uid 65534");
        REQUIRE(::chown((t.dir / "real").c_str(), 65534, 65534) == 0);
        refused("data-foreign", data_config(t.dir / "real"), "is owned by uid 65534");
    } else {
        WARN("not root: the checks of files owned by another user are skipped");
    }
}

TEST_CASE("symbolic links planted in the data directory are not followed") {
    TempFiles t;
    const auto victim = t.write("victim", "keep me", 0600);
    const auto data = t.dir / "data";
    std::filesystem::create_directory(data);
    ::chmod(data.c_str(), 0700);
    std::filesystem::create_symlink(victim, data / "LOCK");
    std::filesystem::create_symlink(victim, data / "elector-state.json.tmp");
    const auto lock = DataDirLock::acquire(data);
    CHECK(std::holds_alternative<DataDirLock::Error>(lock));
    conclave::drivers::store_file_durably(data, "elector-state.json", "{}\n");
    std::ifstream in(victim);
    std::string text;
    std::getline(in, text);
    CHECK(text == "keep me");
    CHECK(std::filesystem::is_regular_file(
        std::filesystem::symlink_status(data / "elector-state.json")));
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
