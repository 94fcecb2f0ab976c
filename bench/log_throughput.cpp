// SPDX-License-Identifier: Apache-2.0
// log_throughput: commits per second and commit latency of the replicated metadata log through
// the embedding API (Node::propose), on a 3-node cluster in this process over loopback TCP.
// Each node runs on its own io_context and thread (as three daemons would); the proposer runs on
// the leader's thread and keeps `--window` proposals outstanding (a new one as each completes).
//
//   log_throughput [--entries N] [--window W] [--value-bytes B] [--fsync never,batched,always]
//                  [--dir PATH]
// Defaults: 100000 entries, window 256, 32-byte values, fsync "never,batched" (one run each).
// Profile "fast" with miss_count 30 (3 s): fsync runs on the io_context thread, and under
// "always" a burst of fsyncs can delay elector heartbeats past the fast profile's 300 ms.
// Data goes to a fresh temporary directory (or --dir), removed afterwards.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "conclave/drivers/log_driver.hpp"
#include "conclave/node/node.hpp"

namespace {

namespace asio = boost::asio;
using conclave::admin::MetadataProposeResult;
using conclave::node::ClusterConfig;
using conclave::node::Node;
using Clock = std::chrono::steady_clock;

struct Options {
    std::size_t entries = 100'000;
    std::size_t window = 256;
    std::size_t value_bytes = 32;
    std::vector<std::string> fsync = {"never", "batched"};
    std::filesystem::path dir;
};

struct Result {
    double seconds = 0;
    std::size_t committed = 0;
    std::size_t failed = 0;
    std::vector<double> latencies_us;
    std::uint64_t leader_fsyncs = 0;
    std::string first_failure;
};

std::uint16_t free_port() {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    return a.local_endpoint().port();
}

template <typename T>
T on_thread(asio::io_context& io, std::function<T()> f) {
    std::promise<T> p;
    asio::post(io, [&] { p.set_value(f()); });
    return p.get_future().get();
}

Result run(const Options& o, const std::string& fsync) {
    const std::filesystem::path root =
        (o.dir.empty() ? std::filesystem::temp_directory_path() : o.dir) /
        ("conclave-log-bench-" + std::to_string(::getpid()) + "-" + fsync);
    std::filesystem::remove_all(root);
    std::string nodes_json;
    for (int i = 1; i <= 3; ++i) {
        nodes_json += std::string(i > 1 ? "," : "") + R"({"id": "n)" + std::to_string(i) +
                      R"(", "peer": "127.0.0.1:)" + std::to_string(free_port()) +
                      R"(", "http": "127.0.0.1:)" + std::to_string(free_port()) + R"("})";
    }
    const std::string text =
        R"({"cluster": "bench", "profile": "fast", "timing": {"miss_count": 30}, "nodes": [)" +
        nodes_json + R"(], "data_dir": ")" + root.string() + R"(/{id}", "metadata": {"fsync": ")" +
        fsync + R"(", "propose_timeout_ms": 30000)" +
        (fsync == "never" ? R"(, "unsafe_no_fsync": true)" : "") + "}}";
    std::vector<std::unique_ptr<asio::io_context>> ios;
    std::vector<std::unique_ptr<Node>> nodes;
    for (int i = 0; i < 3; ++i) {
        auto parsed = conclave::node::parse_cluster_config(text, "n" + std::to_string(i + 1));
        if (auto* error = std::get_if<conclave::node::ConfigError>(&parsed)) {
            throw std::runtime_error(error->message);
        }
        conclave::node::NodeOptions options;
        options.admin_http = false;
        options.logger = std::make_shared<spdlog::logger>(
            "bench", std::make_shared<spdlog::sinks::null_sink_mt>());
        ios.push_back(std::make_unique<asio::io_context>());
        nodes.push_back(
            std::make_unique<Node>(*ios.back(), std::get<ClusterConfig>(parsed), options));
        if (auto error = nodes.back()->start()) {
            throw std::runtime_error(*error);
        }
    }
    std::vector<std::thread> threads;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
    for (auto& io : ios) {
        guards.push_back(asio::make_work_guard(*io));
        threads.emplace_back([&io = *io] { io.run(); });
    }

    // Wait for an ACTIVE leader.
    std::size_t leader = 3;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (leader == 3 && Clock::now() < deadline) {
        for (std::size_t i = 0; i < 3 && leader == 3; ++i) {
            const bool active = on_thread<bool>(*ios[i], [&n = *nodes[i]] {
                const auto s = n.status();
                return s.log && s.log->leader_status == "active";
            });
            if (active) {
                leader = i;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (leader == 3) {
        throw std::runtime_error("no active leader within 20 s");
    }

    // The proposer, on the leader's thread.
    Result result;
    result.latencies_us.reserve(o.entries);
    const std::string value(o.value_bytes, 'v');
    std::size_t issued = 0;
    std::promise<void> finished;
    Node& node = *nodes[leader];
    std::function<void()> issue = [&] {
        const std::size_t k = issued++;
        const auto started = Clock::now();
        node.propose(
            "key/" + std::to_string(k % 1000), value, [&, started](const MetadataProposeResult& r) {
                if (r.ok()) {
                    ++result.committed;
                    result.latencies_us.push_back(
                        std::chrono::duration<double, std::micro>(Clock::now() - started).count());
                } else if (result.failed++ == 0) {
                    result.first_failure = std::string(to_string(r.status)) + ": " + r.detail;
                }
                if (issued < o.entries) {
                    issue();
                } else if (result.committed + result.failed == o.entries) {
                    finished.set_value();
                }
            });
    };
    const auto t0 = Clock::now();
    asio::post(*ios[leader], [&] {
        for (std::size_t w = 0; w < std::min(o.window, o.entries); ++w) {
            issue();
        }
    });
    finished.get_future().wait();
    result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    result.leader_fsyncs = on_thread<std::uint64_t>(
        *ios[leader], [&] { return static_cast<std::uint64_t>(node.log_driver()->fsyncs()); });

    for (std::size_t i = 0; i < 3; ++i) {
        asio::post(*ios[i], [&n = *nodes[i]] { n.stop(); });
    }
    for (auto& g : guards) {
        g.reset();
    }
    for (auto& t : threads) {
        t.join();
    }
    nodes.clear();
    std::filesystem::remove_all(root);
    return result;
}

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) {
        return 0;
    }
    const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    std::string command = argv[0];
    for (int i = 1; i < argc; ++i) {
        command += std::string(" ") + argv[i];
    }
    CLI::App app("log_throughput", "log_throughput");
    app.add_option("--entries", o.entries)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40));
    app.add_option("--window", o.window)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40));
    app.add_option("--value-bytes", o.value_bytes);
    app.add_option("--dir", o.dir);
    app.add_option("--fsync", o.fsync)
        ->delimiter(',')
        ->check(CLI::IsMember({"never", "batched", "always"}));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad command line: the reason and 2
    }
    spdlog::set_level(spdlog::level::warn);
    std::printf("command: %s\n", command.c_str());
    std::printf(
        "3 nodes in one process (a thread and io_context each), loopback TCP, "
        "%zu entries of %zu-byte values, window %zu\n",
        o.entries, o.value_bytes, o.window);
    for (const std::string& fsync : o.fsync) {
        Result r = run(o, fsync);
        std::printf(
            "fsync=%-7s commits=%zu failed=%zu time=%.2fs commits/s=%.0f p50=%.2fms "
            "p99=%.2fms leader_fsyncs=%llu\n",
            fsync.c_str(), r.committed, r.failed, r.seconds,
            static_cast<double>(r.committed) / r.seconds, percentile(r.latencies_us, 0.50) / 1000,
            percentile(r.latencies_us, 0.99) / 1000,
            static_cast<unsigned long long>(r.leader_fsyncs));
        if (r.failed > 0) {
            std::printf("  first failure: %s\n", r.first_failure.c_str());
        }
        std::fflush(stdout);
    }
    return 0;
}
