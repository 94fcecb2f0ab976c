// SPDX-License-Identifier: Apache-2.0
// Configuration of the log core, with validation that names the offending field.
#pragma once

#include <boost/describe/enum.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/core/quorum.hpp"
#include "conclave/core/types.hpp"
#include "conclave/replication/membership.hpp"

namespace conclave::replication {

/// Deliberately wrong behaviours, switched on only by tests and the simulator to prove that the
/// invariant checks can fail. `None` in every real configuration: the code paths exist only in
/// conclave_replication_planted (built with CONCLAVE_PLANTED_BUGS, linked by the simulator and the
/// tests); the production core (conclave_replication, which `conclaved` links) refuses any other
/// value.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    PlantedLogBug, std::uint8_t,
    None,                 // the correct behaviour
    SkipSync,             // a new leader serves its own log without syncing with a quorum
    CommitWithoutQuorum,  // count one ack fewer than a quorum as a quorum
    CompactUncommitted,   // compaction folds entries past the commit point into the snapshot
    CountRepaired,        // a repaired node acts as an ordinary one: answers sync, its acks
                          // (and, leading, its own log) count for commit (--repair)
    SkipOwnTermCommit,    // membership, no R3: propose_config is accepted from a PASSIVE leader
                          // once its sync point is appended, before that entry of its own term
                          // commits (docs/membership.md §7.4: harmless under the committed rule)
    ForgetCommitPoint,    // a leader acknowledges proposals without making its commit point
                          // durable first: after a restart it may discard what it acknowledged
    IgnoreSnapshotWindow  // a snapshot is sent whole at once, every chunk in flight (no window)
)

struct LogConfig {
    /// Number of nodes (1..kMaxClusterSize) and this node's index.
    std::size_t cluster_size = 1;
    NodeId self{};
    /// Acks (leader included) needed to commit; 0 means a majority. Must be a majority.
    std::size_t quorum = 0;

    /// Leader: period of the log heartbeat (empty appends carrying the commit point, retransmission
    /// of batches that made no progress, proposal timeouts).
    Millis heartbeat_period{500};
    /// PASSIVE leader: period for re-sending SyncRequest / FetchRequest that went unanswered.
    Millis sync_retry_period{500};
    /// A proposal not committed within this many heartbeat ticks is answered TimedOut.
    std::uint32_t propose_timeout_ticks = 20;

    /// Flow control (catch-up and replication): at most this many entries / bytes per batch (and
    /// per snapshot chunk), and at most this many unacknowledged batches (or snapshot chunks) per
    /// follower.
    std::uint32_t max_batch_entries = 256;
    std::size_t max_batch_bytes = std::size_t{1} << 20;
    std::uint32_t max_inflight_batches = 4;

    /// Limits on proposed entries.
    std::size_t max_key_bytes = 1024;
    std::size_t max_value_bytes = std::size_t{64} << 10;

    /// Quota (etcd's NOSPACE): the held log (snapshot + tail, entry_bytes() each) may
    /// not grow beyond this many bytes / entries. A proposal that would take it beyond is refused
    /// (ProposeError::NoSpace) and raises the NOSPACE alarm, which refuses every proposal until a
    /// compaction frees space or the node stops leading. 0 = no limit. Followers never refuse
    /// replicated entries (the leader enforces the quota).
    std::size_t quota_bytes = 0;
    std::size_t quota_entries = 0;

    /// Incoming snapshots (InstallSnapshot chunks, collected in memory until the last one): the
    /// most entry_bytes() a snapshot being received may hold; beyond it the chunks are dropped
    /// with an alarm (LogViolationKind::SnapshotTooLarge), never collected. 0 = derived:
    /// quota_bytes when set (a snapshot never holds more than the quota lets the log hold),
    /// else kDefaultMaxSnapshotBytes.
    std::size_t max_snapshot_bytes = 0;

    /// Compaction: once more than `compact_threshold` committed (and locally durable) entries
    /// follow the snapshot, the prefix up to `compact_retain` entries before the commit point is
    /// folded into a new snapshot (PersistSnapshot). 0 = never compact. The retained entries let
    /// slightly lagging followers catch up with appends instead of a snapshot.
    std::size_t compact_threshold = 0;
    std::size_t compact_retain = 0;

    /// Membership (replication/README.md "Membership"). The cluster's id table: the id
    /// (string, as in configuration entries) of each NodeId, index = NodeId; empty = the ids are
    /// the decimal indexes ("0", "1", ...). Configuration entries may name only ids of this table.
    std::vector<std::string> node_ids;
    /// Parser of configuration entries' values (conclave::codec::decode_configuration). Null:
    /// membership is off: propose_config refuses, and a configuration entry received from the
    /// network is malformed (LogViolationKind::MalformedConfiguration).
    ConfigurationDecoder decode_configuration = nullptr;

    PlantedLogBug planted_bug = PlantedLogBug::None;

    std::size_t effective_quorum() const { return quorum == 0 ? majority(cluster_size) : quorum; }
    std::size_t effective_max_snapshot_bytes() const {
        return max_snapshot_bytes != 0 ? max_snapshot_bytes
               : quota_bytes != 0      ? quota_bytes
                                       : kDefaultMaxSnapshotBytes;
    }
    static constexpr std::size_t kDefaultMaxSnapshotBytes = std::size_t{1} << 30;  // 1 GiB
    /// Empty when consistent; otherwise a message naming the field.
    std::optional<std::string> validate() const;
};

/// Defined only in conclave_replication_planted (the simulator and tests).
std::string_view to_string(PlantedLogBug b);

}  // namespace conclave::replication
