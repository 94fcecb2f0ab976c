// SPDX-License-Identifier: Apache-2.0
// Node's side of membership changes: add_learner / promote / remove_member, the
// members() view, /status's "membership" and the membership metrics. Kept apart from node.cpp.
#include "conclave/admin/membership.hpp"

#include <boost/asio/post.hpp>

#include "conclave/codec/membership_codec.hpp"
#include "conclave/core/check.hpp"
#include "conclave/drivers/driver.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/node/join.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/node.hpp"
#include "conclave/node/node_table.hpp"

namespace conclave::node {

using admin::ConfigRefusal;
using admin::MemberRole;
using admin::MembershipCallback;
using admin::MembershipOp;
using admin::MembershipResult;
using admin::MetadataProposeResult;
using admin::MetadataProposeStatus;

namespace {

/// A change that cannot be proposed, and why.
struct Refusal {
    ConfigRefusal reason;
    std::string detail;
};

/// The value of a configuration entry: the members with their addresses, and the whole node
/// table (§8: every configuration this node writes carries it).
replication::Configuration configuration_of(const replication::ActiveConfig& c,
                                            const std::vector<NodeEntry>& table) {
    replication::Configuration cfg;
    cfg.version = c.version;
    for (std::uint16_t i = 0; i < table.size(); ++i) {
        const NodeEntry& e = table[i];
        const replication::Member member{e.id, to_string(e.peer), to_string(e.http)};
        if (c.voters.contains(NodeId{i})) {
            cfg.voters.push_back(member);
        } else if (c.learners.contains(NodeId{i})) {
            cfg.learners.push_back(member);
        }
        cfg.table.push_back(e.id);
    }
    return cfg;
}

/// The table index a membership change is about, or why the request is invalid. A brand-new id
/// (§8) added as a learner with its addresses takes the next index of `table`; an id this node
/// kept only by index (removed before it learnt of it) gets the addresses the request names.
std::variant<NodeId, std::string> resolve_target(const ClusterConfig& config,
                                                 std::vector<NodeEntry>& table, MembershipOp op,
                                                 const replication::Member& member) {
    const std::string& id = member.id;
    std::optional<NodeId> target = config.find_node(id);
    if (!target && op == MembershipOp::AddLearner && !member.peer.empty()) {
        const auto peer = parse_endpoint(member.peer);
        const auto http = parse_endpoint(member.http);
        if (!peer || !http || !valid_node_id(id)) {
            return "a new node needs an id (" + std::string(kNodeIdRule) +
                   ") and peer and http addresses host:port";
        }
        if (table.size() >= kMaxClusterSize) {
            return "the node table is full (" + std::to_string(kMaxClusterSize) +
                   " ids ever added; ids are never reused)";
        }
        table.push_back(NodeEntry{id, *peer, *http});
        return NodeId{static_cast<std::uint16_t>(table.size() - 1)};
    }
    if (target && !member.peer.empty() && is_placeholder(table[target->value])) {
        // It comes back: the configuration names its addresses, which every node then learns
        // (follow_table).
        const auto peer = parse_endpoint(member.peer);
        const auto http = parse_endpoint(member.http);
        if (!peer || !http) {
            return "node " + id + " needs peer and http addresses host:port";
        }
        table[target->value] = NodeEntry{id, *peer, *http};
    } else if (target && !member.peer.empty() &&
               (member.peer != to_string(table[target->value].peer) ||
                member.http != to_string(table[target->value].http))) {
        return "node " + id + " is in the table with other addresses (peer " +
               to_string(table[target->value].peer) + ", http " +
               to_string(table[target->value].http) + ")";
    }
    if (!target) {
        std::string known;
        for (const NodeEntry& e : config.nodes) {
            known += (known.empty() ? "" : ", ") + e.id;
        }
        return "unknown node id \"" + id.substr(0, 64) + "\": not in the config's node table (" +
               known +
               "); a new node is added by starting it with conclaved --join HOST:PORT (it joins "
               "as a learner)";
    }
    return *target;
}

/// R7: a learner is promoted only when it holds the leader's committed prefix and is within
/// `promote_lag` entries of its last one.
std::optional<Refusal> promote_refusal(const replication::ReplicatedLog& log, const std::string& id,
                                       NodeId target, std::uint64_t promote_lag) {
    const std::size_t acked = log.progress()[target.value].match_len;
    const std::size_t last = log.end_len();
    const std::size_t commit = log.state().commit_len;
    const std::size_t behind = last - std::min(acked, last);
    if (acked >= commit && behind <= promote_lag) {
        return std::nullopt;
    }
    return Refusal{ConfigRefusal::PromoteLag,
                   id + " is not caught up (R7): it acknowledged " + std::to_string(acked) +
                       " entries, the leader holds " + std::to_string(last) + " (" +
                       std::to_string(commit) + " committed): " + std::to_string(behind) +
                       " behind; a promotion needs the committed prefix and at most "
                       "metadata.promote_lag_entries (" +
                       std::to_string(promote_lag) + ") behind"};
}

/// Applies `op` on `target` to `next` (a copy of the active configuration, whose version it
/// bumps); the refusal when the operation does not fit the active configuration.
std::optional<Refusal> next_configuration(const replication::ReplicatedLog& log, MembershipOp op,
                                          const std::string& id, NodeId target,
                                          const std::vector<NodeEntry>& table,
                                          std::uint64_t promote_lag,
                                          replication::ActiveConfig& next) {
    const replication::ActiveConfig& active = log.active_config();
    next.version = active.version + 1;
    const std::string version_text = " of configuration version " + std::to_string(active.version);
    std::optional<Refusal> refusal;
    switch (op) {
        case MembershipOp::AddLearner:
            if (active.is_member(target)) {
                refusal =
                    Refusal{ConfigRefusal::InvalidOp,
                            id + " is already a " +
                                (active.is_voter(target) ? "voter" : "learner") + version_text};
            } else if (is_placeholder(table[target.value])) {
                // It could not reach this leader: it does not know it (§8, coming back).
                refusal = Refusal{ConfigRefusal::InvalidOp,
                                  id + " was removed before this leader joined, which knows "
                                       "neither its addresses nor whether it knows this leader: "
                                       "restart it with conclaved --join to add it back"};
            }
            next.learners.insert(target);
            break;
        case MembershipOp::Promote:
            if (!active.learners.contains(target)) {
                return Refusal{ConfigRefusal::InvalidOp, id + " is not a learner" + version_text +
                                                             " (add it as a learner first)"};
            }
            refusal = promote_refusal(log, id, target, promote_lag);
            next.learners.erase(target);
            next.voters.insert(target);
            break;
        case MembershipOp::Remove:
            if (!active.is_member(target)) {
                refusal = Refusal{ConfigRefusal::InvalidOp, id + " is not a member" + version_text};
            }
            next.voters.erase(target);
            next.learners.erase(target);
            break;
    }
    return refusal;
}

void log_refusal(spdlog::logger& logger, MembershipOp op, const std::string& id,
                 const Refusal& refusal) {
    log_event(logger, spdlog::level::warn, "membership change refused",
              {{"op", std::string(to_string(op))},
               {"id", id},
               {"reason", std::string(to_string(refusal.reason))},
               {"detail", refusal.detail}});
}

}  // namespace

void Node::add_learner(std::string id, MembershipCallback done) {
    change_membership(MembershipOp::AddLearner, replication::Member{std::move(id), {}, {}},
                      std::move(done));
}

void Node::add_learner(replication::Member member, MembershipCallback done) {
    change_membership(MembershipOp::AddLearner, std::move(member), std::move(done));
}

void Node::promote(std::string id, MembershipCallback done) {
    change_membership(MembershipOp::Promote, replication::Member{std::move(id), {}, {}},
                      std::move(done));
}

void Node::remove_member(std::string id, MembershipCallback done) {
    change_membership(MembershipOp::Remove, replication::Member{std::move(id), {}, {}},
                      std::move(done));
}

admin::MembersView Node::members() const {
    admin::MembersView view;
    const auto member = [this](NodeId n, MemberRole role) {
        const NodeEntry& e = config_.nodes[n.value];
        admin::MemberInfo m{e.id, to_string(e.peer), to_string(e.http), role, std::nullopt};
        m.priority = cores_.driver->elector().config().priority(n);
        return m;
    };
    if (!cores_.log_driver) {
        // No configuration entry can exist: every node of the table is a voter, version 0.
        for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
            view.members.push_back(member(NodeId{i}, MemberRole::Voter));
        }
        add_liveness(view);
        return view;
    }
    const replication::ReplicatedLog& log = cores_.log_driver->log();
    const replication::ActiveConfig& active = log.active_config();
    view.version = active.version;
    view.from_entry = active.from_entry;
    const bool leader = log.role() != replication::LogRole::Follower;
    if (leader) {
        view.pending_change = log.config_pending();
    }
    for (const MemberRole role : {MemberRole::Voter, MemberRole::Learner}) {
        const NodeSet& set = role == MemberRole::Voter ? active.voters : active.learners;
        for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
            const NodeId n{i};
            if (!set.contains(n)) {
                continue;
            }
            admin::MemberInfo m = member(n, role);
            if (leader) {
                const std::size_t acked =
                    n == config_.self ? log.state().durable_len : log.progress()[i].match_len;
                m.catch_up =
                    admin::MemberCatchUp{acked, log.end_len() - std::min(acked, log.end_len()),
                                         n == config_.self || cores_.mesh->is_up(n)};
            }
            view.members.push_back(std::move(m));
        }
    }
    add_liveness(view);
    return view;
}

std::optional<admin::MembershipState> Node::membership_state() const {
    if (!cores_.log_driver) {
        return std::nullopt;
    }
    const replication::ActiveConfig& active = cores_.log_driver->log().active_config();
    admin::MembershipState m;
    m.version = active.version;
    m.from_entry = active.from_entry;
    m.role = active.is_voter(config_.self)            ? "voter"
             : active.learners.contains(config_.self) ? "learner"
                                                      : "removed";
    return m;
}

void Node::change_membership(MembershipOp op, replication::Member member, MembershipCallback done) {
    if (must_post()) {
        boost::asio::post(*runtime_.io,
                          [this, op, member = std::move(member), done = std::move(done)]() mutable {
                              change_membership(op, std::move(member), std::move(done));
                          });
        return;
    }
    const std::string id = member.id;
    const auto answer = [this, &done](MetadataProposeStatus status, std::string detail = {}) {
        MembershipResult r;
        static_cast<MetadataProposeResult&>(r) = proposal_result(status, replication::kNoLsn);
        if (!detail.empty()) {
            r.detail = std::move(detail);
        }
        done(r);
    };
    std::vector<NodeEntry> table = config_.nodes;
    const std::variant<NodeId, std::string> target = resolve_target(config_, table, op, member);
    if (const auto* why = std::get_if<std::string>(&target)) {
        return answer(MetadataProposeStatus::InvalidEntry, *why);
    }
    if (!cores_.log_driver || runtime_.stopping || !runtime_.started ||
        !cores_.log_driver->running()) {
        // propose_entry answers these (disabled, stopped, failed).
        return propose_entry({}, {}, true, {},
                             [done = std::move(done)](const MetadataProposeResult& p) {
                                 MembershipResult r;
                                 static_cast<MetadataProposeResult&>(r) = p;
                                 done(r);
                             });
    }
    const replication::ReplicatedLog& log = cores_.log_driver->log();
    if (!log.can_propose()) {
        return answer(log.role() == replication::LogRole::LeaderPassive
                          ? MetadataProposeStatus::NotActive
                          : MetadataProposeStatus::NotLeader);
    }
    // The next configuration, from the active one (the implicit one included: every node of the
    // table a voter at version 0).
    replication::ActiveConfig next = log.active_config();
    std::optional<Refusal> refusal = next_configuration(
        log, op, id, std::get<NodeId>(target), table, config_.metadata.promote_lag_entries, next);
    const replication::Configuration cfg = configuration_of(next, table);
    if (!refusal) {
        if (auto why = log.check_config_change(cfg)) {
            refusal = Refusal{
                log.config_pending() ? ConfigRefusal::Pending : ConfigRefusal::NotAdjacent, *why};
        }
    }
    if (refusal) {
        admin_.config_refusals[static_cast<std::size_t>(refusal->reason)]->inc();
        log_refusal(*logger_, op, id, *refusal);
        return answer(MetadataProposeStatus::Refused, std::move(refusal->detail));
    }
    log_event(*logger_, spdlog::level::info, "membership change proposed",
              {{"op", std::string(to_string(op))}, {"id", id}, {"version", cfg.version}});
    propose_entry(
        {}, codec::encode_configuration(cfg), true, {},
        [this, op, version = cfg.version, done = std::move(done)](const MetadataProposeResult& p) {
            MembershipResult r;
            static_cast<MetadataProposeResult&>(r) = p;
            if (p.ok()) {
                r.version = version;
                r.detail = "configuration version " + std::to_string(version) + " committed";
                admin_.membership_changes[static_cast<std::size_t>(op)]->inc();
            }
            done(r);
        });
}

replication::Configuration Node::active_configuration() const {
    return configuration_of(cores_.log_driver->log().active_config(), config_.nodes);
}

void Node::follow_table(const replication::NotifyMembership& m) {
    // What the stored table (members.json) must learn from this configuration: ids added (the
    // table grew), the addresses of ids this node kept only by index (a configuration adds them
    // back), and whether this node itself is a member (a removed node rejoins with --join).
    StoredTable stored;
    stored.cluster = config_.cluster;
    stored.nodes = config_.nodes;
    stored.removed.assign(config_.nodes.size(), false);
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        stored.removed[i] = NodeId{i} == config_.self ? peers_.self_removed_stored
                                                      : cores_.mesh->is_retired(NodeId{i});
    }
    const std::size_t old_size = config_.nodes.size();
    for (std::size_t i = old_size; i < m.table.size(); ++i) {
        stored.append(m.table[i], m.members);
    }
    std::vector<NodeId> addressed;  // placeholders a configuration names again
    for (const replication::Member& member : m.members) {
        const auto n = config_.find_node(member.id);
        const auto peer = parse_endpoint(member.peer);
        const auto http = parse_endpoint(member.http);
        if (n && is_placeholder(stored.nodes[n->value]) && peer && http) {
            stored.nodes[n->value] = NodeEntry{member.id, *peer, *http};
            addressed.push_back(*n);
        }
    }
    const bool self_removed =
        m.version > 0 && !m.voters.contains(config_.self) && !m.learners.contains(config_.self);
    stored.removed[config_.self.value] = self_removed;
    if (stored.nodes.size() > old_size || !addressed.empty() ||
        self_removed != peers_.self_removed_stored) {
        // Durable first: an elector state naming a new node must find it at the next start.
        try {
            store_node_table(config_.data_dir, stored);
        } catch (const std::exception& e) {
            fail_stop(std::string("cannot store the node table: ") + e.what());
            return;
        }
        peers_.self_removed_stored = self_removed;
        for (const NodeId n : addressed) {
            const NodeEntry& e = stored.nodes[n.value];
            cores_.mesh->set_address(n, e.peer.host, e.peer.port);
            log_event(*logger_, spdlog::level::info, "membership: node addresses learnt",
                      {{"id", e.id}, {"peer", to_string(e.peer)}, {"http", to_string(e.http)}});
        }
        for (std::size_t i = old_size; i < stored.nodes.size(); ++i) {
            const NodeEntry& e = stored.nodes[i];
            const auto added = cores_.mesh->add_node(
                net::NodeAddress{e.id, e.peer.host, e.peer.port}, stored.removed[i]);
            CONCLAVE_CHECK(added.index && added.index->value == i,
                           "the mesh's table grows like the log's");
        }
        if (stored.nodes.size() > old_size) {
            if (auto error = cores_.driver->grow_table(stored.nodes.size())) {
                logger_->error("membership: the elector refused the table of {} nodes: {}",
                               stored.nodes.size(), *error);
            }
            log_event(*logger_, spdlog::level::info, "membership: node table grew",
                      {{"nodes", stored.nodes.size()}, {"version", m.version}});
        }
        config_.nodes = stored.nodes;
        config_.elector.cluster_size = stored.nodes.size();
    }
    // Retiring closes connections: not inside the log's batch.
    boost::asio::post(*runtime_.io, [this, alive = std::weak_ptr<int>(runtime_.alive)] {
        if (!alive.expired()) {
            follow_members();
        }
    });
}

void Node::follow_members() {
    if (!cores_.log_driver || runtime_.stopped) {
        return;
    }
    const replication::ReplicatedLog& log = cores_.log_driver->log();
    const replication::ActiveConfig& active = log.active_config();
    if (!active.from_entry || !active.is_member(config_.self)) {
        return;  // the implicit configuration; or removed: the others drop this node
    }
    const NodeSet targets =
        log.role() != replication::LogRole::Follower ? log.replication_targets() : NodeSet{};
    bool waiting = false;
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        const NodeId n{i};
        if (n == config_.self) {
            continue;
        }
        if (active.is_member(n)) {
            cores_.mesh->readmit_node(n);
        } else if (!cores_.mesh->is_retired(n)) {
            if (targets.contains(n)) {
                waiting = true;  // R8: the leader still tells it of its removal
            } else {
                cores_.mesh->retire_node(n);
                // Removed: a later join of this id may come with an empty data directory.
                try {
                    peers_.incarnations->forget(config_.node_name(n));
                } catch (const drivers::StateFileError& e) {
                    logger_->error("membership: cannot forget the incarnation of '{}': {}",
                                   config_.node_name(n), e.what());
                }
            }
        }
    }
    if (waiting) {
        peers_.members_timer.expires_after(std::chrono::milliseconds(200));
        peers_.members_timer.async_wait([this, alive = std::weak_ptr<int>(runtime_.alive)](
                                            const boost::system::error_code& ec) {
            if (!ec && !alive.expired()) {
                follow_members();
            }
        });
    }
}

void Node::answer_join(std::string id, net::JoinRequest request,
                       std::function<void(net::JoinAnswer)> respond) {
    log_event(*logger_, spdlog::level::info, "membership: join request",
              {{"id", id}, {"peer", request.peer}, {"http", request.http}});
    const Leadership now = current();
    if (!now.is_leader()) {
        if (now.leader) {
            const auto leader = config_.find_node(*now.leader);
            respond(net::JoinAnswer{net::JoinStatus::Redirect,
                                    to_string(config_.nodes[leader->value].peer)});
        } else {
            respond(net::JoinAnswer{net::JoinStatus::Refused,
                                    std::string(kJoinRetry) + "no leader yet"});
        }
        return;
    }
    // An id of the table asks again (its answer was lost, or it was added by hand): the current
    // configuration when it is a member at these addresses; a removed one is added back (at
    // any addresses when this node only kept its index: it was removed before this node
    // joined).
    if (const auto known = config_.find_node(id)) {
        const NodeEntry& e = config_.nodes[known->value];
        const bool member = cores_.log_driver->log().active_config().is_member(*known);
        if (!is_placeholder(e) &&
            (to_string(e.peer) != request.peer || to_string(e.http) != request.http)) {
            const std::string where =
                "(peer " + to_string(e.peer) + ", http " + to_string(e.http) + ")";
            respond(net::JoinAnswer{
                net::JoinStatus::Refused,
                member ? "node id \"" + id + "\" is in use by a member of the cluster " + where +
                             ": join under a new id"
                       : "node id \"" + id +
                             "\" was removed from the cluster; it was at other "
                             "addresses " +
                             where +
                             ": join under a new id (ids are never given "
                             "to another node), or from those addresses to add it back"});
            return;
        }
        if (member) {
            respond(net::JoinAnswer{net::JoinStatus::Accepted,
                                    codec::encode_configuration(active_configuration())});
            return;
        }
    }
    add_learner(
        replication::Member{id, request.peer, request.http},
        [this, alive = std::weak_ptr<int>(runtime_.alive),
         respond = std::move(respond)](const MembershipResult& r) {
            if (alive.expired()) {
                return;
            }
            using Status = MetadataProposeStatus;
            // The leadership moved or the commit was slow: the joiner asks again (a node whose
            // addition did commit is then answered as a member, so asking twice adds it once).
            const bool transient = r.status == Status::NotLeader || r.status == Status::NoLeader ||
                                   r.status == Status::NotActive || r.status == Status::TimedOut ||
                                   r.status == Status::LeadershipLost;
            if (r.ok()) {
                respond(net::JoinAnswer{net::JoinStatus::Accepted,
                                        codec::encode_configuration(active_configuration())});
            } else {
                respond(net::JoinAnswer{net::JoinStatus::Refused,
                                        (transient ? std::string(kJoinRetry) : "") + r.detail});
            }
        });
}

void Node::register_membership_metrics() {
    for (std::size_t i = 0; i < admin::kMembershipOpCount; ++i) {
        admin_.membership_changes[i] =
            &admin_.metrics.counter("conclave_membership_changes_total",
                                    "Membership changes this node proposed that committed, by op",
                                    {{"op", std::string(to_string(static_cast<MembershipOp>(i)))}});
    }
    for (std::size_t i = 0; i < admin::kConfigRefusalCount; ++i) {
        admin_.config_refusals[i] = &admin_.metrics.counter(
            "conclave_config_refusals_total",
            "Membership changes refused (by this leader) and configurations the elector refused, "
            "by reason",
            {{"reason", std::string(to_string(static_cast<ConfigRefusal>(i)))}});
    }
    if (!cores_.log_driver) {
        return;
    }
    admin::Gauge& version = admin_.metrics.gauge(
        "conclave_membership_version", "Version of this node's active configuration (0: none yet)");
    admin::Counter* elector_refusals =
        admin_.config_refusals[static_cast<std::size_t>(ConfigRefusal::Elector)];
    auto mirrored = std::make_shared<std::uint64_t>(0);
    admin_.metrics.on_collect([this, &version, elector_refusals, mirrored] {
        version.set(static_cast<double>(cores_.log_driver->log().active_config().version));
        // Mirrored: the log driver counts the elector's refusals (monotonic).
        const std::uint64_t now = cores_.log_driver->counters().voter_set_refused;
        elector_refusals->inc(static_cast<double>(now - *mirrored));
        *mirrored = now;
    });
}

}  // namespace conclave::node
