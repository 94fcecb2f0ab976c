// SPDX-License-Identifier: Apache-2.0
// Lease overlap and time without a valid lease, from synthetic /status answers (bounce/lease.hpp),
// and the parsing of the /status "lease" field.
#include <catch2/catch.hpp>
#include <vector>

#include "conclave/bounce/lease.hpp"
#include "conclave/bounce/poller.hpp"

using namespace conclave::bounce;

namespace {

constexpr std::size_t kLeaseNodes = 3;
constexpr NodeIndex kLeaseA = 0;
constexpr NodeIndex kLeaseB = 1;

/// A leader's answer to the poll sent at `at`, arriving `round_trip` ms later.
Observation lease(std::int64_t at, NodeIndex n, std::uint64_t term, std::int64_t remaining,
                  std::int64_t round_trip = 0) {
    return Observation{at, n, ObservedRole::Leader, term, n, remaining, at + round_trip};
}
/// A leader's answer without a valid lease (pending, over) or a follower's.
Observation no_lease(std::int64_t at, NodeIndex n, ObservedRole role, std::uint64_t term) {
    return Observation{at, n, role, term, std::nullopt, std::nullopt, at};
}
FaultEvent killed(std::int64_t at, NodeIndex n) {
    FaultEvent e;
    e.at_ms = at;
    e.kind = FaultKind::Kill;
    e.node = n;
    return e;
}

}  // namespace

TEST_CASE("a hand-over without overlap: the gap between the leases is the time without one") {
    const std::vector<Observation> obs{lease(0, kLeaseA, 1, 200), lease(50, kLeaseA, 1, 200),
                                       no_lease(300, kLeaseA, ObservedRole::Follower, 2),
                                       lease(400, kLeaseB, 2, 200), lease(450, kLeaseB, 2, 200)};
    const LeaseSummary s = lease_summary(kLeaseNodes, obs, {}, 1000);
    CHECK(s.reported);
    CHECK_FALSE(s.longest_overlap);
    REQUIRE(s.held[kLeaseA].size() == 1);
    CHECK(s.held[kLeaseA][0].begin_ms == 0);
    CHECK(s.held[kLeaseA][0].end_ms == 250);
    // From A's end (250) to B's first answer (400); B's lease then runs to 650,
    // the end 1000.
    CHECK(s.longest_without_ms == 350);
    CHECK(s.longest_without_from_ms == 650);
}

TEST_CASE("two valid leases at once are reported as an overlap") {
    const std::vector<Observation> obs{lease(100, kLeaseA, 1, 300), lease(300, kLeaseB, 2, 200)};
    const LeaseSummary s = lease_summary(kLeaseNodes, obs, {}, 1000);
    REQUIRE(s.longest_overlap);
    CHECK(s.longest_overlap->a == kLeaseA);
    CHECK(s.longest_overlap->b == kLeaseB);
    CHECK(s.longest_overlap->begin_ms == 300);
    CHECK(s.longest_overlap->length_ms == 100);
}

TEST_CASE("a lease ends at the answer that no longer shows it, or at the kill") {
    SECTION("a later answer without a valid lease") {
        const std::vector<Observation> obs{lease(100, kLeaseA, 1, 300),
                                           no_lease(200, kLeaseA, ObservedRole::Leader, 1),
                                           lease(250, kLeaseB, 2, 200)};
        const LeaseSummary s = lease_summary(kLeaseNodes, obs, {}, 1000);
        CHECK_FALSE(s.longest_overlap);
        CHECK(s.held[kLeaseA].at(0).end_ms == 200);
    }
    SECTION("a killed leader acts no more") {
        const std::vector<Observation> obs{lease(100, kLeaseA, 1, 300),
                                           lease(250, kLeaseB, 2, 200)};
        const LeaseSummary s = lease_summary(kLeaseNodes, obs, {killed(150, kLeaseA)}, 1000);
        CHECK_FALSE(s.longest_overlap);
        CHECK(s.held[kLeaseA].at(0).end_ms == 150);
    }
    SECTION("an unanswered poll says nothing") {
        const std::vector<Observation> obs{lease(100, kLeaseA, 1, 300),
                                           no_lease(200, kLeaseA, ObservedRole::Unreachable, 0),
                                           lease(250, kLeaseB, 2, 200)};
        const LeaseSummary s = lease_summary(kLeaseNodes, obs, {}, 1000);
        REQUIRE(s.longest_overlap);
        CHECK(s.longest_overlap->length_ms == 150);
    }
}

TEST_CASE("an overlap's or a gap's error is the round trips of the answers at its ends") {
    SECTION("an overlap") {
        const std::vector<Observation> obs{lease(0, kLeaseA, 1, 200, 3),
                                           lease(50, kLeaseA, 1, 200, 7),
                                           lease(240, kLeaseB, 2, 200, 2)};
        const LeaseSummary s = lease_summary(kLeaseNodes, obs, {}, 1000);
        REQUIRE(s.longest_overlap);
        CHECK(s.longest_overlap->length_ms == 10);
        CHECK(s.longest_overlap->error_ms == (7 + 1) + (2 + 1));
    }
    SECTION("the closest approach and the gap") {
        const std::vector<Observation> obs{lease(0, kLeaseA, 1, 200, 3),
                                           no_lease(150, kLeaseA, ObservedRole::Follower, 2),
                                           lease(400, kLeaseB, 2, 200, 5)};
        const LeaseSummary s = lease_summary(kLeaseNodes, obs, {killed(100, kLeaseA)}, 600);
        CHECK_FALSE(s.longest_overlap);
        REQUIRE(s.closest);
        CHECK(s.closest->a == kLeaseA);
        CHECK(s.closest->b == kLeaseB);
        CHECK(s.closest->length_ms == 300);
        CHECK(s.closest->error_ms == 0 + (5 + 1));  // the kill is exact
        CHECK(s.longest_without_ms == 300);
        CHECK(s.longest_without_error_ms == 6);
    }
}

TEST_CASE("a lease given up between two polls may have ended as early as the last valid answer") {
    // A hands over: it answers with a valid lease at 100, gives it up some time before its
    // answer at 150 shows none; B's lease shows at 130. The polls cannot tell whether A's lease
    // ended before 130: the overlap (20 ms) is within the error (50 ms back to A's valid answer,
    // + the round trips).
    const std::vector<Observation> obs{lease(100, kLeaseA, 1, 300, 2), lease(130, kLeaseB, 2, 200),
                                       no_lease(150, kLeaseA, ObservedRole::Follower, 2)};
    const LeaseSummary s = lease_summary(kLeaseNodes, obs, {}, 1000);
    REQUIRE(s.longest_overlap);
    CHECK(s.longest_overlap->length_ms == 20);
    CHECK(s.longest_overlap->error_ms == (0 + 1) + (50 + 0 + 1));
    CHECK(s.held[kLeaseA].at(0).end_error_ms == 51);
    SECTION("a lease that ran out before the answer keeps its own end and error") {
        const std::vector<Observation> late{lease(100, kLeaseA, 1, 30, 2),
                                            no_lease(150, kLeaseA, ObservedRole::Follower, 1)};
        const LeaseSummary t = lease_summary(kLeaseNodes, late, {}, 1000);
        REQUIRE(t.held[kLeaseA].size() == 1);
        CHECK(t.held[kLeaseA][0].end_ms == 130);
        CHECK(t.held[kLeaseA][0].end_error_ms == 3);
    }
}

TEST_CASE("a daemon without the lease field reports nothing") {
    const std::vector<Observation> obs{no_lease(0, kLeaseA, ObservedRole::Leader, 1)};
    const LeaseSummary s = lease_summary(kLeaseNodes, obs, {}, 1000);
    CHECK_FALSE(s.reported);
    CHECK(s.longest_without_ms == 0);
}

TEST_CASE("/status lease field: valid, not valid, absent, malformed") {
    const std::string head = R"({"role": "leader", "term": 3, "leader": "n1", "lease": )";
    CHECK(parse_status(head + R"({"valid": true, "remaining_ms": 212}})", kLeaseA, kLeaseNodes)
              .lease_remaining_ms == 212);
    CHECK_FALSE(parse_status(head + R"({"valid": false, "remaining_ms": 0}})", kLeaseA, kLeaseNodes)
                    .lease_remaining_ms);
    CHECK_FALSE(parse_status(head + "null}", kLeaseA, kLeaseNodes).lease_remaining_ms);
    CHECK_FALSE(parse_status(R"({"role": "follower", "term": 3})", kLeaseA, kLeaseNodes)
                    .lease_remaining_ms);
    CHECK_THROWS(parse_status(head + R"({"valid": true}})", kLeaseA, kLeaseNodes));
    CHECK_THROWS(
        parse_status(head + R"({"valid": true, "remaining_ms": -1}})", kLeaseA, kLeaseNodes));
    CHECK_THROWS(parse_status(head + R"({"valid": 1, "remaining_ms": 5}})", kLeaseA, kLeaseNodes));
    CHECK_THROWS(
        parse_status(head + R"({"valid": true, "remaining_ms": 1e30}})", kLeaseA, kLeaseNodes));
}

// ---- Self-reported beliefs (bench's lock-recipe lines) ----------------------------------------

namespace {

constexpr std::int64_t kBeliefEpochUs = 5'000'000;

Belief belief_at(const std::string& line) {
    const auto b = parse_belief_line(line, kBeliefEpochUs);
    REQUIRE(b);
    return *b;
}

}  // namespace

TEST_CASE("belief lines: timestamped states are parsed, anything else is refused or skipped") {
    const Belief lead = belief_at("5250000 lead lease 42 ttl 2 s");
    CHECK(lead.at_ms == 250);
    CHECK(lead.leads);
    CHECK_FALSE(belief_at("5300000 lost keepalive: the lease is gone").leads);
    CHECK_FALSE(belief_at("5000000 start etcd").leads);
    CHECK_FALSE(belief_at("5000001 follow watches n_0000000001").leads);
    // A line some library printed, or a blank one, is no belief.
    CHECK_FALSE(parse_belief_line("2026-01-01 ZOO_ERROR@handle_socket_error", kBeliefEpochUs));
    CHECK_FALSE(parse_belief_line("", kBeliefEpochUs));
    CHECK_FALSE(parse_belief_line("12abc lead", kBeliefEpochUs));
    // A timestamped line with a state the tool does not know is refused, not read as "follows".
    CHECK_THROWS_AS(parse_belief_line("5300000 leads", kBeliefEpochUs), std::runtime_error);
    CHECK_THROWS_AS(parse_belief_line("5300000 LEAD", kBeliefEpochUs), std::runtime_error);
}

TEST_CASE("beliefs: a paused leader believes until it notices, and overlaps its successor") {
    // A leads at 100; paused at 1000 (it prints nothing); B leads at 3100; A, resumed at 5000,
    // learns at 5300 that its lease is gone.
    const std::vector<Belief> a{{0, false}, {100, true}, {5300, false}};
    const std::vector<Belief> b{{0, false}, {3100, true}};
    const LeaseSummary s =
        interval_summary({belief_intervals(a, 8000), belief_intervals(b, 8000)}, 8000);
    REQUIRE(s.longest_overlap);
    CHECK(s.longest_overlap->length_ms == 2200);
    CHECK(s.longest_overlap->begin_ms == 3100);
    CHECK(s.longest_without_ms == 0);
}

TEST_CASE("beliefs: a leader that never says it lost believes until the end of the run") {
    // The successor leads at 3100; the old leader never printed its loss (the run ended first):
    // its belief reaches the end, so the overlap is 4900 ms, not 0 (what closing the interval at
    // its last line would give).
    const std::vector<Belief> a{{100, true}};
    const std::vector<Belief> b{{0, false}, {3100, true}};
    const LeaseSummary s =
        interval_summary({belief_intervals(a, 8000), belief_intervals(b, 8000)}, 8000);
    REQUIRE(s.longest_overlap);
    CHECK(s.longest_overlap->length_ms == 4900);
}

TEST_CASE("beliefs: a killed leader (the tool's event) and its successor do not overlap") {
    const std::vector<Belief> a{{100, true}, {1000, false}};  // SIGKILL at 1000
    const std::vector<Belief> b{{0, false}, {3100, true}};
    const LeaseSummary s =
        interval_summary({belief_intervals(a, 8000), belief_intervals(b, 8000)}, 8000);
    CHECK_FALSE(s.longest_overlap);
    REQUIRE(s.closest);
    CHECK(s.closest->length_ms == 2100);
    CHECK(s.longest_without_ms == 2100);
    CHECK(s.longest_without_from_ms == 1000);
}

TEST_CASE("beliefs: events out of order are refused") {
    CHECK_THROWS_AS(belief_intervals({{100, true}, {50, false}}, 1000), std::runtime_error);
}
