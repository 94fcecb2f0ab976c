// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/repair.hpp"

#include <exception>
#include <filesystem>
#include <ostream>
#include <system_error>

#include "conclave/drivers/state_file.hpp"
#include "conclave/node/cli.hpp"
#include "conclave/node/identity.hpp"
#include "conclave/replication/storage.hpp"

namespace conclave::node {
namespace {

struct ElectorRead {
    std::optional<elector::DurableState> state;     // nullopt: missing (or unreadable: see error)
    std::optional<drivers::NodeIdentity> identity;  // format 2 files only
    std::optional<std::string> error;               // set: the state file is unreadable
};

ElectorRead read_elector_state(const ClusterConfig& config) {
    try {
        auto file = drivers::load_state_file(config.data_dir, vote_record_cluster_size(config));
        if (!file) {
            return ElectorRead{};
        }
        return ElectorRead{file->state, file->identity, std::nullopt};
    } catch (const drivers::StateFileError& e) {
        return ElectorRead{std::nullopt, std::nullopt, std::string(e.what())};
    }
}

// The identity written with the repaired vote record: the node's own, kept when it could be read;
// else a new incarnation: the operator's --min-term bounds its lost votes, and its peers take the
// new incarnation from a repaired node (identity.hpp).
drivers::NodeIdentity repaired_identity(const ClusterConfig& config, const ElectorRead& read) {
    if (read.identity) {
        return *read.identity;
    }
    return drivers::NodeIdentity{config.cluster, config.self_entry().id,
                                 drivers::new_incarnation()};
}

// What --repair did to the log, for the operator.
void print_log_repair(const replication::RepairReport& r, const std::filesystem::path& log_dir,
                      std::ostream& out) {
    using replication::FileStorage;
    const std::filesystem::path log_file = log_dir / FileStorage::kLogFileName;
    if (r.snapshot_dropped) {
        out << "conclaved: --repair: " << (log_dir / FileStorage::kSnapshotFileName).string()
            << " was damaged: it is kept as log.snap.corrupt and all of " << log_file.string()
            << " (" << r.file_bytes << " bytes) was dropped\n";
    } else if (r.bad_magic) {
        out << "conclaved: --repair: " << log_file.string()
            << " is not a Conclave log (bad magic): all " << r.file_bytes
            << " bytes were dropped\n";
    } else if (r.problem != replication::TailProblem::None) {
        out << "conclaved: --repair: " << log_file.string() << ": "
            << replication::to_string(r.problem) << " record at offset " << r.problem_offset
            << "; kept " << r.kept_records << " records (" << r.kept_bytes
            << " bytes), dropped bytes " << r.kept_bytes << ".." << r.file_bytes << " ("
            << r.dropped_bytes() << " bytes, " << r.dropped_valid
            << " of them intact-looking records, dropped too: they may depend on what was lost)\n";
    } else {
        out << "conclaved: --repair: " << log_file.string() << " is intact (" << r.kept_records
            << " records); the node is marked repaired anyway (e.g. a log restored from a "
               "backup may lack acknowledged entries)\n";
    }
    if (!r.saved.empty()) {
        out << "conclaved: --repair: the dropped bytes are kept in " << r.saved.string() << "\n";
    }
    if (!r.meta_readable) {
        out << "conclaved: --repair: log.meta was missing or damaged; rewritten\n";
    }
    out << "conclaved: --repair: last entry kept " << to_string(r.last_kept) << ", commit point "
        << to_string(r.commit_lsn) << ", repaired marker R = term " << r.marker.value << "\n";
}

// Writes the repaired vote record (term R, with `vote`) through the atomic replacement of the
// state file; false (the error printed) when that fails.
bool write_vote_record(const ClusterConfig& config, const ElectorRead& read,
                       elector::DurableState state, const char* what, std::ostream& err,
                       const std::function<void(std::string_view step)>& after_step) {
    try {
        drivers::store_durable_state(config.data_dir, state, repaired_identity(config, read));
    } catch (const std::exception& e) {
        err << "conclaved: --repair: the log is repaired, but " << what << " failed: " << e.what()
            << "\n";
        return false;
    }
    if (after_step) {
        after_step("elector");
    }
    return true;
}

// The elector state after the log's repair: a lost or unreadable one is rewritten with a vote for
// this node in R, one below R is raised to R. False when that write failed.
bool repair_elector_state(const ClusterConfig& config, const ElectorRead& read, Term marker,
                          std::ostream& out, std::ostream& err,
                          const std::function<void(std::string_view step)>& after_step) {
    namespace fs = std::filesystem;
    const std::optional<elector::DurableState>& elector = read.state;
    const bool elector_corrupt = read.error.has_value();
    if (elector_corrupt || !elector) {
        // Its vote history is lost: vote for ourselves in R, so that no vote is ever given in a
        // term <= R (R is at least the operator's --min-term, required above), and keep a copy
        // of the damaged file. Copied, not renamed: the atomic replacement below is the only
        // change to the state file, so a crash leaves either the damaged file (the node refuses
        // to start; run --repair again) or the new one -- never no file, which would start the
        // elector as a new node (term 0) that may repeat a lost vote.
        std::error_code ec;
        const fs::path state = config.data_dir / drivers::kStateFileName;
        if (elector_corrupt) {
            fs::copy_file(state, fs::path(state.string() + ".corrupt"),
                          fs::copy_options::overwrite_existing, ec);
        }
        if (!write_vote_record(config, read, elector::DurableState{marker, config.self},
                               "rewriting the elector state", err, after_step)) {
            return false;
        }
        if (elector_corrupt) {
            out << "conclaved: --repair: the elector state was unreadable (" << *read.error
                << "); kept as " << drivers::kStateFileName << ".corrupt and rewritten with term "
                << marker.value << "\n";
        } else {
            out << "conclaved: --repair: the elector state was missing; written with term "
                << marker.value << "\n";
        }
    } else if (elector->term < marker) {
        // Never vote again in a term <= R: raise the elector's durable term to R (no vote in it).
        if (!write_vote_record(config, read, elector::DurableState{marker, std::nullopt},
                               "raising the elector's term", err, after_step)) {
            return false;
        }
        out << "conclaved: --repair: the elector's term is raised from " << elector->term.value
            << " to " << marker.value << "\n";
    }
    return true;
}

}  // namespace

int run_repair(const ClusterConfig& config, std::optional<std::uint64_t> min_term,
               std::ostream& out, std::ostream& err,
               const std::function<void(std::string_view step)>& after_step) {
    namespace fs = std::filesystem;
    using replication::FileStorage;
    using replication::RepairReport;
    const fs::path log_dir = config.data_dir / "log";
    // The elector state: its term bounds what this node may have promised (and voted in).
    // Read by a helper that returns either the state or the error: assigning the result to an
    // optional inside the try block left it engaged with garbage when the load threw (seen with
    // GCC 12 -O2: R then came out as the bytes of the error message; the node test pins it).
    const ElectorRead read = read_elector_state(config);
    const std::optional<elector::DurableState>& elector = read.state;
    const bool elector_corrupt = read.error.has_value();
    const std::string elector_error = read.error.value_or(std::string());
    const bool elector_lost = !elector && !elector_corrupt;
    if (elector_lost && !min_term) {
        // Lost, not damaged: the same hole. log.meta's term does not bound its votes either.
        err << "conclaved: --repair: " << (config.data_dir / drivers::kStateFileName).string()
            << " is missing (its votes are lost): the highest term this node may have voted in "
               "is unknown; pass --min-term T with T the cluster's current term (GET /status on "
               "any running node); nothing was changed\n";
        return kExitUsage;
    }
    if (elector_corrupt && !min_term) {
        // Its votes are lost, and nothing on this node bounds the terms they were given in: it
        // votes for a candidate of term t before its log hears of t, so log.meta's term may be
        // below them. Without a bound from the cluster, R could let it vote twice in one term.
        err << "conclaved: --repair: the elector state is unreadable (" << elector_error
            << "): the highest term this node may have voted in is unknown; pass --min-term T "
               "with T the cluster's current term (GET /status on any running node); nothing "
               "was changed\n";
        return kExitUsage;
    }
    replication::RepairOptions options;
    if (elector) {
        options.elector_term = elector->term;
    }
    if (min_term) {
        options.min_term = Term{*min_term};
    }
    options.after_step = after_step;
    RepairReport r;
    try {
        r = FileStorage::repair(log_dir, options);
    } catch (const replication::RepairNeedsMinTerm& e) {
        err << "conclaved: --repair: " << e.what() << "; nothing was changed\n";
        return kExitUsage;
    } catch (const std::exception& e) {
        err << "conclaved: --repair failed: " << e.what() << "\n";
        return kExitFailure;
    }
    print_log_repair(r, log_dir, out);
    if (!repair_elector_state(config, read, r.marker, out, err, after_step)) {
        return kExitFailure;
    }
    out << "conclaved: --repair: next: start the node as usual. It rejoins as a non-voting member "
           "(/status \"repaired\": true): no sync promise, its acknowledgements count for no "
           "commit, until it has stored the log of a leader of a term above "
        << r.marker.value
        << " up to that leader's commit point; then the marker is removed (logged) and it is an "
           "ordinary node again. Until then the cluster needs a quorum of the other nodes.\n";
    return kExitOk;
}

}  // namespace conclave::node
