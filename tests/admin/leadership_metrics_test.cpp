// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "conclave/admin/leadership_metrics.hpp"
#include "conclave/admin/prometheus_text.hpp"

using namespace conclave;
using namespace conclave::admin;

namespace {

PrometheusExposition Render(MetricsRegistry& registry) {
    auto parsed = parse_prometheus_text(registry.render());
    REQUIRE(std::holds_alternative<PrometheusExposition>(parsed));
    return std::get<PrometheusExposition>(parsed);
}

elector::LeadershipSnapshot Snapshot(elector::Role role, std::uint64_t term,
                                     std::optional<NodeId> leader) {
    return elector::LeadershipSnapshot{
        role,      Term{term},  leader, leader ? term : 0, elector::Reason::Started,
        Millis{0}, std::nullopt};
}

}  // namespace

TEST_CASE("leadership metrics: counters mirrored, leaderless time and periods", "[metrics]") {
    MetricsRegistry registry;
    LeadershipMetrics metrics(registry);

    elector::ElectorCounters counters;
    counters.elections_started = 2;
    counters.prevotes_refused = 3;
    counters.votes_refused_by_reason[static_cast<std::size_t>(elector::Refusal::AlreadyVoted)] = 4;
    counters.votes_refused_by_reason[static_cast<std::size_t>(elector::Refusal::NotAVoter)] = 2;
    metrics.update_counters(counters);

    metrics.on_leadership(Snapshot(elector::Role::Follower, 1, std::nullopt), Millis{1000});
    metrics.refresh(Millis{1500});
    auto mid = Render(registry);
    CHECK(mid.value("conclave_leaderless_seconds_total") == Approx(0.5));
    CHECK(mid.value("conclave_role", {{"role", "follower"}}) == 1);
    CHECK(mid.value("conclave_role", {{"role", "stopped"}}) == 0);
    CHECK(mid.value("conclave_leader_known") == 0);

    metrics.on_leadership(Snapshot(elector::Role::Candidate, 2, std::nullopt), Millis{1800});
    metrics.on_leadership(Snapshot(elector::Role::Leader, 2, NodeId{0}), Millis{2250});
    metrics.refresh(Millis{9000});  // a leader is known: no more leaderless time
    auto led = Render(registry);
    CHECK(led.value("conclave_elections_started_total") == 2);
    CHECK(led.value("conclave_prevotes_total", {{"result", "refused"}}) == 3);
    CHECK(led.value("conclave_votes_refused_total", {{"reason", "already-voted"}}) == 4);
    CHECK(led.value("conclave_votes_refused_total", {{"reason", "stale-term"}}) == 0);
    CHECK(led.value("conclave_votes_refused_total", {{"reason", "not-a-voter"}}) == 2);
    CHECK(led.value("conclave_votes_refused_total", {{"reason", "stale-config"}}) == 0);
    CHECK(led.value("conclave_leaderless_seconds_total") == Approx(1.25));
    CHECK(led.value("conclave_leaderless_periods_seconds_count") == 1);
    CHECK(led.value("conclave_leaderless_periods_seconds_bucket", {{"le", "1"}}) == 0);
    CHECK(led.value("conclave_leaderless_periods_seconds_bucket", {{"le", "2.5"}}) == 1);
    CHECK(led.value("conclave_term") == 2);
    CHECK(led.value("conclave_fencing_token") == 2);
    CHECK(led.value("conclave_leader_known") == 1);
    CHECK(led.value("conclave_role", {{"role", "leader"}}) == 1);

    // Stopping without a leader is not a failover: no period is recorded.
    metrics.on_leadership(Snapshot(elector::Role::Follower, 3, std::nullopt), Millis{10000});
    metrics.on_leadership(Snapshot(elector::Role::Stopped, 3, std::nullopt), Millis{10500});
    metrics.refresh(Millis{20000});
    auto stopped = Render(registry);
    CHECK(stopped.value("conclave_leaderless_periods_seconds_count") == 1);
    CHECK(stopped.value("conclave_leaderless_seconds_total") == Approx(1.75));
}

TEST_CASE("leadership metrics: election duration by outcome", "[metrics]") {
    MetricsRegistry registry;
    LeadershipMetrics metrics(registry);
    const auto at = [](elector::Role role, std::uint64_t term, std::optional<NodeId> leader,
                       elector::Reason reason, std::int64_t now_ms) {
        elector::LeadershipSnapshot s{role,   Term{term},     leader,      leader ? term : 0,
                                      reason, Millis{now_ms}, std::nullopt};
        return std::pair{s, Millis{now_ms}};
    };
    const auto feed = [&](std::pair<elector::LeadershipSnapshot, Millis> p) {
        metrics.on_leadership(p.first, p.second);
    };

    feed(at(elector::Role::Follower, 0, std::nullopt, elector::Reason::Started, 0));
    // Term 1: timed out without a quorum after 300 ms.
    feed(at(elector::Role::Candidate, 1, std::nullopt, elector::Reason::ElectionStarted, 1000));
    feed(at(elector::Role::Follower, 1, std::nullopt, elector::Reason::QuorumNotAchieved, 1300));
    // Term 2: preempted by another node's leadership after 20 ms.
    feed(at(elector::Role::Candidate, 2, std::nullopt, elector::Reason::ElectionStarted, 2000));
    feed(at(elector::Role::Follower, 3, NodeId{1}, elector::Reason::ElectionPreempted, 2020));
    // Term 4: won after 40 ms.
    feed(at(elector::Role::Follower, 3, std::nullopt, elector::Reason::LeaderUnavailable, 3000));
    feed(at(elector::Role::Candidate, 4, std::nullopt, elector::Reason::ElectionStarted, 3100));
    feed(at(elector::Role::Leader, 4, NodeId{0}, elector::Reason::ElectionWon, 3140));
    // A candidacy interrupted by stop() is not an election result.
    feed(at(elector::Role::Follower, 5, std::nullopt, elector::Reason::LeaderPreempted, 4000));
    feed(at(elector::Role::Candidate, 6, std::nullopt, elector::Reason::ElectionStarted, 4100));
    feed(at(elector::Role::Stopped, 6, std::nullopt, elector::Reason::Stopped, 4200));

    auto r = Render(registry);
    const auto count = [&](const std::string& outcome) {
        return r.value("conclave_election_duration_seconds_count", {{"outcome", outcome}});
    };
    const auto sum = [&](const std::string& outcome) {
        return r.value("conclave_election_duration_seconds_sum", {{"outcome", outcome}});
    };
    CHECK(count("won") == 1);
    CHECK(sum("won") == Approx(0.04));
    CHECK(r.value("conclave_election_duration_seconds_bucket",
                  {{"outcome", "won"}, {"le", "0.025"}}) == 0);
    CHECK(r.value("conclave_election_duration_seconds_bucket",
                  {{"outcome", "won"}, {"le", "0.05"}}) == 1);
    CHECK(count("lost") == 1);
    CHECK(sum("lost") == Approx(0.02));
    CHECK(count("no-quorum") == 1);
    CHECK(sum("no-quorum") == Approx(0.3));
    // The leaderless periods are a different measure: the whole failover as seen here.
    CHECK(r.value("conclave_leaderless_periods_seconds_count") == 2);
}
