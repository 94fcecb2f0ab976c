// SPDX-License-Identifier: Apache-2.0
// A daemon started by leader-bounce or the benchmarks inherits no descriptor of the tool: a
// socket the tool holds (Asio opens them without close-on-exec) must not stay open in the child,
// or resetting a proxied connection would not reach the peer while the child lives.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "conclave/bounce/spawn.hpp"

namespace fs = std::filesystem;

TEST_CASE("spawn_daemon: the child inherits only stdin, stdout and stderr", "[spawn]") {
    // No SOCK_CLOEXEC, as Asio opens them; moved to a high number so that it cannot be confused
    // with the descriptor ls opens itself.
    const int socket = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(socket > 2);
    const int leaked = ::fcntl(socket, F_DUPFD, 100);
    ::close(socket);
    REQUIRE(leaked >= 100);
    const fs::path log =
        fs::temp_directory_path() / ("conclave-spawn-test-" + std::to_string(::getpid()) + ".log");
    fs::remove(log);
    // ls lists the child's descriptors: 0, 1, 2 and the one it opened to read /proc/self/fd.
    const pid_t pid = conclave::bounce::spawn_daemon({"/bin/ls", "-1", "/proc/self/fd"}, log);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ::close(leaked);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::ifstream in(log);
    std::set<int> fds;
    for (std::string line; std::getline(in, line);) {
        fds.insert(std::atoi(line.c_str()));
    }
    fs::remove(log);
    INFO("descriptors open in the child: " << fds.size());
    CHECK(fds.count(leaked) == 0);
    CHECK(fds.size() == 4);  // 0, 1, 2 and ls's own directory descriptor
}

TEST_CASE("spawn_daemon: a missing binary exits 127 and says so in the log", "[spawn]") {
    const fs::path log = fs::temp_directory_path() /
                         ("conclave-spawn-missing-" + std::to_string(::getpid()) + ".log");
    fs::remove(log);
    const pid_t pid = conclave::bounce::spawn_daemon({"/nonexistent/conclaved"}, log);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 127);
    std::ifstream in(log);
    std::string line;
    std::getline(in, line);
    fs::remove(log);
    CHECK(line == "exec of the daemon failed");
}
