// SPDX-License-Identifier: Apache-2.0
// ZooKeeper as a FailoverTarget: N servers on 127.0.0.1, one JVM each (Debian's `zookeeper`
// package: QuorumPeerMain from /usr/share/java/zookeeper.jar), each with its own data directory
// and myid. Roles are read with the `srvr` four-letter word on each server's client port
// ("Mode: leader" / "Mode: follower"; the leader's "Zxid: 0x<epoch><counter>"), allowed by
// 4lw.commands.whitelist=srvr.
#include <signal.h>

#include <fmt/core.h>
#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "bench.hpp"

namespace conclave::bench {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;

std::optional<ZooKeeperInstall> find_zookeeper() {
    const fs::path jar = "/usr/share/java/zookeeper.jar";
    const auto java = find_on_path("java");
    std::error_code ec;
    if (!java || !fs::is_regular_file(jar, ec)) {
        return std::nullopt;
    }
    ZooKeeperInstall z;
    z.java = *java;
    z.classpath = "/etc/zookeeper/conf:" + jar.string();
    return z;
}

namespace {

struct SrvrAnswer {
    bool serving = false;
    bool leader = false;
    bool follower = false;
    std::uint64_t epoch = 0;
};

/// One `srvr` on a fresh connection (the server closes it after answering).
std::optional<SrvrAnswer> srvr(std::uint16_t port, std::chrono::milliseconds timeout) {
    asio::io_context io;
    beast::tcp_stream stream(io);
    std::string text;
    beast::error_code result;
    std::array<char, 4096> buf{};
    std::function<void()> read_more;
    read_more = [&] {
        stream.async_read_some(asio::buffer(buf), [&](beast::error_code ec, std::size_t n) {
            text.append(buf.data(), n);
            if (ec) {
                result = ec == asio::error::eof ? beast::error_code{} : ec;
                return;
            }
            if (text.size() > 64 * 1024) {
                result = asio::error::message_size;
                return;
            }
            read_more();
        });
    };
    stream.expires_after(timeout);
    stream.async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), port),
                         [&](beast::error_code ec) {
                             if (ec) {
                                 result = ec;
                                 return;
                             }
                             asio::async_write(stream, asio::buffer(std::string_view("srvr")),
                                               [&](beast::error_code wec, std::size_t) {
                                                   if (wec) {
                                                       result = wec;
                                                       return;
                                                   }
                                                   read_more();
                                               });
                         });
    io.run();
    if (result) {
        return std::nullopt;
    }
    SrvrAnswer a;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("Mode: ", 0) == 0) {
            a.serving = true;
            a.leader = line.find("leader") != std::string::npos;
            a.follower = line.find("follower") != std::string::npos;
        } else if (line.rfind("Zxid: 0x", 0) == 0) {
            try {
                a.epoch = std::stoull(line.substr(8), nullptr, 16) >> 32;
            } catch (const std::exception&) {
                a.epoch = 0;
            }
        }
    }
    return a;
}

struct ZooKeeperMember {
    std::string name;  // z1, z2, ...
    std::uint16_t client_port = 0;
    std::vector<std::string> args;
    fs::path log;
    int pid = 0;
    bool paused = false;
};

class ZooKeeperTarget final : public PeerProcesses<ZooKeeperMember> {
  public:
    ZooKeeperTarget(ZooKeeperInstall install, std::size_t members, std::uint32_t tick_ms,
                    std::uint32_t sync_limit, const std::string& extra_config)
        : install_(std::move(install)), dir_(make_temp_dir("conclave-bench-zk")) {
        std::set<std::uint16_t> taken;
        members_.resize(members);
        std::string servers;
        for (std::size_t i = 0; i < members_.size(); ++i) {
            ZooKeeperMember& m = members_[i];
            m.name = fmt::format("z{}", i + 1);
            m.client_port = free_port(taken);
            const std::uint16_t quorum = free_port(taken);
            const std::uint16_t election = free_port(taken);
            servers += fmt::format("server.{}=127.0.0.1:{}:{}\n", i + 1, quorum, election);
        }
        for (std::size_t i = 0; i < members_.size(); ++i) {
            ZooKeeperMember& m = members_[i];
            const fs::path data = dir_ / fmt::format("z{}", i + 1);
            fs::create_directories(data);
            std::ofstream(data / "myid") << (i + 1) << "\n";
            const fs::path cfg = dir_ / fmt::format("z{}.cfg", i + 1);
            std::ofstream out(cfg);
            out << "tickTime=" << tick_ms << "\n"
                << "initLimit=" << std::max<std::uint32_t>(10, 5000 / tick_ms) << "\n"
                << "syncLimit=" << sync_limit << "\n"
                << "dataDir=" << data.string() << "\n"
                << "clientPortAddress=127.0.0.1\n"
                << "clientPort=" << m.client_port << "\n"
                << "admin.enableServer=false\n"
                << "4lw.commands.whitelist=srvr\n"
                << "quorumListenOnAllIPs=false\n"
                << extra_config << servers;
            m.log = dir_ / (m.name + ".log");
            m.args = {install_.java.string(),
                      "-Xmx256m",
                      "-XX:+UseSerialGC",
                      "-Dzookeeper.log.dir=" + dir_.string(),
                      "-Dzookeeper.root.logger=WARN,CONSOLE",
                      "-Dzookeeper.console.threshold=WARN",
                      "-cp",
                      install_.classpath,
                      "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                      cfg.string()};
        }
        for (std::size_t i = 0; i < members_.size(); ++i) {
            start(i);
        }
    }

    ~ZooKeeperTarget() override {
        for (std::size_t i = 0; i < members_.size(); ++i) {
            kill(i);
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    /// Agreed: exactly one of `members` serves as leader and every other one serves as follower
    /// (a survivor that was following the stopped leader stops serving when it looks for a new
    /// one, and serves again only once synchronised with the new leader). Followers report the
    /// zxid they last applied (0x0 in an empty tree), so only the leader's epoch is kept.
    std::optional<NodeIndex> poll_agreed(const std::vector<NodeIndex>& members) override {
        std::optional<NodeIndex> leader;
        std::uint64_t epoch = 0;
        for (NodeIndex i : members) {
            const auto a = srvr(members_[i].client_port, std::chrono::milliseconds(300));
            if (!a || !a->serving || (!a->leader && !a->follower)) {
                return std::nullopt;
            }
            if (a->leader) {
                if (leader) {
                    return std::nullopt;
                }
                leader = i;
                epoch = a->epoch;
            }
        }
        if (leader) {
            last_term_ = epoch;
        }
        return leader;
    }

  private:
    ZooKeeperInstall install_;
    fs::path dir_;
};

}  // namespace

std::unique_ptr<FailoverTarget> make_zookeeper_target(const ZooKeeperInstall& install,
                                                      std::size_t members, std::uint32_t tick_ms,
                                                      std::uint32_t sync_limit,
                                                      const std::string& extra_config) {
    return std::make_unique<ZooKeeperTarget>(install, members, tick_ms, sync_limit, extra_config);
}

}  // namespace conclave::bench
