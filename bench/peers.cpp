// SPDX-License-Identifier: Apache-2.0
// Processes of the peers the benchmarks compare with (etcd, ZooKeeper): finding the binary, free
// loopback ports, a private temporary directory, and forking a member in its own process group
// with its output in a log file.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>

#include "bench.hpp"
#include "conclave/bounce/spawn.hpp"

namespace conclave::bench {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using asio::ip::tcp;

std::optional<fs::path> find_on_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    const std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        const std::size_t end = std::min(dirs.find(':', start), dirs.size());
        const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
        std::error_code ec;
        if (end > start && fs::is_regular_file(candidate, ec) &&
            ::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
        start = end + 1;
    }
    return std::nullopt;
}

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

fs::path make_temp_dir(const std::string& prefix) {
    std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
        throw std::runtime_error("cannot create a temporary directory: " +
                                 std::string(std::strerror(errno)));
    }
    return buf.data();
}

int spawn_logged(std::vector<std::string> args, const fs::path& log) {
    return bounce::spawn_daemon(args, log);
}

void signal_group(int pid, int signal) {
    if (pid > 0) {
        ::kill(-pid, signal);
    }
}

void kill_and_reap(int pid) {
    if (pid <= 0) {
        return;
    }
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
}

std::string file_tail(const fs::path& file, std::size_t lines) {
    std::ifstream in(file);
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

}  // namespace conclave::bench
