// SPDX-License-Identifier: Apache-2.0
// The cores' drop and alarm counters reach /metrics, by reason.
#include <catch2/catch.hpp>

#include "conclave/admin/hostile_input_metrics.hpp"
#include "conclave/admin/prometheus_text.hpp"

using namespace conclave;
using namespace conclave::admin;

namespace {

PrometheusExposition RenderHostile(MetricsRegistry& registry) {
    auto parsed = parse_prometheus_text(registry.render());
    REQUIRE(std::holds_alternative<PrometheusExposition>(parsed));
    return std::get<PrometheusExposition>(parsed);
}

}  // namespace

TEST_CASE("hostile-input metrics mirror the cores' drop and violation counters", "[metrics]") {
    MetricsRegistry registry;
    elector::ElectorCounters elector;
    replication::LogCounters log;
    bool metadata_on = false;
    register_hostile_input_metrics(registry,
                                   {[&]() -> const elector::ElectorCounters& { return elector; },
                                    [&]() { return metadata_on ? &log : nullptr; }});

    auto zero = RenderHostile(registry);
    CHECK(zero.value("conclave_core_messages_dropped_total",
                     {{"core", "elector"}, {"reason", "term_out_of_range"}}) == 0);
    CHECK(zero.value("conclave_metadata_protocol_violations_total",
                     {{"kind", "contradicts_committed"}}) == 0);

    elector.dropped_not_a_peer = 2;
    elector.dropped_term_out_of_range = 5;
    elector.term_space_exhausted = 1;
    log.dropped_by_reason[static_cast<std::size_t>(replication::LogDropReason::UnknownAckedLsn)] =
        3;
    log.violations_by_kind[static_cast<std::size_t>(
        replication::LogViolationKind::ContradictsCommitted)] = 4;
    log.two_leader_alarms = 6;
    auto off = RenderHostile(registry);
    CHECK(off.value("conclave_core_messages_dropped_total",
                    {{"core", "elector"}, {"reason", "not_a_peer"}}) == 2);
    CHECK(off.value("conclave_core_messages_dropped_total",
                    {{"core", "elector"}, {"reason", "term_out_of_range"}}) == 5);
    CHECK(off.value("conclave_elector_term_space_exhausted_total") == 1);
    // Metadata off: its series stay at 0.
    CHECK(off.value("conclave_metadata_two_leader_alarms_total") == 0);

    metadata_on = true;
    auto on = RenderHostile(registry);
    CHECK(on.value("conclave_core_messages_dropped_total",
                   {{"core", "metadata"}, {"reason", "unknown_acked_lsn"}}) == 3);
    CHECK(on.value("conclave_core_messages_dropped_total",
                   {{"core", "metadata"}, {"reason", "invalid_batch"}}) == 0);
    CHECK(on.value("conclave_metadata_protocol_violations_total",
                   {{"kind", "contradicts_committed"}}) == 4);
    CHECK(on.value("conclave_metadata_protocol_violations_total",
                   {{"kind", "one_lsn_two_entries"}}) == 0);
    CHECK(on.value("conclave_metadata_two_leader_alarms_total") == 6);
    // Every family is a counter with a _total name (Prometheus conventions).
    const std::string text = registry.render();
    CHECK(text.find("# TYPE conclave_core_messages_dropped_total counter") != std::string::npos);
    CHECK(text.find("# TYPE conclave_metadata_protocol_violations_total counter") !=
          std::string::npos);
}
