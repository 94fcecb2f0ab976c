// SPDX-License-Identifier: Apache-2.0
// conclavectl's requests over the admin client: errors as exit statuses, the survey of every
// node's /status, the leader.
#include <algorithm>

#include "conclavectl.hpp"

namespace conclave::conclavectl {

namespace http = boost::beast::http;

Failure to_failure(const client::Error& error) {
    switch (error.kind()) {
        case client::ErrorKind::Refused:
            return Failure(kExitUsage, error.what());
        case client::ErrorKind::Unreachable:
            return Failure(kExitUnreachable, error.what());
        case client::ErrorKind::BadRedirect:
            break;
    }
    return Failure(kExitFailure, error.what());
}

Reply request(const Options& options, const Endpoint& endpoint, http::verb method,
              const std::string& target, const std::string& body) {
    try {
        return client::request(options.client, endpoint, {method, target, body, {}},
                               options.deadline);
    } catch (const client::Error& e) {
        throw to_failure(e);
    }
}

Reply request_following(const Options& options, const Endpoint& endpoint, http::verb method,
                        const std::string& target, const std::string& body, Endpoint* answered) {
    try {
        return client::request_following(options.client, endpoint, {method, target, body, {}},
                                         options.deadline, answered);
    } catch (const client::Error& e) {
        throw to_failure(e);
    }
}

std::string detail(const Reply& reply) {
    if (reply.document.is_object()) {
        const auto error = reply.document.find("error");
        const auto more = reply.document.find("detail");
        std::string text;
        if (error != reply.document.end() && error->is_string()) {
            text = error->get<std::string>();
        }
        if (more != reply.document.end() && more->is_string()) {
            text += (text.empty() ? "" : ": ") + more->get<std::string>();
        }
        if (!text.empty()) {
            return text;
        }
    }
    std::string body = reply.body.substr(0, 200);
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) {
        body.pop_back();
    }
    return body;
}

void fail(const Endpoint& endpoint, const Reply& reply) {
    const std::string line = client::to_string(endpoint) + ": HTTP " +
                             std::to_string(reply.status) + ": " + detail(reply);
    if (reply.status == 401 || reply.status == 403) {
        throw Failure(kExitAuth, line);
    }
    std::string error;
    if (reply.status == 503 && reply.document.is_object() && reply.document.contains("error") &&
        reply.document["error"].is_string()) {
        error = reply.document["error"].get<std::string>();
    }
    throw Failure(kExitFailure, line, error);
}

namespace {

/// The reply of a survey request, or why there is none (a failure other than "unreachable",
/// and a 401/403, end the command).
std::optional<Reply> SurveyAnswer(const client::Outcome& out, const Endpoint& endpoint,
                                  std::string& error) {
    if (out.error) {
        const Failure failure = to_failure(*out.error);
        if (failure.status != kExitUnreachable) {
            throw failure;
        }
        error = failure.what();
        return std::nullopt;
    }
    if (out.response->status == 401 || out.response->status == 403) {
        fail(endpoint, *out.response);
    }
    return out.response;
}

}  // namespace

std::vector<NodeView> survey(const Options& options, bool with_health,
                             const std::function<bool(const json&)>& enough,
                             std::optional<Clock::time_point> until) {
    const std::size_t n = options.endpoints.size();
    std::vector<client::Call> calls;
    for (const Endpoint& endpoint : options.endpoints) {
        calls.push_back({endpoint, {http::verb::get, "/status", {}, {}}});
        if (with_health) {
            calls.push_back({endpoint, {http::verb::get, "/healthz", {}, {}}});
        }
    }
    const auto stop = [&enough](const Reply& reply) {
        return enough && reply.status == 200 && reply.document.is_object() &&
               enough(reply.document);
    };
    const auto outcomes = client::request_all(
        options.client, calls, std::min(options.deadline, until.value_or(options.deadline)), stop);
    std::vector<NodeView> views;
    const std::size_t per_node = with_health ? 2 : 1;
    for (std::size_t i = 0; i < n; ++i) {
        NodeView view;
        view.endpoint = options.endpoints[i];
        if (const auto reply = SurveyAnswer(outcomes[i * per_node], view.endpoint, view.error)) {
            if (reply->status != 200 || !reply->document.is_object()) {
                view.error = "HTTP " + std::to_string(reply->status) + ": " + detail(*reply);
            } else {
                view.status = reply->document;
            }
        }
        std::string health_error;
        const auto checked = with_health
                                 ? SurveyAnswer(outcomes[i * 2 + 1], view.endpoint, health_error)
                                 : std::nullopt;
        view.health = !checked                 ? std::string("unreachable")
                      : checked->status == 200 ? std::string("ok")
                                               : "unhealthy: " + detail(*checked);
        views.push_back(std::move(view));
    }
    return views;
}

bool is_leader(const json& status) {
    return cell(status, "role") == "leader";
}

std::optional<Endpoint> find_leader(const Options& options, std::string* leader_id,
                                    const std::function<bool(const json&)>& leader,
                                    std::optional<Clock::time_point> until) {
    std::string error;
    bool answered = false;
    for (const NodeView& view : survey(options, false, leader, until)) {
        answered = answered || view.status.has_value();
        if (error.empty()) {
            error = view.error;
        }
        if (view.status && leader(*view.status)) {
            if (leader_id) {
                *leader_id = cell(*view.status, "id");
            }
            return view.endpoint;
        }
    }
    if (!answered) {
        throw Failure(kExitUnreachable, "no node reachable (" + error + ")");
    }
    return std::nullopt;
}

}  // namespace conclave::conclavectl
