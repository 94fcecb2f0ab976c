// etcd as a FailoverTarget: 3 members on 127.0.0.1 (Debian's etcd-server), leader read from the
// v3 HTTP gateway (POST /v3/maintenance/status) of each member.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/http/verb.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "bench.hpp"

namespace conclave::bench {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using asio::ip::tcp;

std::optional<fs::path> find_etcd() {
    const char* path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        const std::size_t end = std::min(dirs.find(':', start), dirs.size());
        const fs::path candidate = fs::path(dirs.substr(start, end - start)) / "etcd";
        std::error_code ec;
        if (end > start && fs::is_regular_file(candidate, ec) &&
            ::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
        start = end + 1;
    }
    return std::nullopt;
}

namespace {

std::uint16_t free_port(std::set<std::uint16_t>& taken) {
    asio::io_context io;
    for (int attempt = 0; attempt < 100; ++attempt) {
        tcp::acceptor a(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
        const std::uint16_t port = a.local_endpoint().port();
        if (taken.insert(port).second) {
            return port;
        }
    }
    throw std::runtime_error("could not find a free port on 127.0.0.1");
}

std::string url(std::uint16_t port) {
    return "http://127.0.0.1:" + std::to_string(port);
}

/// Members' ids are uint64 printed as decimal strings by the gateway; "0" means none.
std::string json_string(const nlohmann::json& j, const char* field) {
    if (!j.contains(field)) {
        return "";
    }
    const auto& v = j[field];
    return v.is_string() ? v.get<std::string>() : v.dump();
}

class EtcdTarget final : public FailoverTarget {
  public:
    EtcdTarget(fs::path etcd, std::uint32_t heartbeat_ms, std::uint32_t election_ms)
        : etcd_(std::move(etcd)) {
        std::string pattern = (fs::temp_directory_path() / "conclave-bench-etcd-XXXXXX").string();
        std::vector<char> buf(pattern.begin(), pattern.end());
        buf.push_back('\0');
        if (::mkdtemp(buf.data()) == nullptr) {
            throw std::runtime_error("cannot create a temporary directory: " +
                                     std::string(std::strerror(errno)));
        }
        dir_ = buf.data();
        std::set<std::uint16_t> taken;
        members_.resize(3);
        std::string initial;
        for (std::size_t i = 0; i < members_.size(); ++i) {
            members_[i].name = "e" + std::to_string(i + 1);
            members_[i].peer_port = free_port(taken);
            members_[i].client_port = free_port(taken);
            initial += (i ? "," : "") + members_[i].name + "=" + url(members_[i].peer_port);
        }
        for (std::size_t i = 0; i < members_.size(); ++i) {
            Member& m = members_[i];
            m.args = {etcd_.string(),
                      "--name",
                      m.name,
                      "--data-dir",
                      (dir_ / m.name).string(),
                      "--listen-peer-urls",
                      url(m.peer_port),
                      "--initial-advertise-peer-urls",
                      url(m.peer_port),
                      "--listen-client-urls",
                      url(m.client_port),
                      "--advertise-client-urls",
                      url(m.client_port),
                      "--initial-cluster",
                      initial,
                      "--initial-cluster-state",
                      "new",
                      "--initial-cluster-token",
                      "conclave-bench",
                      "--heartbeat-interval",
                      std::to_string(heartbeat_ms),
                      "--election-timeout",
                      std::to_string(election_ms),
                      "--pre-vote=true",
                      "--logger",
                      "zap",
                      "--log-level",
                      "warn"};
            m.log = dir_ / (m.name + ".log");
            m.client = std::make_unique<HttpClient>(
                tcp::endpoint(asio::ip::address_v4::loopback(), m.client_port));
        }
        for (std::size_t i = 0; i < members_.size(); ++i) {
            start(i);
        }
    }

    ~EtcdTarget() override {
        for (std::size_t i = 0; i < members_.size(); ++i) {
            kill(i);
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    std::size_t size() const override { return members_.size(); }

    std::optional<NodeIndex> poll_agreed(const std::vector<NodeIndex>& members) override {
        std::string leader;
        std::string term;
        for (NodeIndex i : members) {
            const auto body = members_[i].client->request(boost::beast::http::verb::post,
                                                          "/v3/maintenance/status", "{}",
                                                          std::chrono::milliseconds(300));
            if (!body) {
                return std::nullopt;
            }
            const auto j = nlohmann::json::parse(*body, nullptr, false);
            if (j.is_discarded() || !j.is_object() || !j.contains("header")) {
                return std::nullopt;
            }
            const std::string id = json_string(j["header"], "member_id");
            if (!id.empty()) {
                ids_[id] = i;
            }
            const std::string l = json_string(j, "leader");
            const std::string t = json_string(j, "raftTerm");
            if (l.empty() || l == "0" || (!leader.empty() && (l != leader || t != term))) {
                return std::nullopt;
            }
            leader = l;
            term = t;
        }
        const auto it = ids_.find(leader);
        if (it == ids_.end()) {
            return std::nullopt;  // not yet mapped to an index: its own status not seen yet
        }
        if (std::find(members.begin(), members.end(), it->second) == members.end()) {
            return std::nullopt;  // a survivor still names the signalled member
        }
        return it->second;
    }

    void send_signal(NodeIndex member, int signal) override {
        if (signal == SIGKILL) {
            kill(member);
        } else if (members_[member].pid != 0) {
            ::kill(members_[member].pid, SIGSTOP);
            members_[member].paused = true;
        }
    }

    void restore(NodeIndex member) override {
        Member& m = members_[member];
        if (m.pid == 0) {
            start(member);
        } else if (m.paused) {
            ::kill(m.pid, SIGCONT);
            m.paused = false;
        }
    }

    std::string log_tails() override {
        std::string out;
        for (const Member& m : members_) {
            std::ifstream in(m.log);
            std::deque<std::string> last;
            std::string line;
            while (std::getline(in, line)) {
                last.push_back(line);
                if (last.size() > 5) {
                    last.pop_front();
                }
            }
            out += m.name + ".log:\n";
            for (const auto& l : last) {
                out += "    " + l + "\n";
            }
        }
        return out;
    }

  private:
    struct Member {
        std::string name;
        std::uint16_t peer_port = 0;
        std::uint16_t client_port = 0;
        std::vector<std::string> args;
        fs::path log;
        pid_t pid = 0;
        bool paused = false;
        std::unique_ptr<HttpClient> client;
    };

    void start(std::size_t i) {
        Member& m = members_[i];
        std::vector<char*> argv;
        for (std::string& a : m.args) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        const std::string log = m.log.string();
        const pid_t parent = ::getpid();
        const pid_t pid = ::fork();
        if (pid < 0) {
            throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
        }
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) {
                ::_exit(127);
            }
            ::setpgid(0, 0);
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd >= 0) {
                ::dup2(fd, 1);
                ::dup2(fd, 2);
            }
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        m.pid = pid;
        m.paused = false;
    }

    void kill(std::size_t i) {
        Member& m = members_[i];
        if (m.pid == 0) {
            return;
        }
        ::kill(m.pid, SIGKILL);
        int status = 0;
        while (::waitpid(m.pid, &status, 0) < 0 && errno == EINTR) {
        }
        m.pid = 0;
        m.paused = false;
    }

    fs::path etcd_;
    fs::path dir_;
    std::vector<Member> members_;
    std::map<std::string, NodeIndex> ids_;  // member id (decimal) -> index
};

}  // namespace

std::unique_ptr<FailoverTarget> make_etcd_target(const fs::path& etcd, std::uint32_t heartbeat_ms,
                                                 std::uint32_t election_ms) {
    return std::make_unique<EtcdTarget>(etcd, heartbeat_ms, election_ms);
}

}  // namespace conclave::bench
