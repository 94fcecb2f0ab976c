// SPDX-License-Identifier: Apache-2.0
// A 3-node cluster of Nodes on 127.0.0.1 in one process (one io_context) with the metadata log,
// and an HTTP client for their admin servers: shared by the metadata log's tests
// (metadata_test.cpp) and membership's (membership_test.cpp). Every wait is bounded.
#pragma once

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "conclave/node/node.hpp"
#include "support/active_leader.hpp"
#include "support/loopback.hpp"

namespace conclave::test::node_cluster {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using conclave::admin::MetadataProposeResult;
using conclave::node::ClusterConfig;
using conclave::node::Node;
using conclave::replication::Entry;
using nlohmann::json;

// The bound of every wait: generous, and three times that in a sanitizer build (GCC defines
// these), whose nodes run several times slower; a wait that holds ends as soon as it holds.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::chrono::seconds kBound{45};
#else
constexpr std::chrono::seconds kBound{15};
#endif

/// run_until with the cluster tests' bound.
inline bool run_cluster_until(asio::io_context& io, const std::function<bool()>& done) {
    return conclave::test::run_until(io, done, kBound);
}

struct HttpResult {
    unsigned status = 0;
    std::string location;
    json body;
};

/// One request on a fresh connection, on the nodes' io_context.
inline HttpResult request(asio::io_context& io, std::uint16_t port, http::verb verb,
                          const std::string& target, const std::string& body = "",
                          const std::string& token = "") {
    auto stream = std::make_shared<beast::tcp_stream>(io);
    auto req = std::make_shared<http::request<http::string_body>>(verb, target, 11);
    req->set(http::field::host, "127.0.0.1");
    if (!body.empty()) {
        req->set(http::field::content_type, "application/json");
    }
    if (!token.empty()) {
        req->set(http::field::authorization, "Bearer " + token);
    }
    req->body() = body;
    req->prepare_payload();
    auto buffer = std::make_shared<beast::flat_buffer>();
    auto res = std::make_shared<http::response<http::string_body>>();
    bool done = false;
    stream->async_connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
        [&, stream, req, buffer, res](beast::error_code ec) {
            if (ec) {
                done = true;
                return;
            }
            http::async_write(
                *stream, *req, [&, stream, buffer, res](beast::error_code wec, std::size_t) {
                    if (wec) {
                        done = true;
                        return;
                    }
                    http::async_read(*stream, *buffer, *res,
                                     [&](beast::error_code, std::size_t) { done = true; });
                });
        });
    REQUIRE(run_cluster_until(io, [&] { return done; }));
    HttpResult out;
    out.status = res->result_int();
    out.location = std::string((*res)[http::field::location]);
    out.body = json::parse(res->body(), nullptr, false);
    return out;
}

struct Cluster {
    asio::io_context io;
    std::filesystem::path root;
    std::string config_text;
    std::vector<std::unique_ptr<Node>> nodes{3};
    std::vector<std::vector<Entry>> seen{3};  // non-sync-point entries each subscriber got
    /// Adjusts a node's options before it starts (fault injection).
    std::function<void(std::size_t, conclave::node::NodeOptions&)> customize;

    /// `metadata`: the config's "metadata" section; `extra_fields`: more top-level fields
    /// (",\"admin\": {...}"); `name` names the data directory.
    explicit Cluster(
        const std::string& metadata = R"({"fsync": "batched", "propose_timeout_ms": 3000})",
        const std::string& extra_fields = "", const std::string& name = "metadata") {
        root = std::filesystem::temp_directory_path() /
               ("conclave-" + name + "-test-" + std::to_string(::getpid()));
        std::filesystem::remove_all(root);
        // All six ports at once, held until each is known: one at a time, the kernel may hand
        // out the same port twice and the configuration is refused as naming it twice.
        const std::vector<std::uint16_t> ports = conclave::test::free_ports(io, 6);
        std::string nodes_json;
        for (std::size_t i = 1; i <= 3; ++i) {
            nodes_json += std::string(i > 1 ? "," : "") + R"({"id": "n)" + std::to_string(i) +
                          R"(", "peer": "127.0.0.1:)" + std::to_string(ports.at(2 * i - 2)) +
                          R"(", "http": "127.0.0.1:)" + std::to_string(ports.at(2 * i - 1)) +
                          R"("})";
        }
        config_text = R"({"cluster": "meta", "profile": "fast", "nodes": [)" + nodes_json +
                      R"(], "data_dir": ")" + root.string() + R"(/{id}", "metadata": )" + metadata +
                      extra_fields + "}";
    }
    ~Cluster() {
        for (auto& n : nodes) {
            n.reset();
        }
        std::filesystem::remove_all(root);
    }

    void start(std::size_t i) {
        auto parsed =
            conclave::node::parse_cluster_config(config_text, "n" + std::to_string(i + 1));
        if (const auto* error = std::get_if<conclave::node::ConfigError>(&parsed)) {
            FAIL("configuration refused: " << error->message);
        }
        start(i, std::get<ClusterConfig>(parsed));
    }

    /// Starts nodes[i] from `config` (a node beyond the three, e.g. one that joined, grows the
    /// vectors), with a subscriber that fills seen[i].
    void start(std::size_t i, const ClusterConfig& config) {
        if (i >= nodes.size()) {
            nodes.resize(i + 1);
            seen.resize(i + 1);
        }
        conclave::node::NodeOptions options;
        options.logger = std::make_shared<spdlog::logger>(
            "metadata-test", std::make_shared<spdlog::sinks::null_sink_mt>());
        options.seed = 100 + i;
        if (customize) {
            customize(i, options);
        }
        nodes[i] = std::make_unique<Node>(io, config, options);
        seen[i].clear();
        nodes[i]->subscribe_committed([this, i](const Entry& e) {
            if (!conclave::replication::is_sync_point(e)) {
                seen[i].push_back(e);
            }
        });
        REQUIRE_FALSE(nodes[i]->start());
    }

    void start_all() {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            start(i);
        }
    }

    /// Stops every node still running.
    void stop_all() {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (nodes[i]) {
                stop(i);
            }
        }
    }

    void stop(std::size_t i) {
        bool done = false;
        nodes[i]->stop([&] { done = true; });
        REQUIRE(run_cluster_until(io, [&] { return done; }));
        nodes[i].reset();
    }

    test::RunClusterUntil runner() {
        return [this](const std::function<bool()>& done) { return run_cluster_until(io, done); };
    }

    /// Index of the node whose log is an ACTIVE leader, once there is one.
    std::size_t active_leader() {
        const auto leader = test::wait_for_active_leader(nodes, runner());
        REQUIRE(leader);
        return *leader;
    }

    /// A write that must be acknowledged: sent to the active leader of the moment, again while
    /// the answer is "nothing appended, the leadership is moving" (support/active_leader.hpp), or
    /// also "outcome unknown" when `twice_is_fine` (the entry may then be in the log twice).
    /// Returns the committed LSN's answer; the node that took it is in `leader` when given.
    MetadataProposeResult commit(const std::string& key, const std::string& value,
                                 std::size_t* leader = nullptr, bool twice_is_fine = false) {
        const auto write = test::write_to_active_leader(nodes, runner(), key, value, twice_is_fine);
        INFO(key << ": " << (write.result ? write.result->detail : std::string("no answer")));
        REQUIRE(write.ok());
        if (leader != nullptr) {
            *leader = *write.node;
        }
        return *write.result;
    }

    MetadataProposeResult propose(std::size_t i, const std::string& key, const std::string& value) {
        std::optional<MetadataProposeResult> result;
        nodes[i]->propose(key, value, [&](const MetadataProposeResult& r) { result = r; });
        REQUIRE(run_cluster_until(io, [&] { return result.has_value(); }));
        return *result;
    }

    std::uint16_t http_port(std::size_t i) const { return nodes[i]->http_port(); }
};

}  // namespace conclave::test::node_cluster
