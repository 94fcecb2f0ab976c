// SPDX-License-Identifier: Apache-2.0
// Starting a daemon (conclaved, or a peer the benchmarks compare with) as a child process: its own
// process group, stdout and stderr appended to a log file, stdin from /dev/null, killed with the
// parent, and none of the parent's descriptors inherited.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace conclave::bounce {

/// Forks and execs `argv` (argv[0] is the binary's path). In the child, before exec: SIGKILL when
/// the parent dies (PR_SET_PDEATHSIG), a process group of its own (signals to the tool do not
/// reach it), SIGXFSZ ignored (a write past RLIMIT_FSIZE fails with EFBIG instead of killing the
/// daemon: the disk-full scenario), stdout/stderr appended to `log`, stdin /dev/null, and every
/// other descriptor closed. The last matters: Asio does not open sockets close-on-exec, so without
/// it a daemon would inherit the fault proxy's sockets, and closing (or resetting) a proxied
/// connection in the tool would no longer reach the peer at the other end while the daemon holds
/// a copy — a killed node's peers then keep a dead connection "up" and never redial it.
/// Returns the child's pid; throws std::runtime_error when fork fails. If exec fails the child
/// writes one line to the log and exits with status 127.
pid_t spawn_daemon(const std::vector<std::string>& argv, const std::filesystem::path& log);

}  // namespace conclave::bounce
