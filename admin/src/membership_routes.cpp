// SPDX-License-Identifier: Apache-2.0
// GET /members and POST /members on the admin server (node/README.md has the contract).
#include <array>

#include "conclave/admin/admin_routes.hpp"
#include "conclave/admin/membership.hpp"

namespace conclave::admin {
namespace {

constexpr std::array<std::string_view, kMembershipOpCount> kOpNames = {"add-learner", "promote",
                                                                       "remove"};
constexpr std::array<std::string_view, kConfigRefusalCount> kRefusalNames = {
    "pending", "not_adjacent", "promote_lag", "invalid_op", "elector"};

using nlohmann::json;

constexpr std::string_view kBodyShape =
    "body: expected a JSON object {\"op\": \"add-learner\" | \"promote\" | \"remove\", \"id\": "
    "\"<node id>\"}";

std::optional<AdminResponse> RejectQuery(const AdminRequest& request) {
    if (request.query.empty()) {
        return std::nullopt;
    }
    return json_error(400, "bad_request",
                      "query: unknown parameter \"" + request.query.begin()->first.substr(0, 64) +
                          "\" (this endpoint takes none)");
}

}  // namespace

void register_membership_routes(AdminServer& server, AdminSource& source) {
    server.route("GET", "/members", [&source](const AdminRequest& request) {
        if (auto error = RejectQuery(request)) {
            return *error;
        }
        const std::optional<MembersView> view = source.members();
        if (!view) {
            return json_error(503, "disabled", "this node runs no metadata log");
        }
        return json_response(200, members_to_json(*view));
    });
    server.route_async(
        "POST", "/members", [&source](const AdminRequest& request, AdminResponder respond) {
            if (auto error = RejectQuery(request)) {
                return respond(*error);
            }
            const json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
            if (body.is_discarded() || !body.is_object()) {
                return respond(json_error(400, "bad_request", std::string(kBodyShape)));
            }
            for (const auto& [field, unused] : body.items()) {
                (void)unused;
                if (field == "peer" || field == "http") {
                    // A new node must learn the node table: it joins itself (join.hpp).
                    return respond(json_error(
                        400, "bad_request",
                        "body." + field +
                            ": a node that is not in the node table joins with "
                            "conclaved --join HOST:PORT (it must learn the table); POST /members "
                            "changes the members of the table"));
                }
                if (field != "op" && field != "id") {
                    return respond(json_error(
                        400, "bad_request",
                        "body." + field.substr(0, 64) + ": unknown field (expected op, id)"));
                }
            }
            const auto op = body.find("op");
            if (op == body.end() || !op->is_string()) {
                return respond(json_error(400, "bad_request",
                                          "body.op: expected \"add-learner\", \"promote\" or "
                                          "\"remove\""));
            }
            const std::optional<MembershipOp> parsed = parse_membership_op(op->get<std::string>());
            if (!parsed) {
                return respond(json_error(400, "bad_request",
                                          "body.op: unknown op \"" +
                                              op->get<std::string>().substr(0, 64) +
                                              "\" (expected add-learner, promote or remove)"));
            }
            const auto id = body.find("id");
            if (id == body.end() || !id->is_string() || id->get<std::string>().empty()) {
                return respond(
                    json_error(400, "bad_request", "body.id: expected a non-empty node id"));
            }
            replication::Member member{id->get<std::string>(), {}, {}};
            source.change_membership(
                *parsed, std::move(member),
                [respond, scheme = request.scheme, path = request.path](const MembershipResult& r) {
                    if (r.ok()) {
                        return respond(json_response(
                            200, {{"version", r.version}, {"lsn", lsn_to_json(r.lsn)}}));
                    }
                    respond(propose_response(r, scheme, path));
                });
        });
}

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
                                 {"role", m.role == MemberRole::Voter ? "voter" : "learner"},
                                 {"priority", m.priority}};
        if (m.catch_up) {
            member["catch_up"] = {{"acknowledged_len", m.catch_up->acknowledged_len},
                                  {"lag_entries", m.catch_up->lag_entries},
                                  {"connected", m.catch_up->connected}};
        }
        member["last_heartbeat_ms"] =
            m.last_heartbeat_ms ? nlohmann::json(*m.last_heartbeat_ms) : nlohmann::json(nullptr);
        member["live"] = m.live ? nlohmann::json(*m.live) : nlohmann::json(nullptr);
        members.push_back(std::move(member));
    }
    nlohmann::json out = {{"version", view.version},
                          {"from_entry", view.from_entry},
                          {"members", std::move(members)}};
    if (view.pending_change) {
        out["pending_change"] = *view.pending_change;
    }
    out["liveness"] = {{"window_ms", view.liveness_window_ms
                                         ? nlohmann::json(*view.liveness_window_ms)
                                         : nlohmann::json(nullptr)}};
    if (!view.liveness_detail.empty()) {
        out["liveness"]["detail"] = view.liveness_detail;
    }
    return out;
}

}  // namespace conclave::admin
