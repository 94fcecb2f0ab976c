// SPDX-License-Identifier: Apache-2.0
// conclave-broker-example: one node of the example broker (broker.hpp) as a process, for the
// real-process fault test (tests/netns/broker_faults.py). Built in the tree only, never installed.
//   conclave-broker-example --config FILE --node-id ID [--report FILE] [--partitions N]
//                           [--check-every MS]
// It runs a conclave::node::Node from the same cluster config conclaved takes (its admin HTTP API
// included) and the example Broker on it, and reports, one JSON object per line, flushed at once:
//   {"event":"up","node":ID,"pid":PID,"t":NS}                       the process started
//   {"event":"start","node":ID,"partition":P,"token":T,"t":NS}     began serving P
//   {"event":"stop","node":ID,"partition":P,"token":T,"t":NS}      served P for the last time
//   {"event":"ack","node":ID,"partition":P,"lsn":"T.C","value":V,"t":NS}  an assignment this broker
//                                                                   wrote was acknowledged
// NS is CLOCK_MONOTONIC in nanoseconds (one clock for every network namespace of the host). Every
// --check-every ms the broker decides, for each partition, whether it serves it
// (Broker::serving); a serving interval runs from the clock read just before the first check that
// said yes to the clock read just after the last one: a process that is paused or killed decides
// nothing, so it serves nothing until it checks again, and a "stop" line carries the time of the
// last yes, not the time the change was noticed.
// Exit status as conclaved's: 0 clean stop (SIGTERM/SIGINT), 1 runtime failure, 2 bad command
// line or config. Planted bug, tests only: CONCLAVE_BROKER_PLANTED_BUG=stale-serving makes the
// broker serve on its applied assignment alone, without the token or the lease
// (BrokerOptions::planted_stale_serving).
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "broker.hpp"
#include "conclave/admin/metadata.hpp"
#include "conclave/node/cli.hpp"
#include "conclave/node/data_dir_lock.hpp"
#include "conclave/node/node.hpp"

namespace cn = conclave::node;
using conclave::examples::Broker;
using conclave::examples::BrokerOptions;

namespace {

constexpr const char* kProgram = "conclave-broker-example";

struct BrokerCli {
    std::string config;
    std::string node_id;
    std::string report;  // empty: stdout
    int partitions = 8;
    int check_every_ms = 5;
};

std::int64_t MonotonicNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// JSON lines on a file opened for appending (a restarted broker adds to its report), or stdout;
/// each line flushed as it is written.
class Report {
  public:
    explicit Report(const std::string& path)
        : file_(path.empty() ? stdout : std::fopen(path.c_str(), "a")), owned_(!path.empty()) {}
    ~Report() {
        if (owned_ && file_ != nullptr) {
            std::fclose(file_);
        }
    }
    Report(const Report&) = delete;
    Report& operator=(const Report&) = delete;
    bool ok() const { return file_ != nullptr; }
    void write(const nlohmann::json& line) {
        const std::string text = line.dump() + "\n";
        std::fwrite(text.data(), 1, text.size(), file_);
        std::fflush(file_);
    }

  private:
    std::FILE* file_;
    bool owned_;
};

/// Checks every partition each period and reports the serving intervals and acknowledgements.
class Watcher {
  public:
    Watcher(cn::Node& node, Broker& broker, Report& report, int partitions,
            std::chrono::milliseconds period)
        : broker_(broker),
          report_(report),
          period_(period),
          timer_(node.io()),
          id_(node.config().self_entry().id),
          serving_(static_cast<std::size_t>(partitions)),
          last_yes_(static_cast<std::size_t>(partitions)),
          tokens_(serving_.size()) {}

    void start() {
        report_.write({{"event", "up"}, {"node", id_}, {"pid", getpid()}, {"t", MonotonicNs()}});
        tick();
    }
    /// Closes the intervals still open (a clean stop): they ended at their last check.
    void finish() {
        finished_ = true;
        timer_.cancel();
        for (std::size_t p = 0; p < serving_.size(); ++p) {
            if (serving_[p]) {
                emit("stop", p, last_yes_[p]);
            }
        }
    }

  private:
    void tick() {
        check_partitions();
        report_acks();
        timer_.expires_after(period_);
        timer_.async_wait([this](const boost::system::error_code& ec) {
            if (!ec && !finished_) {
                tick();
            }
        });
    }
    void check_partitions() {
        const std::int64_t before = MonotonicNs();
        std::vector<bool> now(serving_.size());
        for (std::size_t p = 0; p < now.size(); ++p) {
            now[p] = broker_.serving(static_cast<int>(p));
        }
        const std::int64_t after = MonotonicNs();
        for (std::size_t p = 0; p < now.size(); ++p) {
            if (now[p] && !serving_[p]) {
                const auto held = broker_.assignments().find(static_cast<int>(p));
                tokens_[p] = held == broker_.assignments().end() ? 0 : held->second.token;
                emit("start", p, before);
            } else if (!now[p] && serving_[p]) {
                emit("stop", p, last_yes_[p]);
            }
            serving_[p] = now[p];
            if (now[p]) {
                last_yes_[p] = after;
            }
        }
    }
    void report_acks() {
        const auto& acked = broker_.acknowledged();
        for (; acks_reported_ < acked.size(); ++acks_reported_) {
            const Broker::Acknowledged& a = acked[acks_reported_];
            report_.write({{"event", "ack"},
                           {"node", id_},
                           {"partition", a.partition},
                           {"lsn", conclave::admin::lsn_text(a.lsn)},
                           {"value", a.value},
                           {"t", MonotonicNs()}});
        }
    }
    void emit(const char* event, std::size_t p, std::int64_t t) {
        report_.write(
            {{"event", event}, {"node", id_}, {"partition", p}, {"token", tokens_[p]}, {"t", t}});
    }

    Broker& broker_;
    Report& report_;
    std::chrono::milliseconds period_;
    boost::asio::steady_timer timer_;
    std::string id_;
    std::vector<bool> serving_;
    std::vector<std::int64_t> last_yes_;
    std::vector<std::uint64_t> tokens_;
    std::size_t acks_reported_ = 0;
    bool finished_ = false;
};

/// Parses the command line into `cli`; an exit status when the program should stop here.
std::optional<int> ParseCommandLine(int argc, char** argv, BrokerCli& cli) {
    CLI::App app{
        "The example broker (examples/broker) on one Conclave node, reporting what it "
        "serves (JSON lines, CLOCK_MONOTONIC ns) for the real-process fault test",
        kProgram};
    app.add_option("--config", cli.config, "cluster config, as conclaved's")
        ->required()
        ->type_name("FILE");
    app.add_option("--node-id", cli.node_id, "this node's id in the config")
        ->required()
        ->type_name("ID");
    app.add_option("--report", cli.report, "append the report to FILE (default: standard output)")
        ->type_name("FILE");
    app.add_option("--partitions", cli.partitions, "partitions to assign (default 8)")
        ->check(CLI::Range(1, 1024))
        ->type_name("N");
    app.add_option("--check-every", cli.check_every_ms,
                   "milliseconds between two serving checks (default 5)")
        ->check(CLI::Range(1, 1000))
        ->type_name("MS");
    app.footer(
        "Report: one JSON object per line, flushed at once; \"t\" is CLOCK_MONOTONIC in ns.\n"
        "  {\"event\":\"up\",\"node\",\"pid\",\"t\"}: the process started\n"
        "  {\"event\":\"start\"|\"stop\",\"node\",\"partition\",\"token\",\"t\"}: the first and "
        "the "
        "last\n    check that said the broker serves the partition\n"
        "  {\"event\":\"ack\",\"node\",\"partition\",\"lsn\",\"value\",\"t\"}: an assignment this "
        "broker\n    wrote was acknowledged\n"
        "Exit status: 0 clean stop (SIGTERM/SIGINT), 1 runtime failure, 2 bad command line or "
        "config.");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {
            std::cout << app.help();
            return cn::kExitOk;
        }
        std::cerr << kProgram << ": " << e.what() << "\nTry '" << kProgram
                  << " --help' for more information.\n";
        return cn::kExitUsage;
    }
    return std::nullopt;
}

/// The config loaded and checked as conclaved does it (prepare_daemon), its messages under this
/// program's name; nullopt after printing why not.
std::optional<cn::ClusterConfig> LoadConfig(const BrokerCli& cli) {
    std::ostringstream out;
    std::ostringstream err;
    auto prepared =
        cn::prepare_daemon({"--config", cli.config, "--node-id", cli.node_id}, out, err);
    if (auto* ready = std::get_if<cn::StartupReady>(&prepared)) {
        return std::move(ready->config);
    }
    std::istringstream lines(err.str());
    for (std::string line; std::getline(lines, line);) {
        const std::string daemon = "conclaved: ";
        if (line.rfind(daemon, 0) == 0) {
            line = std::string(kProgram) + ": " + line.substr(daemon.size());
        }
        if (line.rfind("Try '", 0) != 0) {
            std::cerr << line << "\n";
        }
    }
    return std::nullopt;
}

/// Whether CONCLAVE_BROKER_PLANTED_BUG names a known planted bug (or is unset); sets it.
bool PlantedBug(BrokerOptions& options) {
    const char* name = std::getenv("CONCLAVE_BROKER_PLANTED_BUG");
    if (name == nullptr) {
        return true;
    }
    if (std::string(name) != "stale-serving") {
        std::cerr << kProgram << ": CONCLAVE_BROKER_PLANTED_BUG: expected stale-serving\n";
        return false;
    }
    std::cerr << kProgram << ": PLANTED BUG stale-serving: serving without token or lease\n";
    options.planted_stale_serving = true;
    return true;
}

int Run(const cn::ClusterConfig& config, const BrokerCli& cli, BrokerOptions options) {
    Report report(cli.report);
    if (!report.ok()) {
        std::cerr << kProgram << ": cannot open " << cli.report << " for appending\n";
        return cn::kExitFailure;
    }
    cn::Node node(config);
    if (auto error = node.start()) {
        std::cerr << kProgram << ": cannot start: " << *error << "\n";
        return cn::kExitFailure;
    }
    options.partition_count = cli.partitions;
    Broker broker(node, options);
    Watcher watcher(node, broker, report, cli.partitions,
                    std::chrono::milliseconds(cli.check_every_ms));
    watcher.start();
    boost::asio::signal_set signals(node.io(), SIGTERM, SIGINT);
    signals.async_wait([&node, &watcher](const boost::system::error_code& ec, int) {
        if (!ec) {
            watcher.finish();
            node.stop();
        }
    });
    node.run();
    signals.cancel();
    if (const auto& failure = node.storage_failure()) {
        std::cerr << kProgram << ": stopped on a storage failure: " << *failure << "\n";
        return cn::kExitFailure;
    }
    if (const auto& refused = node.state_refused()) {
        std::cerr << kProgram << ": " << *refused << "\n";
        return cn::kExitFailure;
    }
    return cn::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    BrokerCli cli;
    if (auto status = ParseCommandLine(argc, argv, cli)) {
        return *status;
    }
    BrokerOptions options;
    if (!PlantedBug(options)) {
        return cn::kExitUsage;
    }
    auto config = LoadConfig(cli);
    if (!config) {
        return cn::kExitUsage;
    }
    auto lock = cn::DataDirLock::acquire(config->data_dir);
    if (auto* error = std::get_if<cn::DataDirLock::Error>(&lock)) {
        std::cerr << kProgram << ": " << error->message << "\n";
        return cn::kExitFailure;
    }
    try {
        return Run(*config, cli, options);
    } catch (const std::exception& e) {
        std::cerr << kProgram << ": " << e.what() << "\n";
        return cn::kExitFailure;
    }
}
