// SPDX-License-Identifier: Apache-2.0
// POST /broadcast and GET /broadcast?watch=1 on the admin server (node/README.md has the
// contract; broadcast.hpp what a broadcast promises).
#include <memory>

#include "conclave/admin/admin_routes.hpp"

#include "ndjson_streams.hpp"

namespace conclave::admin {
namespace {

using nlohmann::json;

constexpr std::string_view kBroadcastBodyShape =
    "body: expected a JSON object {\"topic\": \"<1 to 256 bytes>\", \"payload\": <any JSON>}";

/// The watch streams of GET /broadcast?watch=1; subscribed to the source at the first watch.
struct BroadcastWatchers {
    BroadcastWatchers(boost::asio::io_context& io, AdminSource& admin_source,
                      LeadershipRouteLimits route_limits)
        : source(admin_source),
          limits(route_limits),
          streams(std::make_shared<NdjsonStreams>(io)) {}
    AdminSource& source;
    LeadershipRouteLimits limits;
    std::shared_ptr<NdjsonStreams> streams;
    bool subscribed = false;
};

std::optional<AdminResponse> BroadcastQueryError(const AdminRequest& request, bool watch) {
    for (const auto& [key, value] : request.query) {
        if (!watch || key != "watch") {
            return json_error(400, "bad_request",
                              "query: unknown parameter \"" + key.substr(0, 64) + "\"" +
                                  (watch ? " (allowed: watch)" : " (this endpoint takes none)"));
        }
        if (value != "1") {
            return json_error(400, "bad_request",
                              "watch: expected 1, got \"" + value.substr(0, 64) + "\"");
        }
    }
    if (watch && !request.query.contains("watch")) {
        return json_error(400, "bad_request",
                          "GET /broadcast streams what this node receives: add ?watch=1");
    }
    return std::nullopt;
}

AdminResponse BroadcastResponse(const BroadcastResult& r) {
    using Outcome = BroadcastResult::Outcome;
    switch (r.outcome) {
        case Outcome::Sent:
            return json_response(200,
                                 {{"id", r.id}, {"sent_to", r.sent_to}, {"not_sent", r.not_sent}});
        case Outcome::Invalid:
            return json_error(400, "bad_request", r.detail);
        case Outcome::TooLarge:
            return json_error(413, "too_large", r.detail);
        case Outcome::NeedsMesh:
            return json_error(501, "broadcast needs the mesh", r.detail);
        case Outcome::Unavailable:
            return json_error(503, "unavailable", r.detail);
    }
    return json_error(500, "internal", "unknown broadcast outcome");
}

AdminResponse PostBroadcast(AdminSource& source, const AdminRequest& request) {
    if (auto error = BroadcastQueryError(request, false)) {
        return *error;
    }
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
        return json_error(400, "bad_request", std::string(kBroadcastBodyShape));
    }
    for (const auto& [field, unused] : body.items()) {
        (void)unused;
        if (field != "topic" && field != "payload") {
            return json_error(400, "bad_request",
                              "body." + field.substr(0, 64) +
                                  ": unknown field (expected topic, "
                                  "payload)");
        }
    }
    const auto topic = body.find("topic");
    if (topic == body.end() || !topic->is_string()) {
        return json_error(400, "bad_request", "body.topic: expected a string of 1 to 256 bytes");
    }
    if (!body.contains("payload")) {
        return json_error(400, "bad_request", "body.payload: missing (any JSON value, null too)");
    }
    return BroadcastResponse(
        source.broadcast(topic->get<std::string>(), std::move(body["payload"])));
}

void WatchBroadcasts(const std::shared_ptr<BroadcastWatchers>& watchers,
                     const AdminRequest& request, AdminResponder respond) {
    if (auto error = BroadcastQueryError(request, true)) {
        return respond(*error);
    }
    // As for /leadership: one who presents the token is always served.
    if (!request.authenticated && watchers->streams->size() >= watchers->limits.max_watchers) {
        return respond(json_error(503, "too_many_watchers",
                                  "too many broadcast watches at once (limit " +
                                      std::to_string(watchers->limits.max_watchers) +
                                      "); retry later"));
    }
    if (!watchers->subscribed) {
        watchers->subscribed = true;
        std::weak_ptr<NdjsonStreams> weak = watchers->streams;
        watchers->source.on_broadcast([weak](const BroadcastMessage& m) {
            if (auto streams = weak.lock()) {
                streams->write_all(
                    m.to_json().dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
            }
        });
    }
    AdminResponse response;
    response.content_type = "application/x-ndjson";
    std::weak_ptr<NdjsonStreams> weak = watchers->streams;
    response.stream = [weak](std::shared_ptr<AdminStream> stream) {
        if (auto streams = weak.lock()) {
            streams->add(stream);  // from now on: what arrives after the watch began
        } else {
            stream->close();
        }
    };
    respond(std::move(response));
}

}  // namespace

void register_broadcast_routes(AdminServer& server, AdminSource& source,
                               LeadershipRouteLimits limits) {
    server.route("POST", "/broadcast",
                 [&source](const AdminRequest& request) { return PostBroadcast(source, request); });
    auto watchers = std::make_shared<BroadcastWatchers>(server.io(), source, limits);
    server.route_async("GET", "/broadcast",
                       [watchers](const AdminRequest& request, AdminResponder respond) {
                           WatchBroadcasts(watchers, request, std::move(respond));
                       });
}

std::string BroadcastMessage::id() const {
    return from + "/" + boot + "/" + std::to_string(seq);
}

nlohmann::json BroadcastMessage::to_json() const {
    return {{"id", id()}, {"from", from}, {"topic", topic}, {"payload", payload}};
}

}  // namespace conclave::admin
