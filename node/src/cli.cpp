// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/cli.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <ostream>

#include "conclave/admin/admin_server.hpp"
#include "conclave/node/security.hpp"

#ifndef CONCLAVE_VERSION
#define CONCLAVE_VERSION "unknown"
#endif

namespace conclave::node {

std::string_view conclave_version() {
    return CONCLAVE_VERSION;
}

std::string version_text() {
    return "conclaved " + std::string(conclave_version()) + "\n";
}

namespace {

// `conclaved --help`, in its sections.
constexpr std::string_view kUsageSynopsis =
    R"(Usage: conclaved --config FILE --node-id ID [--join HOST:PORT] [--print-config]
                 [--trace-elector FILE]
       conclaved --repair --config FILE --node-id ID [--min-term T]
       conclaved --help | --version

Runs one node of a Conclave cluster: leader election among the nodes listed in the
cluster config, with an HTTP admin interface on the node's "http" endpoint.

)";
constexpr std::string_view kUsageOptions = R"(Options:
  --config FILE     cluster config (JSON): cluster name, nodes (id, peer, http),
                    profile ("default", "fast", "reference") and timing overrides,
                    scouting, check_quorum, data_dir, tls, log (format, level),
                    secret_file, admin (token_file, ...), insecure;
                    see node/README.md. Refused unless peers authenticate (tls
                    or secret_file) and the admin API has a token_file, or the
                    config says "insecure": true (loopback demos; see SECURITY.md)
  --node-id ID      which of the configured nodes this process is
  --join HOST:PORT  a new node (empty data directory) asks the member whose peer
                    address this is to add it to the cluster: it authenticates
                    like a peer (tls / secret_file), is redirected to the leader,
                    added as a learner, and stores the node table it learns in
                    its data directory (members.json; later starts use it, not
                    the config's nodes, and need no --join). Promote it with
                    POST /members {"op": "promote", "id": ID} once caught up.
                    A removed node restarted with --join is added back as a
                    learner (at its addresses) and learns the current table.
                    A member ignores --join. Waits up to 60 s for a leader;
                    exit 1 if refused
  --trace-elector FILE  append one JSON line per elector step to FILE (the
                    input, the messages sent, the state after; a header line per
                    process). Off by default. tla/merge_daemon_traces.py merges
                    the files of a cluster for tla/validate-trace.sh; see
                    docs/tla-traces.md
  --print-config    print the effective config for this node as JSON and exit
                    (profile and overrides resolved, {id} substituted)
  --repair          offline, with the node stopped (refused while it runs: the
                    data directory is locked): repair a corrupt metadata log.
                    Cuts <data_dir>/log/log.dat at its first bad record (the
                    records after it are dropped too and copied to
                    log.dat.dropped-OFFSET), rewrites log.meta and writes the
                    repaired marker R (the highest term this node may have
                    promised). Until it has caught up from a leader of a term
                    above R, the node gives no sync promise, its log acks do not
                    count for commit and its elector never votes in a term <= R
                    (/status "repaired"). Prints what it dropped; exit 0.
                    See "Corrupt log" in node/README.md
  --min-term T      with --repair: the cluster's current term (GET /status of a
                    running node); needed when the elector state is unreadable
                    (its lost votes may lie above every term on disk) or when
                    log.meta is and there is no elector state; raises R
                    otherwise
  --help            print this help and exit
  --version         print the version and exit
Options also accept the --option=VALUE form.

)";
constexpr std::string_view kUsageEndpoints =
    R"(Admin HTTP endpoints (see node/README.md; conclavectl is their command-line client):
  GET /status, GET /metrics (Prometheus text), GET /healthz,
  GET /leadership (?watch=1: NDJSON stream of changes; ?wait=S&after=TOKEN: long-poll),
  POST /transfer-leadership?to=ID, POST /step-down,
  POST /metadata {"key","value"}, GET /metadata?from=TERM.COUNTER&max=N,
  GET /members, POST /members {"op": "add-learner"|"promote"|"remove", "id"}
  (ids of the node table; a new node joins with --join)
  Every request but GET /healthz and GET /metrics needs "Authorization: Bearer
  <token>" (admin.token_file) unless insecure (admin.open_reads: true opens every
  GET); POST requests need a JSON body (Content-Type: application/json); a Host
  or Origin that is not this node (or localhost), or an Origin on another port,
  is refused with 403. With "admin":
  {"tls": true} (the node certificate of "tls") or {"tls": {"cert", "key"}} they
  are served over HTTPS only. A connection that sends nothing for
  admin.idle_timeout_ms (2000) is closed.

)";
constexpr std::string_view kUsageSignals = R"(Signals:
  SIGTERM, SIGINT   graceful stop: a leader hands leadership over to another
                    node before it exits; then exit status 0
  SIGKILL           no handover; the other nodes elect a new leader after the
                    heartbeat timeout
  SIGHUP, SIGUSR1, SIGUSR2  logged and ignored (no file is re-read while the
                    node runs: restart it to load new certificates or secrets)
  SIGPIPE           ignored

)";
constexpr std::string_view kUsageExitStatus = R"(Exit status:
  0  clean stop (also after --help, --version, --print-config)
  1  runtime failure (data directory locked by another process, port in use,
     corrupt metadata log: the message names the file and offset and the
     repair command, or a storage failure while running: ENOSPC/EIO/...
     on the log or state file; a leader hands over first; --repair: the node
     runs, or the repair failed; --join: refused, or no leader within 60 s)
  2  bad command line or bad config (the message names the option or field);
     --repair without --min-term when the vote record is lost or unreadable
  3  the node's state refused: elector-state.json damaged, of another node,
     or missing beside a log or node table; or a peer knows this node by an
     earlier incarnation (data directory emptied or replaced). The message
     names the ways back (--repair --min-term T, or members remove + --join)
)";

}  // namespace

std::string usage_text() {
    return std::string(kUsageSynopsis) + std::string(kUsageOptions) + std::string(kUsageEndpoints) +
           std::string(kUsageSignals) + std::string(kUsageExitStatus);
}

namespace {

/// Refuses an empty value ("--config="), which CLI11 would otherwise accept.
const CLI::Validator kNonEmpty(
    [](const std::string& value) { return value.empty() ? "needs a non-empty value" : ""; }, "");

/// The CLI11 description of the command line: flags take no value (--help=yes is an error), and an
/// option given twice is refused rather than one of its values silently kept.
void describe(CLI::App& app, CliOptions& options, std::string& min_term, std::string& join) {
    app.set_help_flag();  // --help prints usage_text(), not CLI11's own
    app.allow_windows_style_options(false);
    const auto flag = [&](const char* name, bool& target) {
        app.add_flag(name, target)
            ->disable_flag_override()
            ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    };
    const auto value = [&](const char* name, std::string& target) {
        app.add_option(name, target)
            ->check(kNonEmpty)
            ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    };
    value("--config", options.config_path);
    value("--node-id", options.node_id);
    value("--min-term", min_term);
    value("--join", join);
    value("--trace-elector", options.trace_elector);
    flag("--print-config", options.print_config);
    flag("--repair", options.repair);
    flag("-h,--help", options.help);
    flag("--version", options.version);
}

/// What the parser cannot say: --min-term's range, --join's form, and the options that need or
/// exclude one another. Empty when the options hold together.
std::string check_options(CliOptions& options, const std::string& min_term,
                          const std::string& join) {
    if (!min_term.empty()) {
        std::uint64_t term = 0;
        const auto [end, ec] =
            std::from_chars(min_term.data(), min_term.data() + min_term.size(), term);
        if (ec != std::errc{} || end != min_term.data() + min_term.size() ||
            term >= (std::uint64_t{1} << 63)) {
            return "--min-term: expected a term (an integer below 2^63), got \"" + min_term + "\"";
        }
        options.min_term = term;
    }
    if (!join.empty()) {
        options.join = parse_endpoint(join);
        if (!options.join) {
            return "--join: expected HOST:PORT (a member's peer address), got \"" + join + "\"";
        }
    }
    if (options.help || options.version) {
        return "";
    }
    if (options.config_path.empty()) {
        return "missing --config FILE";
    }
    if (options.node_id.empty()) {
        return "missing --node-id ID";
    }
    if (options.min_term && !options.repair) {
        return "--min-term is only used with --repair";
    }
    if (options.join && options.repair) {
        return "--join and --repair do not go together";
    }
    if (options.repair && options.print_config) {
        return "--repair and --print-config do not go together";
    }
    return "";
}

}  // namespace

std::variant<CliOptions, std::string> parse_command_line(const std::vector<std::string>& args) {
    CliOptions options;
    std::string min_term;
    std::string join;
    CLI::App app("conclaved", "conclaved");
    describe(app, options, min_term, join);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them backwards
    try {
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        return std::string(e.what());
    }
    std::string error = check_options(options, min_term, join);
    if (!error.empty()) {
        return error;
    }
    return options;
}

std::variant<StartupExit, StartupReady> prepare_daemon(const std::vector<std::string>& args,
                                                       std::ostream& out, std::ostream& err) {
    auto parsed = parse_command_line(args);
    if (auto* error = std::get_if<std::string>(&parsed)) {
        err << "conclaved: " << *error << "\nTry 'conclaved --help' for more information.\n";
        return StartupExit{kExitUsage};
    }
    CliOptions options = std::get<CliOptions>(std::move(parsed));
    if (options.help) {
        out << usage_text();
        return StartupExit{kExitOk};
    }
    if (options.version) {
        out << version_text();
        return StartupExit{kExitOk};
    }
    auto loaded = load_cluster_config(options.config_path, options.node_id);
    if (auto* error = std::get_if<ConfigError>(&loaded)) {
        err << "conclaved: bad config: " << error->message << "\n";
        return StartupExit{kExitUsage};
    }
    ClusterConfig config = std::get<ClusterConfig>(std::move(loaded));
    if (options.print_config) {
        out << effective_config_json(config).dump(2) << "\n";
        return StartupExit{kExitOk};
    }
    if (auto error = check_data_dir(config.data_dir)) {
        err << "conclaved: bad config: " << *error << "\n";
        return StartupExit{kExitUsage};
    }
    if (options.repair) {
        return StartupReady{std::move(options), std::move(config)};  // offline: no secrets needed
    }
    // Secure by default (SECURITY.md): no unauthenticated peers or admin writes unless the config
    // says "insecure": true; unreadable or weak secret files are refused before anything starts.
    if (auto error = check_secure_by_default(config)) {
        err << "conclaved: bad config: " << *error << "\n";
        return StartupExit{kExitUsage};
    }
    try {
        (void)load_security_material(config);
    } catch (const std::runtime_error& e) {
        err << "conclaved: bad config: " << e.what() << "\n";
        return StartupExit{kExitUsage};
    }
    if (auto error = check_key_files(config)) {  // ownership and mode (SECURITY.md)
        err << "conclaved: bad config: " << *error << "\n";
        return StartupExit{kExitUsage};
    }
    // HTTPS admin: the certificate and key must load (and match) before anything starts.
    if (config.security.admin_tls != SecuritySettings::AdminTls::Off) {
        std::string error;
        if (!admin::make_admin_tls_context(config.security.admin_tls_cert,
                                           config.security.admin_tls_key, "admin.tls", error)) {
            err << "conclaved: bad config: " << error << "\n";
            return StartupExit{kExitUsage};
        }
    }
    return StartupReady{std::move(options), std::move(config)};
}

}  // namespace conclave::node
