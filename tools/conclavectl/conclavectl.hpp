// SPDX-License-Identifier: Apache-2.0
// conclavectl, the operator's command-line client of conclaved's HTTP admin API (node/README.md,
// "conclavectl"): one small function per command over the admin client (client/), each printing
// to std::cout and returning the exit status. The library target conclavectl_commands holds all
// but main(), so that tests call the commands against canned HTTP answers.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/client/client.hpp"

namespace conclave::conclavectl {

using client::Clock;
using client::Endpoint;
using nlohmann::json;
using Reply = client::Response;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitAuth = 3;
inline constexpr int kExitUnreachable = 4;

/// The command line, resolved (flags over environment over --config).
struct Options {
    std::vector<Endpoint> endpoints;
    client::Settings client;       // HTTPS, token, the timeout named by "no answer within"
    std::vector<std::string> ids;  // from --config; else empty (ids come from /status)
    std::string token_note;        // why no token is sent although the config names one
    std::string output = "table";
    std::chrono::milliseconds timeout{5000};
    Clock::time_point deadline;  // start + timeout
    std::string command;
    std::vector<std::string> args;
    std::string to;
    std::string from;
    std::optional<std::uint64_t> count;
};

/// A failure that ends the command with one line and an exit status.
struct Failure : std::runtime_error {
    Failure(int status_code, const std::string& message, std::string http_error = {})
        : std::runtime_error(message), status(status_code), error(std::move(http_error)) {}
    int status;
    std::string error;  // the "error" code of an HTTP answer, when there was one
};

// ---- the command line (options.cpp) ----

std::string usage_text();
/// "500ms", "2s", "1m"; a bare number is seconds; 1ms to 1h.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
/// Parses and resolves the command line; throws Failure(kExitUsage).
Options parse_command_line(int argc, char** argv, bool& help, bool& version);
/// Runs options.command.
int run(const Options& options);
/// Prints the failure's line (and the --help hint for a usage error); its exit status.
int report(const Failure& failure, const std::string& token_note);

// ---- requests (calls.cpp) ----

/// The client's error as the command's failure (Refused: 2, Unreachable: 4, BadRedirect: 1).
Failure to_failure(const client::Error& error);
/// One request until options.deadline; a client error becomes its Failure.
Reply request(const Options& options, const Endpoint& endpoint, boost::beast::http::verb method,
              const std::string& target, const std::string& body = {});
/// The same, following redirects to the leader; `answered` is who gave the answer.
Reply request_following(const Options& options, const Endpoint& endpoint,
                        boost::beast::http::verb method, const std::string& target,
                        const std::string& body, Endpoint* answered = nullptr);
/// The "error" and "detail" of a JSON error answer, else the start of the body.
std::string detail(const Reply& reply);
/// Throws the one-line failure for an unsuccessful reply (401/403: kExitAuth).
[[noreturn]] void fail(const Endpoint& endpoint, const Reply& reply);

struct NodeView {
    Endpoint endpoint;
    std::optional<json> status;  // GET /status, when reachable
    std::string error;           // why not
    std::string health;          // "ok", "unhealthy: ...", "unreachable"
};

/// GET /status (and /healthz) of every node at once, until all answered, the deadline, or a
/// status for which `enough` is true.
std::vector<NodeView> survey(const Options& options, bool with_health,
                             const std::function<bool(const json&)>& enough = {},
                             std::optional<Clock::time_point> until = std::nullopt);
bool is_leader(const json& status);
/// The admin endpoint of a node that reports `leader` (by default: role "leader"). No node
/// answering at all is a Failure(kExitUnreachable).
std::optional<Endpoint> find_leader(const Options& options, std::string* leader_id = nullptr,
                                    const std::function<bool(const json&)>& leader = is_leader,
                                    std::optional<Clock::time_point> until = std::nullopt);

// ---- output (table.cpp) ----

/// A field as a table cell: "-" for absent or null, an LSN as TERM.COUNTER, a lease as its
/// remaining ms, a storage object as its state.
std::string cell(const json& object, const char* key);
/// Aligned columns, two spaces apart; the first row is the header.
void print_table(const std::vector<std::vector<std::string>>& cells);
/// `text` for a table, `document` for -o json.
void print_result(const Options& options, const std::string& text, const json& document);

// ---- the commands (status.cpp, watch.cpp, commands.cpp, metadata.cpp) ----

int status_command(const Options& options);
int watch_command(const Options& options);
/// transfer (`expect_leader` = the target) and step-down (empty: any other node).
int leader_change_command(const Options& options, const std::string& path, const std::string& what,
                          const std::string& expect_leader);
int set_priority_command(const Options& options);
int members_command(const Options& options);
int broadcast_command(const Options& options);
int put_command(const Options& options);
int get_command(const Options& options);

}  // namespace conclave::conclavectl
