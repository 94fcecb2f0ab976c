// SPDX-License-Identifier: Apache-2.0
// conclavectl's command line: CLI11 for the flags, then the environment, then --config (read
// with conclaved's own parser); the usage text; the dispatch to the commands.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "conclave/node/cluster_config.hpp"
#include "conclavectl.hpp"

namespace conclave::conclavectl {

namespace {

constexpr std::string_view kUsage =
    R"(Usage: conclavectl [--endpoints HOST:PORT,... | --config FILE] [options] COMMAND [ARGS]
       conclavectl --help | --version

Operates a Conclave cluster through the nodes' HTTP admin endpoints.

Commands:
  status              one line per node: id, endpoint, role, term, leader, fencing
                      token, lease (a leader's remaining lease in ms, "-" when it
                      holds none), commit LSN, health, storage (ok, or failed: /status
                      storage.reason and .since with -o json), last contact (ms
                      since the node was last heard from by another node,
                      smallest value)
  watch               one line per leadership change (with the reason) as seen by
                      the first node (GET /leadership?watch=1). A node silent for
                      --timeout is left for the next one; with no node to follow
                      for --timeout, exits 4. Runs until interrupted (^C) or --count
  transfer --to ID    ask the leader to hand leadership to node ID and wait until
                      ID leads
  step-down           ask the leader to hand leadership to another node and wait
                      until another node leads
  put KEY VALUE       append KEY=VALUE to the metadata log (VALUE is JSON if it
                      parses as JSON, else a string); prints the committed LSN
  get [--from LSN]    print the committed metadata entries after LSN (TERM.COUNTER,
                      default: from the start), read from the leader
  get KEY [--consistency linearizable|serializable]
                      print KEY's value, the LSN of its last write and the commit
                      LSN the answer reflects (GET /metadata/KEY); linearizable
                      (default): answered by the leader once it confirmed its
                      leadership; serializable: the first node's own state,
                      possibly behind. Exit 1 when the key does not exist
  members             the active configuration (GET /members, from the leader:
                      id, role, peer, http, acknowledged entries, lag, connected,
                      live and ms since last heard, as the leader sees them)
  set-priority ID N   node ID's priority is N (0: never stands for leader) on every
                      node (POST /priority on each endpoint; the leader records it in
                      the metadata log, so it outlives restarts and reaches nodes that
                      were down)
  members OP ID       a membership change, OP = add-learner | promote | remove
                      (POST /members; waits until it commits; prints the version)
  broadcast TOPIC JSON
                      an advisory message to every live member (POST /broadcast;
                      JSON that does not parse is sent as a string); prints its id
                      and the members it was sent to

Options (flag, else environment variable, else default):
  --endpoints LIST    comma-separated admin endpoints (host:port) of the nodes
                      [CONCLAVECTL_ENDPOINTS]
  --config FILE       conclaved's cluster config: its nodes' "http" endpoints, its
                      "admin.token_file" and, when "admin" has "tls", its "tls.ca"
                      [CONCLAVECTL_CONFIG]
  --token-file FILE   send "Authorization: Bearer <token>" (the file's first line)
                      [CONCLAVECTL_TOKEN_FILE]; default: --config's admin.token_file.
                      The token is sent over HTTPS, or over plain HTTP only to a
                      loopback address that answers HTTP without it
  --cacert FILE       speak HTTPS, trusting node certificates signed by this CA
                      (PEM) and checking that they name the endpoint's host
                      [CONCLAVECTL_CACERT]
  -o, --output FMT    "table" (default) or "json", every command [CONCLAVECTL_OUTPUT]
  --timeout DURATION  deadline of the whole command, e.g. 500ms, 2s, 1m (a bare
                      number is seconds; default 5s) [CONCLAVECTL_TIMEOUT]; for
                      watch: the longest silence of the node followed
  --count N           watch: exit 0 after N lines
  --help, --version
Options also accept the --option=VALUE form. 307 redirects (to the leader) are
followed (http:// or https://, spoken as the first request was).

Exit status:
  0  success
  1  the operation failed (refused, server error, no leader or a leader still
     syncing its log until the deadline: put and members retry those, which
     appended nothing, the new leader not seen before the deadline)
  2  bad command line or config (also: an endpoint speaks HTTPS and no --cacert
     was given; a token would go over plain HTTP to a non-loopback address)
  3  unauthorized: the node answered 401 or 403 (check --token-file)
  4  no node answered before the deadline (status: some node unreachable or
     unhealthy; watch: no node to follow for --timeout)
)";

}  // namespace

std::string usage_text() {
    return std::string(kUsage);
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
    std::uint64_t n = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (ec != std::errc{} || ptr == text.data() || n > 3'600'000) {
        return std::nullopt;
    }
    const std::string_view unit(ptr, static_cast<std::size_t>(end - ptr));
    const std::uint64_t ms = unit == "ms"                  ? n
                             : unit == "s" || unit.empty() ? n * 1000
                             : unit == "m"                 ? n * 60'000
                                                           : 0;
    if (ms == 0 || ms > 3'600'000) {
        return std::nullopt;
    }
    return std::chrono::milliseconds(ms);
}

namespace {

/// The token: the file's first line. nullopt with `why` when it cannot be read.
std::optional<std::string> ReadToken(const std::string& path, std::string& why) {
    std::ifstream in(path);
    if (!in) {
        why = "cannot read the file";
        return std::nullopt;
    }
    std::string token;
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) {
        token.pop_back();
    }
    if (token.empty()) {
        why = "the first line is empty";
        return std::nullopt;
    }
    return token;
}

/// The nodes, the token file and the CA of a cluster config; the paths in it are resolved
/// against its directory by the config's parser.
void LoadConfig(const std::string& path, Options& options, std::string& token_file,
                std::string& cacert) {
    std::ifstream in(path);
    if (!in) {
        throw Failure(kExitUsage, "--config " + path + ": cannot read the file");
    }
    // conclaved's own parser validates it; it needs a node id: take the first one.
    const json document = json::parse(in, nullptr, /*allow_exceptions=*/false);
    std::string first;
    if (document.is_object() && document.contains("nodes") && document["nodes"].is_array() &&
        !document["nodes"].empty() && document["nodes"][0].is_object() &&
        document["nodes"][0].contains("id") && document["nodes"][0]["id"].is_string()) {
        first = document["nodes"][0]["id"].get<std::string>();
    }
    auto loaded = conclave::node::load_cluster_config(path, first);
    if (auto* error = std::get_if<conclave::node::ConfigError>(&loaded)) {
        throw Failure(kExitUsage, "bad config: " + error->message);
    }
    const auto& config = std::get<conclave::node::ClusterConfig>(loaded);
    for (const auto& node : config.nodes) {
        options.endpoints.push_back({node.http.host, node.http.port});
        options.ids.push_back(node.id);
    }
    if (token_file.empty() && !config.security.admin_token_file.empty()) {
        std::string why;
        if (auto token = ReadToken(config.security.admin_token_file, why)) {
            options.client.token = *token;
        } else {
            options.token_note = "--config's admin.token_file " + config.security.admin_token_file +
                                 ": " + why + ", so no token was sent (give --token-file)";
        }
    }
    // An admin API served over HTTPS is verified with the cluster CA of the same config.
    if (config.security.admin_tls != conclave::node::SecuritySettings::AdminTls::Off &&
        cacert.empty()) {
        if (!config.tls) {
            throw Failure(kExitUsage, "--config " + path +
                                          ": the admin API speaks HTTPS (admin.tls) and the "
                                          "config has no \"tls.ca\": give --cacert FILE");
        }
        options.client.tls =
            client::make_tls_context(config.tls->ca_path, "--config " + path + ": tls.ca");
    }
}

/// What the command line says, before the environment and the config fill the gaps.
struct Flags {
    std::string endpoints, config, token_file, cacert, output, timeout, count;
    std::string key, value, op, id;  // put KEY VALUE, members OP ID, get KEY
    std::string consistency;         // get KEY --consistency
    bool help = false;
    bool version = false;
};

/// `value` if given, else the environment variable `name` (if set and not empty).
void FromEnvironment(std::string& value, const char* name) {
    const char* set = std::getenv(name);
    if (value.empty() && set != nullptr) {
        value = set;
    }
}

void ParseEndpoints(const std::string& list_text, Options& options) {
    std::stringstream list(list_text);
    std::string item;
    while (std::getline(list, item, ',')) {
        const auto endpoint = client::parse_endpoint(item);
        if (!endpoint) {
            throw Failure(
                kExitUsage,
                "--endpoints: expected host:port with a port in 1..65535, got \"" + item + "\"");
        }
        options.endpoints.push_back(*endpoint);
    }
    if (options.endpoints.empty()) {
        throw Failure(kExitUsage, "--endpoints: empty list");
    }
}

/// The CLI11 description of the command line; fills `flags` and `options` when parsed.
void Describe(CLI::App& app, Flags& flags, Options& options) {
    app.set_help_flag();  // --help prints usage_text()
    app.add_flag("-h,--help", flags.help);
    app.add_flag("--version", flags.version);
    app.add_option("--endpoints", flags.endpoints);
    app.add_option("--config", flags.config);
    app.add_option("--token-file", flags.token_file);
    app.add_option("--cacert", flags.cacert);
    app.add_option("-o,--output", flags.output);
    app.add_option("--timeout", flags.timeout);
    app.require_subcommand(0, 1);
    const auto command = [&](const char* name) {
        CLI::App* sub = app.add_subcommand(name);
        sub->fallthrough();  // the options above may follow the command
        sub->callback([&options, name] { options.command = name; });
        return sub;
    };
    command("status");
    command("watch")->add_option("--count", flags.count);
    command("transfer")->add_option("--to", options.to)->required();
    command("step-down");
    CLI::App* put = command("put");
    put->add_option("KEY", flags.key)->required();
    put->add_option("VALUE", flags.value)->required();
    CLI::App* get = command("get");
    get->add_option("--from", options.from);
    get->add_option("KEY", flags.key);
    get->add_option("--consistency", flags.consistency);
    CLI::App* priority = command("set-priority");
    priority->add_option("ID", flags.key)->required();
    priority->add_option("N", flags.value)->required();
    CLI::App* broadcast = command("broadcast");
    broadcast->add_option("TOPIC", flags.key)->required();
    broadcast->add_option("JSON", flags.value)->required();
    CLI::App* members = command("members");
    members->add_option("OP", flags.op);
    members->add_option("ID", flags.id);
}

void Validate(const Options& options, const Flags& flags) {
    if (options.command.empty()) {
        throw Failure(kExitUsage,
                      "missing COMMAND (status, watch, transfer, step-down, set-priority, put, "
                      "get, members, broadcast)");
    }
    if (options.command == "members" && !flags.op.empty()) {
        const std::string& op = flags.op;
        if (flags.id.empty()) {
            throw Failure(kExitUsage, "members " + op + ": missing ID");
        }
        if (op != "add-learner" && op != "promote" && op != "remove") {
            throw Failure(kExitUsage,
                          "members: expected add-learner, promote or remove, got \"" + op + "\"");
        }
    }
    for (const char c : options.to) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
            throw Failure(kExitUsage, "--to: not a node id: \"" + options.to + "\"");
        }
    }
    if (options.command == "get" && !flags.consistency.empty() &&
        flags.consistency != "linearizable" && flags.consistency != "serializable") {
        throw Failure(kExitUsage, "--consistency: expected linearizable or serializable, got \"" +
                                      flags.consistency + "\"");
    }
    if (options.command == "get" && !flags.key.empty() && !options.from.empty()) {
        throw Failure(kExitUsage, "get: give KEY or --from, not both");
    }
    if (!options.from.empty() && options.from.find('.') == std::string::npos) {
        throw Failure(kExitUsage,
                      "--from: expected TERM.COUNTER (e.g. 3.17), got \"" + options.from + "\"");
    }
    if (options.output != "table" && options.output != "json") {
        throw Failure(kExitUsage,
                      "--output: expected \"table\" or \"json\", got \"" + options.output + "\"");
    }
    if (!flags.endpoints.empty() && !flags.config.empty()) {
        throw Failure(kExitUsage, "give one of --endpoints and --config, not both");
    }
    if (flags.endpoints.empty() && flags.config.empty()) {
        throw Failure(kExitUsage,
                      "give --endpoints HOST:PORT,... or --config FILE (or set "
                      "CONCLAVECTL_ENDPOINTS or CONCLAVECTL_CONFIG)");
    }
}

/// Flags over environment variables over the config; the config's token file and CA last.
void Resolve(Flags& flags, Options& options) {
    if (flags.endpoints.empty() && flags.config.empty()) {
        FromEnvironment(flags.endpoints, "CONCLAVECTL_ENDPOINTS");
        FromEnvironment(flags.config, "CONCLAVECTL_CONFIG");
    }
    FromEnvironment(flags.token_file, "CONCLAVECTL_TOKEN_FILE");
    FromEnvironment(flags.cacert, "CONCLAVECTL_CACERT");
    FromEnvironment(flags.output, "CONCLAVECTL_OUTPUT");
    FromEnvironment(flags.timeout, "CONCLAVECTL_TIMEOUT");
    if (!flags.output.empty()) {
        options.output = flags.output;
    }
    if (!flags.timeout.empty()) {
        const auto timeout = parse_duration(flags.timeout);
        if (!timeout) {
            throw Failure(kExitUsage,
                          "--timeout: expected a duration from 1ms to 1h such as "
                          "500ms, 2s or 1m, got \"" +
                              flags.timeout + "\"");
        }
        options.timeout = *timeout;
    }
    if (!flags.count.empty()) {
        std::uint64_t n = 0;
        const auto [ptr, ec] =
            std::from_chars(flags.count.data(), flags.count.data() + flags.count.size(), n);
        if (ec != std::errc{} || ptr != flags.count.data() + flags.count.size() || n == 0) {
            throw Failure(kExitUsage,
                          "--count: expected a positive integer, got \"" + flags.count + "\"");
        }
        options.count = n;
    }
    Validate(options, flags);
    if (options.command == "put" || options.command == "set-priority" ||
        options.command == "broadcast") {
        options.args = {flags.key, flags.value};
    } else if (options.command == "members" && !flags.op.empty()) {
        options.args = {flags.op, flags.id};
    } else if (options.command == "get" && !flags.key.empty()) {
        options.args = {
            flags.key, flags.consistency.empty() ? std::string("linearizable") : flags.consistency};
    }
    if (!flags.cacert.empty()) {
        options.client.tls = client::make_tls_context(flags.cacert, "--cacert");
    }
    if (!flags.endpoints.empty()) {
        ParseEndpoints(flags.endpoints, options);
    } else {
        LoadConfig(flags.config, options, flags.token_file, flags.cacert);
    }
    if (!flags.token_file.empty()) {
        std::string why;
        const auto token = ReadToken(flags.token_file, why);
        if (!token) {
            throw Failure(kExitUsage, "--token-file " + flags.token_file + ": " + why);
        }
        options.client.token = *token;
    }
}

}  // namespace

Options parse_command_line(int argc, char** argv, bool& help, bool& version) {
    Options options;
    Flags flags;
    CLI::App app("conclavectl", "conclavectl");
    Describe(app, flags, options);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (std::find(argv + 1, argv + argc, std::string("--help")) != argv + argc ||
            std::find(argv + 1, argv + argc, std::string("-h")) != argv + argc) {
            help = true;
            return options;
        }
        throw Failure(kExitUsage, e.what());
    }
    help = flags.help;
    version = flags.version;
    if (help || version) {
        return options;
    }
    Resolve(flags, options);
    options.client.timeout = options.timeout;
    options.client.user_agent = "conclavectl";
    options.deadline = Clock::now() + options.timeout;
    return options;
}

int run(const Options& options) {
    if (options.command == "status") {
        return status_command(options);
    }
    if (options.command == "watch") {
        return watch_command(options);
    }
    if (options.command == "transfer") {
        return leader_change_command(options, "/transfer-leadership?to=" + options.to, "transfer",
                                     options.to);
    }
    if (options.command == "step-down") {
        return leader_change_command(options, "/step-down", "step down", "");
    }
    if (options.command == "put") {
        return put_command(options);
    }
    if (options.command == "set-priority") {
        return set_priority_command(options);
    }
    if (options.command == "members") {
        return members_command(options);
    }
    if (options.command == "broadcast") {
        return broadcast_command(options);
    }
    return get_command(options);
}

int report(const Failure& failure, const std::string& token_note) {
    std::cerr << "conclavectl: " << failure.what();
    if (failure.status == kExitAuth) {
        std::cerr << " (" << (token_note.empty() ? std::string("check --token-file") : token_note)
                  << ")";
    }
    std::cerr << "\n";
    if (failure.status == kExitUsage) {
        std::cerr << "Try 'conclavectl --help' for more information.\n";
    }
    return failure.status;
}

}  // namespace conclave::conclavectl
