// SPDX-License-Identifier: Apache-2.0
// The command line of `conclaved` (contract: docs/interfaces.md):
//   conclaved --config FILE --node-id ID [--print-config] [--help] [--version]
//   conclaved --repair --config FILE --node-id ID [--min-term T]
// Options also accept the "--option=value" form. Exit statuses: 0 clean stop, 1 runtime failure,
// 2 bad command line or bad config.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "conclave/node/cluster_config.hpp"

namespace conclave::node {

inline constexpr int kExitOk = 0;
/// Runtime failure: data directory locked, port in use, unrecoverable I/O error.
inline constexpr int kExitFailure = 1;
/// Bad command line or bad config.
inline constexpr int kExitUsage = 2;
/// The node's durable state was refused: its vote record is lost or damaged, belongs to another
/// node, or its peers know it by an earlier incarnation. Restarting cannot fix it: an operator
/// must take one of the ways back the message names.
inline constexpr int kExitStateRefused = 3;

struct CliOptions {
    std::string config_path;
    std::string node_id;
    bool print_config = false;
    bool help = false;
    bool version = false;
    /// Offline repair of a corrupt metadata log (run_repair in repair.hpp).
    bool repair = false;
    std::optional<std::uint64_t> min_term;  // --min-term, with --repair only
    /// --join HOST:PORT: ask that member to add this node (docs/membership.md §4; join.hpp).
    std::optional<Endpoint> join;
    /// --trace-elector FILE: append the elector's steps to FILE (NDJSON; docs/tla-traces.md).
    std::string trace_elector;
};

/// Parses the arguments after argv[0]. Returns the options, or an error message. --help and
/// --version make the other options optional.
std::variant<CliOptions, std::string> parse_command_line(const std::vector<std::string>& args);

/// The full --help text.
std::string usage_text();
/// "conclaved <version>" and a line about the build.
std::string version_text();
/// The project version, e.g. "0.1.0".
std::string_view conclave_version();

/// The daemon should exit now with this status (help, version, print-config, or an error already
/// reported on `err`).
struct StartupExit {
    int status = kExitOk;
};
/// The daemon should run with this config.
struct StartupReady {
    CliOptions options;
    ClusterConfig config;
};

/// Everything main() does before it starts the node: parse the command line, answer --help and
/// --version, load and validate the config (errors on `err`, status 2), answer --print-config (the
/// effective config as JSON on `out`). Taking the data-directory lock is the caller's next step
/// (then, with options.repair, run_repair() instead of starting the node).
std::variant<StartupExit, StartupReady> prepare_daemon(const std::vector<std::string>& args,
                                                       std::ostream& out, std::ostream& err);

}  // namespace conclave::node
