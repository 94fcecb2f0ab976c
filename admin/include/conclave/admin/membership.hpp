// SPDX-License-Identifier: Apache-2.0
// Membership changes (docs/membership.md) as the embedding API and the admin routes see
// them: Node::add_learner / promote / remove_member, Node::members(), GET and POST /members.
//
// A change is one configuration entry of the replicated metadata log (key `_conclave/members`),
// proposed by the leader from its active configuration; the callback runs once, with the new
// configuration's version once the entry committed, or an error (a MetadataProposeStatus:
// not leader / no leader / not active / refused with the reason / unknown id (InvalidEntry) /
// timed out or leadership lost = outcome unknown / stopped / disabled).
// Node ids are those of the node table (the config file's `nodes`, grown at run time by the
// configurations that add new ids: docs/membership.md §8); a Member's addresses come from it. A
// new id is added with its addresses by Node::add_learner(Member), which the seed of
// `conclaved --join` calls (join.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/admin/metadata.hpp"

namespace conclave::admin {

class AdminServer;
class AdminSource;

enum class MembershipOp : std::uint8_t { AddLearner, Promote, Remove };
inline constexpr std::size_t kMembershipOpCount = 3;
/// "add-learner", "promote", "remove" (the POST /members `op` and the metrics label).
std::string_view to_string(MembershipOp op);
std::optional<MembershipOp> parse_membership_op(std::string_view text);

/// The answer to a membership change: a proposal's answer (status, leader for redirects,
/// detail) and, once committed, the version of the new configuration.
struct MembershipResult : MetadataProposeResult {
    std::uint64_t version = 0;
};
using MembershipCallback = std::function<void(const MembershipResult&)>;

/// Why a change was refused (label of conclave_config_refusals_total).
enum class ConfigRefusal : std::uint8_t {
    Pending,      // a configuration change is appended and not committed yet (R2)
    NotAdjacent,  // not a single change from the active configuration (R2), or no voter left
    PromoteLag,   // the learner is not caught up (R7)
    InvalidOp,    // the op does not fit the member (add a member, promote a voter, ...)
    Elector,      // the elector refused the committed configuration (set_voters)
};
inline constexpr std::size_t kConfigRefusalCount = 5;
std::string_view to_string(ConfigRefusal r);

enum class MemberRole : std::uint8_t { Voter, Learner };

/// The leader's view of one member's log (GET /members on the leader).
struct MemberCatchUp {
    std::size_t acknowledged_len = 0;  // entries the member acknowledged (durable, matching)
    std::size_t lag_entries = 0;       // the leader's last entry minus acknowledged_len
    bool connected = false;            // the mesh connection is up (self: true)
};

struct MemberInfo {
    std::string id;
    std::string peer;
    std::string http;
    MemberRole role = MemberRole::Voter;
    std::optional<MemberCatchUp> catch_up;  // on the leader only
    std::uint32_t priority = 1;             // docs/design.md, "Priorities"
    /// Liveness (docs/design.md, "Liveness and broadcast"): milliseconds since this node last
    /// heard from the member (itself: 0), nullopt when never (or unknown: a store backend's
    /// other nodes); `live` when that is within the liveness window (nullopt: unknown).
    std::optional<std::int64_t> last_heartbeat_ms{};
    std::optional<bool> live{};
};

/// The active configuration of this node (the latest committed one; without any, every node of
/// the table is a voter at version 0, `from_entry` false).
struct MembersView {
    std::uint64_t version = 0;
    bool from_entry = false;
    std::vector<MemberInfo> members;  // voters, then learners, in node-table order
    /// On the leader: a configuration entry is appended but not committed yet.
    std::optional<bool> pending_change;
    /// The liveness window ("liveness": {"window_ms": N}), or why the others' liveness is
    /// unknown ("liveness": {"window_ms": null, "detail": ...}).
    std::optional<std::int64_t> liveness_window_ms;
    std::string liveness_detail;
};

nlohmann::json members_to_json(const MembersView& view);

/// GET /members, POST /members (see node/README.md); `source` must outlive `server`.
void register_membership_routes(AdminServer& server, AdminSource& source);

}  // namespace conclave::admin
