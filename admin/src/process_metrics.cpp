// SPDX-License-Identifier: Apache-2.0
// process_* metrics (the Prometheus client libraries' names) and conclave_build_info, from
// getrusage, getrlimit and Linux's /proc/self. A file that cannot be read leaves its gauge as it
// was: /metrics never fails because of it.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "conclave/admin/metrics.hpp"

namespace conclave::admin {

namespace {

double Seconds(const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

/// /proc/self/statm: total and resident pages.
void ReadMemory(Gauge& virtual_bytes, Gauge& resident_bytes) {
    std::ifstream statm("/proc/self/statm");
    double size_pages = 0;
    double resident_pages = 0;
    if (statm >> size_pages >> resident_pages) {
        const auto page = static_cast<double>(::sysconf(_SC_PAGESIZE));
        virtual_bytes.set(size_pages * page);
        resident_bytes.set(resident_pages * page);
    }
}

void ReadOpenFds(Gauge& open_fds) {
    std::error_code ec;
    std::filesystem::directory_iterator it("/proc/self/fd", ec);
    if (ec) {
        return;
    }
    double count = 0;
    for (const auto end = std::filesystem::directory_iterator(); it != end; it.increment(ec)) {
        if (ec) {
            return;
        }
        count += 1;
    }
    open_fds.set(count);
}

}  // namespace

void register_process_metrics(MetricsRegistry& registry, std::string_view version) {
    registry
        .gauge("conclave_build_info", "Always 1; the version of this build in a label",
               {{"version", std::string(version)}})
        .set(1);
    const auto started =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch());
    registry
        .gauge("process_start_time_seconds",
               "When the node started its metrics (about the process start), Unix time in seconds")
        .set(started.count());
    Counter& cpu = registry.counter("process_cpu_seconds_total", "User and system CPU time spent");
    Gauge& resident = registry.gauge("process_resident_memory_bytes", "Resident memory size");
    Gauge& virtual_bytes = registry.gauge("process_virtual_memory_bytes", "Virtual memory size");
    Gauge& open_fds = registry.gauge("process_open_fds", "Open file descriptors");
    Gauge& max_fds = registry.gauge("process_max_fds", "Limit of open file descriptors");
    registry.on_collect([&cpu, &resident, &virtual_bytes, &open_fds, &max_fds] {
        rusage usage{};
        if (::getrusage(RUSAGE_SELF, &usage) == 0) {
            const double total = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
            if (total >= cpu.value()) {
                cpu.set_total(total);
            }
        }
        ReadMemory(virtual_bytes, resident);
        ReadOpenFds(open_fds);
        rlimit limit{};
        if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
            max_fds.set(static_cast<double>(limit.rlim_cur));
        }
    });
}

}  // namespace conclave::admin
