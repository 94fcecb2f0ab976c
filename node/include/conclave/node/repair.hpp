// SPDX-License-Identifier: Apache-2.0
// `conclaved --repair`: the offline repair of a corrupt metadata log. See "Corrupt log"
// in node/README.md (the operator's procedure) and replication/README.md (the design and its
// safety argument).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string_view>

#include "conclave/node/cluster_config.hpp"

namespace conclave::node {

/// Repairs <data_dir>/log of `config`'s node (the caller holds the data directory's lock): cuts
/// log.dat at its first bad record, rewrites log.meta and writes the repaired marker R (the
/// largest of log.meta's term, the elector state's term, the kept log's terms and `min_term`).
/// When the elector state is unreadable `min_term` is required (its lost votes may lie above
/// every term on disk); the file is copied to elector-state.json.corrupt and replaced
/// atomically by {term R, vote for this node}: the node never votes again in a term <= R.
/// Prints what it dropped and what happens next on `out`, errors on `err`. Returns the exit
/// status: 0 done, 1 failed (nothing needed changing is left half done: the marker is written
/// first), 2 R unknown (the elector state unreadable, or neither log.meta nor the elector state
/// readable, and no --min-term; nothing changed).
/// `after_step` (tests only, the crash-ordering test): called after each durable step, first
/// FileStorage::repair's (RepairOptions::after_step), then "elector" once the elector state is
/// written; a throw there leaves the files as a crash at that point would.
int run_repair(const ClusterConfig& config, std::optional<std::uint64_t> min_term,
               std::ostream& out, std::ostream& err,
               const std::function<void(std::string_view step)>& after_step = {});

}  // namespace conclave::node
