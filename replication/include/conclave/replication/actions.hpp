// SPDX-License-Identifier: Apache-2.0
// What the log core asks its driver to do. Every input returns an ordered list of these.
//
// Ordering contract for drivers: perform the actions in order.
// - PersistMeta and TruncateEntries are durable when performed (fsync / write-temp + rename):
//   a later send of the same batch may depend on them (a SyncResponse is a durable promise).
// - PersistEntries may be made durable later (group commit); the driver reports durability with
//   ReplicatedLog::persisted(lsn), in the order the entries were handed over. The core never
//   acknowledges an entry to the leader, nor counts its own, before it is reported durable.
// - Sends may leave before earlier PersistEntries are durable (they carry no promise about them).
#pragma once

#include <boost/describe/enum.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "conclave/core/enum_names.hpp"
#include "conclave/replication/membership.hpp"
#include "conclave/replication/messages.hpp"

namespace conclave::replication {

/// FOLLOWER, or LEADER in one of two states: PASSIVE (syncing, refuses proposals) and ACTIVE.
enum class LogRole : std::uint8_t { Follower, LeaderPassive, LeaderActive };

/// The log's timers. As for the elector: at most one pending instance each, arming replaces.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    LogTimer, std::uint8_t,
    Heartbeat,  // leader (after sync): empty appends, retransmission, proposal timeouts (recurring)
    SyncRetry   // PASSIVE leader: re-send unanswered sync/fetch requests (recurring)
)
inline constexpr std::size_t kLogTimerCount = kEnumeratorCount<LogTimer>;

/// Outcome of a proposal. Only `None` (committed) is a promise. NotLeader, NotActive and
/// InvalidEntry mean the entry was not appended. TimedOut and LeadershipLost mean the outcome is
/// unknown: the entry was appended and may still commit (subscribers will see it if it does).
enum class ProposeError : std::uint8_t {
    None = 0,        // committed at `lsn`
    NotLeader,       // this node is not the leader (or the LSN is of another term)
    NotActive,       // this node is the leader but still syncing (PASSIVE)
    InvalidEntry,    // empty or oversized key, oversized value, or an LSN not above the last one
    TimedOut,        // not committed within propose_timeout_ticks heartbeats (outcome unknown)
    LeadershipLost,  // the node stopped being leader before commit (outcome unknown)
    NoSpace,         // the log's quota is reached (NOSPACE alarm); not appended
};

struct SendLog {
    NodeId to{};
    LogMessage message;
    bool operator==(const SendLog&) const = default;
};
struct BroadcastLog {  // to every other node
    LogMessage message;
    bool operator==(const BroadcastLog&) const = default;
};
struct PersistMeta {  // durable before the next action
    LogMeta meta;
    /// Set on the commit point a leader persists before it answers writers (SetCommit): only the
    /// ProposeResults after it depend on it. An environment may then write it later, once for
    /// several (the newest covers the older ones), as long as no ProposeResult after it is
    /// delivered before it is durable (runtime/log_runtime.hpp, "deferred commit point").
    bool before_results = false;
    bool operator==(const PersistMeta&) const = default;
};
struct PersistEntries {  // append to the end of the stored log
    std::vector<Entry> entries;
    bool operator==(const PersistEntries&) const = default;
};
struct TruncateEntries {  // drop every stored entry after `after_lsn`; durable before the next
                          // action
    Lsn after_lsn{};
    bool operator==(const TruncateEntries&) const = default;
};
/// Make `snapshot` durable (write-temp + fsync + rename) and drop every stored entry up to its
/// LSN; if the stored log does not hold that LSN (a snapshot installed from the leader), drop every
/// stored entry. Durable before the next action.
struct PersistSnapshot {
    Snapshot snapshot;
    bool operator==(const PersistSnapshot&) const = default;
};
struct ArmLogTimer {
    LogTimer timer{};
    Millis delay{};
    bool operator==(const ArmLogTimer&) const = default;
};
struct CancelLogTimer {
    LogTimer timer{};
    bool operator==(const CancelLogTimer&) const = default;
};
struct ApplyCommitted {  // newly committed entries, in LSN order, each exactly once per run
    std::vector<Entry> entries;
    /// Not kNoLsn: `entries` is a snapshot's state at this LSN (the last entry of each key), which
    /// replaces everything applied before (a snapshot installed from the leader, or the one
    /// recovered at start). Entries superseded within the snapshot are never delivered.
    Lsn snapshot_lsn{};
    bool operator==(const ApplyCommitted&) const = default;
};
struct ProposeResult {
    Lsn lsn{};
    ProposeError error = ProposeError::None;
    Millis proposed_at{};
    bool operator==(const ProposeResult&) const = default;
};
struct NotifyLogRole {  // for /status ("passive" | "active") and metrics
    LogRole role{};
    Term term{};
    bool operator==(const NotifyLogRole&) const = default;
};

/// The active configuration changed (membership): a configuration entry entered the
/// committed prefix (or a snapshot / the recovered log holds one). The runtime hands the voters
/// to the elector (Elector::set_voters) and connects the mesh to the members.
struct NotifyMembership {
    std::uint64_t version = 0;
    NodeSet voters;
    NodeSet learners;
    /// The node table, when the configuration carries one (docs/membership.md §8): it may be
    /// longer than the runtime's (nodes added): the runtime grows its mesh and elector to it
    /// before handing over the voters. Empty otherwise. `members`: ids and addresses.
    std::vector<std::string> table;
    std::vector<Member> members;
    bool operator==(const NotifyMembership&) const = default;
};

using LogAction = std::variant<SendLog, BroadcastLog, PersistMeta, PersistEntries, TruncateEntries,
                               PersistSnapshot, ArmLogTimer, CancelLogTimer, ApplyCommitted,
                               ProposeResult, NotifyLogRole, NotifyMembership>;
using LogActions = std::vector<LogAction>;

std::string_view to_string(LogRole r);
std::string_view to_string(LogTimer t);
std::string_view to_string(ProposeError e);
std::string to_string(const LogAction& a);

}  // namespace conclave::replication
