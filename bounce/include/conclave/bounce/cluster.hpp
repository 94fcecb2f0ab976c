// SPDX-License-Identifier: Apache-2.0
// Starts and stops real `conclaved` processes on 127.0.0.1, each peer link through the proxy.
//
// Routing: the daemon's config has one "peer" address per node, which is where that node listens
// and where the others dial it. leader-bounce writes one config file PER NODE: in node i's file,
// nodes[i].peer is i's real listen address and nodes[j].peer (j != i) is the proxy listener of the
// directed link i->j, which forwards to j's real address. Every other field is the same in all
// files. So every connection i dials to j crosses the proxy on the route i->j, and the proxy knows
// which link (and, by direction of the bytes, which directed link) each byte belongs to.
//
// Processes run in their own process group, with stdout/stderr appended to <dir>/<id>.log, and
// die with the tool (PR_SET_PDEATHSIG) even if the tool itself is killed. The destructor kills
// every process and removes the temporary directory.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "conclave/bounce/proxy.hpp"

namespace conclave::bounce {

struct ClusterOptions {
    std::size_t node_count = 3;
    bool scouting = true;
    std::string profile = "fast";
    std::filesystem::path conclaved;  // the daemon binary
    std::uint64_t seed = 1;           // proxy jitter
    bool keep_dir = false;            // keep the temporary directory (logs) after the run
    std::string backoff = {};         // "uniform" / "ranked"; empty: the profile's default
    /// Nodes beyond `node_count` (n<node_count+1>...) that are not in the cluster's configs: each
    /// gets its own ports and a config listing only itself (same cluster and settings), and joins
    /// at run time (start with a seed). Their peer links do not cross the proxy.
    std::size_t spares = 0;
    /// "priority" of each node entry (n1 first); empty: no field (every node the default 1).
    std::vector<std::uint32_t> priorities = {};
    /// timing.preferred_stability_ms in every config; nullopt: the profile's value.
    std::optional<std::int64_t> preferred_stability_ms = std::nullopt;
    /// The config's "backend" object as JSON text (node/README.md: etcd or ZooKeeper); empty:
    /// none, the built-in elector. With a store backend the peer links carry nothing.
    std::string backend = {};
    /// Non-empty: every daemon records its elector's steps (conclaved --trace-elector) in
    /// <trace_dir>/<node>.ndjson, one file per node that each of its processes appends to, for
    /// tla/merge_daemon_traces.py and tla/validate-trace.sh (docs/tla-traces.md).
    std::filesystem::path trace_dir = {};
};

struct NodeProcess {
    pid_t pid = 0;  // 0: not running
    bool paused = false;
    std::filesystem::path config_path;
    std::filesystem::path log_path;
    boost::asio::ip::tcp::endpoint peer;  // real listen address
    boost::asio::ip::tcp::endpoint http;
    std::optional<int> last_exit_status;  // raw waitpid status of the last exit
};

struct ProcessExit {
    NodeIndex node = 0;
    std::string description;  // "exited with status 1", "killed by signal 9"
    bool clean = false;       // exit status 0
};

class Cluster {
  public:
    /// Picks ports, opens the proxy routes and writes the configs into a new temporary
    /// directory. Starts nothing. Throws std::runtime_error with a clear message on failure.
    Cluster(boost::asio::io_context& io, ClusterOptions options);
    ~Cluster();
    Cluster(const Cluster&) = delete;
    Cluster& operator=(const Cluster&) = delete;

    /// Every node, spares included.
    std::size_t size() const { return nodes_.size(); }
    /// The nodes of the initial configuration (n1..n<node_count>), whose links cross the proxy.
    std::size_t members() const { return options_.node_count; }
    const std::filesystem::path& dir() const { return dir_; }
    const NodeProcess& node(NodeIndex i) const { return nodes_.at(i); }
    FaultProxy& proxy() { return proxy_; }

    void start(NodeIndex i);  // throws if already running
    /// Starts spare node i with `--join <seed>` (a member's real peer address).
    void start_joining(NodeIndex i, const boost::asio::ip::tcp::endpoint& seed);
    void kill(NodeIndex i);       // SIGKILL and reap
    void terminate(NodeIndex i);  // SIGTERM (graceful); reap() reports the exit later
    void pause(NodeIndex i);      // SIGSTOP
    void resume(NodeIndex i);     // SIGCONT
    /// Fills node i's disk, unprivileged: its files may no longer grow past
    /// max(size of its metadata log file, 4 KiB) (RLIMIT_FSIZE set with prlimit; a write past it
    /// fails with EFBIG, as a full disk fails with ENOSPC; the daemons ignore SIGXFSZ). Returns
    /// the limit. Throws std::runtime_error if the limit cannot be set.
    std::uint64_t fill_disk(NodeIndex i);
    bool running(NodeIndex i) const { return nodes_.at(i).pid != 0; }
    /// Non-blocking: processes that exited since the last call.
    std::vector<ProcessExit> reap();
    /// Kills every process (SIGKILL) and waits for them. Idempotent.
    void kill_all();
    /// The last `lines` lines of node i's log, for error messages.
    std::string log_tail(NodeIndex i, std::size_t lines) const;

  private:
    /// The configs: cluster.json (the real addresses), one per node (its peers behind the
    /// proxy) and one per spare (only itself).
    void write_configs();
    /// conclaved's command line for node i (its config, its id, its trace file if any).
    std::vector<std::string> daemon_argv(NodeIndex i) const;
    ClusterOptions options_;
    std::filesystem::path dir_;
    FaultProxy proxy_;
    std::vector<NodeProcess> nodes_;
};

/// Where to find conclaved when --conclaved is not given: next to `self_exe`, then
/// <self_exe dir>/../tools/conclaved, then build/release/tools/conclaved. Nullopt if none exists.
std::optional<std::filesystem::path> find_conclaved(const std::filesystem::path& self_exe);

}  // namespace conclave::bounce
