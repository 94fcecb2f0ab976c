// SPDX-License-Identifier: Apache-2.0
// conclave-bench: programs that PRINT figures (failover, cold start, jitter, cost, etcd).
// Never run by ctest: they time real processes on a real (possibly busy) machine.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "conclave/bounce/cluster.hpp"
#include "conclave/bounce/observation.hpp"
#include "conclave/client/client.hpp"
#include "conclave/elector/config.hpp"

namespace conclave::bench {

using Clock = std::chrono::steady_clock;
using bounce::NodeIndex;

double ms_since(Clock::time_point start);
void sleep_ms(double ms);

// ---- Statistics ----------------------------------------------------------------------------

struct Summary {
    std::size_t count = 0;
    double min = 0;
    double median = 0;
    double p95 = 0;
    double max = 0;
    double mean = 0;
};
Summary summarize(std::vector<double> values);
/// "min 12.3  median 45.6  p95 78.9  max 99.0  (n=20)", values in ms.
std::string format_summary(const Summary& s);

// ---- HTTP ------------------------------------------------------------------------------------

/// A blocking HTTP/1.1 client of one server with a deadline per request: the admin client
/// (client/), one connection per request.
class HttpClient {
  public:
    explicit HttpClient(boost::asio::ip::tcp::endpoint endpoint);
    /// The body of a 200 answer; nullopt otherwise (error() says why).
    std::optional<std::string> request(boost::beast::http::verb verb, const std::string& target,
                                       const std::string& body, std::chrono::milliseconds timeout);
    std::optional<std::string> get(const std::string& target, std::chrono::milliseconds timeout);
    const std::string& error() const { return error_; }

  private:
    client::Endpoint endpoint_;
    client::Settings settings_;
    std::string error_;
};

/// Sum of every sample of metric `name` (all label sets) in a Prometheus text body.
double metric_sum(const std::string& text, const std::string& name);

// ---- Processes -------------------------------------------------------------------------------

/// utime + stime of a process, in seconds, from /proc/<pid>/stat. Nullopt if unreadable.
std::optional<double> cpu_seconds(int pid);
/// VmRSS of a process in KiB, from /proc/<pid>/status.
std::optional<std::uint64_t> rss_kib(int pid);
/// Median cost of persisting a small state file the way net/state_file.cpp does (write temp,
/// fsync, rename, fsync the directory), over `count` tries in `dir`. Milliseconds.
double persist_cost_ms(const std::filesystem::path& dir, int count);

// ---- A conclaved cluster through leader-bounce's library --------------------------------------

struct StatusView {
    bool answered = false;
    bounce::ObservedRole role = bounce::ObservedRole::Unreachable;
    std::uint64_t term = 0;
    std::optional<NodeIndex> leader;
};

struct Agreement {
    NodeIndex leader = 0;
    std::uint64_t term = 0;
};

/// The leader every view names, in one term, with that leader among the views saying "leader".
std::optional<Agreement> agreement(const std::vector<NodeIndex>& members,
                                   const std::vector<StatusView>& views);

/// Cluster (processes + fault proxy) with the proxy's io_context on a thread of its own, and one
/// keep-alive /status client per node on the caller's thread.
class Harness {
  public:
    explicit Harness(bounce::ClusterOptions options);
    ~Harness();
    Harness(const Harness&) = delete;
    Harness& operator=(const Harness&) = delete;

    bounce::Cluster& cluster() { return *cluster_; }
    std::size_t size() const { return cluster_->size(); }
    void start_all();
    /// Runs `fn` on the proxy's thread and waits for it.
    void on_proxy_thread(const std::function<void(bounce::FaultProxy&)>& fn);
    StatusView status(NodeIndex i, std::chrono::milliseconds timeout);
    std::optional<std::string> metrics(NodeIndex i);
    /// Polls `members` every `period_ms` until they agree or `timeout_ms` passes.
    std::optional<Agreement> wait_agreement(const std::vector<NodeIndex>& members,
                                            double timeout_ms, double period_ms);
    /// The last log lines of every node, for error messages.
    std::string log_tails();

  private:
    bool keep_ = false;  // print the kept temporary directory's path at the end
    boost::asio::io_context io_;
    std::unique_ptr<bounce::Cluster> cluster_;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
    std::thread thread_;
    std::vector<std::unique_ptr<HttpClient>> clients_;
};

std::vector<NodeIndex> all_nodes(std::size_t n);

// ---- Figures ---------------------------------------------------------------------------------

struct BenchOptions {
    std::filesystem::path conclaved;
    int runs = 20;                      // failover runs per case; cold-start runs per N
    std::vector<std::string> profiles;  // failover: "fast", "default"
    std::string backoff;                // "uniform" / "ranked"; empty: the profile's default
    double duration_s = 60;             // jitter: seconds per case
    double window_s = 20;               // cost: measuring window
    double poll_ms = 1;                 // failover, restart: /status polling period
    double downtime_min_ms = 100;       // restart: the killed node stays down a random time
    double downtime_max_ms = 1500;      //   drawn uniformly from [min, max]
    bool etcd = true;                   // failover, cold start: compare with etcd when installed
    bool zookeeper = true;              // failover, cold start: compare with ZooKeeper likewise
    bool keep = false;                  // keep the clusters' temporary directories (logs)
    int clients = 64;                   // puts: concurrent connections
    int pipeline = 1;                   // puts: requests each connection sends at once
    int batch = 1;                      // puts: writes per request
    std::size_t value_bytes = 256;      // puts: bytes of each value (keys are 8 bytes)
    std::size_t keys = 100'000;         // puts: distinct keys, written in turn
    std::uint64_t seed = 1;
    std::int64_t store_ttl_ms = 2000;  // stores: the TTL of the recipes and of conclaved's backend
    bool recipe_defaults = false;      // stores: also the recipes at their default TTLs
};

int run_failover(const BenchOptions& options);
int run_cold_start(const BenchOptions& options);
int run_jitter(const BenchOptions& options);
int run_cost(const BenchOptions& options);
int run_restart(const BenchOptions& options);
int run_puts(const BenchOptions& options);
int run_stores(const BenchOptions& options);

// ---- Failover, shared by conclaved and etcd ---------------------------------------------------

/// Something with N members, one leader, /status-like polling, and processes to signal.
class FailoverTarget {
  public:
    virtual ~FailoverTarget() = default;
    virtual std::size_t size() const = 0;
    /// Polls `members` once each; the leader they all name now (same term), if any.
    virtual std::optional<NodeIndex> poll_agreed(const std::vector<NodeIndex>& members) = 0;
    virtual void send_signal(NodeIndex member, int signal) = 0;  // SIGKILL or SIGSTOP
    virtual void restore(NodeIndex member) = 0;  // restart a killed member, SIGCONT a stopped one
    /// The term (etcd: raft term; ZooKeeper: epoch) of the last agreement poll_agreed returned.
    virtual std::uint64_t last_term() const = 0;
    virtual std::string log_tails() = 0;
    /// Where clients reach a member (etcd: its client URL); nullopt when not offered.
    virtual std::optional<boost::asio::ip::tcp::endpoint> client_endpoint(NodeIndex) const {
        return std::nullopt;
    }
};

struct FailoverResult {
    std::vector<double> samples_ms;
    std::size_t failures = 0;  // no agreed new leader within the bound
    double poll_round_ms = 0;  // mean time of one polling round (resolution)
};

/// One run: wait for a leader all members agree on, a random calm of [1, 2] x `calm_ms`, the
/// signal, poll the survivors every `poll_ms` until they name the same new leader, restore.
/// Returns the time from the signal to agreement (nullopt: none within `bound_ms`); adds the
/// polling rounds to `result`'s resolution figures. Throws when no leader is agreed in 30 s.
std::optional<double> failover_once(FailoverTarget& target, int signal, double calm_ms,
                                    double poll_ms, double bound_ms, std::mt19937_64& random,
                                    double& round_total_ms, std::size_t& rounds);

/// Idealised failover time of the core alone (no network, no disk), from the profile's timers:
/// Monte Carlo of the two survivors of a 3-node cluster. `silent`: SIGSTOP (heartbeats stop;
/// detection by missed checks), else SIGKILL (connection loss: detection at once).
std::vector<double> floor_model_ms(const elector::Config& config, bool silent, int samples,
                                   std::mt19937_64& random);

/// etcd (Debian's etcd-server) when an `etcd` binary is on PATH; nullopt otherwise.
std::optional<std::filesystem::path> find_etcd();
/// `members` etcd members; heartbeat and election timeout as etcd's flags.
std::unique_ptr<FailoverTarget> make_etcd_target(const std::filesystem::path& etcd,
                                                 std::size_t members, std::uint32_t heartbeat_ms,
                                                 std::uint32_t election_ms);

/// ZooKeeper (Debian's zookeeper package) when java and /usr/share/java/zookeeper.jar exist.
struct ZooKeeperInstall {
    std::filesystem::path java;
    std::string classpath;
};
std::optional<ZooKeeperInstall> find_zookeeper();
/// `members` servers (one JVM each) with tickTime `tick_ms` and syncLimit `sync_limit`: a
/// follower gives up on a silent leader after tick x syncLimit. `extra_config`: more lines of
/// each server's zoo.cfg.
std::unique_ptr<FailoverTarget> make_zookeeper_target(const ZooKeeperInstall& install,
                                                      std::size_t members, std::uint32_t tick_ms,
                                                      std::uint32_t sync_limit,
                                                      const std::string& extra_config = {});

/// The peers' settings at the same tolerance of a silent leader as a Conclave profile (see
/// bench/README.md): etcd heartbeat = min(heartbeat, inactivity / 5) (etcd refuses an election
/// timeout below 5 heartbeats), election timeout = inactivity; ZooKeeper syncLimit 3, tickTime =
/// inactivity / 3.
struct PeerSettings {
    std::uint32_t etcd_heartbeat_ms = 0;
    std::uint32_t etcd_election_ms = 0;
    std::uint32_t zk_tick_ms = 0;
    std::uint32_t zk_sync_limit = 3;
};
PeerSettings peer_settings(const elector::Config& profile);

/// Every peer of the comparison, in order: conclave first, then etcd and ZooKeeper when enabled
/// and installed. Prints one line per peer that is skipped and how to enable it.
struct Peers {
    std::optional<std::filesystem::path> etcd;
    std::optional<ZooKeeperInstall> zookeeper;
};
Peers find_peers(const BenchOptions& options);

// ---- Peer processes (peers.cpp) ---------------------------------------------------------------

std::optional<std::filesystem::path> find_on_path(const std::string& name);
std::uint16_t free_port(std::set<std::uint16_t>& taken);
std::filesystem::path make_temp_dir(const std::string& prefix);
/// fork + exec `args` in a process group of its own (killed with this process), stdout and stderr
/// appended to `log`. Returns the pid (= the process group).
int spawn_logged(std::vector<std::string> args, const std::filesystem::path& log);
void signal_group(int pid, int signal);
/// SIGKILL to the process group, then waitpid.
void kill_and_reap(int pid);
/// The last `lines` lines of a file, indented.
std::string file_tail(const std::filesystem::path& file, std::size_t lines);

/// A peer system's members as processes of their own (etcd, ZooKeeper), signalled and restored by
/// failover_once. `Member` has at least `name`, `client_port`, `args`, `log`, `pid` (0: not
/// running) and `paused`; the subclass fills `members_`, starts them, and kills them (kill) in its
/// destructor before it removes their files.
template <class Member>
class PeerProcesses : public FailoverTarget {
  public:
    std::size_t size() const override { return members_.size(); }
    std::uint64_t last_term() const override { return last_term_; }

    std::optional<boost::asio::ip::tcp::endpoint> client_endpoint(NodeIndex member) const override {
        return boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(),
                                              members_.at(member).client_port);
    }

    void send_signal(NodeIndex member, int signal) override {
        if (signal == SIGKILL) {
            kill(member);
        } else if (members_[member].pid != 0) {
            signal_group(members_[member].pid, SIGSTOP);
            members_[member].paused = true;
        }
    }

    void restore(NodeIndex member) override {
        Member& m = members_[member];
        if (m.pid == 0) {
            start(member);
        } else if (m.paused) {
            signal_group(m.pid, SIGCONT);
            m.paused = false;
        }
    }

    std::string log_tails() override {
        std::string out;
        for (const Member& m : members_) {
            out += m.name + ".log:\n" + file_tail(m.log, 5);
        }
        return out;
    }

  protected:
    void start(std::size_t i) {
        members_[i].pid = spawn_logged(members_[i].args, members_[i].log);
        members_[i].paused = false;
    }

    void kill(std::size_t i) {
        kill_and_reap(members_[i].pid);
        members_[i].pid = 0;
        members_[i].paused = false;
    }

    std::vector<Member> members_;
    std::uint64_t last_term_ = 0;  // of the last agreement poll_agreed returned
};
std::unique_ptr<FailoverTarget> make_conclave_target(const BenchOptions& options,
                                                     const std::string& profile);
/// A conclaved cluster of `nodes` with the benchmark's daemon, backoff, --keep and --seed.
bounce::ClusterOptions cluster_options(const BenchOptions& options, std::size_t nodes,
                                       const std::string& profile);

}  // namespace conclave::bench
