#include <catch2/catch.hpp>

#include "conclave/node/leadership_metrics.hpp"
#include "conclave/node/prometheus_text.hpp"

using namespace conclave;
using namespace conclave::node;

namespace {

PrometheusExposition Render(MetricsRegistry& registry) {
    auto parsed = parse_prometheus_text(registry.render());
    REQUIRE(std::holds_alternative<PrometheusExposition>(parsed));
    return std::get<PrometheusExposition>(parsed);
}

LeadershipSnapshot Snapshot(Role role, std::uint64_t term, std::optional<NodeId> leader) {
    return LeadershipSnapshot{role,     Term{term}, leader, leader ? term : 0, Reason::Started,
                              Millis{0}};
}

}  // namespace

TEST_CASE("leadership metrics: counters mirrored, leaderless time and periods", "[metrics]") {
    MetricsRegistry registry;
    LeadershipMetrics metrics(registry);

    ElectorCounters counters;
    counters.elections_started = 2;
    counters.prevotes_refused = 3;
    counters.votes_refused_by_reason[static_cast<std::size_t>(Refusal::AlreadyVoted)] = 4;
    metrics.update_counters(counters);

    metrics.on_leadership(Snapshot(Role::Follower, 1, std::nullopt), Millis{1000});
    metrics.refresh(Millis{1500});
    auto mid = Render(registry);
    CHECK(mid.value("conclave_leaderless_seconds_total") == Approx(0.5));
    CHECK(mid.value("conclave_role", {{"role", "follower"}}) == 1);
    CHECK(mid.value("conclave_role", {{"role", "stopped"}}) == 0);
    CHECK(mid.value("conclave_leader_known") == 0);

    metrics.on_leadership(Snapshot(Role::Candidate, 2, std::nullopt), Millis{1800});
    metrics.on_leadership(Snapshot(Role::Leader, 2, NodeId{0}), Millis{2250});
    metrics.refresh(Millis{9000});  // a leader is known: no more leaderless time
    auto led = Render(registry);
    CHECK(led.value("conclave_elections_started_total") == 2);
    CHECK(led.value("conclave_prevotes_total", {{"result", "refused"}}) == 3);
    CHECK(led.value("conclave_votes_refused_total", {{"reason", "already-voted"}}) == 4);
    CHECK(led.value("conclave_votes_refused_total", {{"reason", "stale-term"}}) == 0);
    CHECK(led.value("conclave_leaderless_seconds_total") == Approx(1.25));
    CHECK(led.value("conclave_leaderless_periods_seconds_count") == 1);
    CHECK(led.value("conclave_leaderless_periods_seconds_bucket", {{"le", "1"}}) == 0);
    CHECK(led.value("conclave_leaderless_periods_seconds_bucket", {{"le", "2.5"}}) == 1);
    CHECK(led.value("conclave_term") == 2);
    CHECK(led.value("conclave_fencing_token") == 2);
    CHECK(led.value("conclave_leader_known") == 1);
    CHECK(led.value("conclave_role", {{"role", "leader"}}) == 1);

    // Stopping without a leader is not a failover: no period is recorded.
    metrics.on_leadership(Snapshot(Role::Follower, 3, std::nullopt), Millis{10000});
    metrics.on_leadership(Snapshot(Role::Stopped, 3, std::nullopt), Millis{10500});
    metrics.refresh(Millis{20000});
    auto stopped = Render(registry);
    CHECK(stopped.value("conclave_leaderless_periods_seconds_count") == 1);
    CHECK(stopped.value("conclave_leaderless_seconds_total") == Approx(1.75));
}
