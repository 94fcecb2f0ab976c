// SPDX-License-Identifier: Apache-2.0
// Writes beside etcd: 3 conclaved daemons (POST /metadata, group commit with fsync before the
// acknowledgement) and 3 etcd members (POST /v3/kv/put on the v3 JSON gateway, its WAL fsynced
// before the acknowledgement), both on 127.0.0.1 and both written by the same client: C
// keep-alive HTTP/1.1 connections to the leader, each with one request outstanding, keys of 8
// bytes, values of V bytes (client::Session). Rounds are interleaved (Conclave, etcd, Conclave,
// etcd, ...) so that the load of the machine hits both alike.
#include <fmt/core.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/http/error.hpp>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench.hpp"
#include "conclave/client/session.hpp"

namespace conclave::bench {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;

namespace {

// ---- the load: C keep-alive sessions, one request outstanding each ---------------------------

struct LoadFigures {
    std::size_t ok = 0;
    std::size_t errors = 0;
    std::size_t reconnects = 0;  // connections opened again after the server closed one
    double seconds = 0;
    std::vector<double> latencies_ms;                // of the requests completed inside the window
    std::map<std::string, std::size_t> error_kinds;  // "HTTP 503", "connect: ...", ...
};

/// The next request of a load client.
using NextRequest = std::function<client::Request()>;

/// What to count of one answer: inside the window, a 200 is `writes` commits (the writes of the
/// request) and one latency.
void Count(const client::Response& reply, std::size_t writes, Clock::time_point sent,
           Clock::time_point window_start, Clock::time_point window_end, LoadFigures& figures) {
    const auto now = Clock::now();
    if (sent < window_start || now > window_end) {
        return;
    }
    if (reply.status == 200) {
        figures.ok += writes;
        figures.latencies_ms.push_back(
            std::chrono::duration<double, std::milli>(now - sent).count());
    } else {
        ++figures.errors;
        ++figures.error_kinds[fmt::format("HTTP {} {}", reply.status, reply.body.substr(0, 80))];
    }
}

/// One load client: `depth` requests at a time (pipelined when more than one) over one keep-alive
/// session (client::Session, which reopens the connection the server closes, e.g. conclaved's
/// after 1000 requests) until the end of the window. Requests left unanswered by a connection the
/// server closed are sent again. A connection that cannot be opened ends the client.
asio::awaitable<void> PutLoop(client::Settings settings, client::Endpoint to, NextRequest next,
                              int depth, std::size_t writes, Clock::time_point window_start,
                              Clock::time_point window_end, LoadFigures& figures) {
    const auto executor = co_await asio::this_coro::executor;
    client::Session session(executor, settings, to);
    std::vector<client::Request> batch;
    while (Clock::now() < window_end) {
        while (batch.size() < static_cast<std::size_t>(depth)) {
            batch.push_back(next());
        }
        const auto sent = Clock::now();
        const auto deadline = sent + settings.timeout;
        std::optional<client::Error> failure;
        try {
            const std::vector<client::Response> replies =
                co_await session.pipeline(batch, deadline);
            for (const client::Response& reply : replies) {
                Count(reply, writes, sent, window_start, window_end, figures);
            }
            batch.erase(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(replies.size()));
        } catch (const client::Error& e) {
            failure = e;
            batch.clear();
        }
        // A connection the server closed as the request went out is reopened, not an error.
        if (failure && failure->code() != http::error::end_of_stream) {
            const bool connect = failure->stage() == client::Stage::Connect;
            ++figures.errors;
            ++figures.error_kinds[(connect ? "connect: " : "") +
                                  (failure->code() ? failure->code().message()
                                                   : std::string(failure->what()))];
            if (connect) {
                break;
            }
        }
    }
    figures.reconnects += session.connections() > 1 ? session.connections() - 1 : 0;
}

/// `clients` sessions to `to` for warmup + seconds; figures over the last `seconds` only.
LoadFigures run_load(const asio::ip::tcp::endpoint& to, const NextRequest& next, int clients,
                     int depth, std::size_t writes, double warmup_s, double seconds) {
    asio::io_context io;
    LoadFigures figures;
    const auto start = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(warmup_s));
    const auto end =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    client::Settings settings;
    settings.timeout = std::chrono::seconds(10);
    const client::Endpoint endpoint{to.address().to_string(), to.port()};
    for (int c = 0; c < clients; ++c) {
        asio::co_spawn(io, PutLoop(settings, endpoint, next, depth, writes, start, end, figures),
                       [](const std::exception_ptr& e) {
                           if (e) {
                               std::rethrow_exception(e);
                           }
                       });
    }
    io.run();
    figures.seconds = seconds;
    return figures;
}

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) {
        return 0;
    }
    const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

std::string base64(const std::string& in) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const auto n = (static_cast<unsigned>(static_cast<unsigned char>(in[i])) << 16) |
                       (static_cast<unsigned>(static_cast<unsigned char>(in[i + 1])) << 8) |
                       static_cast<unsigned>(static_cast<unsigned char>(in[i + 2]));
        for (int s = 18; s >= 0; s -= 6) {
            out += kAlphabet[(n >> s) & 63U];
        }
    }
    if (i < in.size()) {
        unsigned n = static_cast<unsigned>(static_cast<unsigned char>(in[i])) << 16;
        if (i + 1 < in.size()) {
            n |= static_cast<unsigned>(static_cast<unsigned char>(in[i + 1])) << 8;
        }
        out += kAlphabet[(n >> 18) & 63U];
        out += kAlphabet[(n >> 12) & 63U];
        out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63U] : '=';
        out += '=';
    }
    return out;
}

// ---- 3 conclaved daemons, no proxy --------------------------------------------------------------

class ConclaveDirect {
  public:
    ConclaveDirect(const fs::path& conclaved, std::size_t n)
        : dir_(make_temp_dir("conclave-puts")) {
        std::set<std::uint16_t> taken;
        nlohmann::json nodes = nlohmann::json::array();
        for (std::size_t i = 0; i < n; ++i) {
            const auto peer = free_port(taken);
            const auto http = free_port(taken);
            http_.emplace_back(asio::ip::address_v4::loopback(), http);
            nodes.push_back({{"id", "n" + std::to_string(i + 1)},
                             {"peer", "127.0.0.1:" + std::to_string(peer)},
                             {"http", "127.0.0.1:" + std::to_string(http)}});
        }
        const nlohmann::json doc{
            {"cluster", "puts"},
            {"nodes", nodes},
            {"profile", "default"},  // steadier than fast on a loaded machine
            {"data_dir", (dir_ / "{id}").string()},
            {"tls", nullptr},
            {"insecure", true},  // loopback benchmark cluster
            // With the token, clients leave the budget of 64 unauthenticated connections.
            {"admin", {{"token_file", (dir_ / "token").string()}, {"open_reads", true}}},
            {"metadata", {{"fsync", "batched"}, {"compact_threshold", 100000}}},
            {"log", {{"format", "text"}, {"level", "warn"}}}};
        std::ofstream(dir_ / "cluster.json") << doc.dump(2) << "\n";
        token_ = "bench-token-0123456789abcdef0123456789abcdef";
        std::ofstream(dir_ / "token") << token_;
        fs::permissions(dir_ / "token", fs::perms::owner_read | fs::perms::owner_write);
        for (std::size_t i = 0; i < n; ++i) {
            pids_.push_back(
                spawn_logged({conclaved.string(), "--config", (dir_ / "cluster.json").string(),
                              "--node-id", "n" + std::to_string(i + 1)},
                             dir_ / ("n" + std::to_string(i + 1) + ".log")));
            clients_.push_back(std::make_unique<HttpClient>(http_[i]));
        }
    }
    ~ConclaveDirect() {
        for (int pid : pids_) {
            kill_and_reap(pid);
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    /// The index of the node that says it leads with an active log, waiting up to 30 s.
    NodeIndex wait_leader() {
        const auto start = Clock::now();
        while (ms_since(start) < 30'000) {
            for (NodeIndex i = 0; i < clients_.size(); ++i) {
                const auto body = clients_[i]->get("/status", std::chrono::milliseconds(500));
                const auto j =
                    body ? nlohmann::json::parse(*body, nullptr, false) : nlohmann::json();
                if (j.is_object() && j.value("role", "") == "leader" &&
                    j.value("leader_status", "") == "active") {
                    return i;
                }
            }
            sleep_ms(50);
        }
        throw std::runtime_error("conclaved: no active leader within 30 s");
    }
    tcp::endpoint http(NodeIndex i) const { return http_.at(i); }
    const std::string& token() const { return token_; }
    std::optional<std::string> metrics(NodeIndex i) {
        return clients_.at(i)->get("/metrics", std::chrono::milliseconds(2000));
    }

  private:
    fs::path dir_;
    std::string token_;
    std::vector<tcp::endpoint> http_;
    std::vector<int> pids_;
    std::vector<std::unique_ptr<HttpClient>> clients_;
};

// ---- the rounds
// -----------------------------------------------------------------------------------

struct PutsOptions {
    int clients = 64;
    int depth = 1;          // requests sent at once per connection
    std::size_t batch = 1;  // writes per request
    std::size_t value_bytes = 256;
    double seconds = 10;
    double warmup_s = 2;
    int rounds = 2;
    std::size_t keys = 100'000;
};

/// Request maker: keys "k" + 7 hex digits of a counter modulo `keys`, values of `value_bytes`;
/// `batch` writes per request (etcd: a txn of puts; conclaved: {"entries": [...]}).
NextRequest requests(bool etcd, const PutsOptions& o, const std::string& token) {
    auto counter = std::make_shared<std::size_t>(0);
    const std::string value(o.value_bytes, 'x');
    const std::string encoded_value = base64(value);
    return [=] {
        nlohmann::json writes = nlohmann::json::array();
        for (std::size_t i = 0; i < o.batch; ++i) {
            const std::string key = fmt::format("k{:07x}", (*counter)++ % o.keys);
            writes.push_back(etcd ? nlohmann::json{{"key", base64(key)}, {"value", encoded_value}}
                                  : nlohmann::json{{"key", key}, {"value", value}});
        }
        if (etcd) {
            if (o.batch == 1) {
                return client::Request{http::verb::post, "/v3/kv/put", writes[0].dump(), {}};
            }
            nlohmann::json ops = nlohmann::json::array();
            for (auto& w : writes) {
                ops.push_back({{"request_put", std::move(w)}});
            }
            return client::Request{
                http::verb::post, "/v3/kv/txn", nlohmann::json{{"success", ops}}.dump(), {}};
        }
        // The token goes as a header of its own: the client's plain-HTTP check of a port (a
        // connection without the token) would count against the unauthenticated connections.
        return client::Request{
            http::verb::post,
            "/metadata",
            (o.batch == 1 ? writes[0] : nlohmann::json{{"entries", writes}}).dump(),
            {{"Authorization", "Bearer " + token}}};
    };
}

struct RoundFigures {
    double per_second = 0;
    double p50 = 0;
    double p99 = 0;
    std::size_t errors = 0;
};

RoundFigures report(const std::string& system, int round, LoadFigures f, const std::string& extra) {
    RoundFigures r;
    r.per_second = static_cast<double>(f.ok) / f.seconds;
    r.p50 = percentile(f.latencies_ms, 0.50);
    r.p99 = percentile(f.latencies_ms, 0.99);
    r.errors = f.errors;
    fmt::print("  round {} {:<9} {:>9.0f} commits/s  p50 {:6.2f} ms  p99 {:7.2f} ms  errors {}{}\n",
               round, system, r.per_second, r.p50, r.p99, r.errors, extra);
    if (f.reconnects > 0) {
        fmt::print("      {} reconnections (keep-alive connections closed by the server)\n",
                   f.reconnects);
    }
    for (const auto& [kind, count] : f.error_kinds) {
        fmt::print("      {} x {}\n", count, kind);
    }
    return r;
}

/// The leader's /metrics counters that batching is judged by, at one moment.
struct BatchCounters {
    double commits = 0;
    double fsyncs = 0;         // every fsync: group commits, meta and truncations
    double group_commits = 0;  // the log's group-commit syncs only
};

BatchCounters batch_counters(const std::string& metrics_text) {
    return BatchCounters{metric_sum(metrics_text, "conclave_metadata_commits_total"),
                         metric_sum(metrics_text, "conclave_metadata_fsyncs_total"),
                         metric_sum(metrics_text, "conclave_metadata_group_commits_total")};
}

/// Entries per group commit and per fsync (meta writes included) on the leader over a round.
std::string fsync_batching(ConclaveDirect& c, NodeIndex leader, const BatchCounters& before) {
    const auto text = c.metrics(leader);
    if (!text) {
        return "";
    }
    const BatchCounters after = batch_counters(*text);
    const double commits = after.commits - before.commits;
    const double fsyncs = after.fsyncs - before.fsyncs;
    const double syncs = after.group_commits - before.group_commits;
    if (fsyncs <= 0 || syncs <= 0) {
        return "";
    }
    return fmt::format("  ({:.1f} entries per leader group commit, {:.1f} per fsync)",
                       commits / syncs, commits / fsyncs);
}

void summarize_system(const std::string& system, const std::vector<RoundFigures>& rounds) {
    std::vector<double> rate;
    std::vector<double> p50;
    std::vector<double> p99;
    for (const auto& r : rounds) {
        rate.push_back(r.per_second);
        p50.push_back(r.p50);
        p99.push_back(r.p99);
    }
    fmt::print(
        "  {:<9} commits/s {:.0f}-{:.0f}, p50 {:.2f}-{:.2f} ms, p99 {:.2f}-{:.2f} ms\n", system,
        *std::min_element(rate.begin(), rate.end()), *std::max_element(rate.begin(), rate.end()),
        *std::min_element(p50.begin(), p50.end()), *std::max_element(p50.begin(), p50.end()),
        *std::min_element(p99.begin(), p99.end()), *std::max_element(p99.begin(), p99.end()));
}

}  // namespace

int run_puts(const BenchOptions& options) {
    PutsOptions o;
    o.clients = options.clients;
    o.depth = options.pipeline;
    o.batch = static_cast<std::size_t>(options.batch);
    o.value_bytes = options.value_bytes;
    o.seconds = options.duration_s;
    o.rounds = options.runs;
    o.keys = options.keys;
    fmt::print(
        "puts: 3 nodes each, {} clients ({} request{} outstanding each, {} write{} per request), "
        "keys of 8 bytes, values of {} bytes, {} s per round after {} s of warm-up, {} rounds\n",
        o.clients, o.depth, o.depth == 1 ? "" : "s pipelined", o.batch, o.batch == 1 ? "" : "s",
        o.value_bytes, o.seconds, o.warmup_s, o.rounds);
    ConclaveDirect conclave(options.conclaved, 3);
    std::unique_ptr<FailoverTarget> etcd;
    const auto etcd_path = options.etcd ? find_etcd() : std::nullopt;
    if (etcd_path) {
        etcd = make_etcd_target(*etcd_path, 3, 100, 1000);  // etcd's default timing
    } else {
        fmt::print("etcd: skipped ({}apt-get install -y etcd-server)\n",
                   options.etcd ? "not on PATH; " : "--no-etcd; ");
    }
    std::vector<RoundFigures> ours;
    std::vector<RoundFigures> theirs;
    for (int round = 1; round <= o.rounds; ++round) {
        const NodeIndex leader = conclave.wait_leader();
        const BatchCounters before = batch_counters(conclave.metrics(leader).value_or(""));
        auto f = run_load(conclave.http(leader), requests(false, o, conclave.token()), o.clients,
                          o.depth, o.batch, o.warmup_s, o.seconds);
        ours.push_back(
            report("conclaved", round, std::move(f), fsync_batching(conclave, leader, before)));
        if (!etcd) {
            continue;
        }
        std::optional<NodeIndex> etcd_leader;
        const auto start = Clock::now();
        while (!(etcd_leader = etcd->poll_agreed(all_nodes(3))) && ms_since(start) < 30'000) {
            sleep_ms(50);
        }
        if (!etcd_leader) {
            throw std::runtime_error("etcd: no agreed leader within 30 s\n" + etcd->log_tails());
        }
        auto e = run_load(*etcd->client_endpoint(*etcd_leader), requests(true, o, ""), o.clients,
                          o.depth, o.batch, o.warmup_s, o.seconds);
        theirs.push_back(report("etcd", round, std::move(e), ""));
    }
    fmt::print("summary over {} rounds:\n", o.rounds);
    summarize_system("conclaved", ours);
    if (!theirs.empty()) {
        summarize_system("etcd", theirs);
    }
    return 0;
}

}  // namespace conclave::bench
