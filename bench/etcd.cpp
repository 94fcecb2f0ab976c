// SPDX-License-Identifier: Apache-2.0
// etcd as a FailoverTarget: N members on 127.0.0.1 (Debian's etcd-server), leader read from the
// v3 HTTP gateway (POST /v3/maintenance/status) of each member.
#include <signal.h>

#include <algorithm>
#include <boost/beast/http/verb.hpp>
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
    return find_on_path("etcd");
}

namespace {

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

struct EtcdMember {
    std::string name;
    std::uint16_t peer_port = 0;
    std::uint16_t client_port = 0;
    std::vector<std::string> args;
    fs::path log;
    int pid = 0;
    bool paused = false;
    std::unique_ptr<HttpClient> client;
};

class EtcdTarget final : public PeerProcesses<EtcdMember> {
  public:
    EtcdTarget(fs::path etcd, std::size_t members, std::uint32_t heartbeat_ms,
               std::uint32_t election_ms)
        : etcd_(std::move(etcd)), dir_(make_temp_dir("conclave-bench-etcd")) {
        std::set<std::uint16_t> taken;
        members_.resize(members);
        std::string initial;
        for (std::size_t i = 0; i < members_.size(); ++i) {
            members_[i].name = "e" + std::to_string(i + 1);
            members_[i].peer_port = free_port(taken);
            members_[i].client_port = free_port(taken);
            initial += (i ? "," : "") + members_[i].name + "=" + url(members_[i].peer_port);
        }
        for (std::size_t i = 0; i < members_.size(); ++i) {
            EtcdMember& m = members_[i];
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
        try {
            last_term_ = std::stoull(term);
        } catch (const std::exception&) {
            last_term_ = 0;
        }
        return it->second;
    }

  private:
    fs::path etcd_;
    fs::path dir_;
    std::map<std::string, NodeIndex> ids_;  // member id (decimal) -> index
};

}  // namespace

std::unique_ptr<FailoverTarget> make_etcd_target(const fs::path& etcd, std::size_t members,
                                                 std::uint32_t heartbeat_ms,
                                                 std::uint32_t election_ms) {
    return std::make_unique<EtcdTarget>(etcd, members, heartbeat_ms, election_ms);
}

}  // namespace conclave::bench
