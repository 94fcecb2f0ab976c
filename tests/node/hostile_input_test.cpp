// SPDX-License-Identifier: Apache-2.0
// Bad input never crashes anything: seeded random mutations of a config file, and random bytes
// sent to the admin HTTP server. Deterministic (fixed seeds) so that a failure reproduces.
#include <catch2/catch.hpp>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <random>

#include "admin/fake_admin_source.hpp"
#include "conclave/admin/admin_routes.hpp"
#include "conclave/node/cluster_config.hpp"

using namespace conclave::admin;
using namespace conclave::node;
using nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

const char* const kGoodConfig = R"({
  "cluster": "demo",
  "nodes": [
    {"id": "n1", "peer": "127.0.0.1:7101", "http": "127.0.0.1:8101"},
    {"id": "n2", "peer": "127.0.0.1:7102", "http": "127.0.0.1:8102"},
    {"id": "n3", "peer": "127.0.0.1:7103", "http": "127.0.0.1:8103"}
  ],
  "profile": "fast",
  "timing": {"heartbeat_ms": 200, "miss_count": 3, "max_random_wait_ms": 300},
  "scouting": true,
  "check_quorum": true,
  "data_dir": "/tmp/conclave/{id}",
  "tls": {"ca": "ca.pem", "cert": "cert.pem", "key": "key.pem"},
  "log": {"format": "json", "level": "info"}
})";

json RandomValue(std::mt19937_64& rng) {
    static const std::vector<json> kValues = {nullptr,
                                              true,
                                              false,
                                              0,
                                              -1,
                                              1.5,
                                              1e308,
                                              18446744073709551615ULL,
                                              -9223372036854775807LL,
                                              "",
                                              "x",
                                              "abc:0",
                                              "[::1]:1",
                                              "{id}",
                                              "{",
                                              std::string(300, 'z'),
                                              json::array(),
                                              json::object(),
                                              json::array({1, 2}),
                                              json{{"id", "n9"}}};
    return kValues[rng() % kValues.size()];
}

/// Replaces one randomly chosen value (at any depth) of `doc`, or deletes/adds a key.
void Mutate(json& doc, std::mt19937_64& rng) {
    json* node = &doc;
    while ((node->is_object() || node->is_array()) && !node->empty() && rng() % 3 != 0) {
        auto it = node->begin();
        std::advance(it, static_cast<long>(rng() % node->size()));
        node = &*it;
    }
    switch (rng() % 3) {
        case 0:
            *node = RandomValue(rng);
            break;
        case 1:
            if (node->is_object() && !node->empty()) {
                node->erase(node->begin().key());
            } else {
                *node = RandomValue(rng);
            }
            break;
        default:
            if (node->is_object()) {
                (*node)["extra"] = RandomValue(rng);
            } else if (node->is_array()) {
                node->push_back(RandomValue(rng));
            }
            break;
    }
}

}  // namespace

TEST_CASE("mutated configs give a ConfigError naming a field, never an exception", "[hostile]") {
    std::mt19937_64 rng(20261123);
    const json good = json::parse(kGoodConfig);
    int accepted = 0;
    for (int i = 0; i < 1000; ++i) {
        json doc = good;
        const int mutations = 1 + static_cast<int>(rng() % 3);
        for (int m = 0; m < mutations; ++m) {
            Mutate(doc, rng);
        }
        // An exception escaping here fails the test case.
        const ConfigResult result = parse_cluster_config(doc.dump(), "n2");
        if (auto* error = std::get_if<ConfigError>(&result)) {
            if (error->message.find(": ") == std::string::npos) {
                FAIL("no field named in \"" << error->message << "\" for " << doc.dump());
            }
        } else {
            accepted += 1;
            if (std::get<ClusterConfig>(result).elector.validate()) {
                FAIL("accepted an invalid elector config: " << doc.dump());
            }
        }
    }
    CHECK(accepted > 0);  // some mutations are harmless (e.g. a different level)
}

TEST_CASE("byte-level corruption of a config is reported as invalid JSON or a field", "[hostile]") {
    std::mt19937_64 rng(7);
    const std::string good = kGoodConfig;
    for (int i = 0; i < 1000; ++i) {
        std::string text = good;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) {
            text[rng() % text.size()] = static_cast<char>(rng() % 256);
        }
        if (rng() % 4 == 0) {
            text.resize(rng() % text.size());
        }
        const ConfigResult result = parse_cluster_config(text, "n1");
        if (auto* error = std::get_if<ConfigError>(&result); error && error->message.empty()) {
            FAIL("empty error message for " << text);
        }
    }
}

TEST_CASE("random bytes on the admin port get a 4xx or a close, and the server carries on",
          "[hostile]") {
    asio::io_context io;
    testing::FakeAdminSource source;
    AdminServerLimits limits;
    limits.request_timeout = std::chrono::milliseconds(300);
    AdminServer server(io, limits);
    register_admin_routes(server, source);
    REQUIRE_FALSE(server.listen("127.0.0.1", 0));
    const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), server.port());

    std::mt19937_64 rng(99);
    constexpr int kClients = 40;
    struct Probe {
        explicit Probe(asio::io_context& context) : socket(context) {}
        tcp::socket socket;
        std::string bytes;
        beast::flat_buffer buffer;
        http::response<http::string_body> response;
        beast::error_code error;
        bool done = false;
    };
    std::vector<std::unique_ptr<Probe>> probes;
    for (int i = 0; i < kClients; ++i) {
        auto probe = std::make_unique<Probe>(io);
        const std::size_t size = 1 + rng() % 600;
        for (std::size_t b = 0; b < size; ++b) {
            probe->bytes += static_cast<char>(rng() % 256);
        }
        if (i % 2 == 0) {
            // Half start like a request, so the parser gets past the request line.
            probe->bytes = "GET /status HTTP/1.1\r\n" + probe->bytes;
        }
        probe->bytes += "\r\n\r\n";
        Probe* p = probe.get();
        p->socket.async_connect(endpoint, [p](beast::error_code ec) {
            if (ec) {
                p->error = ec;
                p->done = true;
                return;
            }
            asio::async_write(p->socket, asio::buffer(p->bytes),
                              [p](beast::error_code write_ec, std::size_t) {
                                  if (write_ec) {
                                      p->error = write_ec;
                                      p->done = true;
                                      return;
                                  }
                                  http::async_read(p->socket, p->buffer, p->response,
                                                   [p](beast::error_code read_ec, std::size_t) {
                                                       p->error = read_ec;
                                                       p->done = true;
                                                   });
                              });
        });
        probes.push_back(std::move(probe));
    }
    const auto all_done = [&] {
        return std::all_of(probes.begin(), probes.end(), [](const auto& p) { return p->done; });
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!all_done() && std::chrono::steady_clock::now() < deadline) {
        io.run_one_for(std::chrono::milliseconds(20));
    }
    REQUIRE(all_done());
    for (const auto& p : probes) {
        if (!p->error) {
            INFO(p->response.body());
            CHECK(p->response.result_int() >= 400);
            CHECK(p->response.result_int() < 500);
            CHECK(json::parse(p->response.body()).contains("error"));
        }
    }

    // Still serving.
    bool done = false;
    tcp::socket socket(io);
    http::response<http::string_body> response;
    beast::flat_buffer buffer;
    const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    socket.async_connect(endpoint, [&](beast::error_code ec) {
        REQUIRE_FALSE(ec);
        asio::async_write(socket, asio::buffer(request), [&](beast::error_code, std::size_t) {
            http::async_read(socket, buffer, response,
                             [&](beast::error_code, std::size_t) { done = true; });
        });
    });
    const auto second_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done && std::chrono::steady_clock::now() < second_deadline) {
        io.run_one_for(std::chrono::milliseconds(20));
    }
    REQUIRE(done);
    CHECK(response.result_int() == 200);
}
