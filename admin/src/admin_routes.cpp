// SPDX-License-Identifier: Apache-2.0
#include "conclave/admin/admin_routes.hpp"

#include <algorithm>
#include <charconv>

#include "conclave/elector/config.hpp"

#include "conclave/admin/metrics.hpp"

namespace conclave::admin {
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

// POST /priority?node=ID&value=N (docs/design.md, "Priorities").
void RegisterPriorityRoute(AdminServer& server, AdminSource& source) {
    server.route("POST", "/priority", [&source](const AdminRequest& request) {
        if (auto error = RejectUnknownParameters(request, {"node", "value"})) {
            return *error;
        }
        const auto node = request.query.find("node");
        const auto value = request.query.find("value");
        if (node == request.query.end() || value == request.query.end()) {
            return json_error(400, "bad_request",
                              "query: expected parameters \"node\" (a node id) and \"value\" "
                              "(its priority, an integer >= 0)");
        }
        const auto ids = source.node_ids();
        if (std::find(ids.begin(), ids.end(), node->second) == ids.end()) {
            return json_error(
                400, "bad_request",
                "node: \"" + node->second.substr(0, 64) + "\" is not a configured node");
        }
        std::uint32_t priority = 0;
        const std::string& text = value->second;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), priority);
        if (ec != std::errc{} || end != text.data() + text.size() ||
            priority > elector::Config::kMaxPriority) {
            return json_error(400, "bad_request",
                              "value: expected an integer from 0 to " +
                                  std::to_string(elector::Config::kMaxPriority));
        }
        return CommandResponse(source.set_priority(node->second, priority));
    });
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
    RegisterPriorityRoute(server, source);
    server.route("POST", "/step-down", [&source](const AdminRequest& request) {
        if (auto error = RejectUnknownParameters(request, {})) {
            return *error;
        }
        return CommandResponse(source.step_down());
    });
    register_metadata_routes(server, source);
    register_membership_routes(server, source);
    register_leadership_routes(server, source, leadership_limits);
    register_broadcast_routes(server, source, leadership_limits);
}

}  // namespace conclave::admin
