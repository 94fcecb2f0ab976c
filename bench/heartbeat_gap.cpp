// SPDX-License-Identifier: Apache-2.0
// heartbeat_gap: how late the elector's heartbeats reach a follower while the leader's io thread
// also runs the metadata log (storage). 3 Nodes in this process over loopback
// TCP, each on its own io_context and thread, profile "fast" (heartbeat every 100 ms) with
// miss_count 30 so that a late heartbeat shows up as a gap instead of an election.
//
//   heartbeat_gap [--seconds S] [--read-entries N] [--value-bytes B] [--dir PATH]
//
// Phases, each printing the gaps between LeaderHeartbeat messages seen at one follower (p50,
// p99, max; sampled on the follower's thread every 2 ms from its message counter, so the
// resolution is ~2 ms):
//   idle          nothing but the elector
//   flood-always  fsync "always", a window of 64 proposals outstanding for S seconds
//   large-read    N entries of B bytes committed, then GET /metadata (default page) in a loop
//                 for S seconds on the leader's HTTP port
// Target: p99 gap <= 1.5 x the heartbeat period.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "conclave/client/client.hpp"
#include "conclave/node/node.hpp"

namespace {

namespace asio = boost::asio;
using conclave::admin::MetadataProposeResult;
using conclave::node::ClusterConfig;
using conclave::node::Node;
using Clock = std::chrono::steady_clock;

struct Options {
    double seconds = 5;
    std::size_t read_entries = 1000;
    std::size_t value_bytes = 64000;
    std::filesystem::path dir;
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

// The follower's count of LeaderHeartbeat messages received, from its metrics text.
std::uint64_t heartbeats(Node& n) {
    const std::string text = n.metrics_text();
    const std::string needle = "conclave_messages_received_total{type=\"LeaderHeartbeat\"} ";
    const auto at = text.find(needle);
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + needle.size()));
}

// Samples the follower's heartbeat counter every 2 ms on its own thread; records the gaps.
class GapProbe {
  public:
    GapProbe(asio::io_context& io, Node& node) : timer_(io), node_(node) {}
    void start() {
        last_count_ = heartbeats(node_);
        last_change_ = Clock::now();
        tick();
    }
    void stop() {
        stopped_ = true;
        timer_.cancel();
    }
    std::vector<double> take() {
        auto g = std::move(gaps_ms_);
        gaps_ms_.clear();
        return g;
    }

  private:
    void tick() {
        timer_.expires_after(std::chrono::milliseconds(2));
        timer_.async_wait([this](const boost::system::error_code& ec) {
            if (ec || stopped_) {
                return;
            }
            const std::uint64_t count = heartbeats(node_);
            if (count != last_count_) {
                const auto now = Clock::now();
                gaps_ms_.push_back(
                    std::chrono::duration<double, std::milli>(now - last_change_).count());
                last_change_ = now;
                last_count_ = count;
            }
            tick();
        });
    }
    asio::steady_timer timer_;
    Node& node_;
    std::uint64_t last_count_ = 0;
    Clock::time_point last_change_;
    std::vector<double> gaps_ms_;
    bool stopped_ = false;
};

void print_gaps(const char* phase, const std::string& fsync, std::vector<double> gaps,
                const std::string& extra) {
    if (gaps.empty()) {
        std::printf("%-13s fsync %-7s no heartbeat seen %s\n", phase, fsync.c_str(), extra.c_str());
        return;
    }
    std::sort(gaps.begin(), gaps.end());
    const auto pct = [&](double p) {
        return gaps[std::min(gaps.size() - 1,
                             static_cast<std::size_t>(p * static_cast<double>(gaps.size())))];
    };
    std::printf(
        "%-13s fsync %-7s heartbeats %4zu  gap p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms  "
        "(period 100 ms, target p99 <= 150 ms)%s\n",
        phase, fsync.c_str(), gaps.size(), pct(0.5), pct(0.99), gaps.back(), extra.c_str());
    std::fflush(stdout);
}

/// The size of the answer's body (a large read the followers' heartbeats must not wait for).
std::size_t http_get(std::uint16_t port, const std::string& target) {
    conclave::client::Settings settings;
    settings.timeout = std::chrono::seconds(60);
    settings.body_limit = std::size_t{1} << 30;
    settings.user_agent = "heartbeat_gap";
    const auto answer = conclave::client::request(settings, {"127.0.0.1", port},
                                                  {boost::beast::http::verb::get, target, {}, {}});
    return answer.body.size();
}

struct Cluster {
    std::vector<std::unique_ptr<asio::io_context>> ios;
    std::vector<std::unique_ptr<Node>> nodes;
    std::vector<std::thread> threads;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
    std::filesystem::path root;
    std::size_t leader = 3;

    Cluster(const Options& o, const std::string& fsync) {
        root = (o.dir.empty() ? std::filesystem::temp_directory_path() : o.dir) /
               ("conclave-hb-bench-" + std::to_string(::getpid()) + "-" + fsync);
        std::filesystem::remove_all(root);
        std::string nodes_json;
        for (int i = 1; i <= 3; ++i) {
            nodes_json += std::string(i > 1 ? "," : "") + R"({"id": "n)" + std::to_string(i) +
                          R"(", "peer": "127.0.0.1:)" + std::to_string(free_port()) +
                          R"(", "http": "127.0.0.1:)" + std::to_string(free_port()) + R"("})";
        }
        const std::string text =
            R"({"cluster": "bench", "profile": "fast", "timing": {"miss_count": 30}, "nodes": [)" +
            nodes_json + R"(], "data_dir": ")" + root.string() +
            R"(/{id}", "metadata": {"fsync": ")" + fsync + R"(", "propose_timeout_ms": 60000}})";
        for (int i = 0; i < 3; ++i) {
            auto parsed = conclave::node::parse_cluster_config(text, "n" + std::to_string(i + 1));
            if (auto* error = std::get_if<conclave::node::ConfigError>(&parsed)) {
                throw std::runtime_error(error->message);
            }
            conclave::node::NodeOptions options;
            options.logger = std::make_shared<spdlog::logger>(
                "bench", std::make_shared<spdlog::sinks::null_sink_mt>());
            ios.push_back(std::make_unique<asio::io_context>());
            nodes.push_back(
                std::make_unique<Node>(*ios.back(), std::get<ClusterConfig>(parsed), options));
            if (auto error = nodes.back()->start()) {
                throw std::runtime_error(*error);
            }
        }
        for (auto& io : ios) {
            guards.push_back(asio::make_work_guard(*io));
            threads.emplace_back([&io = *io] { io.run(); });
        }
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        while (leader == 3 && Clock::now() < deadline) {
            for (std::size_t i = 0; i < 3 && leader == 3; ++i) {
                if (on_thread<bool>(*ios[i], [&n = *nodes[i]] {
                        const auto s = n.status();
                        return s.log && s.log->leader_status == "active";
                    })) {
                    leader = i;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (leader == 3) {
            throw std::runtime_error("no active leader within 20 s");
        }
    }
    std::size_t follower() const { return (leader + 1) % 3; }

    // Proposes `count` entries (or until `until`), keeping `window` outstanding, on the leader.
    std::size_t flood(std::size_t count, std::size_t window, std::size_t value_bytes,
                      Clock::time_point until) {
        Node& node = *nodes[leader];
        const std::string value = "\"" + std::string(value_bytes, 'v') + "\"";
        std::size_t issued = 0;
        std::size_t done = 0;
        std::size_t ok = 0;
        std::promise<void> finished;
        std::function<void()> issue = [&] {
            ++issued;
            node.propose("key/" + std::to_string(issued), value,
                         [&](const MetadataProposeResult& r) {
                             ++done;
                             ok += r.ok() ? 1U : 0U;
                             if (issued < count && Clock::now() < until) {
                                 issue();
                             } else if (done == issued) {
                                 finished.set_value();
                             }
                         });
        };
        asio::post(*ios[leader], [&] {
            for (std::size_t w = 0; w < std::min(window, count); ++w) {
                issue();
            }
        });
        finished.get_future().wait();
        return ok;
    }

    ~Cluster() {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            asio::post(*ios[i], [&n = *nodes[i]] { n.stop(); });
        }
        for (auto& g : guards) {
            g.reset();
        }
        for (auto& t : threads) {
            t.join();
        }
        nodes.clear();
        std::error_code ignored;
        std::filesystem::remove_all(root, ignored);
    }
};

void run(const Options& o) {
    const auto span =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    {
        Cluster c(o, "always");
        const std::size_t f = c.follower();
        GapProbe probe(*c.ios[f], *c.nodes[f]);
        asio::post(*c.ios[f], [&] { probe.start(); });
        std::this_thread::sleep_for(span);
        print_gaps("idle", "always",
                   on_thread<std::vector<double>>(*c.ios[f], [&] { return probe.take(); }), "");
        const std::size_t ok = c.flood(SIZE_MAX, 64, 100, Clock::now() + span);
        print_gaps("flood-always", "always",
                   on_thread<std::vector<double>>(*c.ios[f], [&] { return probe.take(); }),
                   "  (" + std::to_string(ok) + " commits of 100 B)");
        on_thread<bool>(*c.ios[f], [&] {
            probe.stop();
            return true;
        });
    }
    {
        Cluster c(o, "batched");
        const std::size_t f = c.follower();
        const std::size_t ok = c.flood(o.read_entries, 16, o.value_bytes, Clock::time_point::max());
        GapProbe probe(*c.ios[f], *c.nodes[f]);
        asio::post(*c.ios[f], [&] { probe.start(); });
        const std::uint16_t port = on_thread<std::uint16_t>(
            *c.ios[c.leader], [&] { return c.nodes[c.leader]->http_port(); });
        std::size_t reads = 0;
        std::size_t bytes = 0;
        const auto until = Clock::now() + span;
        while (Clock::now() < until) {
            bytes = http_get(port, "/metadata");
            ++reads;
        }
        print_gaps("large-read", "batched",
                   on_thread<std::vector<double>>(*c.ios[f], [&] { return probe.take(); }),
                   "  (" + std::to_string(ok) + " entries of " + std::to_string(o.value_bytes) +
                       " B; " + std::to_string(reads) + " GET /metadata of " +
                       std::to_string(bytes) + " B)");
        on_thread<bool>(*c.ios[f], [&] {
            probe.stop();
            return true;
        });
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app("heartbeat_gap", "heartbeat_gap");
    app.add_option("--seconds", o.seconds)->check(CLI::Range(0.001, 1e6));
    app.add_option("--read-entries", o.read_entries);
    app.add_option("--value-bytes", o.value_bytes);
    app.add_option("--dir", o.dir);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad command line: the reason and 2
    }
    try {
        run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "heartbeat_gap: %s\n", e.what());
        return 1;
    }
    return 0;
}
