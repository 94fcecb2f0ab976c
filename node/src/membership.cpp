// Node's side of membership changes (issue 18): add_learner / promote / remove_member, the
// members() view, /status's "membership" and the membership metrics. Kept apart from node.cpp.
#include "conclave/node/membership.hpp"

#include <boost/asio/post.hpp>

#include "conclave/codec/membership_codec.hpp"
#include "conclave/drivers/driver.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/node.hpp"

namespace conclave::node {

namespace {

constexpr std::array<std::string_view, kMembershipOpCount> kOpNames = {"add-learner", "promote",
                                                                       "remove"};
constexpr std::array<std::string_view, kConfigRefusalCount> kRefusalNames = {
    "pending", "not_adjacent", "promote_lag", "invalid_op", "elector"};

/// A change that cannot be proposed, and why.
struct Refusal {
    ConfigRefusal reason;
    std::string detail;
};

}  // namespace

std::string_view to_string(MembershipOp op) {
    return kOpNames.at(static_cast<std::size_t>(op));
}

std::optional<MembershipOp> parse_membership_op(std::string_view text) {
    for (std::size_t i = 0; i < kOpNames.size(); ++i) {
        if (kOpNames[i] == text) {
            return static_cast<MembershipOp>(i);
        }
    }
    return std::nullopt;
}

std::string_view to_string(ConfigRefusal r) {
    return kRefusalNames.at(static_cast<std::size_t>(r));
}

nlohmann::json members_to_json(const MembersView& view) {
    nlohmann::json members = nlohmann::json::array();
    for (const MemberInfo& m : view.members) {
        nlohmann::json member = {{"id", m.id},
                                 {"peer", m.peer},
                                 {"http", m.http},
                                 {"role", m.role == MemberRole::Voter ? "voter" : "learner"}};
        if (m.catch_up) {
            member["catch_up"] = {{"acknowledged_len", m.catch_up->acknowledged_len},
                                  {"lag_entries", m.catch_up->lag_entries},
                                  {"connected", m.catch_up->connected}};
        }
        members.push_back(std::move(member));
    }
    nlohmann::json out = {{"version", view.version},
                          {"from_entry", view.from_entry},
                          {"members", std::move(members)}};
    if (view.pending_change) {
        out["pending_change"] = *view.pending_change;
    }
    return out;
}

void Node::add_learner(std::string id, MembershipCallback done) {
    change_membership(MembershipOp::AddLearner, std::move(id), std::move(done));
}

void Node::promote(std::string id, MembershipCallback done) {
    change_membership(MembershipOp::Promote, std::move(id), std::move(done));
}

void Node::remove_member(std::string id, MembershipCallback done) {
    change_membership(MembershipOp::Remove, std::move(id), std::move(done));
}

MembersView Node::members() const {
    MembersView view;
    if (!log_driver_) {
        return view;
    }
    const replication::ReplicatedLog& log = log_driver_->log();
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
            MemberInfo m{config_.nodes[i].id, to_string(config_.nodes[i].peer),
                         to_string(config_.nodes[i].http), role, std::nullopt};
            if (leader) {
                const std::size_t acked =
                    n == config_.self ? log.state().durable_len : log.progress()[i].match_len;
                m.catch_up = MemberCatchUp{acked, log.end_len() - std::min(acked, log.end_len()),
                                           n == config_.self || mesh_->is_up(n)};
            }
            view.members.push_back(std::move(m));
        }
    }
    return view;
}

std::optional<MembershipState> Node::membership_state() const {
    if (!log_driver_) {
        return std::nullopt;
    }
    const replication::ActiveConfig& active = log_driver_->log().active_config();
    MembershipState m;
    m.version = active.version;
    m.from_entry = active.from_entry;
    m.role = active.is_voter(config_.self)            ? "voter"
             : active.learners.contains(config_.self) ? "learner"
                                                      : "removed";
    return m;
}

void Node::change_membership(MembershipOp op, std::string id, MembershipCallback done) {
    if (must_post()) {
        boost::asio::post(*io_, [this, op, id = std::move(id), done = std::move(done)]() mutable {
            change_membership(op, std::move(id), std::move(done));
        });
        return;
    }
    const auto answer = [this, &done](MetadataProposeStatus status, std::string detail = {}) {
        MembershipResult r;
        static_cast<MetadataProposeResult&>(r) = proposal_result(status, replication::kNoLsn);
        if (!detail.empty()) {
            r.detail = std::move(detail);
        }
        done(r);
    };
    const std::optional<NodeId> target = config_.find_node(id);
    if (!target) {
        std::string known;
        for (const NodeEntry& e : config_.nodes) {
            known += (known.empty() ? "" : ", ") + e.id;
        }
        return answer(MetadataProposeStatus::InvalidEntry,
                      "unknown node id \"" + id.substr(0, 64) +
                          "\": not in the config's node table (" + known +
                          "); a brand-new id needs the runtime id table, not built yet");
    }
    if (!log_driver_ || stopping_ || !started_ || !log_driver_->running()) {
        // propose_entry answers these (disabled, stopped, failed).
        return propose_entry({}, {}, true,
                             [done = std::move(done)](const MetadataProposeResult& p) {
                                 MembershipResult r;
                                 static_cast<MetadataProposeResult&>(r) = p;
                                 done(r);
                             });
    }
    const replication::ReplicatedLog& log = log_driver_->log();
    if (!log.can_propose()) {
        return answer(log.role() == replication::LogRole::LeaderPassive
                          ? MetadataProposeStatus::NotActive
                          : MetadataProposeStatus::NotLeader);
    }
    // The next configuration, from the active one (the implicit one included: every node of the
    // table a voter at version 0).
    const replication::ActiveConfig& active = log.active_config();
    replication::ActiveConfig next = active;
    next.version = active.version + 1;
    const std::string version_text = " of configuration version " + std::to_string(active.version);
    std::optional<Refusal> refusal;
    switch (op) {
        case MembershipOp::AddLearner:
            if (active.is_member(*target)) {
                refusal =
                    Refusal{ConfigRefusal::InvalidOp,
                            id + " is already a " +
                                (active.is_voter(*target) ? "voter" : "learner") + version_text};
            }
            next.learners.insert(*target);
            break;
        case MembershipOp::Promote: {
            if (!active.learners.contains(*target)) {
                refusal =
                    Refusal{ConfigRefusal::InvalidOp, id + " is not a learner" + version_text +
                                                          " (add it as a learner first)"};
                break;
            }
            // R7: the learner holds the leader's committed prefix and is close to its last entry.
            const std::size_t acked = log.progress()[target->value].match_len;
            const std::size_t last = log.end_len();
            const std::size_t commit = log.state().commit_len;
            const std::size_t behind = last - std::min(acked, last);
            if (acked < commit || behind > config_.metadata.promote_lag_entries) {
                refusal = Refusal{
                    ConfigRefusal::PromoteLag,
                    id + " is not caught up (R7): it acknowledged " + std::to_string(acked) +
                        " entries, the leader holds " + std::to_string(last) + " (" +
                        std::to_string(commit) + " committed): " + std::to_string(behind) +
                        " behind; a promotion needs the committed prefix and at most "
                        "metadata.promote_lag_entries (" +
                        std::to_string(config_.metadata.promote_lag_entries) + ") behind"};
            }
            next.learners.erase(*target);
            next.voters.insert(*target);
            break;
        }
        case MembershipOp::Remove:
            if (!active.is_member(*target)) {
                refusal = Refusal{ConfigRefusal::InvalidOp, id + " is not a member" + version_text};
            }
            next.voters.erase(*target);
            next.learners.erase(*target);
            break;
    }
    replication::Configuration cfg;
    cfg.version = next.version;
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        const NodeEntry& e = config_.nodes[i];
        const replication::Member member{e.id, to_string(e.peer), to_string(e.http)};
        if (next.voters.contains(NodeId{i})) {
            cfg.voters.push_back(member);
        } else if (next.learners.contains(NodeId{i})) {
            cfg.learners.push_back(member);
        }
    }
    if (!refusal) {
        if (auto why = log.check_config_change(cfg)) {
            refusal = Refusal{
                log.config_pending() ? ConfigRefusal::Pending : ConfigRefusal::NotAdjacent, *why};
        }
    }
    if (refusal) {
        config_refusals_[static_cast<std::size_t>(refusal->reason)]->inc();
        log_event(*logger_, spdlog::level::warn, "membership change refused",
                  {{"op", std::string(to_string(op))},
                   {"id", id},
                   {"reason", std::string(to_string(refusal->reason))},
                   {"detail", refusal->detail}});
        return answer(MetadataProposeStatus::Refused, std::move(refusal->detail));
    }
    log_event(*logger_, spdlog::level::info, "membership change proposed",
              {{"op", std::string(to_string(op))}, {"id", id}, {"version", cfg.version}});
    propose_entry(
        {}, encode_configuration(cfg), true,
        [this, op, version = cfg.version, done = std::move(done)](const MetadataProposeResult& p) {
            MembershipResult r;
            static_cast<MetadataProposeResult&>(r) = p;
            if (p.ok()) {
                r.version = version;
                r.detail = "configuration version " + std::to_string(version) + " committed";
                membership_changes_[static_cast<std::size_t>(op)]->inc();
            }
            done(r);
        });
}

void Node::register_membership_metrics() {
    for (std::size_t i = 0; i < kMembershipOpCount; ++i) {
        membership_changes_[i] =
            &metrics_.counter("conclave_membership_changes_total",
                              "Membership changes this node proposed that committed, by op",
                              {{"op", std::string(to_string(static_cast<MembershipOp>(i)))}});
    }
    for (std::size_t i = 0; i < kConfigRefusalCount; ++i) {
        config_refusals_[i] = &metrics_.counter(
            "conclave_config_refusals_total",
            "Membership changes refused (by this leader) and configurations the elector refused, "
            "by reason",
            {{"reason", std::string(to_string(static_cast<ConfigRefusal>(i)))}});
    }
    if (!log_driver_) {
        return;
    }
    Gauge& version = metrics_.gauge("conclave_membership_version",
                                    "Version of this node's active configuration (0: none yet)");
    Counter* elector_refusals = config_refusals_[static_cast<std::size_t>(ConfigRefusal::Elector)];
    auto mirrored = std::make_shared<std::uint64_t>(0);
    metrics_.on_collect([this, &version, elector_refusals, mirrored] {
        version.set(static_cast<double>(log_driver_->log().active_config().version));
        // Mirrored: the log driver counts the elector's refusals (monotonic).
        const std::uint64_t now = log_driver_->counters().voter_set_refused;
        elector_refusals->inc(static_cast<double>(now - *mirrored));
        *mirrored = now;
    });
}

}  // namespace conclave::node
