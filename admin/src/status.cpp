// SPDX-License-Identifier: Apache-2.0
#include "conclave/admin/status.hpp"

namespace conclave::admin {

nlohmann::json lsn_to_json(const Lsn& lsn) {
    return {{"term", lsn.term.value}, {"counter", lsn.counter}};
}

LeaseStatus lease_status(std::optional<std::chrono::steady_clock::time_point> deadline,
                         std::chrono::steady_clock::time_point now) {
    if (!deadline || now >= *deadline) {
        return LeaseStatus{};
    }
    // Rounded down: a client never sees more time than is left.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now);
    return LeaseStatus{true, left.count()};
}

nlohmann::json lease_to_json(const std::optional<LeaseStatus>& lease) {
    if (!lease) {
        return nullptr;
    }
    return {{"valid", lease->valid}, {"remaining_ms", lease->remaining_ms}};
}

nlohmann::json store_to_json(const StoreStatus& store) {
    return {{"kind", store.kind},
            {"session", store.session},
            {"detail", store.detail},
            {"last_answer_ms", store.last_answer_ms ? nlohmann::json(*store.last_answer_ms)
                                                    : nlohmann::json(nullptr)},
            {"ttl_ms", store.ttl_ms}};
}

namespace {

nlohmann::json identity_to_json(const StatusReport& status) {
    nlohmann::json identity = {{"incarnation", status.incarnation}};
    if (status.refused) {
        identity["refused"] = *status.refused;
    }
    if (status.quarantined) {
        identity["quarantined"] = true;
    }
    if (status.unknown_to_peers) {
        identity["unknown_to_peers"] = *status.unknown_to_peers;
    }
    if (status.state_regressed) {
        identity["state_regressed"] = *status.state_regressed;
    }
    return identity;
}

/// The metadata log's part of /status, into `out`.
void add_log_status(const LogStatus& log, nlohmann::json& out) {
    if (!log.leader_status.empty()) {  // only on the leader
        out["leader_status"] = log.leader_status;
    }
    out["commit_lsn"] = lsn_to_json(log.commit_lsn);
    out["alarms"] = log.alarms;
    if (log.rollback) {
        out["rollback"] = *log.rollback;
    }
    out["repaired"] = log.repaired.has_value();
    if (log.repaired) {
        out["repaired_term"] = log.repaired->value;
    }
}

}  // namespace

nlohmann::json status_to_json(const StatusReport& status) {
    nlohmann::json peers = nlohmann::json::array();
    for (const PeerStatus& peer : status.peers) {
        nlohmann::json contact = nullptr;
        if (peer.last_contact_ms) {
            contact = *peer.last_contact_ms;
        }
        peers.push_back({{"id", peer.id},
                         {"up", peer.up},
                         {"last_contact_ms", contact},
                         {"last_heartbeat_ms", contact},
                         {"live", peer.live},
                         {"priority", peer.priority}});
    }
    nlohmann::json leader = nullptr;
    if (status.leader) {
        leader = *status.leader;
    }
    // nlohmann::json objects keep keys sorted; the contract is about names and types, not order.
    nlohmann::json out = {
        {"id", status.id},
        {"cluster", status.cluster},
        {"role", std::string(to_string(status.role))},
        {"term", status.term.value},
        {"leader", std::move(leader)},
        {"fencing_token", status.fencing_token},
        {"lsn", lsn_to_json(status.lsn)},
        {"priority", status.priority},
        {"peers", std::move(peers)},
        {"last_transition",
         {{"reason", std::string(to_string(status.last_transition_reason))},
          {"age_ms", status.last_transition_age_ms}}},
        {"lease", lease_to_json(status.lease)},
    };
    if (status.store) {
        out["store"] = store_to_json(*status.store);
    }
    out["liveness"] = {{"window_ms", status.liveness_window_ms
                                         ? nlohmann::json(*status.liveness_window_ms)
                                         : nlohmann::json(nullptr)}};
    if (!status.liveness_detail.empty()) {
        out["liveness"]["detail"] = status.liveness_detail;
    }
    if (status.storage.ok) {
        out["storage"] = {{"state", "ok"}};
    } else {
        out["storage"] = {{"state", "failed"},
                          {"reason", status.storage.reason},
                          {"since", status.storage.since}};
    }
    out["identity"] = identity_to_json(status);
    if (status.membership) {
        out["membership"] = {{"version", status.membership->version},
                             {"from_entry", status.membership->from_entry},
                             {"role", status.membership->role}};
    }
    if (status.log) {
        add_log_status(*status.log, out);
    }
    return out;
}

}  // namespace conclave::admin
