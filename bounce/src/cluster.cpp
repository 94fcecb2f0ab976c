// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/cluster.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

#include "conclave/bounce/observation.hpp"
#include "conclave/bounce/spawn.hpp"

namespace conclave::bounce {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

/// A port the kernel considers free right now. Its listener stays open in `held` until the
/// caller drops it, so that the proxy's own listeners (port 0) cannot be given the same port in
/// the meantime. A small race remains (another process may take it before the daemon binds); the
/// daemon then exits with status 1 and the tool reports it.
std::uint16_t free_port(asio::io_context& io, std::set<std::uint16_t>& taken,
                        std::vector<tcp::acceptor>& held) {
    for (int attempt = 0; attempt < 100; ++attempt) {
        tcp::acceptor a(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
        const std::uint16_t port = a.local_endpoint().port();
        if (taken.insert(port).second) {
            held.push_back(std::move(a));
            return port;
        }
    }
    throw std::runtime_error("could not find a free port on 127.0.0.1");
}

std::string address(const tcp::endpoint& e) {
    return e.address().to_string() + ":" + std::to_string(e.port());
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) {
        return "exited with status " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return "killed by signal " + std::to_string(WTERMSIG(status));
    }
    return "ended (status " + std::to_string(status) + ")";
}

fs::path make_temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/leader-bounce-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
        throw std::runtime_error("cannot create a temporary directory from " + pattern + ": " +
                                 std::strerror(errno));
    }
    return fs::path(buf.data());
}

/// A node's config: the cluster's settings with `node_list` as its nodes.
nlohmann::json config_doc(const ClusterOptions& options, const fs::path& dir,
                          nlohmann::json node_list) {
    nlohmann::json doc{{"cluster", "bounce"},
                       {"nodes", std::move(node_list)},
                       {"profile", options.profile},
                       {"scouting", options.scouting},
                       {"data_dir", (dir / "data" / "{id}").string()},
                       {"tls", nullptr},
                       // Loopback demo cluster behind the fault proxy (SECURITY.md).
                       {"insecure", true},
                       {"log", {{"format", "text"}, {"level", "info"}}}};
    if (!options.backoff.empty()) {
        doc["backoff"] = options.backoff;
    }
    if (options.preferred_stability_ms) {
        doc["timing"] = {{"preferred_stability_ms", *options.preferred_stability_ms}};
    }
    if (!options.backend.empty()) {
        doc["backend"] = nlohmann::json::parse(options.backend);
    }
    return doc;
}

nlohmann::json node_entry(const ClusterOptions& options, NodeIndex i, const tcp::endpoint& peer,
                          const tcp::endpoint& http) {
    nlohmann::json entry{{"id", node_name(i)}, {"peer", address(peer)}, {"http", address(http)}};
    if (i < options.priorities.size()) {
        entry["priority"] = options.priorities[i];
    }
    return entry;
}

/// Writes node i's config (its path and log path set in `node`).
void write_config(NodeProcess& node, NodeIndex i, const fs::path& dir, const nlohmann::json& doc) {
    node.config_path = dir / (node_name(i) + ".json");
    node.log_path = dir / (node_name(i) + ".log");
    std::ofstream out(node.config_path);
    out << doc.dump(2) << "\n";
    if (!out) {
        throw std::runtime_error("cannot write " + node.config_path.string());
    }
}

}  // namespace

Cluster::Cluster(asio::io_context& io, ClusterOptions options)
    : options_(std::move(options)),
      dir_(make_temp_dir()),
      proxy_(io, options_.node_count, options_.seed),
      nodes_(options_.node_count + options_.spares) {
    try {
        std::set<std::uint16_t> taken;
        std::vector<tcp::acceptor> held;  // closed at the end of this block, before any start
        for (NodeIndex i = 0; i < nodes_.size(); ++i) {
            nodes_[i].peer =
                tcp::endpoint(asio::ip::address_v4::loopback(), free_port(io, taken, held));
            nodes_[i].http =
                tcp::endpoint(asio::ip::address_v4::loopback(), free_port(io, taken, held));
        }
        write_configs();
        if (!options_.trace_dir.empty()) {
            fs::create_directories(options_.trace_dir);
        }
    } catch (...) {
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

void Cluster::write_configs() {
    const std::size_t n = options_.node_count;
    // proxy_for[i][j]: where node i dials node j.
    std::vector<std::vector<tcp::endpoint>> proxy_for(n, std::vector<tcp::endpoint>(n));
    for (NodeIndex i = 0; i < n; ++i) {
        for (NodeIndex j = 0; j < n; ++j) {
            if (i != j) {
                proxy_for[i][j] = proxy_.add_route({i, j}, nodes_[j].peer);
            }
        }
    }
    fs::create_directories(dir_ / "data");
    nlohmann::json real_nodes = nlohmann::json::array();
    for (NodeIndex i = 0; i < n; ++i) {
        real_nodes.push_back(node_entry(options_, i, nodes_[i].peer, nodes_[i].http));
    }
    std::ofstream(dir_ / "cluster.json") << config_doc(options_, dir_, real_nodes).dump(2) << "\n";
    for (NodeIndex i = 0; i < n; ++i) {
        nlohmann::json list = nlohmann::json::array();
        for (NodeIndex j = 0; j < n; ++j) {
            list.push_back(
                node_entry(options_, j, i == j ? nodes_[j].peer : proxy_for[i][j], nodes_[j].http));
        }
        write_config(nodes_[i], i, dir_, config_doc(options_, dir_, list));
    }
    // A spare's config lists only itself: it is not a member until it joins (--join).
    for (NodeIndex i = n; i < nodes_.size(); ++i) {
        write_config(nodes_[i], i, dir_,
                     config_doc(options_, dir_,
                                nlohmann::json::array(
                                    {node_entry(options_, i, nodes_[i].peer, nodes_[i].http)})));
    }
}

Cluster::~Cluster() {
    kill_all();
    proxy_.close();
    if (!options_.keep_dir) {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
}

std::vector<std::string> Cluster::daemon_argv(NodeIndex i) const {
    std::vector<std::string> argv{options_.conclaved.string(), "--config",
                                  nodes_.at(i).config_path.string(), "--node-id", node_name(i)};
    if (!options_.trace_dir.empty()) {
        argv.insert(argv.end(), {"--trace-elector",
                                 (options_.trace_dir / (node_name(i) + ".ndjson")).string()});
    }
    return argv;
}

void Cluster::start(NodeIndex i) {
    NodeProcess& p = nodes_.at(i);
    if (p.pid != 0) {
        throw std::logic_error(node_name(i) + " is already running");
    }
    p.pid = spawn_daemon(daemon_argv(i), p.log_path);
    p.paused = false;
}

void Cluster::start_joining(NodeIndex i, const tcp::endpoint& seed) {
    NodeProcess& p = nodes_.at(i);
    if (p.pid != 0) {
        throw std::logic_error(node_name(i) + " is already running");
    }
    std::vector<std::string> argv = daemon_argv(i);
    argv.insert(argv.end(), {"--join", address(seed)});
    p.pid = spawn_daemon(argv, p.log_path);
    p.paused = false;
}

void Cluster::kill(NodeIndex i) {
    NodeProcess& p = nodes_.at(i);
    if (p.pid == 0) {
        return;
    }
    ::kill(p.pid, SIGKILL);
    int status = 0;
    while (::waitpid(p.pid, &status, 0) < 0 && errno == EINTR) {
    }
    p.last_exit_status = status;
    p.pid = 0;
    p.paused = false;
}

void Cluster::terminate(NodeIndex i) {
    NodeProcess& p = nodes_.at(i);
    if (p.pid == 0) {
        return;
    }
    if (p.paused) {
        ::kill(p.pid, SIGCONT);
        p.paused = false;
    }
    ::kill(p.pid, SIGTERM);
}

void Cluster::pause(NodeIndex i) {
    NodeProcess& p = nodes_.at(i);
    if (p.pid != 0 && !p.paused) {
        ::kill(p.pid, SIGSTOP);
        p.paused = true;
    }
}

void Cluster::resume(NodeIndex i) {
    NodeProcess& p = nodes_.at(i);
    if (p.pid != 0 && p.paused) {
        ::kill(p.pid, SIGCONT);
        p.paused = false;
    }
}

std::uint64_t Cluster::fill_disk(NodeIndex i) {
    const NodeProcess& p = nodes_.at(i);
    if (p.pid == 0) {
        throw std::runtime_error("fill_disk: " + node_name(i) + " is not running");
    }
    std::error_code ec;
    const auto log_file = dir_ / "data" / node_name(i) / "log" / "log.dat";
    const std::uint64_t size = std::filesystem::file_size(log_file, ec);
    const std::uint64_t limit = std::max<std::uint64_t>(ec ? 0 : size, 4096);
    struct rlimit old {};
    if (::prlimit(p.pid, RLIMIT_FSIZE, nullptr, &old) != 0) {
        throw std::runtime_error("prlimit(" + node_name(i) + "): " + std::strerror(errno));
    }
    struct rlimit full {};
    full.rlim_cur = std::min<rlim_t>(static_cast<rlim_t>(limit), old.rlim_max);
    full.rlim_max = old.rlim_max;
    if (::prlimit(p.pid, RLIMIT_FSIZE, &full, nullptr) != 0) {
        throw std::runtime_error("prlimit(" + node_name(i) + "): " + std::strerror(errno));
    }
    return static_cast<std::uint64_t>(full.rlim_cur);
}

std::vector<ProcessExit> Cluster::reap() {
    std::vector<ProcessExit> out;
    for (NodeIndex i = 0; i < nodes_.size(); ++i) {
        NodeProcess& p = nodes_[i];
        if (p.pid == 0) {
            continue;
        }
        int status = 0;
        const pid_t r = ::waitpid(p.pid, &status, WNOHANG);
        if (r == p.pid) {
            p.pid = 0;
            p.paused = false;
            p.last_exit_status = status;
            out.push_back(ProcessExit{i, describe_status(status),
                                      WIFEXITED(status) && WEXITSTATUS(status) == 0});
        }
    }
    return out;
}

void Cluster::kill_all() {
    for (NodeIndex i = 0; i < nodes_.size(); ++i) {
        kill(i);
    }
}

std::string Cluster::log_tail(NodeIndex i, std::size_t lines) const {
    std::ifstream in(nodes_.at(i).log_path);
    std::deque<std::string> last;
    std::string line;
    while (std::getline(in, line)) {
        last.push_back(line);
        if (last.size() > lines) {
            last.pop_front();
        }
    }
    std::string out;
    for (const auto& l : last) {
        out += "    " + l + "\n";
    }
    return out;
}

std::optional<fs::path> find_conclaved(const fs::path& self_exe) {
    const fs::path dir = self_exe.parent_path();
    for (const fs::path& candidate : {dir / "conclaved", dir / ".." / "tools" / "conclaved",
                                      fs::path("build") / "release" / "tools" / "conclaved"}) {
        std::error_code ec;
        if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
            return fs::weakly_canonical(candidate, ec);
        }
    }
    return std::nullopt;
}

}  // namespace conclave::bounce
