// SPDX-License-Identifier: Apache-2.0
// GET /leadership on the admin server: the node's leadership snapshot, and a bounded long-poll
// for sidecars and services in any language (see node/README.md for the contract).
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <list>
#include <memory>

#include "conclave/admin/admin_routes.hpp"
#include "conclave/admin/status.hpp"

#include "ndjson_streams.hpp"
#include "query_params.hpp"

namespace conclave::admin {
namespace {

using nlohmann::json;

json Snapshot(AdminSource& source) {
    const StatusReport s = source.status();
    return {{"id", s.id},
            {"role", std::string(to_string(s.role))},
            {"term", s.term.value},
            {"leader", s.leader ? json(*s.leader) : json(nullptr)},
            {"fencing_token", s.fencing_token},
            {"reason", std::string(to_string(s.last_transition_reason))},
            {"lease", lease_to_json(s.lease)}};
}

struct Waiter {
    explicit Waiter(boost::asio::io_context& io) : timer(io) {}
    std::uint64_t after = 0;
    boost::asio::steady_timer timer;
    AdminResponder respond;
};

/// The long-polls waiting for a change. Owned by the routes' handlers (shared_ptr), so that a
/// timer firing after the server stopped finds it alive; responders are then ignored.
struct Watchers {
    Watchers(boost::asio::io_context& io_context, AdminSource& admin_source,
             LeadershipRouteLimits route_limits)
        : io(io_context),
          source(admin_source),
          limits(route_limits),
          streams(std::make_shared<NdjsonStreams>(io_context)) {}
    boost::asio::io_context& io;
    AdminSource& source;
    LeadershipRouteLimits limits;
    std::list<std::shared_ptr<Waiter>> waiting;
    std::shared_ptr<NdjsonStreams> streams;  // ?watch=1
    bool subscribed = false;
    /// The snapshot at the last change or request: what a waiter timing out gets (a timer may
    /// fire after the source is gone; it must not call it then).
    json last;

    std::size_t Count() const { return waiting.size() + streams->size(); }

    void Subscribe(const std::shared_ptr<Watchers>& self) {
        if (subscribed) {
            return;
        }
        subscribed = true;
        std::weak_ptr<Watchers> weak = self;
        source.on_leadership_change([weak] {
            if (auto w = weak.lock()) {
                w->OnChange();
            }
        });
    }

    /// Writes the snapshot to every stream and answers every long-poll whose token differs.
    void OnChange() {
        last = Snapshot(source);
        const json& snapshot = last;
        const std::string line = snapshot.dump() + "\n";
        streams->write_all(line);
        const auto token = snapshot["fencing_token"].get<std::uint64_t>();
        for (auto it = waiting.begin(); it != waiting.end();) {
            if ((*it)->after != token) {
                const std::shared_ptr<Waiter> waiter = *it;
                it = waiting.erase(it);
                waiter->timer.cancel();
                waiter->respond(json_response(200, snapshot));
            } else {
                ++it;
            }
        }
    }
};

AdminResponse TooMany(const LeadershipRouteLimits& limits) {
    return json_error(503, "too_many_watchers",
                      "too many watches and long-polls at once (limit " +
                          std::to_string(limits.max_watchers) + "); retry later");
}

/// Requests that present the token are not held to max_watchers: watchers without it cannot
/// keep an authorised one out.
bool OverLimit(const Watchers& watchers, const AdminRequest& request) {
    return !request.authenticated && watchers.Count() >= watchers.limits.max_watchers;
}

void Watch(const std::shared_ptr<Watchers>& watchers, const AdminRequest& request,
           AdminResponder respond) {
    if (OverLimit(*watchers, request)) {
        return respond(TooMany(watchers->limits));
    }
    watchers->Subscribe(watchers);
    AdminResponse response;
    response.content_type = "application/x-ndjson";
    std::weak_ptr<Watchers> weak = watchers;
    response.stream = [weak](std::shared_ptr<AdminStream> stream) {
        auto w = weak.lock();
        if (!w) {
            stream->close();
            return;
        }
        // Level-triggered: the current snapshot first, then one line per change.
        w->last = Snapshot(w->source);
        if (!stream->write(w->last.dump() + "\n")) {
            return;
        }
        w->streams->add(stream);
    };
    respond(std::move(response));
}

void LongPoll(const std::shared_ptr<Watchers>& watchers, const AdminRequest& request,
              std::uint64_t wait_seconds, std::optional<std::uint64_t> after,
              AdminResponder respond) {
    const json snapshot = Snapshot(watchers->source);
    watchers->last = snapshot;
    if (wait_seconds == 0 || !after || snapshot["fencing_token"].get<std::uint64_t>() != *after) {
        return respond(json_response(200, snapshot));
    }
    if (OverLimit(*watchers, request)) {
        return respond(TooMany(watchers->limits));
    }
    watchers->Subscribe(watchers);
    auto waiter = std::make_shared<Waiter>(watchers->io);
    waiter->after = *after;
    waiter->respond = std::move(respond);
    watchers->waiting.push_back(waiter);
    waiter->timer.expires_after(std::chrono::seconds(wait_seconds));
    waiter->timer.async_wait([watchers, waiter](boost::system::error_code ec) {
        if (ec) {
            return;  // answered by OnChange
        }
        watchers->waiting.remove(waiter);
        // No change within the wait: the current snapshot (same token); the client asks again.
        waiter->respond(json_response(200, watchers->last));
    });
}

void Handle(const std::shared_ptr<Watchers>& watchers, const AdminRequest& request,
            AdminResponder respond) {
    for (const auto& [key, value] : request.query) {
        (void)value;
        if (key != "watch" && key != "wait" && key != "after") {
            return respond(json_error(400, "bad_request",
                                      "query: unknown parameter \"" + key.substr(0, 64) +
                                          "\" (allowed: watch, wait, after)"));
        }
    }
    if (auto it = request.query.find("watch"); it != request.query.end()) {
        if (it->second != "1") {
            return respond(json_error(
                400, "bad_request", "watch: expected 1, got \"" + it->second.substr(0, 64) + "\""));
        }
        if (request.query.size() != 1) {
            return respond(json_error(400, "bad_request",
                                      "watch=1 takes no other parameter (wait and after are for "
                                      "the long-poll)"));
        }
        return Watch(watchers, request, std::move(respond));
    }
    std::uint64_t wait_seconds = 0;
    if (auto it = request.query.find("wait"); it != request.query.end()) {
        const auto parsed = ParseU64(it->second);
        if (!parsed || *parsed > watchers->limits.max_wait_seconds) {
            return respond(json_error(400, "bad_request",
                                      "wait: expected seconds in 0.." +
                                          std::to_string(watchers->limits.max_wait_seconds) +
                                          ", got \"" + it->second.substr(0, 64) + "\""));
        }
        wait_seconds = *parsed;
    }
    std::optional<std::uint64_t> after;
    if (auto it = request.query.find("after"); it != request.query.end()) {
        after = ParseU64(it->second);
        if (!after) {
            return respond(json_error(400, "bad_request",
                                      "after: expected a fencing token (an integer), got \"" +
                                          it->second.substr(0, 64) + "\""));
        }
    }
    LongPoll(watchers, request, wait_seconds, after, std::move(respond));
}

}  // namespace

void register_leadership_routes(AdminServer& server, AdminSource& source,
                                LeadershipRouteLimits limits) {
    auto watchers = std::make_shared<Watchers>(server.io(), source, limits);
    server.route_async("GET", "/leadership",
                       [watchers](const AdminRequest& request, AdminResponder respond) {
                           Handle(watchers, request, std::move(respond));
                       });
}

}  // namespace conclave::admin
