// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "conclave/admin/status.hpp"

using namespace conclave;
using namespace conclave::admin;
using nlohmann::json;

TEST_CASE("/status JSON has exactly the fields of interfaces.md", "[status]") {
    StatusReport s;
    s.id = "n1";
    s.cluster = "demo";
    s.role = elector::Role::Leader;
    s.term = Term{7};
    s.leader = "n1";
    s.fencing_token = 7;
    s.lsn = Lsn{Term{7}, 42};
    s.peers = {{"n2", true, 12, 1, true}, {"n3", false, std::nullopt}};
    s.liveness_window_ms = 3000;
    s.last_transition_reason = elector::Reason::ElectionWon;
    s.last_transition_age_ms = 5310;
    s.incarnation = "00112233445566778899aabbccddeeff";

    const json expected = json::parse(R"({
      "id": "n1", "cluster": "demo", "role": "leader", "term": 7, "leader": "n1",
      "fencing_token": 7, "lsn": {"term": 7, "counter": 42}, "priority": 1,
      "peers": [{"id": "n2", "up": true, "last_contact_ms": 12, "last_heartbeat_ms": 12,
                 "live": true, "priority": 1},
                {"id": "n3", "up": false, "last_contact_ms": null, "last_heartbeat_ms": null,
                 "live": false, "priority": 1}],
      "liveness": {"window_ms": 3000},
      "last_transition": {"reason": "ELECTION_WON", "age_ms": 5310},
      "storage": {"state": "ok"},
      "identity": {"incarnation": "00112233445566778899aabbccddeeff"},
      "lease": null
    })");
    CHECK(status_to_json(s) == expected);

    SECTION("a leader's lease: valid with the milliseconds left, or not valid") {
        s.lease = LeaseStatus{true, 268};
        CHECK(status_to_json(s)["lease"] == json{{"valid", true}, {"remaining_ms", 268}});
        s.lease = LeaseStatus{};
        CHECK(status_to_json(s)["lease"] == json{{"valid", false}, {"remaining_ms", 0}});
    }

    SECTION("no leader is null; the metadata log adds two fields") {
        s.role = elector::Role::Follower;
        s.leader.reset();
        s.log = LogStatus{"passive", Lsn{Term{7}, 40}, {"NOSPACE"}, std::nullopt, std::nullopt};
        const json j = status_to_json(s);
        CHECK(j["role"] == "follower");
        CHECK(j["leader"].is_null());
        CHECK(j["leader_status"] == "passive");
        CHECK(j["commit_lsn"] == json{{"term", 7}, {"counter", 40}});
        CHECK(j["alarms"] == json::array({"NOSPACE"}));
        CHECK(j["repaired"] == false);
        CHECK_FALSE(j.contains("repaired_term"));
        // conclaved --repair: the marker's term while the node is non-voting.
        s.log->repaired = Term{6};
        const json r = status_to_json(s);
        CHECK(r["repaired"] == true);
        CHECK(r["repaired_term"] == 6);
    }
    SECTION("without a mesh (a store backend) the window is null, with the reason") {
        s.peers.clear();
        s.liveness_window_ms.reset();
        s.liveness_detail = "the etcd backend's nodes share no mesh";
        CHECK(status_to_json(s)["liveness"] ==
              json{{"window_ms", nullptr}, {"detail", "the etcd backend's nodes share no mesh"}});
    }
    SECTION("membership: version, from_entry and this node's role") {
        CHECK_FALSE(status_to_json(s).contains("membership"));
        for (const char* role : {"voter", "learner", "removed"}) {
            s.membership = MembershipState{4, true, role};
            CHECK(status_to_json(s)["membership"] ==
                  json{{"version", 4}, {"from_entry", true}, {"role", role}});
        }
    }
    SECTION("a node its peers refuse as state_lost says why") {
        s.refused = "node 'n2' refuses this node: its data directory was lost";
        CHECK(status_to_json(s)["identity"] ==
              json{{"incarnation", "00112233445566778899aabbccddeeff"},
                   {"refused", "node 'n2' refuses this node: its data directory was lost"}});
    }
    SECTION("a new node in quarantine says so") {
        s.quarantined = true;
        CHECK(status_to_json(s)["identity"]["quarantined"] == true);
    }
    SECTION("a storage failure says what and since when") {
        s.storage =
            StorageStatus{false, "write log.dat: No space left on device", "2026-11-23T13:05:00Z"};
        CHECK(status_to_json(s)["storage"] ==
              json{{"state", "failed"},
                   {"reason", "write log.dat: No space left on device"},
                   {"since", "2026-11-23T13:05:00Z"}});
    }
    SECTION("every role name") {
        for (auto [role, name] : {std::pair{elector::Role::Stopped, "stopped"},
                                  std::pair{elector::Role::Candidate, "candidate"}}) {
            s.role = role;
            CHECK(status_to_json(s)["role"] == name);
        }
    }
}

TEST_CASE("lease_status: valid strictly before the deadline, remaining rounded down", "[status]") {
    using std::chrono::microseconds;
    using std::chrono::milliseconds;
    const std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
    const LeaseStatus pending = lease_status(std::nullopt, now);
    CHECK_FALSE(pending.valid);
    CHECK(pending.remaining_ms == 0);
    const LeaseStatus held = lease_status(now + microseconds(268'900), now);
    CHECK(held.valid);
    CHECK(held.remaining_ms == 268);
    CHECK_FALSE(lease_status(now, now).valid);
    CHECK_FALSE(lease_status(now - milliseconds(5), now).valid);
    CHECK(lease_status(now - milliseconds(5), now).remaining_ms == 0);
}
