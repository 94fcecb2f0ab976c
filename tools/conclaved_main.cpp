// SPDX-License-Identifier: Apache-2.0
// conclaved: one Conclave node as a daemon. See node/README.md and docs/interfaces.md.
//   conclaved --config FILE --node-id ID [--join HOST:PORT] [--print-config] [--help] [--version]
//   conclaved --repair --config FILE --node-id ID [--min-term T]   (offline, node stopped)
// Exit status: 0 clean stop (SIGTERM/SIGINT, after a leadership hand-over), 1 runtime failure
// (data directory locked, port in use, corrupt metadata log, a storage failure while running),
// 2 bad command line or config, 3 the node's durable state refused (vote record lost, damaged or
// another node's; peers know the node by an earlier incarnation).
// SIGPIPE is ignored (a peer or client that goes away is an error on its socket); SIGHUP, SIGUSR1
// and SIGUSR2 are logged and ignored: conclaved re-reads no file while it runs (restart it, one
// node at a time, to load new certificates, a new token or secret).
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "conclave/node/cli.hpp"
#include "conclave/node/data_dir_lock.hpp"
#include "conclave/node/identity.hpp"
#include "conclave/node/join.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/node.hpp"
#include "conclave/node/repair.hpp"
#include "conclave/replication/storage.hpp"
#ifdef CONCLAVE_PLANTED_DAEMON
#include "conclave/core/enum_names.hpp"
#endif

namespace cn = conclave::node;

namespace {

/// Logs each signal of `signals` and keeps waiting.
void IgnoreLogged(boost::asio::signal_set& signals, cn::Node& node) {
    signals.async_wait([&signals, &node](const boost::system::error_code& ec, int signal_number) {
        if (ec) {
            return;
        }
        node.logger().warn(
            "signal {} received: ignored (conclaved re-reads no file while it runs; restart the "
            "node to load new certificates, token or secret)",
            signal_number);
        IgnoreLogged(signals, node);
    });
}

/// Runs the node until it stops (a signal, a storage failure, its state refused); the exit status.
int RunNode(const cn::ClusterConfig& config, const cn::CliOptions& cli) {
    cn::NodeOptions options;
    options.elector_trace = cli.trace_elector;
    cn::Node node(config, std::move(options));
    if (auto error = node.start()) {
        std::cerr << "conclaved: cannot start: " << *error << "\n";
        return cn::kExitFailure;
    }
    boost::asio::signal_set signals(node.io(), SIGTERM, SIGINT);
    signals.async_wait([&node](const boost::system::error_code& ec, int signal_number) {
        if (ec) {
            return;
        }
        node.logger().info("signal {} received: stopping", signal_number);
        node.stop();
    });
    boost::asio::signal_set ignored(node.io(), SIGHUP, SIGUSR1, SIGUSR2);
    IgnoreLogged(ignored, node);
    node.run();
    signals.cancel();
    ignored.cancel();
    if (const auto& refused = node.state_refused()) {
        std::cerr << "conclaved: " << *refused << "\n";
        return cn::kExitStateRefused;
    }
    if (const auto& failure = node.storage_failure()) {
        std::cerr << "conclaved: stopped on a storage failure: " << *failure
                  << "; fix the disk, then restart the node\n";
        return cn::kExitFailure;
    }
    return cn::kExitOk;
}

#ifdef CONCLAVE_PLANTED_DAEMON
/// conclaved_planted only (tests/tla: this file built again, linked with the planted elector core,
/// CONCLAVE_PLANTED_DAEMON defined): the elector's planted bug named by the environment variable
/// CONCLAVE_PLANTED_BUG (kebab case, "skip-sticky-leader"), so that a test can show that a check
/// of real daemons catches it. `conclaved` has no such code and its core refuses planted bugs.
bool PlantElectorBug(cn::ClusterConfig& config) {
    const char* name = std::getenv("CONCLAVE_PLANTED_BUG");
    if (name == nullptr) {
        return true;
    }
    const auto bug = conclave::parse_enum<conclave::elector::PlantedBug>(name);
    if (!bug) {
        std::cerr << "conclaved_planted: CONCLAVE_PLANTED_BUG: expected one of "
                  << conclave::enum_choices<conclave::elector::PlantedBug>() << "\n";
        return false;
    }
    config.elector.planted_bug = *bug;
    return true;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    // Until the node's handlers are in place (and SIGPIPE for good): no signal but SIGTERM and
    // SIGINT ends the process.
    for (const int ignored : {SIGPIPE, SIGHUP, SIGUSR1, SIGUSR2}) {
        std::signal(ignored, SIG_IGN);
    }
    std::vector<std::string> args(argv + 1, argv + argc);
    auto prepared = cn::prepare_daemon(args, std::cout, std::cerr);
    if (auto* exit = std::get_if<cn::StartupExit>(&prepared)) {
        return exit->status;
    }
    auto& ready = std::get<cn::StartupReady>(prepared);
#ifdef CONCLAVE_PLANTED_DAEMON
    if (!PlantElectorBug(ready.config)) {
        return cn::kExitUsage;
    }
#endif
    auto lock = cn::DataDirLock::acquire(ready.config.data_dir);
    if (auto* error = std::get_if<cn::DataDirLock::Error>(&lock)) {
        std::cerr << "conclaved: " << error->message
                  << (ready.options.repair ? " (--repair runs only while the node is stopped)" : "")
                  << "\n";
        return cn::kExitFailure;
    }
    if (ready.options.repair) {
        return cn::run_repair(ready.config, ready.options.min_term, std::cout, std::cerr);
    }
    try {
        if (ready.options.join) {
            auto logger = cn::make_logger(ready.config.self_entry().id, ready.config.log);
            if (auto error = cn::join_cluster(ready.config, *ready.options.join, *logger)) {
                std::cerr << "conclaved: " << *error << "\n";
                return cn::kExitFailure;
            }
        }
        return RunNode(ready.config, ready.options);
    } catch (const cn::IdentityError& e) {
        std::cerr << "conclaved: " << e.what() << "\n";
        return cn::kExitStateRefused;
    } catch (const conclave::drivers::StateFileError& e) {
        std::cerr << "conclaved: " << e.what() << "\n";
        return cn::kExitStateRefused;
    } catch (const conclave::replication::CorruptLogError& e) {
        std::cerr << "conclaved: " << e.what() << "; the repair command for this node: conclaved "
                  << "--repair --config " << ready.options.config_path << " --node-id "
                  << ready.options.node_id << "\n";
        return cn::kExitFailure;
    } catch (const std::exception& e) {
        std::cerr << "conclaved: " << e.what() << "\n";
        return cn::kExitFailure;
    }
}
