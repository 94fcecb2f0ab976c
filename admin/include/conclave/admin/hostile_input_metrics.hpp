// SPDX-License-Identifier: Apache-2.0
// Counters of the input the cores drop or alarm on ("no input wedges or crashes a
// node"), for /metrics. The elector and metadata-log cores drop what no correct member could have
// sent and count it by reason (ElectorCounters, LogCounters); this mirrors those counts, at scrape
// time, into Prometheus families (all counters):
//
//   conclave_core_messages_dropped_total{core="elector|metadata",reason="..."}
//       elector: not_a_peer, term_out_of_range;
//       metadata: not_a_peer, term_out_of_range, invalid_batch, unknown_acked_lsn
//   conclave_metadata_protocol_violations_total{kind="..."}  (each one is an alarm)
//       sync_response_ahead, truncates_committed, contradicts_committed, one_lsn_two_entries,
//       commit_between_entries
//   conclave_metadata_two_leader_alarms_total
//   conclave_elector_term_space_exhausted_total
//
// What the frame decoder and the mesh refuse before a core sees it is counted by
// conclave_bad_frames_total{kind} and conclave_handshake_refusals_total{reason} (node.cpp).
// Single-threaded, like the registry.
#pragma once

#include <functional>

#include "conclave/admin/metrics.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/replication/log.hpp"

namespace conclave::admin {

struct HostileInputSources {
    /// The elector core's counters (required).
    std::function<const elector::ElectorCounters&()> elector;
    /// The metadata log core's counters; nullptr (or an empty function) when metadata is off.
    std::function<const replication::LogCounters*()> log;
};

/// Registers the families above in `registry` and a collector that mirrors the sources into them.
void register_hostile_input_metrics(MetricsRegistry& registry, HostileInputSources sources);

}  // namespace conclave::admin
