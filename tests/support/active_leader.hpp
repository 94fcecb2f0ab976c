// SPDX-License-Identifier: Apache-2.0
// Writes to a running cluster of Nodes that hold on a busy machine: the active leader is waited
// for, never assumed, and a write answered "nothing appended, the leadership is moving"
// (NotLeader, NoLeader, NotActive: admin/include/conclave/admin/metadata.hpp) is sent again to the
// active leader of the moment, a bounded number of times. An answer whose outcome is unknown
// (TimedOut, LeadershipLost) is returned as it is, unless the caller does not mind the entry
// committed twice (sending it again could write it twice). Used by
// the Node cluster tests (tests/node) and the metadata-log attack tests (tests/security).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conclave/node/node.hpp"

namespace conclave::test {

/// Runs the cluster's event loop until `done()` holds; false once the caller's bound has passed.
using RunClusterUntil = std::function<bool(const std::function<bool()>& done)>;

/// The index of a running node (not stopped, nor stopping on a failure) whose metadata log is an
/// ACTIVE leader, if any.
inline std::optional<std::size_t> find_active_leader(
    const std::vector<std::unique_ptr<node::Node>>& nodes) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i] && !nodes[i]->stopped() && nodes[i]->status().log &&
            nodes[i]->status().log->leader_status == "active") {
            return i;
        }
    }
    return std::nullopt;
}

/// Waits for an active leader (nullopt when `run_until` gives up first).
inline std::optional<std::size_t> wait_for_active_leader(
    const std::vector<std::unique_ptr<node::Node>>& nodes, const RunClusterUntil& run_until) {
    std::optional<std::size_t> leader;
    run_until([&] { return (leader = find_active_leader(nodes)).has_value(); });
    return leader;
}

/// Whether the answer says that nothing was appended because the leadership is moving: the
/// write may be sent again.
inline bool leadership_in_flux(const admin::MetadataProposeResult& result) {
    using admin::MetadataProposeStatus;
    return result.status == MetadataProposeStatus::NotLeader ||
           result.status == MetadataProposeStatus::NoLeader ||
           result.status == MetadataProposeStatus::NotActive;
}

/// One write and where it was answered.
struct LeaderWrite {
    std::optional<admin::MetadataProposeResult> result;  // nullopt: no answer or no leader in time
    std::optional<std::size_t> node;                     // the node that answered last
    bool ok() const { return result && result->ok(); }
};

/// Whether a write whose answer was `result` may be sent again: it was not appended
/// (leadership_in_flux), or, when the caller does not mind the entry committed twice
/// (`twice_is_fine`), its outcome is unknown because the leadership moved or the commit was slow.
inline bool may_resend(const admin::MetadataProposeResult& result, bool twice_is_fine) {
    using admin::MetadataProposeStatus;
    return leadership_in_flux(result) ||
           (twice_is_fine && (result.status == MetadataProposeStatus::LeadershipLost ||
                              result.status == MetadataProposeStatus::TimedOut));
}

/// Proposes key = value to the active leader, waiting for one first; while the answer allows it
/// (may_resend), waits for an active leader again and resends, at most `attempts` times.
inline LeaderWrite write_to_active_leader(const std::vector<std::unique_ptr<node::Node>>& nodes,
                                          const RunClusterUntil& run_until, const std::string& key,
                                          const std::string& value, bool twice_is_fine = false,
                                          int attempts = 20) {
    LeaderWrite write;
    for (int attempt = 0; attempt < attempts; ++attempt) {
        if (attempt > 0) {  // let the election or the log's sync move on
            const auto resume = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
            run_until([&] { return std::chrono::steady_clock::now() >= resume; });
        }
        write.node = wait_for_active_leader(nodes, run_until);
        if (!write.node) {
            return write;
        }
        std::optional<admin::MetadataProposeResult> answer;
        nodes[*write.node]->propose(key, value,
                                    [&](const admin::MetadataProposeResult& r) { answer = r; });
        if (!run_until([&] { return answer.has_value(); })) {
            return write;
        }
        write.result = answer;
        if (!may_resend(*answer, twice_is_fine)) {
            return write;
        }
    }
    return write;
}

}  // namespace conclave::test
