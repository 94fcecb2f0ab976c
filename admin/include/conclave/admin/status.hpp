// SPDX-License-Identifier: Apache-2.0
// The node's status as plain data, and its JSON form served at GET /status.
//
// The JSON shape is a contract (docs/interfaces.md): the leader-bounce tool, benchmarks and
// operators' scripts read it. Extensions made here:
//   - "peers[].last_contact_ms" is null for a peer never heard from since start;
//   - "leader_status" and "commit_lsn" appear only when a metadata log is present;
//   - "membership": {"version": N, "from_entry": bool, "role": "voter"|"learner"|"removed"}
//     appears only when a metadata log is present;
//   - "storage": {"state": "ok"} or {"state": "failed", "reason": "...", "since": RFC 3339 UTC}
//     (a failed node steps down and exits; this is what it says meanwhile);
//   - "identity": {"incarnation": "<hex>"} plus "refused": "<why>" when a peer knows this node by
//     an earlier incarnation (its data directory was lost or replaced; it stops, exit status 3),
//     "quarantined": true while a new node waits to be admitted by a majority of its peers, and
//     "unknown_to_peers": "<why>" when a majority of its peers answer that they do not know it
//     (removed while it was down), and "state_regressed": "<why>" when a peer refuses it because
//     its durable term is below one it announced before (restored from an older copy);
//   - "store": the coordination store's session, with a store backend (StoreStatus);
//   - "peers[].last_heartbeat_ms" (the same age as last_contact_ms: any frame, liveness beats
//     included) and "peers[].live" (heard from within the liveness window, link up), and
//     "liveness": {"window_ms": N} (null, with a "detail", where the members' liveness is unknown).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "conclave/core/types.hpp"
#include "conclave/elector/actions.hpp"

namespace conclave::admin {

struct PeerStatus {
    std::string id;
    bool up = false;
    /// Milliseconds since the last message from this peer; nullopt when never heard from.
    std::optional<std::int64_t> last_contact_ms;
    std::uint32_t priority = 1;  // docs/design.md, "Priorities"
    /// Heard from within the liveness window, link up (docs/design.md, "Liveness and broadcast").
    bool live = false;
};

/// State of the metadata log, when the node runs one.
struct LogStatus {
    /// "passive" (leader not yet allowed to write) or "active"; empty (omitted) on a follower.
    std::string leader_status;
    Lsn commit_lsn{};
    /// Raised alarms ("NOSPACE": the quota is reached, metadata writes are refused; "ROLLBACK": a
    /// node's state went back to an older copy, see `rollback`).
    std::vector<std::string> alarms;
    /// The first rollback this node saw (replication::describe(RollbackAlarm)): which entries,
    /// which peer, what the node does about it.
    std::optional<std::string> rollback;
    /// `conclaved --repair`: the repaired marker R while this node is non-voting.
    std::optional<Term> repaired;
};

/// Membership: this node's active configuration, when it runs a metadata log.
struct MembershipState {
    std::uint64_t version = 0;
    bool from_entry = false;  // false: no configuration entry yet (every node votes, version 0)
    /// "voter", "learner", or "removed" (not a member of its active configuration: its elector
    /// never campaigns or votes; the operator stops it).
    std::string role = "voter";
};

/// State of the node's storage (metadata log, elector state).
struct StorageStatus {
    bool ok = true;
    std::string reason;  // when failed: what failed (errno text, file)
    std::string since;   // when failed: RFC 3339 UTC time of the failure
};

/// The leader lease (docs/design.md) as served: valid now, and for how long more (0 when not).
struct LeaseStatus {
    bool valid = false;
    std::int64_t remaining_ms = 0;
};

/// A leader's lease status from its deadline (nullopt: lease pending) at `now`.
LeaseStatus lease_status(std::optional<std::chrono::steady_clock::time_point> deadline,
                         std::chrono::steady_clock::time_point now);
/// {"valid": bool, "remaining_ms": N}, or null without a lease status (not a leader).
nlohmann::json lease_to_json(const std::optional<LeaseStatus>& lease);

/// Leadership from a coordination store (config "backend"): the store session as this node sees
/// it ("store": {"kind", "session", "detail", "last_answer_ms", "ttl_ms"}; absent with the
/// built-in elector).
struct StoreStatus {
    std::string kind;     // "etcd" | "zookeeper"
    std::string session;  // "connecting" | "connected" | "unreachable" | "expired" | "stopped"
    std::string detail;   // the last error, or empty
    /// Milliseconds since the store last answered; nullopt when it never did.
    std::optional<std::int64_t> last_answer_ms;
    std::uint32_t ttl_ms = 0;
};

struct StatusReport {
    std::string id;
    std::string cluster;
    elector::Role role = elector::Role::Stopped;
    Term term{};
    /// String id of the known leader; nullopt when none is known.
    std::optional<std::string> leader;
    std::uint64_t fencing_token = 0;
    Lsn lsn{};
    /// This node's priority (docs/design.md, "Priorities"; 0: never stands for leader).
    std::uint32_t priority = 1;
    std::optional<LogStatus> log;
    std::optional<MembershipState> membership;
    StorageStatus storage;
    /// The node's incarnation (elector-state.json; its peers remember it) and, when a peer
    /// refused it as state_lost, why ("identity": {"incarnation": ..., "refused": ...}).
    std::string incarnation;
    std::optional<std::string> refused;
    /// A new incarnation not yet admitted by a majority of the other voters ("quarantined": true).
    bool quarantined = false;
    /// A majority of the other nodes answered this node's dials with unknown_node: why it looks
    /// removed ("identity": {"unknown_to_peers": ...}).
    std::optional<std::string> unknown_to_peers;
    /// A peer refused this node as state_regressed: why, and the repair command
    /// ("identity": {"state_regressed": ...}).
    std::optional<std::string> state_regressed;
    std::vector<PeerStatus> peers;  // every other node, in config order
    elector::Reason last_transition_reason = elector::Reason::Stopped;
    std::int64_t last_transition_age_ms = 0;
    /// Leader only: its lease ("lease": {"valid": bool, "remaining_ms": N}, null otherwise).
    std::optional<LeaseStatus> lease;
    std::optional<StoreStatus> store;
    /// The liveness window; nullopt (with `liveness_detail`) when the members' liveness is unknown.
    std::optional<std::int64_t> liveness_window_ms;
    std::string liveness_detail;
};

nlohmann::json lsn_to_json(const Lsn& lsn);
nlohmann::json store_to_json(const StoreStatus& store);
nlohmann::json status_to_json(const StatusReport& status);

}  // namespace conclave::admin
