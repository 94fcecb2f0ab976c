// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/admin_routes.hpp"

#include <algorithm>

#include "conclave/node/metrics.hpp"

namespace conclave::node {
namespace {

/// 400 naming the first query parameter not in `allowed`, if any.
std::optional<AdminResponse> RejectUnknownParameters(const AdminRequest& request,
                                                     std::initializer_list<std::string> allowed) {
    for (const auto& [key, value] : request.query) {
        (void)value;
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            std::string known;
            for (const auto& a : allowed) {
                known += (known.empty() ? "" : ", ") + a;
            }
            return json_error(
                400, "bad_request",
                "query: unknown parameter \"" + key.substr(0, 64) + "\"" +
                    (known.empty() ? " (this endpoint takes none)" : " (allowed: " + known + ")"));
        }
    }
    return std::nullopt;
}

AdminResponse CommandResponse(const CommandResult& result) {
    switch (result.outcome) {
        case CommandResult::Outcome::Accepted:
            return json_response(202, {{"status", "accepted"}, {"detail", result.detail}});
        case CommandResult::Outcome::Refused:
            return json_error(409, "refused", result.detail);
        case CommandResult::Outcome::Unavailable:
            return json_error(503, "unavailable", result.detail);
    }
    return json_error(500, "internal", "unknown command outcome");
}

}  // namespace

void register_admin_routes(AdminServer& server, AdminSource& source,
                           LeadershipRouteLimits leadership_limits) {
    server.route("GET", "/status", [&source](const AdminRequest& request) {
        if (auto error = RejectUnknownParameters(request, {})) {
            return *error;
        }
        return json_response(200, status_to_json(source.status()));
    });
    server.route("GET", "/metrics", [&source](const AdminRequest& request) {
        if (auto error = RejectUnknownParameters(request, {})) {
            return *error;
        }
        AdminResponse response;
        response.content_type = std::string(MetricsRegistry::kContentType);
        response.body = source.metrics_text();
        return response;
    });
    server.route("GET", "/healthz", [&source](const AdminRequest& request) {
        if (auto error = RejectUnknownParameters(request, {})) {
            return *error;
        }
        const HealthReport health = source.health();
        if (!health.healthy) {
            return json_error(503, "unhealthy", health.detail);
        }
        return json_response(200, {{"status", "ok"}});
    });
    server.route("POST", "/transfer-leadership", [&source](const AdminRequest& request) {
        if (auto error = RejectUnknownParameters(request, {"to"})) {
            return *error;
        }
        const auto to = request.query.find("to");
        if (to == request.query.end() || to->second.empty()) {
            return json_error(400, "bad_request",
                              "query: missing parameter \"to\" (the id of the node to hand "
                              "leadership to)");
        }
        const auto ids = source.node_ids();
        if (std::find(ids.begin(), ids.end(), to->second) == ids.end()) {
            std::string known;
            for (const auto& id : ids) {
                known += (known.empty() ? "" : ", ") + id;
            }
            return json_error(400, "bad_request",
                              "to: \"" + to->second.substr(0, 64) +
                                  "\" is not a configured node (" + known + ")");
        }
        return CommandResponse(source.transfer_leadership(to->second));
    });
    server.route("POST", "/step-down", [&source](const AdminRequest& request) {
        if (auto error = RejectUnknownParameters(request, {})) {
            return *error;
        }
        return CommandResponse(source.step_down());
    });
    register_metadata_routes(server, source);
    register_membership_routes(server, source);
    register_leadership_routes(server, source, leadership_limits);
}

}  // namespace conclave::node
