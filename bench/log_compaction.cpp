// SPDX-License-Identifier: Apache-2.0
// Compaction under a sustained write load: one log core (a 1-node cluster: every entry
// commits once durable) on FileStorage in a temporary directory, fed as fast as it takes entries
// for --seconds. Every --interval seconds it prints the process RSS, the bytes on disk
// (log.dat + log.snap + log.meta), the entries held (snapshot + tail), and the restart time: the
// log is closed and recovered from disk (FileStorage::recover + the core's constructor + start),
// and the run goes on with the recovered log. With --no-compact the same load runs without
// compaction, for comparison. No network: this measures what compaction bounds (memory, disk,
// recovery), not replication throughput (see log_throughput). The core runs inside the shared
// runtime (runtime/log_runtime.hpp), as in conclaved.
//
//   build/release/bench/log_compaction [--seconds 120] [--interval 10] [--keys 10000]
//       [--value-bytes 200] [--threshold 10000] [--retain 1000] [--fsync batched|never]
//       [--no-compact] [--dir DIR]
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/runtime/log_runtime.hpp"

using namespace conclave;
using namespace conclave::replication;

namespace {

struct Options {
    double seconds = 120;
    double interval = 10;
    std::size_t keys = 10'000;
    std::size_t value_bytes = 200;
    std::size_t threshold = 10'000;
    std::size_t retain = 1'000;
    FsyncPolicy fsync = FsyncPolicy::Batched;
    bool compact = true;
    std::filesystem::path dir;
};

Options Parse(int argc, char** argv) {
    Options o;
    CLI::App app("log_compaction", "log_compaction");
    app.add_option("--seconds", o.seconds)->check(CLI::Range(0.001, 1e6));
    app.add_option("--interval", o.interval)->check(CLI::Range(0.001, 1e6));
    app.add_option("--keys", o.keys)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40));
    app.add_option("--value-bytes", o.value_bytes);
    app.add_option("--threshold", o.threshold);
    app.add_option("--retain", o.retain);
    std::string fsync = "batched";
    app.add_option("--fsync", fsync)->check(CLI::IsMember({"batched", "never"}));
    app.add_flag_function("--no-compact", [&o](std::int64_t) { o.compact = false; });
    app.add_option("--dir", o.dir);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        std::exit(app.exit(e) == 0 ? 0 : 2);  // --help: 0; a bad command line: 2
    }
    o.fsync = fsync == "never" ? FsyncPolicy::Never : FsyncPolicy::Batched;
    return o;
}

double RssMiB() {
    std::ifstream statm("/proc/self/statm");
    unsigned long pages = 0;
    unsigned long resident = 0;
    statm >> pages >> resident;
    return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
           (1024.0 * 1024.0);
}

double DiskMiB(const std::filesystem::path& dir) {
    std::uintmax_t total = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
        if (f.is_regular_file()) {
            total += f.file_size();
        }
    }
    return static_cast<double>(total) / (1024.0 * 1024.0);
}

// The core runs inside the shared runtime (runtime/log_runtime.hpp), the one interpreter of its
// actions: storage actions in order, the group commit when this loop calls flush().
struct BenchEnv {
    static constexpr bool kPlantedBugs = false;
    FileStorage* store = nullptr;
    Millis now() const { return Millis{0}; }
    LogStorage& storage() { return *store; }
    void send(std::span<const NodeId>, const LogMessage&) {}  // one node: nobody to send to
    void arm(LogTimer, Millis, runtime::TimerGeneration) {}   // no timer is needed here
    void cancel(LogTimer) {}
    void schedule_flush() {}  // the loop flushes after each 100 proposals
    void apply(const std::vector<Entry>&) {}
    void propose_result(const ProposeResult&) {}
    void role(const NotifyLogRole&) {}
    [[noreturn]] void failed(const std::string& what) {
        std::fprintf(stderr, "log_compaction: storage failed: %s\n", what.c_str());
        std::exit(1);
    }
    void after_batch() {}
};

struct Running {
    std::unique_ptr<FileStorage> storage;
    std::unique_ptr<BenchEnv> env;
    std::unique_ptr<runtime::LogRuntime<BenchEnv>> rt;
};

Running Open(const Options& o, const LogConfig& config) {
    Running r;
    r.storage = std::make_unique<FileStorage>(o.dir, o.fsync);
    r.env = std::make_unique<BenchEnv>(BenchEnv{r.storage.get()});
    r.rt =
        std::make_unique<runtime::LogRuntime<BenchEnv>>(*r.env, config, r.storage->recover().log);
    r.rt->run([](ReplicatedLog& log) { return log.start(Millis{0}); });
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = Parse(argc, argv);
    const bool own_dir = o.dir.empty();
    if (own_dir) {
        o.dir = std::filesystem::temp_directory_path() /
                ("conclave-log-compaction-" + std::to_string(::getpid()));
    }
    std::filesystem::remove_all(o.dir);
    LogConfig config;  // one node: an entry commits once durable
    config.compact_threshold = o.compact ? o.threshold : 0;
    config.compact_retain = o.compact ? o.retain : 0;
    config.max_value_bytes = std::max<std::size_t>(o.value_bytes, 1);
    if (auto error = config.validate()) {
        std::fprintf(stderr, "log_compaction: %s\n", error->c_str());
        return 2;
    }
    std::printf(
        "log_compaction: %zu keys, %zu-byte values, fsync %s, compaction %s "
        "(threshold %zu, retain %zu), %.0f s, dir %s\n",
        o.keys, o.value_bytes, std::string(to_string(o.fsync)).c_str(), o.compact ? "on" : "off",
        o.threshold, o.retain, o.seconds, o.dir.c_str());
    std::printf("%8s %12s %10s %10s %12s %12s %10s\n", "time_s", "entries_w", "rss_mib", "disk_mib",
                "held_entries", "restart_ms", "commits/s");

    Running r = Open(o, config);
    std::uint64_t term = 1;
    const auto lead = [&] {
        ++term;
        r.rt->run([&](ReplicatedLog& log) {
            return log.on_leadership(
                Millis{0},
                elector::LeadershipSnapshot{elector::Role::Leader, Term{term}, NodeId{0}, term,
                                            elector::Reason::ElectionWon, Millis{0}, std::nullopt});
        });
        r.rt->flush();
    };
    lead();
    const std::string value(o.value_bytes, 'v');
    std::uint64_t counter = 0;
    std::uint64_t written = 0;
    std::uint64_t written_at_report = 0;
    const auto start = std::chrono::steady_clock::now();
    auto last_report = start;
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    while (elapsed() < o.seconds) {
        for (int i = 0; i < 100; ++i) {
            ++counter;
            r.rt->run([&](ReplicatedLog& log) {
                return log.propose(Millis{0}, Lsn{Term{term}, counter},
                                   "key/" + std::to_string(written % o.keys), value);
            });
            ++written;
        }
        r.rt->flush();
        const auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last_report).count() >= o.interval) {
            const double rate = static_cast<double>(written - written_at_report) /
                                std::chrono::duration<double>(now - last_report).count();
            const double rss = RssMiB();
            const double disk = DiskMiB(o.dir);
            const std::size_t held = r.rt->log().used_entries();
            // Restart: close, recover from disk, lead again (a new term).
            r = Running{};
            const auto t0 = std::chrono::steady_clock::now();
            r = Open(o, config);
            const double restart_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
            lead();
            counter = 0;
            std::printf("%8.0f %12llu %10.1f %10.1f %12zu %12.1f %10.0f\n", elapsed(),
                        static_cast<unsigned long long>(written), rss, disk, held, restart_ms,
                        rate);
            std::fflush(stdout);
            last_report = std::chrono::steady_clock::now();
            written_at_report = written;
        }
    }
    r = Running{};
    if (own_dir) {
        std::filesystem::remove_all(o.dir);
    }
    return 0;
}
