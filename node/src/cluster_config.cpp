// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/cluster_config.hpp"
#include "conclave/core/check.hpp"
#include "conclave/core/enum_names.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <variant>

namespace conclave::node {
namespace {

using nlohmann::json;

/// Thrown inside the parser, turned into a ConfigError at the boundary.
struct FieldError {
    std::string message;
};

[[noreturn]] void Fail(const std::string& path, const std::string& problem) {
    throw FieldError{path + ": " + problem};
}

/// A short description of a JSON value for error messages: `string "abc"`, `number -1.5`, ...
std::string Describe(const json& value) {
    switch (value.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::boolean:
            return std::string("boolean ") + (value.get<bool>() ? "true" : "false");
        case json::value_t::string: {
            std::string text = value.dump();
            if (text.size() > 80) {
                text = text.substr(0, 77) + "...";
            }
            return "string " + text;
        }
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float:
            return "number " + value.dump();
        case json::value_t::object:
            return "an object";
        case json::value_t::array:
            return "an array";
        default:
            return "an unsupported value";
    }
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
            row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
            diagonal = above;
        }
    }
    return row[b.size()];
}

/// Rejects any key of `object` not in `known`, suggesting the closest known key for typos.
void RejectUnknownFields(const json& object, const std::string& path,
                         const std::vector<std::string_view>& known) {
    for (const auto& [key, value] : object.items()) {
        if (std::find(known.begin(), known.end(), key) != known.end()) {
            continue;
        }
        std::string problem = "unknown field \"" + key + "\"";
        std::string_view best;
        std::size_t best_distance = 3;  // suggest only close matches
        for (std::string_view candidate : known) {
            const std::size_t distance = EditDistance(key, candidate);
            if (distance < best_distance) {
                best = candidate;
                best_distance = distance;
            }
        }
        if (!best.empty()) {
            problem += " (did you mean \"" + std::string(best) + "\"?)";
        } else {
            problem += " (known fields:";
            for (std::string_view candidate : known) {
                problem += " " + std::string(candidate);
            }
            problem += ")";
        }
        Fail(path.empty() ? key : path + "." + key, problem);
    }
}

std::string Join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
}

const json* Find(const json& object, std::string_view key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

const json& Require(const json& object, const std::string& path, std::string_view key) {
    const json* value = Find(object, key);
    if (value == nullptr) {
        Fail(Join(path, key), "missing (required field)");
    }
    return *value;
}

void ExpectObject(const json& value, const std::string& path) {
    if (!value.is_object()) {
        Fail(path, "expected an object, got " + Describe(value));
    }
}

const std::string& ExpectString(const json& value, const std::string& path) {
    if (!value.is_string()) {
        Fail(path, "expected a string, got " + Describe(value));
    }
    return value.get_ref<const std::string&>();
}

bool ExpectBool(const json& value, const std::string& path) {
    if (!value.is_boolean()) {
        Fail(path, "expected true or false, got " + Describe(value));
    }
    return value.get<bool>();
}

/// An integer in [min, max]. Floats (even 2.0), strings and booleans are refused.
std::int64_t ExpectInteger(const json& value, const std::string& path, std::int64_t min,
                           std::int64_t max) {
    const auto out_of_range = [&] {
        Fail(path, "must be an integer between " + std::to_string(min) + " and " +
                       std::to_string(max) + ", got " + Describe(value));
    };
    if (value.is_number_unsigned()) {
        const auto v = value.get<std::uint64_t>();
        if (v > static_cast<std::uint64_t>(max) || static_cast<std::int64_t>(v) < min) {
            out_of_range();
        }
        return static_cast<std::int64_t>(v);
    }
    if (value.is_number_integer()) {
        const auto v = value.get<std::int64_t>();
        if (v < min || v > max) {
            out_of_range();
        }
        return v;
    }
    Fail(path, "expected an integer, got " + Describe(value));
}

/// Ids are used in file paths ({id} in data_dir) and logs: keep them boring.
bool ValidName(std::string_view s) {
    if (s.empty() || s.size() > 64) {
        return false;
    }
    const auto alnum = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    };
    if (!alnum(s.front())) {
        return false;
    }
    return std::all_of(s.begin(), s.end(),
                       [&](char c) { return alnum(c) || c == '_' || c == '.' || c == '-'; });
}

const char* const kNameRule = kNodeIdRule;

Endpoint ParseEndpointField(const json& value, const std::string& path) {
    const std::string& text = ExpectString(value, path);
    auto endpoint = parse_endpoint(text);
    if (!endpoint) {
        Fail(path, "expected \"host:port\" with a port in 1..65535, got " + Describe(value));
    }
    return *endpoint;
}

bool IsWildcard(const std::string& host) {
    return host == "0.0.0.0" || host == "::";
}

/// Two endpoints clash when they could be the same socket on one machine.
bool Clash(const Endpoint& a, const Endpoint& b) {
    return a.port == b.port && (a.host == b.host || IsWildcard(a.host) || IsWildcard(b.host));
}

constexpr std::int64_t kMaxTimingMs = 3'600'000;  // one hour, as Config::validate() allows
constexpr std::int64_t kMaxMissCount = 1000;

/// One option under "timing": its config name, the elector::Config member it sets (a duration in
/// milliseconds or a count), the member's name as Config::validate() speaks of it, and the largest
/// value accepted (the smallest is 0). Parsing, the unknown-field check, the names in validation
/// messages and the effective-config dump are all derived from kTimingOptions: a new option is one
/// line here plus its row in node/README.md (tests/node/cluster_config_test.cpp checks both).
struct TimingOption {
    std::string_view name;
    std::variant<Millis elector::Config::*, std::uint32_t elector::Config::*> member;
    std::string_view elector_name;
    std::int64_t max;
};
using ElectorConfig = elector::Config;
const TimingOption kTimingOptions[] = {
    {"heartbeat_ms", &ElectorConfig::heartbeat_period, "heartbeat_period", kMaxTimingMs},
    {"miss_count", &ElectorConfig::heartbeat_miss_count, "heartbeat_miss_count", kMaxMissCount},
    {"max_random_wait_ms", &ElectorConfig::max_random_wait, "max_random_wait", kMaxTimingMs},
    {"initial_wait_ms", &ElectorConfig::initial_wait, "initial_wait", kMaxTimingMs},
    {"scouting_result_ms", &ElectorConfig::scouting_result_timeout, "scouting_result_timeout",
     kMaxTimingMs},
    {"election_result_ms", &ElectorConfig::election_result_timeout, "election_result_timeout",
     kMaxTimingMs},
    {"heartbeat_check_ms", &ElectorConfig::heartbeat_check_period, "heartbeat_check_period",
     kMaxTimingMs},
    {"rank_slot_ms", &ElectorConfig::rank_slot, "rank_slot", kMaxTimingMs},
    {"rank_slot_min_ms", &ElectorConfig::rank_slot_min, "rank_slot_min", kMaxTimingMs},
    {"rank_slot_max_ms", &ElectorConfig::rank_slot_max, "rank_slot_max", kMaxTimingMs},
    {"rank_slot_rtt_multiple", &ElectorConfig::rank_slot_rtt_multiple, "rank_slot_rtt_multiple",
     ElectorConfig::kMaxRankSlotRttMultiple},
    {"lease_drift_permille", &ElectorConfig::lease_drift_permille, "lease_drift_permille",
     ElectorConfig::kMaxLeaseDriftPermille},
    {"preferred_stability_ms", &ElectorConfig::preferred_stability, "preferred_stability",
     kMaxTimingMs},
};

void ApplyTimingOption(const TimingOption& option, const json& value, elector::Config& config) {
    const std::int64_t n = ExpectInteger(value, Join("timing", option.name), 0, option.max);
    std::visit(
        [&](auto member) {
            using Field = std::remove_reference_t<decltype(config.*member)>;
            if constexpr (std::is_same_v<Field, Millis>) {
                config.*member = Millis{n};
            } else {
                config.*member = static_cast<Field>(n);
            }
        },
        option.member);
}

void ApplyTiming(const json& timing, elector::Config& config) {
    ExpectObject(timing, "timing");
    std::vector<std::string_view> known;
    for (const TimingOption& option : kTimingOptions) {
        known.push_back(option.name);
    }
    RejectUnknownFields(timing, "timing", known);
    for (const TimingOption& option : kTimingOptions) {
        if (const json* v = Find(timing, option.name)) {
            ApplyTimingOption(option, *v, config);
        }
    }
    // rank_slot_ms alone is the floor too (and raises the ceiling if needed), so that one knob
    // still sets the slot on a fast link; rank_slot_min_ms / rank_slot_max_ms override that.
    if (Find(timing, "rank_slot_ms")) {
        if (!Find(timing, "rank_slot_min_ms")) {
            config.rank_slot_min = config.rank_slot;
        }
        if (!Find(timing, "rank_slot_max_ms")) {
            config.rank_slot_max = std::max(config.rank_slot_max, config.rank_slot);
        }
    }
}

/// Config::validate() speaks in elector member names; the operator wrote timing.* names. Replaces
/// whole identifiers only.
std::string ToConfigFieldNames(const std::string& message) {
    const auto ident = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
    };
    std::string out;
    for (std::size_t i = 0; i < message.size();) {
        if (!ident(message[i])) {
            out += message[i++];
            continue;
        }
        std::size_t end = i;
        while (end < message.size() && ident(message[end])) {
            ++end;
        }
        const std::string_view word(message.data() + i, end - i);
        std::string replacement(word);
        for (const TimingOption& option : kTimingOptions) {
            if (word == option.elector_name) {
                replacement = "timing." + std::string(option.name);
            }
        }
        out += replacement;
        i = end;
    }
    return out;
}

std::string SubstituteId(const std::string& text, const std::string& id) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        if (text.compare(i, 4, "{id}") == 0) {
            out += id;
            i += 4;
        } else {
            out += text[i];
            ++i;
        }
    }
    return out;
}

std::string ParseDataDir(const json& value, const std::string& path) {
    const std::string& text = ExpectString(value, path);
    if (text.empty()) {
        Fail(path, "must not be empty");
    }
    for (std::size_t at = text.find('{'); at != std::string::npos; at = text.find('{', at + 1)) {
        if (text.compare(at, 4, "{id}") != 0) {
            const std::size_t close = text.find('}', at);
            const std::string placeholder =
                text.substr(at, close == std::string::npos ? 1 : close - at + 1);
            Fail(path, "unknown placeholder \"" + placeholder + "\" (only {id} is supported)");
        }
    }
    return text;
}

LogSettings ParseLog(const json& value) {
    ExpectObject(value, "log");
    RejectUnknownFields(value, "log", {"format", "level"});
    LogSettings log;
    if (const json* format = Find(value, "format")) {
        const std::string& text = ExpectString(*format, "log.format");
        if (text == "text") {
            log.format = LogFormat::Text;
        } else if (text == "json") {
            log.format = LogFormat::Json;
        } else {
            Fail("log.format", "expected \"text\" or \"json\", got " + Describe(*format));
        }
    }
    if (const json* level = Find(value, "level")) {
        const std::string& text = ExpectString(*level, "log.level");
        static const std::set<std::string, std::less<>> kLevels = {
            "trace", "debug", "info", "warn", "error", "critical", "off"};
        if (kLevels.find(text) == kLevels.end()) {
            Fail("log.level",
                 "expected one of trace, debug, info, warn, error, critical, off, got " +
                     Describe(*level));
        }
        log.level = text;
    }
    return log;
}

// metadata's quota, compaction and promotion limits.
void ParseQuota(const json& value, MetadataSettings& metadata) {
    // The smallest quota holds one entry of the largest size.
    constexpr std::int64_t kMinQuotaBytes = 16 + 1024 + (64 << 10);
    if (const json* v = Find(value, "quota_bytes")) {
        const std::int64_t n = ExpectInteger(*v, "metadata.quota_bytes", 0, std::int64_t{1} << 40);
        if (n != 0 && n < kMinQuotaBytes) {
            Fail("metadata.quota_bytes",
                 "expected 0 (no limit) or at least " + std::to_string(kMinQuotaBytes) +
                     " (one entry of the largest size), got " + std::to_string(n));
        }
        metadata.quota_bytes = static_cast<std::uint64_t>(n);
    }
    if (const json* v = Find(value, "quota_entries")) {
        const std::int64_t n =
            ExpectInteger(*v, "metadata.quota_entries", 0, std::int64_t{1} << 32);
        if (n == 1) {
            Fail("metadata.quota_entries", "expected 0 (no limit) or at least 2, got 1");
        }
        metadata.quota_entries = static_cast<std::uint64_t>(n);
    }
    if (const json* v = Find(value, "compact_threshold")) {
        metadata.compact_threshold = static_cast<std::uint64_t>(
            ExpectInteger(*v, "metadata.compact_threshold", 0, std::int64_t{1} << 32));
    }
    if (const json* v = Find(value, "compact_retain")) {
        metadata.compact_retain = static_cast<std::uint64_t>(
            ExpectInteger(*v, "metadata.compact_retain", 0, std::int64_t{1} << 32));
    }
    // Membership (R7): how far behind the leader's last entry a learner may be when
    // it is promoted.
    if (const json* v = Find(value, "promote_lag_entries")) {
        metadata.promote_lag_entries = static_cast<std::uint64_t>(
            ExpectInteger(*v, "metadata.promote_lag_entries", 0, std::int64_t{1} << 32));
    }
}

MetadataSettings ParseMetadata(const json& value) {
    ExpectObject(value, "metadata");
    RejectUnknownFields(
        value, "metadata",
        {"enabled", "fsync", "propose_timeout_ms", "unsafe_no_fsync", "quota_bytes",
         "quota_entries", "compact_threshold", "compact_retain", "promote_lag_entries"});
    MetadataSettings metadata;
    if (const json* enabled = Find(value, "enabled")) {
        metadata.enabled = ExpectBool(*enabled, "metadata.enabled");
    }
    if (const json* fsync = Find(value, "fsync")) {
        const std::string& text = ExpectString(*fsync, "metadata.fsync");
        if (text == "batched") {
            metadata.fsync = replication::FsyncPolicy::Batched;
        } else if (text == "always") {
            metadata.fsync = replication::FsyncPolicy::EveryEntry;
        } else if (text == "never") {
            metadata.fsync = replication::FsyncPolicy::Never;
        } else {
            Fail("metadata.fsync",
                 "expected \"batched\", \"always\" or \"never\", got " + Describe(*fsync));
        }
    }
    if (const json* timeout = Find(value, "propose_timeout_ms")) {
        metadata.propose_timeout_ms = static_cast<std::uint32_t>(
            ExpectInteger(*timeout, "metadata.propose_timeout_ms", 10, 3'600'000));
    }
    // storage: "never" can lose acknowledged entries on a machine crash; it needs an
    // explicit consent.
    if (const json* consent = Find(value, "unsafe_no_fsync")) {
        metadata.unsafe_no_fsync = ExpectBool(*consent, "metadata.unsafe_no_fsync");
    }
    ParseQuota(value, metadata);
    if (metadata.compact_threshold != 0 && metadata.compact_retain >= metadata.compact_threshold) {
        Fail("metadata.compact_retain", "must be below metadata.compact_threshold (" +
                                            std::to_string(metadata.compact_threshold) + "), got " +
                                            std::to_string(metadata.compact_retain));
    }
    if (metadata.fsync == replication::FsyncPolicy::Never && !metadata.unsafe_no_fsync) {
        Fail("metadata.fsync",
             "\"never\" can lose acknowledged entries on a machine crash; refused unless "
             "\"unsafe_no_fsync\": true is set too");
    }
    return metadata;
}

std::optional<TlsFiles> ParseTls(const json& value) {
    if (value.is_null()) {
        return std::nullopt;
    }
    if (!value.is_object()) {
        Fail("tls", "expected null or an object {ca, cert, key}, got " + Describe(value));
    }
    RejectUnknownFields(value, "tls", {"ca", "cert", "key"});
    const auto file = [&](std::string_view key) {
        const std::string path = Join("tls", key);
        const std::string& text = ExpectString(Require(value, "tls", key), path);
        if (text.empty()) {
            Fail(path, "must be a file path, got an empty string");
        }
        return text;
    };
    return TlsFiles{file("ca"), file("cert"), file("key")};
}

// ---- Security block ("insecure", "secret_file", "admin"): kept together for easy merges. ----
void ParseAdminTls(const json& value, const std::optional<TlsFiles>& tls,
                   SecuritySettings& security) {
    using AdminTls = SecuritySettings::AdminTls;
    if (value.is_boolean()) {
        if (!value.get<bool>()) {
            security.admin_tls = AdminTls::Off;
            return;
        }
        if (!tls) {
            Fail("admin.tls",
                 "true serves HTTPS with the node certificate of the \"tls\" block, which is not "
                 "set: add \"tls\" (conclave-certs makes the files), or name the files with "
                 "\"admin\": {\"tls\": {\"cert\": ..., \"key\": ...}}");
        }
        security.admin_tls = AdminTls::NodeCertificate;
        security.admin_tls_cert = tls->cert_path;
        security.admin_tls_key = tls->key_path;
        return;
    }
    if (!value.is_object()) {
        Fail("admin.tls",
             "expected false, true (the \"tls\" block's certificate) or {\"cert\", \"key\"}, "
             "got " +
                 Describe(value));
    }
    RejectUnknownFields(value, "admin.tls", {"cert", "key"});
    const auto file = [&](std::string_view key) {
        const std::string path = Join("admin.tls", key);
        if (Find(value, key) == nullptr) {
            Fail(path,
                 "missing: HTTPS needs both \"cert\" and \"key\" (a half-configured TLS "
                 "admin API is refused rather than served in clear)");
        }
        const std::string& text = ExpectString(*Find(value, key), path);
        if (text.empty()) {
            Fail(path, "must be a file path, got an empty string");
        }
        return text;
    };
    security.admin_tls = AdminTls::Files;
    security.admin_tls_cert = file("cert");
    security.admin_tls_key = file("key");
}

void ParseSecurity(const json& document, const std::optional<TlsFiles>& tls,
                   SecuritySettings& security) {
    if (const json* insecure = Find(document, "insecure")) {
        security.insecure = ExpectBool(*insecure, "insecure");
    }
    const auto path_field = [](const json& value, const std::string& path) -> std::string {
        if (value.is_null()) {
            return "";  // as written by effective_config_json for "none"
        }
        const std::string& text = ExpectString(value, path);
        if (text.empty()) {
            Fail(path, "must be a file path, got an empty string");
        }
        return text;
    };
    if (const json* secret = Find(document, "secret_file")) {
        security.secret_file = path_field(*secret, "secret_file");
    }
    if (const json* admin = Find(document, "admin")) {
        ExpectObject(*admin, "admin");
        RejectUnknownFields(*admin, "admin",
                            {"token_file", "open_reads", "hosts", "max_connections_per_source",
                             "max_watchers", "idle_timeout_ms", "tls"});
        if (const json* token = Find(*admin, "token_file")) {
            security.admin_token_file = path_field(*token, "admin.token_file");
        }
        if (const json* open = Find(*admin, "open_reads")) {
            security.admin_open_reads = ExpectBool(*open, "admin.open_reads");
        }
        if (const json* hosts = Find(*admin, "hosts")) {
            if (!hosts->is_array()) {
                Fail("admin.hosts", "expected an array of host names, got " + Describe(*hosts));
            }
            for (std::size_t i = 0; i < hosts->size(); ++i) {
                const std::string path = "admin.hosts[" + std::to_string(i) + "]";
                const std::string& host = ExpectString((*hosts)[i], path);
                if (host.empty() || host.size() > 253) {
                    Fail(path, "expected a host name, got " + Describe((*hosts)[i]));
                }
                security.admin_hosts.push_back(host);
            }
        }
        if (const json* limit = Find(*admin, "max_connections_per_source")) {
            security.admin_max_connections_per_source = static_cast<std::uint32_t>(
                ExpectInteger(*limit, "admin.max_connections_per_source", 1, 10'000));
        }
        if (const json* watchers = Find(*admin, "max_watchers")) {
            // The admin server holds at most 64 connections; at least 16 stay for other requests.
            security.admin_max_watchers = static_cast<std::uint32_t>(
                ExpectInteger(*watchers, "admin.max_watchers", 1, kMaxAdminWatchers));
        }
        if (const json* idle = Find(*admin, "idle_timeout_ms")) {
            security.admin_idle_timeout_ms = static_cast<std::uint32_t>(
                ExpectInteger(*idle, "admin.idle_timeout_ms", 100, 10'000));
        }
        if (const json* admin_tls = Find(*admin, "tls")) {
            ParseAdminTls(*admin_tls, tls, security);
        }
    }
}

std::vector<NodeEntry> ParseNodes(const json& value) {
    if (!value.is_array()) {
        Fail("nodes", "expected an array of {id, peer, http}, got " + Describe(value));
    }
    if (value.empty() || value.size() > kMaxClusterSize) {
        Fail("nodes", "must list between 1 and " + std::to_string(kMaxClusterSize) +
                          " nodes, got " + std::to_string(value.size()));
    }
    std::vector<NodeEntry> nodes;
    for (std::size_t i = 0; i < value.size(); ++i) {
        const std::string path = "nodes[" + std::to_string(i) + "]";
        const json& item = value[i];
        ExpectObject(item, path);
        RejectUnknownFields(item, path, {"id", "peer", "http", "priority"});
        NodeEntry entry;
        const json& id = Require(item, path, "id");
        entry.id = ExpectString(id, path + ".id");
        if (!ValidName(entry.id)) {
            Fail(path + ".id", std::string("expected ") + kNameRule + ", got " + Describe(id));
        }
        entry.peer = ParseEndpointField(Require(item, path, "peer"), path + ".peer");
        entry.http = ParseEndpointField(Require(item, path, "http"), path + ".http");
        if (const json* priority = Find(item, "priority")) {
            entry.priority = static_cast<std::uint32_t>(
                ExpectInteger(*priority, path + ".priority", 0, elector::Config::kMaxPriority));
        }
        nodes.push_back(std::move(entry));
    }
    // Duplicate ids, then endpoint clashes (both sockets of every node against all earlier ones).
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
            if (nodes[i].id == nodes[j].id) {
                Fail("nodes[" + std::to_string(i) + "].id", "duplicate id \"" + nodes[i].id +
                                                                "\" (also nodes[" +
                                                                std::to_string(j) + "].id)");
            }
        }
    }
    struct Socket {
        std::string path;
        const Endpoint* endpoint;
    };
    std::vector<Socket> sockets;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const std::string path = "nodes[" + std::to_string(i) + "]";
        for (const Socket& candidate :
             {Socket{path + ".peer", &nodes[i].peer}, Socket{path + ".http", &nodes[i].http}}) {
            for (const Socket& earlier : sockets) {
                if (Clash(*candidate.endpoint, *earlier.endpoint)) {
                    Fail(candidate.path, "endpoint " + to_string(*candidate.endpoint) +
                                             " clashes with " + earlier.path + " (" +
                                             to_string(*earlier.endpoint) + ")");
                }
            }
            sockets.push_back(candidate);
        }
    }
    return nodes;
}

// The elector's settings: the profile for the cluster's size, then timing, backoff, scouting and
// check_quorum overrides, validated together.
void ParseElector(const json& document, ClusterConfig& config) {
    if (const json* profile = Find(document, "profile")) {
        config.profile = ExpectString(*profile, "profile");
    }
    auto elector = elector::Config::profile(config.profile, config.nodes.size(), config.self);
    if (!elector) {
        Fail("profile", "expected \"default\", \"fast\" or \"reference\", got " +
                            Describe(*Find(document, "profile")));
    }
    config.elector = *elector;
    for (std::size_t i = 0; i < config.nodes.size(); ++i) {
        config.elector.priorities[i] = config.nodes[i].priority;
    }
    if (const json* timing = Find(document, "timing")) {
        ApplyTiming(*timing, config.elector);
    }
    if (const json* backoff = Find(document, "backoff")) {
        const auto parsed = parse_enum<elector::Backoff>(ExpectString(*backoff, "backoff"));
        if (!parsed) {
            Fail("backoff", "expected \"uniform\" or \"ranked\", got " + Describe(*backoff));
        }
        config.elector.backoff = *parsed;
    }
    if (const json* scouting = Find(document, "scouting")) {
        config.elector.scouting = ExpectBool(*scouting, "scouting");
    }
    if (const json* check_quorum = Find(document, "check_quorum")) {
        config.elector.check_quorum = ExpectBool(*check_quorum, "check_quorum");
    }
    if (auto error = config.elector.validate()) {
        // Timing errors name the override; anything else (cluster size) is a nodes problem.
        std::string message = ToConfigFieldNames(*error);
        if (message.rfind("timing", 0) != 0) {
            message = "nodes: " + message;
        }
        throw FieldError{message};
    }
}

// ---- Leadership backend ("backend"): the built-in elector or a coordination store. ----------

BackendSettings::Kind ParseBackendKind(const json& value) {
    const std::string& kind = ExpectString(value, "backend.kind");
    if (kind == "raft") {
        return BackendSettings::Kind::Raft;
    }
    if (kind == "etcd") {
        return BackendSettings::Kind::Etcd;
    }
    if (kind == "zookeeper") {
        return BackendSettings::Kind::ZooKeeper;
    }
    Fail("backend.kind", "expected \"raft\", \"etcd\" or \"zookeeper\", got " + Describe(value));
}

void ParseBackendEndpoints(const json& object, BackendSettings& backend) {
    const json* endpoints = Find(object, "endpoints");
    const json* hosts = Find(object, "hosts");
    const bool etcd = backend.kind == BackendSettings::Kind::Etcd;
    if ((etcd ? hosts : endpoints) != nullptr) {
        Fail(etcd ? "backend.hosts" : "backend.endpoints",
             etcd ? "is for \"zookeeper\"; etcd takes \"endpoints\": [\"host:port\", ...]"
                  : "is for \"etcd\"; zookeeper takes \"hosts\": \"host:port,host:port\"");
    }
    if (!etcd) {
        backend.hosts = ExpectString(Require(object, "backend", "hosts"), "backend.hosts");
        if (backend.hosts.empty()) {
            Fail("backend.hosts", "expected \"host:port[,host:port...]\", got an empty string");
        }
        return;
    }
    const json& list = Require(object, "backend", "endpoints");
    if (!list.is_array() || list.empty()) {
        Fail("backend.endpoints",
             "expected a non-empty array of \"host:port\", got " + Describe(list));
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string path = "backend.endpoints[" + std::to_string(i) + "]";
        const auto endpoint = parse_endpoint(ExpectString(list[i], path));
        if (!endpoint) {
            Fail(path, "expected \"host:port\", got " + Describe(list[i]));
        }
        backend.endpoints.push_back(*endpoint);
    }
}

BackendSettings ParseBackend(const json& object, std::uint32_t drift_permille) {
    ExpectObject(object, "backend");
    RejectUnknownFields(object, "backend",
                        {"kind", "endpoints", "hosts", "ttl_ms", "drift_permille", "prefix"});
    BackendSettings backend;
    backend.drift_permille = drift_permille;
    backend.kind = ParseBackendKind(Require(object, "backend", "kind"));
    if (!backend.is_store()) {
        if (object.size() > 1) {
            Fail("backend", "kind \"raft\" (the built-in elector) takes no other field");
        }
        return backend;
    }
    ParseBackendEndpoints(object, backend);
    if (const json* ttl = Find(object, "ttl_ms")) {
        backend.ttl_ms =
            static_cast<std::uint32_t>(ExpectInteger(*ttl, "backend.ttl_ms", 500, 600'000));
    }
    if (const json* drift = Find(object, "drift_permille")) {
        backend.drift_permille =
            static_cast<std::uint32_t>(ExpectInteger(*drift, "backend.drift_permille", 0, 500));
    }
    if (const json* prefix = Find(object, "prefix")) {
        backend.prefix = ExpectString(*prefix, "backend.prefix");
        if (backend.prefix.size() < 2 || backend.prefix.front() != '/' ||
            backend.prefix.back() == '/' || !ValidName(backend.prefix.substr(1))) {
            Fail("backend.prefix",
                 "expected \"/\" then " + std::string(kNameRule) + ", got " + Describe(*prefix));
        }
    }
    return backend;
}

/// A store backend holds the quorum: the metadata log (which needs the built-in elector's
/// quorum) cannot run beside it.
void CheckBackendConflicts(const json& document, ClusterConfig& config) {
    if (!config.backend.is_store()) {
        return;
    }
    const json* metadata = Find(document, "metadata");
    if (metadata != nullptr && config.metadata.enabled) {
        Fail("metadata", std::string("the metadata log needs the built-in elector; with "
                                     "\"backend\": {\"kind\": \"") +
                             std::string(to_string(config.backend.kind)) +
                             "\"} set \"metadata\": {\"enabled\": false} or leave it out");
    }
    config.metadata.enabled = false;
}

ClusterConfig ParseDocument(const json& document, std::string_view node_id) {
    if (!document.is_object()) {
        Fail("(top level)", "expected a JSON object, got " + Describe(document));
    }
    RejectUnknownFields(
        document, "",
        {"cluster", "nodes", "profile", "timing", "backoff", "scouting", "check_quorum", "data_dir",
         "tls", "log", "metadata", "insecure", "secret_file", "admin", "backend"});
    ClusterConfig config;
    const json& cluster = Require(document, "", "cluster");
    config.cluster = ExpectString(cluster, "cluster");
    if (!ValidName(config.cluster)) {
        Fail("cluster", std::string("expected ") + kNameRule + ", got " + Describe(cluster));
    }
    config.nodes = ParseNodes(Require(document, "", "nodes"));

    const auto self = config.find_node(node_id);
    if (!self) {
        std::string known;
        for (const NodeEntry& n : config.nodes) {
            known += (known.empty() ? "" : ", ") + n.id;
        }
        Fail("--node-id",
             "\"" + std::string(node_id) + "\" is not one of the configured nodes (" + known + ")");
    }
    config.self = *self;

    ParseElector(document, config);

    config.data_dir_template = ParseDataDir(Require(document, "", "data_dir"), "data_dir");
    config.data_dir = SubstituteId(config.data_dir_template, config.self_entry().id);
    if (const json* tls = Find(document, "tls")) {
        config.tls = ParseTls(*tls);
    }
    if (const json* log = Find(document, "log")) {
        config.log = ParseLog(*log);
    }
    if (const json* metadata = Find(document, "metadata")) {
        config.metadata = ParseMetadata(*metadata);
    }
    ParseSecurity(document, config.tls, config.security);
    if (const json* backend = Find(document, "backend")) {
        config.backend = ParseBackend(*backend, config.elector.lease_drift_permille);
        CheckBackendConflicts(document, config);
    }
    return config;
}

/// Refuses duplicate keys in any JSON object while parsing (nlohmann keeps the last one silently).
class DuplicateKeyCheck {
  public:
    bool operator()(int depth, json::parse_event_t event, json& parsed) {
        (void)depth;
        switch (event) {
            case json::parse_event_t::object_start:
                keys_.emplace_back();
                break;
            case json::parse_event_t::object_end:
                if (!keys_.empty()) {
                    keys_.pop_back();
                }
                break;
            case json::parse_event_t::key: {
                CONCLAVE_CHECK(!keys_.empty(), "the parser reports a key only inside an object");
                const auto& key = parsed.get_ref<const std::string&>();
                if (!keys_.back().insert(key).second) {
                    throw FieldError{"invalid JSON: duplicate key \"" + key +
                                     "\" in the same object"};
                }
                break;
            }
            default:
                break;
        }
        return true;
    }

  private:
    std::vector<std::set<std::string>> keys_;
};

}  // namespace

std::string_view to_string(BackendSettings::Kind k) {
    switch (k) {
        case BackendSettings::Kind::Etcd:
            return "etcd";
        case BackendSettings::Kind::ZooKeeper:
            return "zookeeper";
        case BackendSettings::Kind::Raft:
            break;
    }
    return "raft";
}

std::string to_string(const Endpoint& e) {
    const bool v6 = e.host.find(':') != std::string::npos;
    return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

bool valid_node_id(std::string_view id) {
    return ValidName(id);
}

std::optional<Endpoint> parse_endpoint(std::string_view text) {
    std::string_view host;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            return std::nullopt;
        }
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
        if (host.find(':') == std::string_view::npos) {
            return std::nullopt;  // brackets only for IPv6 literals
        }
    } else {
        const std::size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) {
            return std::nullopt;
        }
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) {
            return std::nullopt;  // unbracketed IPv6 is ambiguous
        }
    }
    const bool host_ok =
        !host.empty() && host.size() <= 253 && std::all_of(host.begin(), host.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '-' || c == ':' || c == '_';
        });
    if (!host_ok || port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
    }
    unsigned value = 0;
    std::from_chars(port.data(), port.data() + port.size(), value);
    if (value == 0 || value > 65535) {
        return std::nullopt;
    }
    return Endpoint{std::string(host), static_cast<std::uint16_t>(value)};
}

std::string_view to_string(LogFormat f) {
    return f == LogFormat::Json ? "json" : "text";
}

std::optional<NodeId> ClusterConfig::find_node(std::string_view id) const {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].id == id) {
            return NodeId{static_cast<std::uint16_t>(i)};
        }
    }
    return std::nullopt;
}

const std::string& ClusterConfig::node_name(NodeId n) const {
    CONCLAVE_CHECK(n.value < nodes.size(), "a node index names a configured node");
    return nodes[n.value].id;
}

ConfigResult cluster_config_from_json(const nlohmann::json& document, std::string_view node_id) {
    try {
        return ParseDocument(document, node_id);
    } catch (const FieldError& e) {
        return ConfigError{e.message};
    }
}

ConfigResult parse_cluster_config(std::string_view json_text, std::string_view node_id) {
    json document;
    try {
        document = json::parse(json_text, DuplicateKeyCheck{});
    } catch (const FieldError& e) {
        return ConfigError{e.message};
    } catch (const json::exception& e) {
        // "[json.exception.parse_error.101] parse error at line 3, column 7: ..." -> keep the tail.
        std::string what = e.what();
        const std::size_t bracket = what.find("] ");
        if (bracket != std::string::npos) {
            what = what.substr(bracket + 2);
        }
        return ConfigError{"invalid JSON: " + what};
    }
    return cluster_config_from_json(document, node_id);
}

namespace {

/// A relative path in a config file names a file next to that file: `base / path`.
void ResolveAgainst(const std::filesystem::path& base, std::string& path) {
    if (!path.empty() && std::filesystem::path(path).is_relative()) {
        path = (base / path).lexically_normal().string();
    }
}

/// Every path field of `config` (data_dir, secret_file, admin.token_file, admin.tls and tls
/// files), resolved against the directory of the config file `config_path`.
void ResolvePaths(ClusterConfig& config, const std::filesystem::path& config_path) {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::absolute(config_path, ec).parent_path();
    if (ec) {
        base = config_path.parent_path();
    }
    ResolveAgainst(base, config.data_dir_template);
    std::string data_dir = config.data_dir.string();
    ResolveAgainst(base, data_dir);
    config.data_dir = data_dir;
    ResolveAgainst(base, config.security.secret_file);
    ResolveAgainst(base, config.security.admin_token_file);
    ResolveAgainst(base, config.security.admin_tls_cert);
    ResolveAgainst(base, config.security.admin_tls_key);
    if (config.tls) {
        ResolveAgainst(base, config.tls->ca_path);
        ResolveAgainst(base, config.tls->cert_path);
        ResolveAgainst(base, config.tls->key_path);
    }
}

}  // namespace

ConfigResult load_cluster_config(const std::filesystem::path& path, std::string_view node_id) {
    const std::string name = path.string();
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) {
        return ConfigError{name + ": cannot read config file: " +
                           (ec ? ec.message() : std::string("no such file"))};
    }
    if (std::filesystem::is_directory(status)) {
        return ConfigError{name + ": cannot read config file: it is a directory"};
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return ConfigError{name + ": cannot read config file: " +
                           std::error_code(errno, std::generic_category()).message()};
    }
    std::string text;
    char buffer[4096];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
        text.append(buffer, static_cast<std::size_t>(in.gcount()));
        if (text.size() > kMaxConfigFileBytes) {
            return ConfigError{name + ": config file is larger than " +
                               std::to_string(kMaxConfigFileBytes) + " bytes"};
        }
    }
    if (in.bad()) {
        return ConfigError{name + ": cannot read config file: read error"};
    }
    ConfigResult result = parse_cluster_config(text, node_id);
    if (auto* error = std::get_if<ConfigError>(&result)) {
        error->message = name + ": " + error->message;
    } else {
        ResolvePaths(std::get<ClusterConfig>(result), path);
    }
    return result;
}

std::string_view metadata_fsync_name(replication::FsyncPolicy p) {
    switch (p) {
        case replication::FsyncPolicy::Batched:
            return "batched";
        case replication::FsyncPolicy::EveryEntry:
            return "always";
        case replication::FsyncPolicy::Never:
            return "never";
    }
    return "batched";
}

namespace {

/// "admin.tls" as written: false, true, or {"cert", "key"}.
nlohmann::ordered_json AdminTlsJson(const SecuritySettings& s) {
    switch (s.admin_tls) {
        case SecuritySettings::AdminTls::Off:
            return false;
        case SecuritySettings::AdminTls::NodeCertificate:
            return true;
        case SecuritySettings::AdminTls::Files:
            return {{"cert", s.admin_tls_cert}, {"key", s.admin_tls_key}};
    }
    return false;
}

nlohmann::ordered_json TimingJson(const elector::Config& e) {
    nlohmann::ordered_json timing = nlohmann::ordered_json::object();
    for (const TimingOption& option : kTimingOptions) {
        std::visit(
            [&](auto member) {
                if constexpr (std::is_same_v<std::remove_cvref_t<decltype(e.*member)>, Millis>) {
                    timing[std::string(option.name)] = (e.*member).count();
                } else {
                    timing[std::string(option.name)] = e.*member;
                }
            },
            option.member);
    }
    return timing;
}

}  // namespace

std::vector<std::string_view> timing_option_names() {
    std::vector<std::string_view> names;
    for (const TimingOption& option : kTimingOptions) {
        names.push_back(option.name);
    }
    return names;
}

namespace {

nlohmann::ordered_json BackendJson(const BackendSettings& backend) {
    nlohmann::ordered_json out{{"kind", to_string(backend.kind)}};
    if (!backend.is_store()) {
        return out;
    }
    if (backend.kind == BackendSettings::Kind::Etcd) {
        nlohmann::ordered_json endpoints = nlohmann::ordered_json::array();
        for (const Endpoint& e : backend.endpoints) {
            endpoints.push_back(to_string(e));
        }
        out["endpoints"] = std::move(endpoints);
    } else {
        out["hosts"] = backend.hosts;
    }
    out["ttl_ms"] = backend.ttl_ms;
    out["drift_permille"] = backend.drift_permille;
    out["prefix"] = backend.prefix;
    return out;
}

}  // namespace

nlohmann::ordered_json effective_config_json(const ClusterConfig& config) {
    nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
    for (const NodeEntry& n : config.nodes) {
        nodes.push_back({{"id", n.id},
                         {"peer", to_string(n.peer)},
                         {"http", to_string(n.http)},
                         {"priority", n.priority}});
    }
    const elector::Config& e = config.elector;
    nlohmann::ordered_json tls = nullptr;
    if (config.tls) {
        tls = {{"ca", config.tls->ca_path},
               {"cert", config.tls->cert_path},
               {"key", config.tls->key_path}};
    }
    return nlohmann::ordered_json{
        {"cluster", config.cluster},
        {"nodes", std::move(nodes)},
        {"profile", config.profile},
        {"timing", TimingJson(e)},
        {"backoff", to_string(e.backoff)},
        {"scouting", e.scouting},
        {"check_quorum", e.check_quorum},
        {"data_dir", config.data_dir.string()},
        {"tls", std::move(tls)},
        {"log", {{"format", to_string(config.log.format)}, {"level", config.log.level}}},
        {"metadata",
         {{"enabled", config.metadata.enabled},
          {"fsync", metadata_fsync_name(config.metadata.fsync)},
          {"propose_timeout_ms", config.metadata.propose_timeout_ms},
          {"unsafe_no_fsync", config.metadata.unsafe_no_fsync},
          {"quota_bytes", config.metadata.quota_bytes},
          {"quota_entries", config.metadata.quota_entries},
          {"compact_threshold", config.metadata.compact_threshold},
          {"compact_retain", config.metadata.compact_retain},
          {"promote_lag_entries", config.metadata.promote_lag_entries}}},
        {"insecure", config.security.insecure},
        {"secret_file", config.security.secret_file.empty()
                            ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json(config.security.secret_file)},
        {"admin",
         {{"token_file", config.security.admin_token_file.empty()
                             ? nlohmann::ordered_json(nullptr)
                             : nlohmann::ordered_json(config.security.admin_token_file)},
          {"open_reads", config.security.admin_open_reads},
          {"hosts", config.security.admin_hosts},
          {"max_connections_per_source", config.security.admin_max_connections_per_source},
          {"max_watchers", config.security.admin_max_watchers},
          {"idle_timeout_ms", config.security.admin_idle_timeout_ms},
          {"tls", AdminTlsJson(config.security)}}},
        {"backend", BackendJson(config.backend)},
    };
}

}  // namespace conclave::node
