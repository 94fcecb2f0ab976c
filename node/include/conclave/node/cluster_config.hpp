// SPDX-License-Identifier: Apache-2.0
// The cluster config file of `conclaved` (JSON; shape fixed in docs/interfaces.md).
//
// Parsing is strict: every field is type- and range-checked, unknown fields are rejected (a typo
// such as "heartbeat_msec" must not silently fall back to a default), and every error message
// starts with the path of the offending field, e.g.
//   nodes[2].peer: expected "host:port", got "abc"
// The result is plain data: the membership table (string ids <-> NodeId indices), this node's
// index, the elector Config (profile plus overrides, validated), and the resolved paths.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "conclave/core/endpoint.hpp"
#include "conclave/core/types.hpp"
#include "conclave/elector/config.hpp"
#include "conclave/replication/storage.hpp"

namespace conclave::node {

/// A "host:port" (or "[v6-address]:port") endpoint as written in the config
/// (conclave/core/endpoint.hpp).
using conclave::Endpoint;
using conclave::parse_endpoint;
using conclave::to_string;

/// Node ids (and cluster names) are used in file paths and logs: kNodeIdRule.
bool valid_node_id(std::string_view id);
inline constexpr const char* kNodeIdRule =
    "1 to 64 characters from [A-Za-z0-9_.-], starting with a letter or digit";

struct NodeEntry {
    std::string id;  // "n1": [A-Za-z0-9][A-Za-z0-9_.-]{0,63}
    Endpoint peer;   // elector mesh (TCP)
    Endpoint http;   // admin HTTP
    /// Leadership preference (docs/design.md, "Priorities"): higher stands first and is handed
    /// leadership back; 0 never stands for leader (still votes). Optional, default 1.
    std::uint32_t priority = 1;
    bool operator==(const NodeEntry&) const = default;
};

enum class LogFormat : std::uint8_t { Text, Json };
std::string_view to_string(LogFormat f);

struct LogSettings {
    LogFormat format = LogFormat::Text;
    /// spdlog level name: trace, debug, info, warn, error, critical, off.
    std::string level = "info";
    bool operator==(const LogSettings&) const = default;
};

/// Paths of the PEM files for mutual TLS on the mesh. Not opened by the parser.
struct TlsFiles {
    std::string ca_path;
    std::string cert_path;
    std::string key_path;
    bool operator==(const TlsFiles&) const = default;
};

/// The replicated metadata log ("metadata" section; "log" is the logging section).
struct MetadataSettings {
    bool enabled = true;
    /// "batched" (group commit, default), "always" (the daemon's storage thread treats it like
    /// "batched": every append fsynced before acknowledged), "never" (benchmarks).
    replication::FsyncPolicy fsync = replication::FsyncPolicy::Batched;
    /// A proposal not committed within this time is answered "timed out (outcome unknown)".
    std::uint32_t propose_timeout_ms = 10'000;
    /// Consent to "fsync": "never" (refused without it: a machine crash can lose acknowledged
    /// entries).
    bool unsafe_no_fsync = false;
    /// Quota: the log (snapshot + tail) may hold at most this many bytes of entries /
    /// entries; beyond, writes are refused with 507 and the NOSPACE alarm. 0 = no limit.
    std::uint64_t quota_bytes = std::uint64_t{256} << 20;
    std::uint64_t quota_entries = 1'000'000;
    /// Compaction: once this many committed entries follow the snapshot, fold all but
    /// `compact_retain` of them into a new snapshot. 0 = never compact.
    std::uint64_t compact_threshold = 10'000;
    std::uint64_t compact_retain = 1'000;
    /// Membership (R7): a learner is promoted only when it holds the leader's committed
    /// prefix and is at most this many entries behind the leader's last entry (0..2^32).
    std::uint64_t promote_lag_entries = 1'000;
    bool operator==(const MetadataSettings&) const = default;
};
std::string_view metadata_fsync_name(replication::FsyncPolicy p);

/// Upper bound of `admin.max_watchers`: the admin server holds at most 64 connections without
/// the token (AdminServerLimits::max_connections) and keeps at least 16 of them for other
/// requests.
inline constexpr std::int64_t kMaxAdminWatchers = 48;

/// Who may talk to this node ("insecure", "secret_file", "admin" fields; SECURITY.md). Parsed in
/// its own block; the files are not opened by the parser (load_security_material does).
struct SecuritySettings {
    /// Run without peer authentication (no TLS, no secret) and without an admin token. Only for
    /// loopback demos and tests; conclaved says so loudly at start-up.
    bool insecure = false;
    /// File holding the cluster secret (>= 32 bytes, mode 0600 or stricter, this user's, in
    /// directories only it or root can write; security.hpp); "" = none.
    std::string secret_file;
    /// File holding the admin bearer token (>= 32 bytes, mode 0600 or stricter); "" = none.
    std::string admin_token_file;
    /// Every GET endpoint (/status, /metadata, /members, /leadership, ...) answers without the
    /// token. Off by default: only /healthz and /metrics do (AdminSecurity::public_paths).
    bool admin_open_reads = false;
    /// Host names (besides the node's http host, localhost, 127.0.0.1 and ::1) accepted in the
    /// Host and Origin headers of admin requests.
    std::vector<std::string> admin_hosts;
    /// Admin connections from one source address that have not presented the token; one more
    /// evicts the oldest of them.
    std::uint32_t admin_max_connections_per_source = 16;
    /// GET /leadership watch streams plus waiting long-polls at once (1..kMaxAdminWatchers); one
    /// more without the token is answered 503 "too_many_watchers".
    std::uint32_t admin_max_watchers = 32;
    /// An admin connection that sends nothing for this long is closed (100..10000 ms: at most
    /// the 10 s request deadline).
    std::uint32_t admin_idle_timeout_ms = 2'000;
    /// HTTPS for the admin API ("admin.tls"): Off (false); NodeCertificate (true): the node
    /// certificate and key of the "tls" block; Files ({"cert", "key"}): these PEM files. The paths
    /// are resolved at parsing (NodeCertificate copies them from "tls").
    enum class AdminTls : std::uint8_t { Off, NodeCertificate, Files };
    AdminTls admin_tls = AdminTls::Off;
    std::string admin_tls_cert;
    std::string admin_tls_key;
    bool operator==(const SecuritySettings&) const = default;
};

/// Where leadership comes from: the built-in elector (Raft kind, the default) or a coordination
/// store (etcd v3, ZooKeeper) that holds the quorum (node/README.md, "Leadership from a store").
struct BackendSettings {
    enum class Kind : std::uint8_t { Raft, Etcd, ZooKeeper };
    Kind kind = Kind::Raft;
    /// etcd: the client URLs' "host:port" (plain HTTP JSON gateway), tried in turn.
    std::vector<Endpoint> endpoints;
    /// ZooKeeper: the C client's connect string ("host:port,host:port").
    std::string hosts;
    /// The store lease (etcd, rounded up to whole seconds) or session timeout (ZooKeeper).
    std::uint32_t ttl_ms = 2'000;
    /// Bound on the rate difference of this node's and the store's clocks, in permille (the
    /// holder's lease is ttl * (1000 - d) / (1000 + d) from the sending of a confirmed renewal).
    std::uint32_t drift_permille = 50;
    /// Root of the keys / znodes (the cluster name is appended).
    std::string prefix = "/conclave";
    bool is_store() const { return kind != Kind::Raft; }
    bool operator==(const BackendSettings&) const = default;
};
std::string_view to_string(BackendSettings::Kind k);

struct ClusterConfig {
    std::string cluster;
    /// Membership table: nodes[i] has NodeId{i}. Ids and endpoints are unique.
    std::vector<NodeEntry> nodes;
    /// This node (the --node-id) as an index into `nodes`.
    NodeId self{};
    /// "default", "fast" or "reference".
    std::string profile = "default";
    /// Elector configuration: the profile, then the timing overrides, scouting and check_quorum;
    /// cluster_size and self filled in. Always validates.
    elector::Config elector;
    /// data_dir as written (may contain "{id}"), and with "{id}" replaced by this node's id.
    std::string data_dir_template;
    std::filesystem::path data_dir;
    std::optional<TlsFiles> tls;
    LogSettings log;
    MetadataSettings metadata;
    SecuritySettings security;
    BackendSettings backend;

    const NodeEntry& self_entry() const { return nodes.at(self.value); }
    /// The NodeId of a configured string id.
    std::optional<NodeId> find_node(std::string_view id) const;
    /// The string id of a NodeId (asserts it is in range).
    const std::string& node_name(NodeId n) const;
};

/// A config that could not be used. `message` names the field (or the file) at fault.
struct ConfigError {
    std::string message;
};

using ConfigResult = std::variant<ClusterConfig, ConfigError>;

/// Parses and validates config text for node `node_id`. Invalid JSON is reported with its line and
/// column; duplicate keys in a JSON object are refused.
ConfigResult parse_cluster_config(std::string_view json_text, std::string_view node_id);

/// Parses an already-decoded JSON document (same checks as above, minus the JSON syntax).
ConfigResult cluster_config_from_json(const nlohmann::json& document, std::string_view node_id);

/// Reads `path` and parses it. A missing or unreadable file is a ConfigError naming the path.
/// Config files larger than kMaxConfigFileBytes are refused.
ConfigResult load_cluster_config(const std::filesystem::path& path, std::string_view node_id);

/// A config is a small hand-written file; anything bigger is a mistake (wrong file).
inline constexpr std::size_t kMaxConfigFileBytes = 1024 * 1024;

/// The effective config for this node, in the config file's own shape: every timing value
/// explicit (profile plus overrides), scouting/check_quorum/tls/log spelled out, and "data_dir"
/// with "{id}" already replaced. Feeding it back with the same node id yields the same config.
nlohmann::ordered_json effective_config_json(const ClusterConfig& config);

/// The names of the options under "timing", in the order the effective config lists them.
std::vector<std::string_view> timing_option_names();

/// Every described field: the top-level ones ("cluster", "nodes", ...) by their name, then every
/// option of the sections described as tables ("timing", "log", "metadata", "admin", "backend")
/// as "section.name". The parser, its unknown-field checks and messages, and the effective config
/// are derived from these tables.
std::vector<std::string> described_option_names();

}  // namespace conclave::node
