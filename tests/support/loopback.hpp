// SPDX-License-Identifier: Apache-2.0
// Test support for Nodes on 127.0.0.1 in one process: free ports, a bounded event loop, the
// cluster config text for N nodes, and a logger that discards everything. Used by the Node API
// tests (tests/node) and the broker example's test (tests/examples).
#pragma once

#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>
#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace conclave::test {

/// The first port of the kernel's ephemeral range (the source ports of outgoing connections).
inline std::uint16_t ephemeral_low() {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    unsigned low = 0;
    return range >> low && low > 1024 && low <= 65535 ? static_cast<std::uint16_t>(low) : 32768;
}

/// `count` distinct free TCP ports on 127.0.0.1 (all held open together while they are chosen,
/// so that none is handed out twice), picked at random below the ephemeral range: a node that
/// starts (or restarts) late must still find its port free, and the peers dialing it meanwhile,
/// or any other connection on the machine, would otherwise take it as a source port (a dial to
/// a local port nobody listens on can even connect to itself and hold it).
inline std::vector<std::uint16_t> free_ports(boost::asio::io_context& io, std::size_t count) {
    std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> held;
    std::vector<std::uint16_t> ports;
    const unsigned low = ephemeral_low();
    const unsigned floor = low > 12'000 ? 10'000 : 1'025;
    std::mt19937 rng(std::random_device{}());
    for (int attempt = 0; ports.size() < count; ++attempt) {
        if (attempt == 10'000) {
            throw std::runtime_error("no free port below the ephemeral range");
        }
        const auto port = static_cast<std::uint16_t>(floor + rng() % (low - floor));
        boost::system::error_code ec;
        auto acceptor = std::make_unique<boost::asio::ip::tcp::acceptor>(io);
        acceptor->open(boost::asio::ip::tcp::v4(), ec);
        if (!ec) {
            acceptor->bind({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
        }
        if (!ec) {
            acceptor->listen(boost::asio::socket_base::max_listen_connections, ec);
        }
        if (!ec) {  // else in use
            ports.push_back(port);
            held.push_back(std::move(acceptor));
        }
    }
    return ports;
}

/// Runs `io` until `done()` holds; false if that takes longer than `timeout`.
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        io.run_one_for(std::chrono::milliseconds(20));
    }
    return true;
}

/// A fresh (removed) directory under the system temp dir, unique to this process and `name`.
inline std::filesystem::path fresh_temp_dir(const std::string& name) {
    const auto dir =
        std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    return dir;
}

/// Config text (profile "fast") for `count` nodes with ids <id_prefix>0.. on 127.0.0.1: peer
/// ports are ports[0..count), HTTP ports ports[count..2*count); data in <data_root>/<id>.
inline std::string loopback_cluster_config(const std::string& cluster, const std::string& id_prefix,
                                           std::size_t count,
                                           const std::vector<std::uint16_t>& ports,
                                           const std::filesystem::path& data_root,
                                           const std::string& extra_fields = "") {
    std::string text = R"({"cluster": ")" + cluster + R"(", "profile": "fast", "nodes": [)";
    for (std::size_t i = 0; i < count; ++i) {
        text += (i ? "," : "") + std::string(R"({"id": ")") + id_prefix + std::to_string(i) +
                R"(", "peer": "127.0.0.1:)" + std::to_string(ports.at(i)) +
                R"(", "http": "127.0.0.1:)" + std::to_string(ports.at(count + i)) + R"("})";
    }
    text += R"(], "data_dir": ")" + (data_root / "{id}").string() + "\"" + extra_fields + "}";
    return text;
}

/// A logger that drops every record (keeps test output readable).
inline std::shared_ptr<spdlog::logger> quiet_logger(const std::string& name) {
    return std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::null_sink_mt>());
}

}  // namespace conclave::test
