// SPDX-License-Identifier: Apache-2.0
#include "conclave/admin/hostile_input_metrics.hpp"

#include <array>
#include <memory>
#include <string>
#include <utility>

namespace conclave::admin {
namespace {

constexpr const char* kDroppedName = "conclave_core_messages_dropped_total";
constexpr const char* kDroppedHelp =
    "Messages the elector or metadata-log core dropped without acting on them (no correct "
    "member sends them), by core and reason.";
constexpr const char* kViolationsName = "conclave_metadata_protocol_violations_total";
constexpr const char* kViolationsHelp =
    "Metadata-log messages that contradict this node's log in a way no correct leader can "
    "(dropped, alarm logged), by kind.";

struct HostileCounters {
    Counter* elector_not_a_peer = nullptr;
    Counter* elector_term_out_of_range = nullptr;
    Counter* elector_term_space_exhausted = nullptr;
    std::array<Counter*, replication::kLogDropReasonCount> log_dropped{};
    std::array<Counter*, replication::kLogViolationKindCount> log_violations{};
    Counter* log_two_leader_alarms = nullptr;
};

void Mirror(Counter* counter, std::uint64_t total) {
    counter->set_total(static_cast<double>(total));
}

}  // namespace

void register_hostile_input_metrics(MetricsRegistry& r, HostileInputSources sources) {
    auto c = std::make_shared<HostileCounters>();
    const auto dropped = [&](const char* core, std::string_view reason) {
        return &r.counter(kDroppedName, kDroppedHelp,
                          {{"core", core}, {"reason", std::string(reason)}});
    };
    c->elector_not_a_peer = dropped("elector", "not_a_peer");
    c->elector_term_out_of_range = dropped("elector", "term_out_of_range");
    for (std::size_t i = 0; i < replication::kLogDropReasonCount; ++i) {
        c->log_dropped[i] =
            dropped("metadata", to_string(static_cast<replication::LogDropReason>(i)));
    }
    for (std::size_t i = 0; i < replication::kLogViolationKindCount; ++i) {
        c->log_violations[i] = &r.counter(
            kViolationsName, kViolationsHelp,
            {{"kind", std::string(to_string(static_cast<replication::LogViolationKind>(i)))}});
    }
    c->log_two_leader_alarms =
        &r.counter("conclave_metadata_two_leader_alarms_total",
                   "Metadata-log requests from a second leader of one term (must stay 0).");
    c->elector_term_space_exhausted =
        &r.counter("conclave_elector_term_space_exhausted_total",
                   "Elections not started because the term reached 2^63-1 (only a forged term "
                   "can get there).");
    r.on_collect([c, sources = std::move(sources)] {
        const elector::ElectorCounters& e = sources.elector();
        Mirror(c->elector_not_a_peer, e.dropped_not_a_peer);
        Mirror(c->elector_term_out_of_range, e.dropped_term_out_of_range);
        Mirror(c->elector_term_space_exhausted, e.term_space_exhausted);
        const replication::LogCounters* log = sources.log ? sources.log() : nullptr;
        if (log == nullptr) {
            return;
        }
        for (std::size_t i = 0; i < replication::kLogDropReasonCount; ++i) {
            Mirror(c->log_dropped[i], log->dropped_by_reason[i]);
        }
        for (std::size_t i = 0; i < replication::kLogViolationKindCount; ++i) {
            Mirror(c->log_violations[i], log->violations_by_kind[i]);
        }
        Mirror(c->log_two_leader_alarms, log->two_leader_alarms);
    });
}

}  // namespace conclave::admin
