// SPDX-License-Identifier: Apache-2.0
// conclavectl's commands that change the cluster: transfer, step-down, set-priority, put,
// members (and its changes), broadcast.
#include <iostream>
#include <thread>

#include "conclavectl.hpp"

namespace conclave::conclavectl {

namespace http = boost::beast::http;

int set_priority_command(const Options& options) {
    const std::string target = "/priority?node=" + options.args[0] + "&value=" + options.args[1];
    bool all = true;
    json out = json::array();
    for (const Endpoint& endpoint : options.endpoints) {
        json row = {{"endpoint", client::to_string(endpoint)}};
        try {
            const Reply reply = request(options, endpoint, http::verb::post, target);
            row["accepted"] = reply.status == 202;
            row["detail"] = detail(reply);
        } catch (const Failure& e) {
            row["accepted"] = false;
            row["detail"] = e.what();
        }
        all = all && row["accepted"].get<bool>();
        if (options.output != "json") {
            std::cout << client::to_string(endpoint) << ": " << row["detail"].get<std::string>()
                      << "\n";
        }
        out.push_back(std::move(row));
    }
    if (options.output == "json") {
        std::cout << out.dump(2) << std::endl;
    }
    std::cout.flush();
    return all ? kExitOk : kExitFailure;
}

int leader_change_command(const Options& options, const std::string& path, const std::string& what,
                          const std::string& expect_leader) {
    std::string leader_id;
    const auto leader = find_leader(options, &leader_id);
    if (!leader) {
        throw Failure(kExitFailure, "no node reports itself leader; nothing to " + what);
    }
    const Reply reply = request_following(options, *leader, http::verb::post, path, {});
    if (reply.status != 202) {
        fail(*leader, reply);
    }
    if (options.output != "json") {
        std::cout << leader_id << ": " << detail(reply) << std::endl;
    }
    const auto is_new_leader = [&](const json& s) {
        const std::string id = cell(s, "id");
        return is_leader(s) && (expect_leader.empty() ? id != leader_id : id == expect_leader);
    };
    // Wait until another node (or the requested one) leads, until the deadline.
    while (Clock::now() < options.deadline) {
        std::string now_id;
        try {
            // One poll waits at most a second for a node (a silent one must not take it all).
            const auto until = Clock::now() + std::chrono::seconds(1);
            if (find_leader(options, &now_id, is_new_leader, until)) {
                print_result(options, "leader is now " + now_id,
                             {{"from", leader_id}, {"to", now_id}, {"accepted", detail(reply)}});
                return kExitOk;
            }
        } catch (const Failure& e) {
            if (e.status != kExitUnreachable) {
                throw;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw Failure(kExitFailure,
                  "accepted, but " +
                      (expect_leader.empty() ? std::string("no other node") : expect_leader) +
                      " leads after " + client::format_duration(options.timeout));
}

namespace {

/// POSTs `body` to `path` on the leader (found by asking every node at once, so that a silent
/// node costs nothing), else on the first node that answers (a follower redirects to the
/// leader); the 200 reply, else a Failure.
Reply PostOnce(const Options& options, const std::string& path, const json& body) {
    std::vector<Endpoint> order = options.endpoints;
    if (const auto leader = find_leader(options)) {
        order.insert(order.begin(), *leader);
    }
    std::string last_error;
    for (const Endpoint& endpoint : order) {
        try {
            Endpoint answered;
            const Reply reply = request_following(options, endpoint, http::verb::post, path,
                                                  body.dump(), &answered);
            if (reply.status != 200) {
                fail(answered, reply);
            }
            return reply;
        } catch (const Failure& e) {
            if (e.status != kExitUnreachable) {
                throw;
            }
            last_error = e.what();
        }
    }
    throw Failure(kExitUnreachable, "no node reachable (last: " + last_error + ")");
}

/// A 503 that says the proposal was never appended: no leader yet, or a leader still syncing its
/// log. Sending the same request again cannot apply it twice.
bool NotAppended(const Failure& failure) {
    return failure.error == "no_leader" || failure.error == "not_active";
}

/// PostOnce, sent again while the cluster is electing or its new leader syncs (a 503 that appended
/// nothing), until the deadline; then the last answer's failure.
Reply PostAnywhere(const Options& options, const std::string& path, const json& body) {
    for (;;) {
        try {
            return PostOnce(options, path, body);
        } catch (const Failure& e) {
            const auto pause = std::chrono::milliseconds(50);
            if (!NotAppended(e) || Clock::now() + pause >= options.deadline) {
                throw;
            }
            std::this_thread::sleep_for(pause);
        }
    }
}

/// The argument as JSON if it parses, else as a string.
json JsonOrString(const std::string& text) {
    json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
        value = text;
    }
    return value;
}

int ChangeMembers(const Options& options) {
    const Reply reply =
        PostAnywhere(options, "/members", {{"op", options.args[0]}, {"id", options.args[1]}});
    json document = reply.document.is_object() ? reply.document : json::object();
    document["op"] = options.args[0];
    document["id"] = options.args[1];
    print_result(options,
                 options.args[0] + " " + options.args[1] + ": committed, configuration version " +
                     cell(reply.document, "version"),
                 document);
    return kExitOk;
}

}  // namespace

int put_command(const Options& options) {
    const std::string& key = options.args[0];
    const json value = JsonOrString(options.args[1]);
    const Reply reply = PostAnywhere(options, "/metadata", {{"key", key}, {"value", value}});
    json document = reply.document.is_object() ? reply.document : json::object();
    document["key"] = key;
    print_result(options, "committed at " + cell(reply.document, "lsn"), document);
    return kExitOk;
}

int broadcast_command(const Options& options) {
    const json payload = JsonOrString(options.args[1]);
    const Reply reply =
        PostOnce(options, "/broadcast", {{"topic", options.args[0]}, {"payload", payload}});
    std::string to;
    for (const json& id : reply.document.value("sent_to", json::array())) {
        to += (to.empty() ? "" : ", ") + (id.is_string() ? id.get<std::string>() : id.dump());
    }
    print_result(options,
                 "sent " + cell(reply.document, "id") + " to " + (to.empty() ? "no member" : to),
                 reply.document);
    return kExitOk;
}

int members_command(const Options& options) {
    if (options.args.size() == 2) {
        return ChangeMembers(options);
    }
    const Endpoint source = find_leader(options).value_or(options.endpoints.front());
    Endpoint answered;
    const Reply reply =
        request_following(options, source, http::verb::get, "/members", {}, &answered);
    if (reply.status != 200 || !reply.document.is_object()) {
        fail(answered, reply);
    }
    const json& view = reply.document;
    if (options.output == "json") {
        std::cout << view.dump(2) << std::endl;
        return kExitOk;
    }
    std::cout << "configuration version " << cell(view, "version")
              << (view.value("from_entry", false) ? "" : " (implicit: no change made yet)") << "\n";
    std::vector<std::vector<std::string>> cells = {
        {"ID", "ROLE", "PEER", "HTTP", "ACKNOWLEDGED", "LAG", "CONNECTED", "LIVE", "HEARD_MS"}};
    for (const json& m : view.value("members", json::array())) {
        const json c = m.value("catch_up", json::object());
        cells.push_back({cell(m, "id"), cell(m, "role"), cell(m, "peer"), cell(m, "http"),
                         cell(c, "acknowledged_len"), cell(c, "lag_entries"), cell(c, "connected"),
                         cell(m, "live"), cell(m, "last_heartbeat_ms")});
    }
    print_table(cells);
    return kExitOk;
}

}  // namespace conclave::conclavectl
