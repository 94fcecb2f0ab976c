// SPDX-License-Identifier: Apache-2.0
// The metadata-log check: "no acknowledged entry lost". Pure: takes what the proposer recorded
// and every node's committed log as read through GET /metadata, returns the verdict.
//
// The proposer proposes every key ("bounce/<seq>", value {"seq": seq}) exactly once and never
// retries a key, so every key may appear at most once in any log. Checked:
// - every acknowledged entry is in every node's committed log at the LSN it was acknowledged
//   with, with the same key and value (a node whose committed log ends before that LSN has not
//   caught up: a warning, not a loss; an acknowledged LSN beyond every node's log is a loss);
// - the committed logs of all nodes are prefixes of one another (same entries, same LSNs, same
//   order);
// - no key is committed twice (outcome-unknown entries appear at most once);
// - a refused proposal (the daemon said nothing was appended) is never committed.
#pragma once

#include <compare>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "conclave/bounce/proxy.hpp"

namespace conclave::bounce {

struct LogLsn {
    std::uint64_t term = 0;
    std::uint64_t counter = 0;
    auto operator<=>(const LogLsn&) const = default;
};
std::string to_string(const LogLsn& lsn);  // "3.17"

enum class ProposalOutcome : std::uint8_t {
    Acknowledged,  // 200 with an LSN: a promise
    Unknown,       // 504, leadership lost, connection dropped after the request was written, ...
    Refused,       // nothing was appended: no leader, not active, could not connect, ...
};

struct ProposalRecord {
    std::uint64_t seq = 0;
    std::int64_t at_ms = 0;  // when the answer (or failure) came back
    ProposalOutcome outcome = ProposalOutcome::Refused;
    std::optional<LogLsn> lsn;  // acknowledged only
    std::string detail;         // the daemon's error kind or the transport error
};

/// The key and value the proposer uses for `seq`.
std::string proposal_key(std::uint64_t seq);
nlohmann::json proposal_value(std::uint64_t seq);

struct LogEntry {
    LogLsn lsn;
    std::string key;
    nlohmann::json value;
};

/// One node's committed log as read through GET /metadata.
struct NodeLog {
    NodeIndex node = 0;
    bool read = false;  // false: the node could not be read (`error` says why)
    std::string error;
    std::vector<LogEntry> entries;  // data entries, in LSN order (sync points are not served)
    LogLsn end;                     // the last committed LSN read (sync points included)
};

struct LogVerdict {
    std::size_t acknowledged = 0;
    std::size_t unknown = 0;
    std::size_t unknown_committed = 0;  // outcome-unknown entries found in some committed log
    std::size_t refused = 0;
    std::size_t nodes_read = 0;
    std::vector<std::string> violations;  // the first few, each a sentence
    std::size_t violation_count = 0;      // all of them
    std::vector<std::string> warnings;    // lagging or unreadable nodes

    bool ok() const { return violation_count == 0; }
};

/// Checks `proposals` against `logs` (see the top of this file).
LogVerdict check_log(const std::vector<ProposalRecord>& proposals,
                     const std::vector<NodeLog>& logs);

/// Decodes a GET /metadata body. Throws std::runtime_error naming the field.
struct MetadataPageBody {
    std::vector<LogEntry> entries;
    LogLsn commit_lsn;
    LogLsn next_from;
};
MetadataPageBody parse_metadata_page(const std::string& body);
/// Decodes {"term": T, "counter": C}. Throws std::runtime_error naming `field`.
LogLsn parse_lsn(const nlohmann::json& j, const std::string& field);

}  // namespace conclave::bounce
