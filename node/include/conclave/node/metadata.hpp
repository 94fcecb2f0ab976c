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

namespace conclave::node {

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
};
std::string_view to_string(MetadataProposeStatus s);

struct MetadataProposeResult {
    MetadataProposeStatus status = MetadataProposeStatus::Committed;
    Lsn lsn{};
    /// The known leader (string id and http endpoint "host:port"), for redirects.
    std::optional<std::string> leader;
    std::optional<std::string> leader_http;
    std::string detail;  // human-readable explanation
    bool ok() const { return status == MetadataProposeStatus::Committed; }
    /// Whether the entry may have been appended and may still commit.
    bool outcome_unknown() const;
};

using MetadataProposeCallback = std::function<void(const MetadataProposeResult&)>;
using CommittedCallback = std::function<void(const replication::Entry&)>;

/// Committed entries after `from` (exclusive), for GET /metadata.
struct MetadataPage {
    std::vector<replication::Entry> entries;
    Lsn commit_lsn{};
};

/// Largest page GET /metadata serves (max=), and its default.
inline constexpr std::size_t kMaxMetadataPage = 10'000;
inline constexpr std::size_t kDefaultMetadataPage = 1000;
/// A GET /metadata page stops after the entry that takes its body to this size (storage, issue
/// 16: one read must not build a huge response on the io thread); page on with next_from.
inline constexpr std::size_t kMetadataPageBytes = std::size_t{1} << 20;

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

/// "T.C" -> Lsn; nullopt if malformed.
std::optional<Lsn> parse_lsn_text(std::string_view text);

}  // namespace conclave::node
