// SPDX-License-Identifier: Apache-2.0
// The replicated metadata log as the embedding API and the admin routes see it.
//
// Node::propose(key, value, done) answers with a MetadataProposeResult; Node::subscribe_committed
// delivers committed entries (replication::Entry) in LSN order. The HTTP routes
// (POST /metadata, GET /metadata?from=T.C&max=N) are registered with the other admin routes and
// reach the node through AdminSource.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/core/types.hpp"
#include "conclave/replication/entry.hpp"

namespace conclave::admin {

class AdminServer;
struct AdminResponse;
class AdminSource;

enum class MetadataProposeStatus : std::uint8_t {
    Committed,       // `lsn` is the committed LSN: a promise
    NotLeader,       // this node is not the leader (see `leader`); nothing appended
    NoLeader,        // no leader is known right now; nothing appended
    NotActive,       // the leader is still syncing its log; nothing appended
    InvalidEntry,    // empty or oversized key, oversized value; nothing appended
    TimedOut,        // not committed in time: outcome unknown (it may still commit)
    LeadershipLost,  // the node stopped leading before commit: outcome unknown
    Stopped,         // the node is not running (or stopping); outcome unknown if appended
    Disabled,        // the metadata log is disabled in the config
    Failed,          // log storage failed on this node: outcome unknown
    NoSpace,         // the log's quota is reached (NOSPACE alarm); nothing appended
    Refused,  // membership: the change does not fit now (R2, R7; see detail); nothing appended
    ConditionFailed,  // a MetadataCondition does not hold (see current_lsn); nothing appended
};
std::string_view to_string(MetadataProposeStatus s);

struct MetadataProposeResult {
    MetadataProposeStatus status = MetadataProposeStatus::Committed;
    Lsn lsn{};
    /// The known leader (string id and http endpoint "host:port"), for redirects.
    std::optional<std::string> leader;
    std::optional<std::string> leader_http;
    std::string detail;  // human-readable explanation
    /// ConditionFailed: the LSN of the key's last write the condition was checked against
    /// (kNoLsn: the key does not exist) and the leader's term (its fencing token).
    Lsn current_lsn{};
    std::uint64_t term = 0;
    bool ok() const { return status == MetadataProposeStatus::Committed; }
    /// Whether the entry may have been appended and may still commit.
    bool outcome_unknown() const;
};

using MetadataProposeCallback = std::function<void(const MetadataProposeResult&)>;

/// Conditions of a write (POST /metadata "expect_lsn" and "fence"). The leader checks them when
/// it appends the entry, against the state the entry will apply on: the committed key state plus
/// every entry before it in its log, uncommitted ones included (drivers::ProposeCondition). A
/// failed condition appends nothing (ConditionFailed, with the key's current LSN).
struct MetadataCondition {
    /// The LSN of the key's last write must equal this one; kNoLsn ("0.0"): the key must not
    /// exist.
    std::optional<Lsn> expect_lsn;
    /// The leader's term must equal this fencing token (Leadership::fencing_token of the
    /// leadership the write was decided under); the entry is then of that term.
    std::optional<std::uint64_t> fence;
    bool empty() const { return !expect_lsn && !fence; }
};

/// How fresh a read of the key state must be.
enum class ReadConsistency : std::uint8_t {
    /// Answered by the leader only, once its sync point (an entry of its own term) committed,
    /// then at once while its lease is valid, else once a heartbeat round sent after the read
    /// arrived is acknowledged by a quorum (ReadIndex). Other nodes answer NotLeader (a
    /// redirect to the leader).
    Linearizable,
    /// This node's committed state as it is (possibly behind the leader's).
    Serializable,
};
std::string_view to_string(ReadConsistency c);
std::optional<ReadConsistency> parse_read_consistency(std::string_view text);

/// A read of the key state (Node::read, GET /metadata/<key>, GET /metadata?prefix=).
struct MetadataQuery {
    std::string key;         // the key, or the prefix when `prefix`
    bool prefix = false;     // every key that starts with `key`, in key order
    std::size_t max = 1000;  // at most this many keys (prefix)
    ReadConsistency consistency = ReadConsistency::Linearizable;
};

/// Its answer: `outcome.status` Committed = served, with `outcome.lsn` the commit LSN the answer
/// reflects; else why not (NotLeader with the leader for a redirect, NoLeader, NotActive: the
/// leader did not reach its sync point or a quorum round in time, Stopped, Disabled).
struct MetadataReadResult {
    MetadataProposeResult outcome;
    std::vector<replication::Entry> entries;  // the key's last write (none: absent), or the keys
    bool more = false;                        // prefix: more keys than `max`
};
using MetadataReadCallback = std::function<void(const MetadataReadResult&)>;
using CommittedCallback = std::function<void(const replication::Entry&)>;

/// Committed entries after `from` (exclusive), for GET /metadata.
struct MetadataPage {
    std::vector<replication::Entry> entries;
    Lsn commit_lsn{};
    /// The LSN of the last compaction's snapshot: entries at or below it come from the snapshot
    /// (the last write of each key; the writes it replaced are gone).
    Lsn snapshot_lsn{};
};

/// Largest page GET /metadata serves (max=), and its default.
inline constexpr std::size_t kMaxMetadataPage = 10'000;
inline constexpr std::size_t kDefaultMetadataPage = 1000;
/// A GET /metadata page stops after the entry that takes its body to this size (storage, issue
/// 16: one read must not build a huge response on the io thread); page on with next_from.
inline constexpr std::size_t kMetadataPageBytes = std::size_t{1} << 20;

/// Most writes one POST /metadata batch {"entries": [...]} carries (each its own log entry).
inline constexpr std::size_t kMaxMetadataBatch = 1024;

/// POST /metadata and GET /metadata (see node/README.md); `source` must outlive `server`.
void register_metadata_routes(AdminServer& server, AdminSource& source);

/// The body of a GET /metadata page: `page`'s entries after `from`, values served as JSON text
/// (or a string for opaque bytes), stopping after the entry that takes it to kMetadataPageBytes;
/// pure (no node state), so that it runs on a worker thread (AdminSource::offload).
AdminResponse metadata_page_body(const MetadataPage& page, Lsn from);

/// The HTTP answer to a proposal that did not commit (and {"lsn": ...} to one that did): 307 to
/// the leader's `path` (`scheme` of this server), 503 no leader / not active / stopped, 400
/// invalid, 409 refused, 504 timed out, 507 NOSPACE.
AdminResponse propose_response(const MetadataProposeResult& r, const std::string& scheme,
                               const std::string& path);

/// Largest prefix listing GET /metadata?prefix= serves (max=), and its default.
inline constexpr std::size_t kMaxMetadataList = 10'000;
/// Watches of GET /metadata?watch=1 at once (beyond: 503 too_many_watchers without the token).
inline constexpr std::size_t kMaxMetadataWatchers = 32;

/// Lsn -> "T.C".
std::string lsn_text(const Lsn& lsn);
/// "T.C" -> Lsn; nullopt if malformed.
std::optional<Lsn> parse_lsn_text(std::string_view text);

}  // namespace conclave::admin
