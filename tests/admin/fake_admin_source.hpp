// SPDX-License-Identifier: Apache-2.0
// A scripted AdminSource for admin-route tests: returns what the test put in it and records the
// commands it received.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "conclave/admin/admin_routes.hpp"
#include "conclave/admin/metrics.hpp"

namespace conclave::admin::testing {

class FakeAdminSource final : public AdminSource {
  public:
    StatusReport report;
    MetricsRegistry metrics;
    HealthReport health_report;
    CommandResult transfer_result;
    CommandResult step_down_result;
    std::vector<std::string> ids = {"n1", "n2", "n3"};

    std::vector<std::string> transfers;  // targets received
    int step_downs = 0;

    FakeAdminSource() {
        report.id = "n1";
        report.cluster = "demo";
        report.role = elector::Role::Leader;
        report.term = Term{7};
        report.leader = "n1";
        report.fencing_token = 7;
        report.lsn = Lsn{Term{7}, 42};
        report.peers = {{"n2", true, 12}, {"n3", false, std::nullopt}};
        report.last_transition_reason = elector::Reason::ElectionWon;
        report.last_transition_age_ms = 5310;
        metrics.counter("conclave_elections_started_total", "Elections started.").inc(3);
        metrics.histogram("conclave_election_duration_seconds", "Election duration.", {0.1, 1})
            .observe(0.2);
    }

    StatusReport status() override { return report; }
    std::string metrics_text() override { return metrics.render(); }
    HealthReport health() override { return health_report; }
    CommandResult transfer_leadership(const std::string& to) override {
        transfers.push_back(to);
        return transfer_result;
    }
    CommandResult step_down() override {
        step_downs += 1;
        return step_down_result;
    }
    std::vector<std::string> node_ids() override { return ids; }

    /// read_metadata's answer (unset: the default, no metadata log) and the queries received.
    std::optional<MetadataReadResult> read_result;
    std::vector<MetadataQuery> reads;
    void read_metadata(MetadataQuery query, MetadataReadCallback done) override {
        reads.push_back(query);
        if (!read_result) {
            return AdminSource::read_metadata(std::move(query), std::move(done));
        }
        done(*read_result);
    }
};

}  // namespace conclave::admin::testing
