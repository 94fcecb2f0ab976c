// SPDX-License-Identifier: Apache-2.0
// conclavectl's command functions against canned admin answers (tests/support/fake_admin.hpp):
// the command line as a user types it, the printed table or JSON, the exit status.
#include <catch2/catch.hpp>
#include <iostream>
#include <sstream>

#include "conclavectl.hpp"
#include "support/fake_admin.hpp"

namespace {

using namespace conclave;
using nlohmann::json;
using test::Canned;
using test::FakeAdmin;

/// What one conclavectl run printed and returned.
struct Ran {
    int status = -1;
    std::string out;
    std::string err;
};

/// Runs conclavectl with `args` as main() does, capturing std::cout and std::cerr; with a
/// client that follows at most `max_redirects` redirects.
Ran Conclavectl(std::vector<std::string> args, int max_redirects = client::kMaxRedirects) {
    args.insert(args.begin(), "conclavectl");
    std::vector<char*> argv;
    for (std::string& a : args) {
        argv.push_back(a.data());
    }
    std::ostringstream out;
    std::ostringstream err;
    auto* old_out = std::cout.rdbuf(out.rdbuf());
    auto* old_err = std::cerr.rdbuf(err.rdbuf());
    Ran ran;
    conclavectl::Options options;
    try {
        bool help = false;
        bool version = false;
        options = conclavectl::parse_command_line(static_cast<int>(argv.size()), argv.data(), help,
                                                  version);
        options.client.max_redirects = max_redirects;
        ran.status = conclavectl::run(options);
    } catch (const conclavectl::Failure& e) {
        ran.status = conclavectl::report(e, options.token_note);
    }
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
    ran.out = out.str();
    ran.err = err.str();
    return ran;
}

Canned Answer(unsigned status, const json& body) {
    Canned c;
    c.status = status;
    c.body = body.dump();
    return c;
}

json NodeStatus(const std::string& id, const std::string& role, const std::string& leader) {
    return {{"id", id},
            {"role", role},
            {"priority", 1},
            {"term", 4},
            {"leader", leader},
            {"fencing_token", 9},
            {"lease", {{"valid", role == "leader"}, {"remaining_ms", 800}}},
            {"commit_lsn", {{"term", 4}, {"counter", 12}}},
            {"storage", {{"state", "ok"}}},
            {"peers", json::array({{{"id", id == "n1" ? "n2" : "n1"}, {"last_contact_ms", 7}}})}};
}

/// Two nodes, n1 the leader, both healthy.
struct TwoNodes {
    FakeAdmin n1;
    FakeAdmin n2;
    TwoNodes() {
        n1.on("GET /status", Answer(200, NodeStatus("n1", "leader", "n1")));
        n2.on("GET /status", Answer(200, NodeStatus("n2", "follower", "n1")));
        n1.on("GET /healthz", Answer(200, {{"ok", true}}));
        n2.on("GET /healthz", Answer(200, {{"ok", true}}));
    }
    std::string endpoints() const {
        return client::to_string(n1.endpoint()) + "," + client::to_string(n2.endpoint());
    }
};

}  // namespace

TEST_CASE("conclavectl status: the table, exit 0 when every node is healthy", "[conclavectl]") {
    TwoNodes c;
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "status"});
    CHECK(ran.status == conclavectl::kExitOk);
    std::istringstream lines(ran.out);
    std::string header, first, second;
    std::getline(lines, header);
    std::getline(lines, first);
    std::getline(lines, second);
    CHECK(header.starts_with("ID  ENDPOINT"));
    CHECK_THAT(header, Catch::EndsWith("HEALTH  STORAGE  LAST-CONTACT-MS"));
    CHECK_THAT(first,
               Catch::Matches("n1  127\\.0\\.0\\.1:[0-9]+ +leader    1 +4 +n1 +9 +800 +4\\.12 "
                              " +ok +ok +7"));
    CHECK_THAT(second,
               Catch::Matches("n2  127\\.0\\.0\\.1:[0-9]+ +follower  1 +4 +n1 +9 +- +4\\.12 "
                              " +ok +ok +7"));
    CHECK(ran.err.empty());
}

TEST_CASE("conclavectl status: an unhealthy node is exit 4, -o json has every field",
          "[conclavectl]") {
    TwoNodes c;
    c.n2.on("GET /healthz", Answer(503, {{"error", "storage_failed"}, {"detail", "disk full"}}));
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "-o", "json", "status"});
    CHECK(ran.status == conclavectl::kExitUnreachable);
    const json rows = json::parse(ran.out);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0]["health"] == "ok");
    CHECK(rows[1]["health"] == "unhealthy: storage_failed: disk full");
    CHECK(rows[1]["commit_lsn"] == json({{"term", 4}, {"counter", 12}}));
    CHECK(rows[1]["last_contact_ms"] == 7);
}

TEST_CASE("conclavectl status: 401 is exit 3 with one line naming the token", "[conclavectl]") {
    TwoNodes c;
    c.n1.on("GET /status", Answer(401, {{"error", "unauthorized"}}));
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "status"});
    CHECK(ran.status == conclavectl::kExitAuth);
    CHECK_THAT(ran.err, Catch::Contains("HTTP 401: unauthorized (check --token-file)"));
}

TEST_CASE("conclavectl watch: one line per change, duplicates skipped, --count", "[conclavectl]") {
    TwoNodes c;
    Canned stream;
    stream.stream = true;
    stream.end_stream = false;
    const json a = {{"id", "n1"}, {"role", "leader"},   {"leader", "n1"},
                    {"term", 4},  {"fencing_token", 9}, {"reason", "elected"}};
    json b = a;
    b["leader"] = "n2";
    b["role"] = "follower";
    b["term"] = 5;
    b["reason"] = "transfer";
    stream.lines = {a.dump(), "", a.dump(), "not json", b.dump()};
    c.n1.on("GET /leadership?watch=1", stream);
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "watch", "--count", "2"});
    CHECK(ran.status == conclavectl::kExitOk);
    CHECK_THAT(ran.out,
               Catch::Matches("[0-9T:.-]+Z leader=n1 token=9 term=4 reason=elected \\(seen "
                              "by n1: leader\\)\n[0-9T:.-]+Z leader=n2 token=9 term=5 "
                              "reason=transfer \\(seen by n1: follower\\)\n"));
}

TEST_CASE("conclavectl watch: a node that refuses ends the command", "[conclavectl]") {
    TwoNodes c;
    c.n1.on("GET /leadership?watch=1", Answer(403, {{"error", "forbidden"}}));
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "watch"});
    CHECK(ran.status == conclavectl::kExitAuth);
}

TEST_CASE("conclavectl transfer: asks the leader, waits until the target leads", "[conclavectl]") {
    TwoNodes c;
    auto moved = std::make_shared<std::atomic<bool>>(false);
    c.n1.on("POST /transfer-leadership?to=n2", [moved](const test::Seen&) {
        *moved = true;
        return Answer(202, {{"detail", "transfer to n2 started"}});
    });
    c.n2.on("GET /status", [moved](const test::Seen&) {
        return Answer(200, NodeStatus("n2", *moved ? "leader" : "follower", *moved ? "n2" : "n1"));
    });
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "transfer", "--to", "n2"});
    CHECK(ran.status == conclavectl::kExitOk);
    CHECK(ran.out == "n1: transfer to n2 started\nleader is now n2\n");
}

TEST_CASE("conclavectl step-down: no new leader before the deadline is exit 1", "[conclavectl]") {
    TwoNodes c;
    c.n1.on("POST /step-down", Answer(202, {{"detail", "stepping down"}}));
    const Ran ran = Conclavectl(
        {"--endpoints", c.endpoints(), "--timeout", "300ms", "-o", "json", "step-down"});
    CHECK(ran.status == conclavectl::kExitFailure);
    CHECK(ran.out.empty());
    CHECK_THAT(ran.err, Catch::Contains("accepted, but no other node leads after 300ms"));
}

TEST_CASE("conclavectl set-priority: every node asked, exit 1 unless all accepted",
          "[conclavectl]") {
    TwoNodes c;
    c.n1.on("POST /priority?node=n2&value=0", Answer(202, {{"detail", "recorded"}}));
    c.n2.on("POST /priority?node=n2&value=0", Answer(400, {{"error", "bad_value"}}));
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "set-priority", "n2", "0"});
    CHECK(ran.status == conclavectl::kExitFailure);
    CHECK(ran.out == client::to_string(c.n1.endpoint()) + ": recorded\n" +
                         client::to_string(c.n2.endpoint()) + ": bad_value\n");
}

namespace {

/// put through a follower that redirects to a leader outside --endpoints.
void CheckPutFollowsRedirect(int max_redirects) {
    TwoNodes c;
    FakeAdmin leader;  // not in --endpoints: only the redirect leads there
    c.n1.on("GET /status", Answer(200, NodeStatus("n1", "follower", "n3")));
    const std::string location = "http://" + client::to_string(leader.endpoint()) + "/metadata";
    Canned redirect = Answer(307, {{"error", "not_leader"}});
    redirect.headers = {{"Location", location}};
    c.n1.on("POST /metadata", redirect);
    leader.on("POST /metadata", Answer(200, {{"lsn", {{"term", 4}, {"counter", 13}}}}));
    const Ran ran =
        Conclavectl({"--endpoints", c.endpoints(), "put", "color", "\"blue\""}, max_redirects);
    CHECK(ran.status == conclavectl::kExitOk);
    CHECK(ran.out == "committed at 4.13\n");
    REQUIRE(leader.count("POST", "/metadata") == 1);
    CHECK(json::parse(leader.seen().at(0).body) == json({{"key", "color"}, {"value", "blue"}}));
}

}  // namespace

TEST_CASE("conclavectl put: no leader known, the follower's redirect to the leader is followed",
          "[conclavectl]") {
    CheckPutFollowsRedirect(client::kMaxRedirects);
}

// Canary (CTest tools_conclavectl_redirect_canary, expected to fail): a client that ignores the
// redirect must fail the test above.
TEST_CASE("canary: a client that follows no redirect fails the put test", "[.canary]") {
    CheckPutFollowsRedirect(0);
}

TEST_CASE("conclavectl put: a 503 that appended nothing is sent again", "[conclavectl]") {
    TwoNodes c;
    auto tries = std::make_shared<std::atomic<int>>(0);
    c.n1.on("POST /metadata", [tries](const test::Seen&) {
        return ++*tries == 1 ? Answer(503, {{"error", "no_leader"}})
                             : Answer(200, {{"lsn", {{"term", 4}, {"counter", 14}}}});
    });
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "-o", "json", "put", "n", "7"});
    CHECK(ran.status == conclavectl::kExitOk);
    CHECK(json::parse(ran.out) == json({{"key", "n"}, {"lsn", {{"term", 4}, {"counter", 14}}}}));
    CHECK(*tries == 2);
}

TEST_CASE("conclavectl members: the leader's table; a change prints the version", "[conclavectl]") {
    TwoNodes c;
    const json view = {
        {"version", 3},
        {"from_entry", true},
        {"members",
         {{{"id", "n1"},
           {"role", "voter"},
           {"peer", "127.0.0.1:1"},
           {"http", "127.0.0.1:2"},
           {"live", true},
           {"last_heartbeat_ms", 5}},
          {{"id", "n2"},
           {"role", "learner"},
           {"peer", "127.0.0.1:3"},
           {"http", "127.0.0.1:4"},
           {"catch_up", {{"acknowledged_len", 10}, {"lag_entries", 2}, {"connected", true}}},
           {"live", false},
           {"last_heartbeat_ms", nullptr}}}}};
    c.n1.on("GET /members", Answer(200, view));
    const Ran table = Conclavectl({"--endpoints", c.endpoints(), "members"});
    CHECK(table.status == conclavectl::kExitOk);
    CHECK(table.out ==
          "configuration version 3\n"
          "ID  ROLE     PEER         HTTP         ACKNOWLEDGED  LAG  CONNECTED  LIVE   HEARD_MS\n"
          "n1  voter    127.0.0.1:1  127.0.0.1:2  -             -    -          true   5\n"
          "n2  learner  127.0.0.1:3  127.0.0.1:4  10            2    true       false  -\n");
    c.n1.on("POST /members", Answer(200, {{"version", 4}}));
    const Ran change = Conclavectl({"--endpoints", c.endpoints(), "members", "promote", "n2"});
    CHECK(change.status == conclavectl::kExitOk);
    CHECK(change.out == "promote n2: committed, configuration version 4\n");
    CHECK(json::parse(c.n1.seen().back().body) == json({{"op", "promote"}, {"id", "n2"}}));
}

TEST_CASE("conclavectl broadcast: the id and the members it went to", "[conclavectl]") {
    TwoNodes c;
    c.n1.on("POST /broadcast", Answer(200, {{"id", "b-1"}, {"sent_to", {"n1", "n2"}}}));
    const Ran ran = Conclavectl({"--endpoints", c.endpoints(), "broadcast", "deploy", "{\"v\":2}"});
    CHECK(ran.status == conclavectl::kExitOk);
    CHECK(ran.out == "sent b-1 to n1, n2\n");
    CHECK(json::parse(c.n1.seen().back().body) ==
          json({{"topic", "deploy"}, {"payload", {{"v", 2}}}}));
}

TEST_CASE("conclavectl get: every page of entries; get KEY; an absent key is exit 1",
          "[conclavectl]") {
    TwoNodes c;
    const json lsn3 = {{"term", 1}, {"counter", 3}};
    c.n1.on("GET /metadata",
            Answer(200, {{"entries",
                          {{{"lsn", {{"term", 1}, {"counter", 1}}}, {"key", "a"}, {"value", 1}}}},
                         {"next_from", "1.1"},
                         {"commit_lsn", lsn3}}));
    c.n1.on("GET /metadata?from=1.1",
            Answer(200, {{"entries", {{{"lsn", lsn3}, {"key", "b"}, {"value", {{"x", true}}}}}},
                         {"next_from", "1.3"},
                         {"commit_lsn", lsn3}}));
    const Ran all = Conclavectl({"--endpoints", c.endpoints(), "get"});
    CHECK(all.status == conclavectl::kExitOk);
    CHECK(all.out == "1.1 a 1\n1.3 b {\"x\":true}\n");

    c.n1.on("GET /metadata/dir/a%20b?consistency=linearizable",
            Answer(200, {{"value", "v"}, {"lsn", lsn3}, {"commit_lsn", lsn3}}));
    const Ran key = Conclavectl({"--endpoints", c.endpoints(), "get", "dir/a b"});
    CHECK(key.status == conclavectl::kExitOk);
    CHECK(key.out == "dir/a b = \"v\" (written at 1.3, commit 1.3)\n");

    c.n2.on("GET /metadata/gone?consistency=serializable",
            Answer(404, {{"error", "not_found"}, {"commit_lsn", lsn3}}));
    const Ran gone = Conclavectl({"--endpoints", client::to_string(c.n2.endpoint()), "get", "gone",
                                  "--consistency", "serializable"});
    CHECK(gone.status == conclavectl::kExitFailure);
    CHECK_THAT(gone.err, Catch::Contains("gone: no such key (commit 1.3)"));
}

TEST_CASE("conclavectl: a bad command line is exit 2 with the --help hint", "[conclavectl]") {
    const Ran ran = Conclavectl({"--endpoints", "127.0.0.1:1", "--timeout", "soon", "status"});
    CHECK(ran.status == conclavectl::kExitUsage);
    CHECK_THAT(ran.err, Catch::Contains("--timeout: expected a duration"));
    CHECK_THAT(ran.err, Catch::EndsWith("Try 'conclavectl --help' for more information.\n"));
    CHECK(conclavectl::parse_duration("1m") == std::chrono::milliseconds(60'000));
    CHECK_FALSE(conclavectl::parse_duration("0s").has_value());
}
