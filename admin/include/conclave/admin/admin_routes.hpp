// SPDX-License-Identifier: Apache-2.0
// The admin endpoints of a node, on top of AdminServer:
//   GET  /status                    -> 200 status JSON (status.hpp)
//   GET  /metrics                   -> 200 Prometheus text
//   GET  /healthz                   -> 200 {"status":"ok"} or 503 {"error":"unhealthy",...}
//   POST /transfer-leadership?to=ID -> 202 accepted | 400 bad id | 409 refused (e.g. not leader)
//   POST /step-down                 -> 202 accepted | 409 refused
//   POST /metadata, GET /metadata   -> the metadata log (metadata.hpp, node/README.md)
//   GET  /metadata/<key>, GET /metadata?prefix=P[&watch=1] -> the key state, watches
//   POST /members, GET /members     -> membership changes (membership.hpp, node/README.md)
//   GET  /leadership[?watch=1 | ?wait=S&after=TOKEN] -> leadership snapshot, NDJSON stream,
//   long-poll
//   POST /broadcast, GET /broadcast?watch=1 -> advisory broadcast (broadcast.hpp, node/README.md)
// Query parameters are validated: unknown ones are refused with 400 naming them.
//
// The handlers get their data through AdminSource, which the Node implements (and tests fake).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "conclave/admin/admin_server.hpp"
#include "conclave/admin/broadcast.hpp"
#include "conclave/admin/membership.hpp"
#include "conclave/admin/metadata.hpp"
#include "conclave/admin/status.hpp"
#include "conclave/replication/membership.hpp"

namespace conclave::admin {

struct HealthReport {
    bool healthy = true;
    std::string detail;  // why not healthy
};

/// Outcome of an admin command (transfer, step-down).
struct CommandResult {
    enum class Outcome : std::uint8_t {
        Accepted,     // 202: under way (the outcome shows in /status)
        Refused,      // 409: not possible in the current state (not the leader, target down, ...)
        Unavailable,  // 503: the node is stopping or not started
    };
    Outcome outcome = Outcome::Accepted;
    std::string detail;
};

class AdminSource {
  public:
    virtual ~AdminSource() = default;
    virtual StatusReport status() = 0;
    virtual std::string metrics_text() = 0;
    virtual HealthReport health() = 0;
    /// `to` is a configured node id (already checked against node_ids()).
    virtual CommandResult transfer_leadership(const std::string& to) = 0;
    virtual CommandResult step_down() = 0;
    /// Priorities (docs/design.md): `id` (a configured node) has `priority` on this node from
    /// now on. Default: refused (a source without an elector).
    virtual CommandResult set_priority(const std::string& /*id*/, std::uint32_t /*priority*/) {
        return {CommandResult::Outcome::Refused, "this node cannot change priorities"};
    }
    /// The configured node ids (to validate ?to=).
    virtual std::vector<std::string> node_ids() = 0;
    /// The answer of the defaults below: no metadata log on this node.
    template <class Result>
    static Result disabled() {
        Result r;
        r.status = MetadataProposeStatus::Disabled;
        r.detail = "this node runs no metadata log";
        return r;
    }
    /// The metadata log (POST/GET /metadata). Defaults: no metadata log on this node.
    virtual void propose_metadata(std::string key, std::string value,
                                  MetadataProposeCallback done) {
        (void)key;
        (void)value;
        done(disabled<MetadataProposeResult>());
    }
    /// POST /metadata with "expect_lsn" or "fence". Default: without a condition, as
    /// propose_metadata; with one, no metadata log on this node.
    virtual void propose_metadata_if(std::string key, std::string value,
                                     MetadataCondition condition, MetadataProposeCallback done) {
        if (!condition.empty()) {
            return done(disabled<MetadataProposeResult>());
        }
        propose_metadata(std::move(key), std::move(value), std::move(done));
    }
    /// GET /metadata/<key> and GET /metadata?prefix=: `done` runs once on the io_context thread.
    /// Default: no metadata log on this node.
    virtual void read_metadata(MetadataQuery query, MetadataReadCallback done) {
        (void)query;
        MetadataReadResult r;
        r.outcome = disabled<MetadataProposeResult>();
        done(r);
    }
    /// GET /metadata?watch=1: `callback` gets each committed entry after `after` whose key
    /// starts with `prefix` (those committed so far at once, then each new one), on the
    /// io_context thread, until unwatch_committed(id). nullopt: no metadata log (the default).
    virtual std::optional<std::uint64_t> watch_committed(std::string prefix, Lsn after,
                                                         CommittedCallback callback) {
        (void)prefix;
        (void)after;
        (void)callback;
        return std::nullopt;
    }
    virtual void unwatch_committed(std::uint64_t id) { (void)id; }
    /// Membership (GET /members): the active configuration; nullopt when there is no metadata
    /// log. Default: none.
    virtual std::optional<MembersView> members() { return std::nullopt; }
    /// Membership (POST /members): `done` runs once on the io_context thread. Default: no
    /// metadata log on this node.
    /// `member`: the id (POST /members gives ids of the node table only: no addresses).
    virtual void change_membership(MembershipOp op, replication::Member member,
                                   MembershipCallback done) {
        (void)op;
        (void)member;
        done(disabled<MembershipResult>());
    }
    /// Calls `changed` (on the io_context thread) after every leadership change, for the
    /// /leadership long-poll. Default: never (waiters then time out with the current snapshot).
    virtual void on_leadership_change(std::function<void()> changed) { (void)changed; }
    /// POST /broadcast (Node::broadcast). Default: unavailable.
    virtual BroadcastResult broadcast(std::string topic, nlohmann::json payload) {
        (void)topic;
        (void)payload;
        return {BroadcastResult::Outcome::Unavailable, "this node cannot broadcast", "", {}, {}};
    }
    /// Calls `received` (on the io_context thread) with every broadcast this node receives, for
    /// GET /broadcast?watch=1. Default: never.
    virtual void on_broadcast(std::function<void(const BroadcastMessage&)> received) {
        (void)received;
    }
    /// nullopt when there is no metadata log.
    virtual std::optional<MetadataPage> metadata_after(Lsn from, std::size_t max_entries) {
        (void)from;
        (void)max_entries;
        return std::nullopt;
    }
    /// Runs `work` off the io thread (a worker thread, so that building a large answer never
    /// delays the elector's heartbeats), then `done` with its result on the io thread. `work`
    /// may touch only what it owns (copies, immutable data), never the node. Default (fakes):
    /// both at once, inline.
    virtual void offload(std::function<AdminResponse()> work, AdminResponder done) { done(work()); }
};

/// Bounds of GET /leadership watches and long-polls.
struct LeadershipRouteLimits {
    /// Watch streams plus waiting long-polls at once; one more without the token is answered 503
    /// "too_many_watchers" (one that presents the token is always served). Below the server's
    /// max_connections, so that watchers cannot take every connection of the admin API.
    std::size_t max_watchers = 32;  // the config's admin.max_watchers
    /// Upper bound of ?wait= (seconds).
    std::uint32_t max_wait_seconds = 60;
};

/// GET /leadership (leadership_routes.cpp); part of register_admin_routes.
void register_leadership_routes(AdminServer& server, AdminSource& source,
                                LeadershipRouteLimits limits = {});

/// POST /broadcast, GET /broadcast?watch=1 (broadcast_routes.cpp); part of register_admin_routes.
/// Watch streams count against `limits.max_watchers` apart from /leadership's.
void register_broadcast_routes(AdminServer& server, AdminSource& source,
                               LeadershipRouteLimits limits = {});

/// Registers the endpoints above; `source` must outlive `server`.
void register_admin_routes(AdminServer& server, AdminSource& source,
                           LeadershipRouteLimits leadership_limits = {});

}  // namespace conclave::admin
