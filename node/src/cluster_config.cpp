// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/cluster_config.hpp"
#include "conclave/core/check.hpp"
#include "conclave/core/enum_names.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <optional>
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

// ---- Described options: each section of scalar options is one table. ------------------------
// One option: its name, how a present value is read into the section's settings (the path names
// it in errors; `config` holds what was parsed before this section), and how the effective config
// writes it (nullopt: left out, e.g. a store's field under the built-in elector). The unknown-field
// check, the messages and the effective-config dump of the section all come from its table: a new
// option is one row plus its documentation (tests/node/cluster_config_test.cpp checks both).
template <class Settings>
struct Option {
    std::string_view name;
    std::function<void(const json& value, const std::string& path, const ClusterConfig& config,
                       Settings& settings)>
        parse;
    std::function<std::optional<nlohmann::ordered_json>(const Settings& settings)> dump;
};

template <class Settings>
using Options = std::vector<Option<Settings>>;

template <class Settings>
Option<Settings> Flag(std::string_view name, bool Settings::*member) {
    return {name,
            [member](const json& v, const std::string& path, const ClusterConfig&, Settings& s) {
                s.*member = ExpectBool(v, path);
            },
            [member](const Settings& s) { return nlohmann::ordered_json(s.*member); }};
}

/// An integer in [min, max]; `check` (optional) refuses more values, naming the rule.
template <class Settings, class Field>
Option<Settings> Integer(std::string_view name, Field Settings::*member, std::int64_t min,
                         std::int64_t max,
                         std::function<void(std::int64_t, const std::string&)> check = nullptr) {
    return {name,
            [=](const json& v, const std::string& path, const ClusterConfig&, Settings& s) {
                const std::int64_t n = ExpectInteger(v, path, min, max);
                if (check) {
                    check(n, path);
                }
                s.*member = static_cast<Field>(n);
            },
            [member](const Settings& s) { return nlohmann::ordered_json(s.*member); }};
}

/// One of a few names, each standing for a value of the field.
template <class Value>
using Choices = std::vector<std::pair<std::string_view, Value>>;

template <class Value>
std::string ChoiceList(const Choices<Value>& choices) {
    std::string list;
    for (std::size_t i = 0; i < choices.size(); ++i) {
        list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ");
        list += "\"" + std::string(choices[i].first) + "\"";
    }
    return list;
}

template <class Value>
std::string_view ChoiceName(const Choices<Value>& choices, const Value& value) {
    for (const auto& [name, v] : choices) {
        if (v == value) {
            return name;
        }
    }
    return choices.front().first;
}

template <class Settings, class Value>
Option<Settings> Choice(std::string_view name, Value Settings::*member, Choices<Value> choices) {
    return {name,
            [member, choices](const json& v, const std::string& path, const ClusterConfig&,
                              Settings& s) {
                const std::string& text = ExpectString(v, path);
                for (const auto& [choice, value] : choices) {
                    if (text == choice) {
                        s.*member = value;
                        return;
                    }
                }
                Fail(path, "expected " + ChoiceList(choices) + ", got " + Describe(v));
            },
            [member, choices](const Settings& s) {
                return nlohmann::ordered_json(ChoiceName(choices, s.*member));
            }};
}

/// A file path, or null for none (as the effective config writes "none": "").
template <class Settings>
Option<Settings> PathOrNull(std::string_view name, std::string Settings::*member) {
    return {name,
            [member](const json& v, const std::string& path, const ClusterConfig&, Settings& s) {
                if (v.is_null()) {
                    s.*member = "";
                    return;
                }
                const std::string& text = ExpectString(v, path);
                if (text.empty()) {
                    Fail(path, "must be a file path, got an empty string");
                }
                s.*member = text;
            },
            [member](const Settings& s) {
                return (s.*member).empty() ? nlohmann::ordered_json(nullptr)
                                           : nlohmann::ordered_json(s.*member);
            }};
}

template <class Settings>
std::vector<std::string_view> OptionNames(const Options<Settings>& options) {
    std::vector<std::string_view> names;
    for (const Option<Settings>& option : options) {
        names.push_back(option.name);
    }
    return names;
}

/// Reads the section object `value` (at `section`) into `settings` through its table.
template <class Settings>
void ParseSection(const json& value, const std::string& section, const Options<Settings>& options,
                  const ClusterConfig& config, Settings& settings) {
    ExpectObject(value, section);
    RejectUnknownFields(value, section, OptionNames(options));
    for (const Option<Settings>& option : options) {
        if (const json* v = Find(value, option.name)) {
            option.parse(*v, Join(section, option.name), config, settings);
        }
    }
}

template <class Settings>
nlohmann::ordered_json SectionJson(const Settings& settings, const Options<Settings>& options) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const Option<Settings>& option : options) {
        if (auto v = option.dump(settings)) {
            out[std::string(option.name)] = std::move(*v);
        }
    }
    return out;
}

// ---- "log" -------------------------------------------------------------------------------------
const Options<LogSettings>& LogOptions() {
    static const Options<LogSettings> options = {
        Choice("format", &LogSettings::format,
               Choices<LogFormat>{{"text", LogFormat::Text}, {"json", LogFormat::Json}}),
        Choice("level", &LogSettings::level,
               Choices<std::string>{{"trace", "trace"},
                                    {"debug", "debug"},
                                    {"info", "info"},
                                    {"warn", "warn"},
                                    {"error", "error"},
                                    {"critical", "critical"},
                                    {"off", "off"}}),
    };
    return options;
}

// ---- "metadata" --------------------------------------------------------------------------------
const Choices<replication::FsyncPolicy>& FsyncChoices() {
    static const Choices<replication::FsyncPolicy> choices = {
        {"batched", replication::FsyncPolicy::Batched},
        {"always", replication::FsyncPolicy::EveryEntry},
        {"never", replication::FsyncPolicy::Never}};
    return choices;
}

const Options<MetadataSettings>& MetadataOptions() {
    using M = MetadataSettings;
    constexpr std::int64_t kCount = std::int64_t{1} << 32;
    // The smallest quota holds one entry of the largest size.
    constexpr std::int64_t kMinQuotaBytes = 16 + 1024 + (64 << 10);
    static const Options<M> options = {
        Flag("enabled", &M::enabled),
        Choice("fsync", &M::fsync, FsyncChoices()),
        Integer("propose_timeout_ms", &M::propose_timeout_ms, 10, 3'600'000),
        // storage: "never" can lose acknowledged entries on a machine crash; it needs an
        // explicit consent (checked with the section).
        Flag("unsafe_no_fsync", &M::unsafe_no_fsync),
        Integer("quota_bytes", &M::quota_bytes, 0, std::int64_t{1} << 40,
                [](std::int64_t n, const std::string& path) {
                    if (n != 0 && n < kMinQuotaBytes) {
                        Fail(path,
                             "expected 0 (no limit) or at least " + std::to_string(kMinQuotaBytes) +
                                 " (one entry of the largest size), got " + std::to_string(n));
                    }
                }),
        Integer("quota_entries", &M::quota_entries, 0, kCount,
                [](std::int64_t n, const std::string& path) {
                    if (n == 1) {
                        Fail(path, "expected 0 (no limit) or at least 2, got 1");
                    }
                }),
        Integer("compact_threshold", &M::compact_threshold, 0, kCount),
        Integer("compact_retain", &M::compact_retain, 0, kCount),
        // Membership (R7): how far behind the leader's last entry a learner may be when it is
        // promoted.
        Integer("promote_lag_entries", &M::promote_lag_entries, 0, kCount),
    };
    return options;
}

/// The rules between metadata options.
void CheckMetadata(const MetadataSettings& metadata) {
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

void ParseAdminHosts(const json& hosts, const std::string& path, const ClusterConfig&,
                     SecuritySettings& security) {
    if (!hosts.is_array()) {
        Fail(path, "expected an array of host names, got " + Describe(hosts));
    }
    security.admin_hosts.clear();
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        const std::string item = path + "[" + std::to_string(i) + "]";
        const std::string& host = ExpectString(hosts[i], item);
        if (host.empty() || host.size() > 253) {
            Fail(item, "expected a host name, got " + Describe(hosts[i]));
        }
        security.admin_hosts.push_back(host);
    }
}

const Options<SecuritySettings>& AdminOptions() {
    using S = SecuritySettings;
    static const Options<S> options = {
        PathOrNull("token_file", &S::admin_token_file),
        Flag("open_reads", &S::admin_open_reads),
        {"hosts", ParseAdminHosts,
         [](const S& s) { return std::optional<nlohmann::ordered_json>(s.admin_hosts); }},
        Integer("max_connections_per_source", &S::admin_max_connections_per_source, 1, 10'000),
        // The admin server holds at most 64 connections; at least 16 stay for other requests.
        Integer("max_watchers", &S::admin_max_watchers, 1, kMaxAdminWatchers),
        Integer("idle_timeout_ms", &S::admin_idle_timeout_ms, 100, 10'000),
        {"tls",
         [](const json& v, const std::string&, const ClusterConfig& config, S& s) {
             ParseAdminTls(v, config.tls, s);
         },
         [](const S& s) { return std::optional<nlohmann::ordered_json>(AdminTlsJson(s)); }},
    };
    return options;
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

// ---- The elector's fields: "profile" builds elector::Config for the cluster's size, the next
// rows ("timing", "backoff", "scouting", "check_quorum") override it, then it is validated. ----

/// After "profile" (present or not): the profile's config for this cluster and node.
void BuildElector(const json&, std::string_view, ClusterConfig& config) {
    auto elector = elector::Config::profile(config.profile, config.nodes.size(), config.self);
    CONCLAVE_CHECK(elector.has_value(), "the \"profile\" row accepts only the known profiles");
    config.elector = *elector;
    for (std::size_t i = 0; i < config.nodes.size(); ++i) {
        config.elector.priorities[i] = config.nodes[i].priority;
    }
}

/// After the last elector row: the elector's own rules over the values together.
void ValidateElector(const json&, std::string_view, ClusterConfig& config) {
    if (auto error = config.elector.validate()) {
        // Timing errors name the override; anything else (cluster size) is a nodes problem.
        std::string message = ToConfigFieldNames(*error);
        if (message.rfind("timing", 0) != 0) {
            message = "nodes: " + message;
        }
        throw FieldError{message};
    }
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

Option<elector::Config> TimingField() {
    return {"timing",
            [](const json& v, const std::string&, const ClusterConfig&, elector::Config& e) {
                ApplyTiming(v, e);
            },
            [](const elector::Config& e) {
                return std::optional<nlohmann::ordered_json>(TimingJson(e));
            }};
}

Option<elector::Config> BackoffField() {
    return {"backoff",
            [](const json& v, const std::string& path, const ClusterConfig&, elector::Config& e) {
                const auto parsed = parse_enum<elector::Backoff>(ExpectString(v, path));
                if (!parsed) {
                    Fail(path, "expected \"uniform\" or \"ranked\", got " + Describe(v));
                }
                e.backoff = *parsed;
            },
            [](const elector::Config& e) {
                return std::optional<nlohmann::ordered_json>(to_string(e.backoff));
            }};
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

void ParseBackendEndpoint(const json& list, const std::string& path, const ClusterConfig&,
                          BackendSettings& backend) {
    if (backend.kind != BackendSettings::Kind::Etcd) {
        Fail(path, "is for \"etcd\"; zookeeper takes \"hosts\": \"host:port,host:port\"");
    }
    if (!list.is_array() || list.empty()) {
        Fail(path, "expected a non-empty array of \"host:port\", got " + Describe(list));
    }
    backend.endpoints.clear();
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string item = path + "[" + std::to_string(i) + "]";
        const auto endpoint = parse_endpoint(ExpectString(list[i], item));
        if (!endpoint) {
            Fail(item, "expected \"host:port\", got " + Describe(list[i]));
        }
        backend.endpoints.push_back(*endpoint);
    }
}

void ParseBackendHosts(const json& value, const std::string& path, const ClusterConfig&,
                       BackendSettings& backend) {
    if (backend.kind == BackendSettings::Kind::Etcd) {
        Fail(path, "is for \"zookeeper\"; etcd takes \"endpoints\": [\"host:port\", ...]");
    }
    backend.hosts = ExpectString(value, path);
    if (backend.hosts.empty()) {
        Fail(path, "expected \"host:port[,host:port...]\", got an empty string");
    }
}

void ParseBackendPrefix(const json& value, const std::string& path, const ClusterConfig&,
                        BackendSettings& backend) {
    backend.prefix = ExpectString(value, path);
    if (backend.prefix.size() < 2 || backend.prefix.front() != '/' ||
        backend.prefix.back() == '/' || !ValidName(backend.prefix.substr(1))) {
        Fail(path, "expected \"/\" then " + std::string(kNameRule) + ", got " + Describe(value));
    }
}

/// `option`, written in the effective config only when `when` holds for the settings.
Option<BackendSettings> DumpedWhen(Option<BackendSettings> option,
                                   bool (*when)(const BackendSettings&)) {
    option.dump = [dump = std::move(option.dump), when](const BackendSettings& b) {
        return when(b) ? dump(b) : std::nullopt;
    };
    return option;
}

const Options<BackendSettings>& BackendOptions() {
    using B = BackendSettings;
    using Json = nlohmann::ordered_json;
    const auto store = [](const B& b) { return b.is_store(); };
    static const Options<B> options = {
        {"kind",
         [](const json& v, const std::string&, const ClusterConfig&, B& b) {
             b.kind = ParseBackendKind(v);
         },
         [](const B& b) { return std::optional<Json>(to_string(b.kind)); }},
        DumpedWhen({"endpoints", ParseBackendEndpoint,
                    [](const B& b) {
                        Json list = Json::array();
                        for (const Endpoint& e : b.endpoints) {
                            list.push_back(to_string(e));
                        }
                        return std::optional<Json>(std::move(list));
                    }},
                   [](const B& b) { return b.kind == B::Kind::Etcd; }),
        DumpedWhen(
            {"hosts", ParseBackendHosts, [](const B& b) { return std::optional<Json>(b.hosts); }},
            [](const B& b) { return b.kind == B::Kind::ZooKeeper; }),
        DumpedWhen(Integer("ttl_ms", &B::ttl_ms, 500, 600'000), store),
        DumpedWhen(Integer("drift_permille", &B::drift_permille, 0, 500), store),
        DumpedWhen({"prefix", ParseBackendPrefix,
                    [](const B& b) { return std::optional<Json>(b.prefix); }},
                   store),
    };
    return options;
}

BackendSettings ParseBackend(const json& object, const ClusterConfig& config) {
    ExpectObject(object, "backend");
    RejectUnknownFields(object, "backend", OptionNames(BackendOptions()));
    BackendSettings backend;
    backend.drift_permille = config.elector.lease_drift_permille;
    backend.kind = ParseBackendKind(Require(object, "backend", "kind"));
    if (!backend.is_store()) {
        if (object.size() > 1) {
            Fail("backend", "kind \"raft\" (the built-in elector) takes no other field");
        }
        return backend;
    }
    ParseSection(object, "backend", BackendOptions(), config, backend);
    Require(object, "backend", backend.kind == BackendSettings::Kind::Etcd ? "endpoints" : "hosts");
    return backend;
}

/// A store backend holds the quorum: the metadata log (which needs the built-in elector's
/// quorum) cannot run beside it.
void CheckBackendConflicts(const json& document, std::string_view, ClusterConfig& config) {
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

// ---- The top level: one row per field. --------------------------------------------------------
// The rows are parsed in table order (a row reads what the rows above it set: "data_dir" the node
// found by "nodes", "admin" the "tls" block), and the unknown-field check, the missing-field
// message and the effective-config dump (in the same order) come from the table: a new top-level
// field is one row plus its row in node/README.md's table (tests/node/cluster_config_test.cpp
// checks both).
enum class Presence : std::uint8_t { Optional, Required };

struct TopLevelField {
    /// Runs after the row whether the field is present or not (null: nothing to do).
    using Then =
        std::function<void(const json& document, std::string_view node_id, ClusterConfig& config)>;
    TopLevelField(Option<ClusterConfig> row, Presence required = Presence::Optional,
                  Then after = nullptr)
        : option(std::move(row)), presence(required), then(std::move(after)) {}
    Option<ClusterConfig> option;
    Presence presence;
    Then then;
};

/// An option of one part of the config (`part`), as a top-level row.
template <class Part>
Option<ClusterConfig> Within(Part ClusterConfig::*part, Option<Part> option) {
    return {option.name,
            [part, parse = std::move(option.parse)](
                const json& v, const std::string& path, const ClusterConfig& config,
                ClusterConfig& settings) { parse(v, path, config, settings.*part); },
            [part, dump = std::move(option.dump)](const ClusterConfig& config) {
                return dump(config.*part);
            }};
}

/// A section described by its own table (`options`), read into `part`.
template <class Part>
Option<ClusterConfig> Section(std::string_view name, Part ClusterConfig::*part,
                              const Options<Part>& (*options)()) {
    return Within(part, Option<Part>{name,
                                     [options](const json& v, const std::string& path,
                                               const ClusterConfig& config, Part& settings) {
                                         ParseSection(v, path, options(), config, settings);
                                     },
                                     [options](const Part& settings) {
                                         return std::optional<nlohmann::ordered_json>(
                                             SectionJson(settings, options()));
                                     }});
}

/// After "nodes": which of them this node is (the --node-id).
void FindSelf(const json&, std::string_view node_id, ClusterConfig& config) {
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
}

nlohmann::ordered_json NodesJson(const std::vector<NodeEntry>& entries) {
    nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
    for (const NodeEntry& n : entries) {
        nodes.push_back({{"id", n.id},
                         {"peer", to_string(n.peer)},
                         {"http", to_string(n.http)},
                         {"priority", n.priority}});
    }
    return nodes;
}

nlohmann::ordered_json TlsJson(const std::optional<TlsFiles>& tls) {
    if (!tls) {
        return nullptr;
    }
    return {{"ca", tls->ca_path}, {"cert", tls->cert_path}, {"key", tls->key_path}};
}

void ParseClusterName(const json& v, const std::string& path, const ClusterConfig&,
                      ClusterConfig& config) {
    config.cluster = ExpectString(v, path);
    if (!ValidName(config.cluster)) {
        Fail(path, std::string("expected ") + kNameRule + ", got " + Describe(v));
    }
}

void ParseDataDirField(const json& v, const std::string& path, const ClusterConfig&,
                       ClusterConfig& config) {
    config.data_dir_template = ParseDataDir(v, path);
    config.data_dir = SubstituteId(config.data_dir_template, config.self_entry().id);
}

/// The section's table, then the rules between its options.
Option<ClusterConfig> MetadataField() {
    Option<ClusterConfig> field = Section("metadata", &ClusterConfig::metadata, MetadataOptions);
    field.parse = [parse = std::move(field.parse)](const json& v, const std::string& path,
                                                   const ClusterConfig& config,
                                                   ClusterConfig& settings) {
        parse(v, path, config, settings);
        CheckMetadata(settings.metadata);
    };
    return field;
}

const std::vector<TopLevelField>& TopLevelFields() {
    using C = ClusterConfig;
    using Json = nlohmann::ordered_json;
    using E = elector::Config;
    using S = SecuritySettings;
    static const std::vector<TopLevelField> fields = {
        {{"cluster", ParseClusterName, [](const C& c) { return std::optional<Json>(c.cluster); }},
         Presence::Required},
        {{"nodes",
          [](const json& v, const std::string&, const C&, C& c) { c.nodes = ParseNodes(v); },
          [](const C& c) { return std::optional<Json>(NodesJson(c.nodes)); }},
         Presence::Required,
         FindSelf},
        {Choice("profile", &C::profile,
                Choices<std::string>{
                    {"default", "default"}, {"fast", "fast"}, {"reference", "reference"}}),
         Presence::Optional, BuildElector},
        {Within(&C::elector, TimingField())},
        {Within(&C::elector, BackoffField())},
        {Within(&C::elector, Flag("scouting", &E::scouting))},
        {Within(&C::elector, Flag("check_quorum", &E::check_quorum)), Presence::Optional,
         ValidateElector},
        {{"data_dir", ParseDataDirField,
          [](const C& c) { return std::optional<Json>(c.data_dir.string()); }},
         Presence::Required},
        {{"tls", [](const json& v, const std::string&, const C&, C& c) { c.tls = ParseTls(v); },
          [](const C& c) { return std::optional<Json>(TlsJson(c.tls)); }}},
        {Section("log", &C::log, LogOptions)},
        {MetadataField()},
        {Within(&C::security, Flag("insecure", &S::insecure))},
        {Within(&C::security, PathOrNull("secret_file", &S::secret_file))},
        {Section("admin", &C::security, AdminOptions)},
        {{"backend",
          [](const json& v, const std::string&, const C& config, C& c) {
              c.backend = ParseBackend(v, config);
          },
          [](const C& c) { return std::optional<Json>(SectionJson(c.backend, BackendOptions())); }},
         Presence::Optional,
         CheckBackendConflicts},
    };
    return fields;
}

std::vector<std::string_view> TopLevelNames() {
    std::vector<std::string_view> names;
    for (const TopLevelField& field : TopLevelFields()) {
        names.push_back(field.option.name);
    }
    return names;
}

ClusterConfig ParseDocument(const json& document, std::string_view node_id) {
    if (!document.is_object()) {
        Fail("(top level)", "expected a JSON object, got " + Describe(document));
    }
    RejectUnknownFields(document, "", TopLevelNames());
    ClusterConfig config;
    for (const TopLevelField& field : TopLevelFields()) {
        const std::string path(field.option.name);
        if (const json* value = Find(document, path)) {
            field.option.parse(*value, path, config, config);
        } else if (field.presence == Presence::Required) {
            Fail(path, "missing (required field)");
        }
        if (field.then) {
            field.then(document, node_id, config);
        }
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

bool valid_node_id(std::string_view id) {
    return ValidName(id);
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
    return ChoiceName(FsyncChoices(), p);
}

std::vector<std::string> described_option_names() {
    std::vector<std::string> names;
    for (const std::string_view field : TopLevelNames()) {
        names.emplace_back(field);
    }
    const auto add = [&](std::string_view section, const std::vector<std::string_view>& options) {
        for (const std::string_view option : options) {
            names.push_back(std::string(section) + "." + std::string(option));
        }
    };
    add("timing", timing_option_names());
    add("log", OptionNames(LogOptions()));
    add("metadata", OptionNames(MetadataOptions()));
    add("admin", OptionNames(AdminOptions()));
    add("backend", OptionNames(BackendOptions()));
    return names;
}

std::vector<std::string_view> timing_option_names() {
    std::vector<std::string_view> names;
    for (const TimingOption& option : kTimingOptions) {
        names.push_back(option.name);
    }
    return names;
}

nlohmann::ordered_json effective_config_json(const ClusterConfig& config) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const TopLevelField& field : TopLevelFields()) {
        if (auto value = field.option.dump(config)) {
            out[std::string(field.option.name)] = std::move(*value);
        }
    }
    return out;
}

}  // namespace conclave::node
