// SPDX-License-Identifier: Apache-2.0
// Forking a daemon with a clean set of descriptors (see spawn.hpp).
#include "conclave/bounce/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace conclave::bounce {

pid_t spawn_daemon(const std::vector<std::string>& argv, const std::filesystem::path& log) {
    if (argv.empty()) {
        throw std::invalid_argument("spawn_daemon: no program");
    }
    // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
    std::vector<std::string> args = argv;
    std::vector<char*> c_args;
    for (std::string& a : args) {
        c_args.push_back(a.data());
    }
    c_args.push_back(nullptr);
    const std::string log_path = log.string();
    struct rlimit files {};
    const int max_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
                               files.rlim_cur < 65536
                           ? static_cast<int>(files.rlim_cur)
                           : 65536;
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
        ::setpgid(0, 0);  // Ctrl-C reaches the tool only; the tool stops the daemons
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGXFSZ, &ignore, nullptr);
        const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ::dup2(fd, 1);
            ::dup2(fd, 2);
        }
        if (null_fd >= 0) {
            ::dup2(null_fd, 0);
        }
        // Close every inherited descriptor above stderr: close_range (Linux >= 5.9; the raw
        // syscall because glibc's wrapper may be missing), else one by one.
        if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
            for (int other = 3; other < max_fd; ++other) {
                ::close(other);
            }
        }
        ::execv(c_args[0], c_args.data());
        const char msg[] = "exec of the daemon failed\n";
        [[maybe_unused]] const auto w = ::write(2, msg, sizeof msg - 1);
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent: the group exists before the first signal
    return pid;
}

}  // namespace conclave::bounce
