// SPDX-License-Identifier: Apache-2.0
// Restart: SIGKILL one node of a 3-node cluster, start it again after a random downtime, and time
// until all its links are up again, as the node and its peers report them in /status.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "bench.hpp"

namespace conclave::bench {

namespace {

/// The ids of the peers `/status` of node `i` reports up; nullopt when it does not answer.
std::optional<std::set<std::string>> peers_up(HttpClient& client) {
    const auto body = client.get("/status", std::chrono::milliseconds(300));
    if (!body) {
        return std::nullopt;
    }
    const auto status = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (!status.is_object() || !status.contains("peers") || !status["peers"].is_array()) {
        return std::nullopt;
    }
    std::set<std::string> up;
    for (const auto& peer : status["peers"]) {
        if (peer.is_object() && peer.value("up", false) && peer.contains("id") &&
            peer["id"].is_string()) {
            up.insert(peer["id"].get<std::string>());
        }
    }
    return up;
}

struct LinkPoll {
    bool answered = false;  // the restarted node's /status answered
    bool all_up = false;    // it and every peer report every link of it up
};

LinkPoll poll_links(std::vector<std::unique_ptr<HttpClient>>& clients, NodeIndex node) {
    LinkPoll out;
    const std::size_t n = clients.size();
    const auto own = peers_up(*clients[node]);
    out.answered = own.has_value();
    if (!own || own->size() != n - 1) {
        return out;
    }
    for (NodeIndex i = 0; i < n; ++i) {
        if (i == node) {
            continue;
        }
        const auto theirs = peers_up(*clients[i]);
        if (!theirs || theirs->count(bounce::node_name(node)) == 0) {
            return out;
        }
    }
    out.all_up = true;
    return out;
}

/// Nearest-rank percentile of sorted values.
double rank(const std::vector<double>& sorted, double p) {
    const auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(k, 1, sorted.size()) - 1];
}

std::string percentiles(std::vector<double> values) {
    if (values.empty()) {
        return "(no samples)";
    }
    std::sort(values.begin(), values.end());
    return fmt::format("median {:.1f}  p90 {:.1f}  p99 {:.1f}  max {:.1f}  (n={})",
                       rank(values, 0.5), rank(values, 0.9), rank(values, 0.99), values.back(),
                       values.size());
}

}  // namespace

int run_restart(const BenchOptions& options) {
    if (options.downtime_min_ms > options.downtime_max_ms) {
        throw std::runtime_error("--downtime-min-ms must not exceed --downtime-max-ms");
    }
    constexpr std::size_t kNodes = 3;
    const NodeIndex victim = kNodes - 1;  // every link of the highest index is dialed by a peer
    bounce::ClusterOptions c;
    c.node_count = kNodes;
    c.profile = "fast";
    c.conclaved = options.conclaved;
    c.keep_dir = options.keep;
    c.seed = options.seed;
    Harness h(c);
    h.start_all();
    std::vector<std::unique_ptr<HttpClient>> clients;
    for (NodeIndex i = 0; i < kNodes; ++i) {
        clients.push_back(std::make_unique<HttpClient>(h.cluster().node(i).http));
    }
    fmt::print(
        "\n== restart, profile fast, {} nodes: SIGKILL {} (whose links its peers dial), start it "
        "again after a downtime drawn from [{:.0f}, {:.0f}] ms; /status of all nodes polled every "
        "{} ms; {} runs\n",
        kNodes, bounce::node_name(victim), options.downtime_min_ms, options.downtime_max_ms,
        options.poll_ms, options.runs);
    std::mt19937_64 random(options.seed);
    std::uniform_real_distribution<double> downtime(options.downtime_min_ms,
                                                    options.downtime_max_ms);
    std::vector<double> links;
    std::vector<double> answers;
    int failures = 0;
    for (int run = 0; run < options.runs; ++run) {
        const auto settle = Clock::now();
        while (!poll_links(clients, victim).all_up) {
            if (ms_since(settle) > 30'000) {
                throw std::runtime_error("links not all up within 30 s before run " +
                                         std::to_string(run + 1) + "\n" + h.log_tails());
            }
            sleep_ms(10);
        }
        h.cluster().kill(victim);
        sleep_ms(downtime(random));
        const auto restarted = Clock::now();
        h.cluster().start(victim);
        std::optional<double> answered;
        bool done = false;
        while (ms_since(restarted) < 10'000) {
            const auto round = Clock::now();
            const LinkPoll p = poll_links(clients, victim);
            if (p.answered && !answered) {
                answered = ms_since(restarted);
            }
            if (p.all_up) {
                links.push_back(ms_since(restarted));
                done = true;
                break;
            }
            sleep_ms(options.poll_ms - ms_since(round));
        }
        if (answered) {
            answers.push_back(*answered);
        }
        if (!done) {
            ++failures;
            fmt::print("  run {}: links not all up within 10 s\n{}", run + 1, h.log_tails());
        }
    }
    fmt::print("  start -> all links up, both ends (ms):  {}\n", percentiles(links));
    fmt::print("  start -> its /status answers (ms):      {}\n", percentiles(answers));
    fmt::print("  runs without all links up within 10 s: {}\n", failures);
    return 0;
}

}  // namespace conclave::bench
