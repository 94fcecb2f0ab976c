// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/log_invariants.hpp"
#include "conclave/core/quorum.hpp"

#include <algorithm>
#include <charconv>

#include "conclave/core/check.hpp"

namespace conclave::sim {
namespace {

/// The voters of a configuration entry (ids: decimal NodeIds); empty when it does not decode.
NodeSet voters_of(const replication::Entry& e, replication::ConfigurationDecoder decode) {
    NodeSet voters;
    if (const auto cfg = decode(e.value)) {
        for (const replication::Member& m : cfg->voters) {
            std::uint16_t id = 0;
            const auto [ptr, ec] = std::from_chars(m.id.data(), m.id.data() + m.id.size(), id);
            if (ec == std::errc{} && ptr == m.id.data() + m.id.size() && id < 64) {
                voters.insert(NodeId{id});
            }
        }
    }
    return voters;
}

using replication::ApplyCommitted;
using replication::Entry;
using replication::LogAction;
using replication::LogActions;
using replication::LogRole;
using replication::MemoryStorage;
using replication::ProposeError;
using replication::ProposeResult;
using replication::ReplicatedLog;

std::string node_name(NodeId n) {
    return "n" + std::to_string(n.value);
}

std::string entry_text(const Entry& e) {
    return to_string(e.lsn) + " '" + e.key + "'";
}

Violation violation(ViolationKind kind, NodeId node, std::string what) {
    return Violation{kind, "log of " + node_name(node) + ": " + std::move(what)};
}

/// The state a snapshot of the first `len` history entries must hold: the last entry of each key
/// (sync points dropped), in LSN order.
std::vector<Entry> state_of(const std::vector<Entry>& history, std::size_t len) {
    std::map<std::string, const Entry*> latest;
    for (std::size_t k = 0; k < len; ++k) {
        if (!replication::is_sync_point(history[k])) {
            latest[history[k].key] = &history[k];
        }
    }
    std::vector<Entry> out;
    for (const auto& [key, e] : latest) {
        out.push_back(*e);
    }
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.lsn < b.lsn; });
    return out;
}

}  // namespace

LogHistory::LogHistory(std::size_t nodes, LogHistoryOptions options)
    : nodes_(nodes),
      majority_(conclave::majority(options.initial_table != 0 ? options.initial_table : nodes)),
      options_(options),
      verified_len_(nodes, 0),
      complete_len_(nodes, 0),
      complete_term_(nodes),
      applied_(nodes, 0),
      snapshot_checked_(nodes),
      repair_lost_(nodes),
      loss_unnoticed_by_(nodes) {
    CONCLAVE_CHECK(nodes > 0, "the history has nodes");
}

void LogHistory::on_proposed(const Entry& entry) {
    proposed_[entry.lsn] = entry;
}

void LogHistory::on_restart(NodeId node) {
    applied_[node.value] = 0;
    verified_len_[node.value] = 0;
    complete_len_[node.value] = 0;
    // A new core knows nothing of any peer's old acknowledgements.
    for (std::size_t n = 0; n < nodes_; ++n) {
        on_peer_event(node, NodeId{static_cast<std::uint16_t>(n)});
    }
}

void LogHistory::on_repair_loss(NodeId node, std::vector<Lsn> lost, NodeSet unaware) {
    repair_lost_[node.value] = std::move(lost);
    loss_unnoticed_by_[node.value] = unaware;
}

void LogHistory::on_peer_event(NodeId observer, NodeId peer) {
    NodeSet& unaware = loss_unnoticed_by_[peer.value];
    unaware.erase(observer);
    if (unaware.empty()) {
        repair_lost_[peer.value].clear();
    }
}

bool LogHistory::acknowledged(Lsn lsn) const {
    return acked_.count(lsn) != 0;
}

// The node's committed prefix against the one history, each index once (see the header for why
// once is enough); where the prefix goes beyond the history, it extends the history.
// Compaction: positions inside the node's snapshot are no longer held; those committed in this
// very step are known from its ApplyCommitted actions (`step_applied`, by position), the others
// were compared before, or are checked through the snapshot as a whole (check_snapshot).
std::optional<Violation> LogHistory::check_prefix(
    NodeId node, const ReplicatedLog& log, const std::map<std::size_t, Entry>& step_applied) {
    const std::size_t commit_len = log.state().commit_len;
    const std::size_t base = log.snapshot().len;
    if (commit_len > log.end_len()) {
        return violation(ViolationKind::LogCoreCheck, node,
                         "commit length " + std::to_string(commit_len) + " exceeds the log (" +
                             std::to_string(log.end_len()) + ")");
    }
    std::size_t& verified = verified_len_[node.value];
    verified = std::min(verified, commit_len);
    const auto entry_at = [&](std::size_t k) -> const Entry* {
        if (k >= base) {
            return &log.at(k);
        }
        auto it = step_applied.find(k);
        return it == step_applied.end() ? nullptr : &it->second;
    };
    for (std::size_t k = verified; k < commit_len; ++k) {
        const Entry* e = entry_at(k);
        if (e == nullptr) {
            continue;  // inside the snapshot: check_snapshot compares it whole
        }
        if (k < history_.size()) {
            if (*e != history_[k]) {
                return violation(ViolationKind::LogDivergence, node,
                                 "committed " + entry_text(*e) + " at index " + std::to_string(k) +
                                     " where " + entry_text(history_[k]) +
                                     " was committed (commit point " + to_string(log.commit_lsn()) +
                                     ", term " + to_string(log.state().term) + ")");
            }
        } else if (k == history_.size()) {
            history_.push_back(*e);
            commit_term_.push_back(log.state().term);
            if (options_.decode_configuration != nullptr && replication::is_config_entry(*e)) {
                configs_.emplace_back(k, voters_of(*e, options_.decode_configuration));
            }
        } else {
            return violation(ViolationKind::LogDivergence, node,
                             "committed index " + std::to_string(k) +
                                 " beyond the known history, with a gap before it");
        }
    }
    verified = commit_len;
    return std::nullopt;
}

// A snapshot is exactly the state of the committed history up to its length: it ends at the
// history's entry of that index, and holds the last entry of each key before it.
std::optional<Violation> LogHistory::check_snapshot(NodeId node, const ReplicatedLog& log) {
    const replication::Snapshot& snap = log.snapshot();
    if (snap.len == 0 || snapshot_checked_[node.value] == snap.lsn) {
        return std::nullopt;
    }
    if (snap.len > history_.size() || history_[snap.len - 1].lsn != snap.lsn) {
        return violation(ViolationKind::LogDivergence, node,
                         "snapshot at " + to_string(snap.lsn) + " (length " +
                             std::to_string(snap.len) +
                             ") does not end at a committed entry of the history (" +
                             std::to_string(history_.size()) + " committed)");
    }
    if (snap.entries != state_of(history_, snap.len)) {
        return violation(ViolationKind::LogDivergence, node,
                         "snapshot at " + to_string(snap.lsn) +
                             " is not the state of the committed history up to it");
    }
    snapshot_checked_[node.value] = snap.lsn;
    return std::nullopt;
}

// Committed means durable on a majority: each newly committed entry must be flushed, at its index,
// in the storage of a majority of the nodes (crashed ones included: storage survives). One
// exception, inherent: a node that acknowledged the entry and then lost it (a crash whose disk is
// repaired) before the committing leader could know (its peer_down not delivered yet) is counted
// as a holder: the leader counted a true acknowledgement, and the loss is one more failure after
// it (replication/README.md, "Acknowledged on a majority").
std::optional<Violation> LogHistory::check_durable(NodeId committer, std::size_t from,
                                                   const std::vector<MemoryStorage>& storage) {
    for (std::size_t k = from; k < history_.size(); ++k) {
        if (!configs_.empty()) {
            if (auto v = check_durable_voters(k, storage)) {
                return v;
            }
            continue;
        }
        std::size_t holders = 0;
        std::size_t unnoticed = 0;
        for (std::size_t n = 0; n < storage.size(); ++n) {
            if (holds(storage[n], k)) {
                ++holders;
            } else if (loss_unnoticed_by_[n].contains(committer) &&
                       std::find(repair_lost_[n].begin(), repair_lost_[n].end(), history_[k].lsn) !=
                           repair_lost_[n].end()) {
                ++unnoticed;
            }
        }
        if (holders < majority_ && holders + unnoticed >= majority_) {
            ++commits_on_unnoticed_loss_;
        } else if (holders < majority_) {
            return Violation{
                ViolationKind::LogNotDurable,
                "committed " + entry_text(history_[k]) + " (index " + std::to_string(k) +
                    ", committed in term " + to_string(commit_term_[k]) + ") is durable on " +
                    std::to_string(holders) + " node(s), majority is " + std::to_string(majority_)};
        }
    }
    return std::nullopt;
}

bool LogHistory::holds(const MemoryStorage& s, std::size_t k) const {
    const std::size_t base = s.snapshot().len;  // durable, and checked against history
    return base > k ||
           (s.synced_count() > k - base && s.entries()[k - base].lsn == history_[k].lsn);
}

// Membership: durable on a majority of the voters of the configuration in effect at k (the
// latest configuration entry before it; every node before the first) or of its predecessor.
// (The repair allowance above is not applied here: membership runs inject no repairs.)
std::optional<Violation> LogHistory::check_durable_voters(
    std::size_t k, const std::vector<MemoryStorage>& storage) const {
    const NodeSet all =
        NodeSet::first(options_.initial_table != 0 ? options_.initial_table : nodes_);
    const auto after = std::lower_bound(configs_.begin(), configs_.end(), k,
                                        [](const auto& c, std::size_t i) { return c.first < i; });
    const auto index = static_cast<std::size_t>(after - configs_.begin());
    const NodeSet now = index >= 1 ? configs_[index - 1].second : all;
    const NodeSet before = index >= 2 ? configs_[index - 2].second : all;
    std::size_t held_now = 0;
    std::size_t held_before = 0;
    for (std::size_t n = 0; n < storage.size(); ++n) {
        if (holds(storage[n], k)) {
            held_now += now.contains(NodeId{static_cast<std::uint16_t>(n)}) ? 1U : 0U;
            held_before += before.contains(NodeId{static_cast<std::uint16_t>(n)}) ? 1U : 0U;
        }
    }
    if (conclave::is_majority(held_now, now.size()) ||
        conclave::is_majority(held_before, before.size())) {
        return std::nullopt;
    }
    return Violation{ViolationKind::LogNotDurable,
                     "committed " + entry_text(history_[k]) + " (index " + std::to_string(k) +
                         ", committed in term " + to_string(commit_term_[k]) + ") is durable on " +
                         std::to_string(held_now) + " of the " + std::to_string(now.size()) +
                         " voters of its configuration and " + std::to_string(held_before) +
                         " of the " + std::to_string(before.size()) + " of the previous one"};
}

// Leader Completeness (tla/ReplicatedLog.tla): an ACTIVE leader of term T holds every entry
// committed in a term <= T, at its index. (A deposed leader that has not heard yet lacks what its
// successors commit: those entries were committed in higher terms.) Each history index is checked
// once per ACTIVE term: an ACTIVE leader's log is append-only.
std::optional<Violation> LogHistory::check_complete(NodeId node, const ReplicatedLog& log) {
    std::size_t& done = complete_len_[node.value];
    const Term term = log.state().term;
    if (log.role() != LogRole::LeaderActive || complete_term_[node.value] != term) {
        done = 0;
        complete_term_[node.value] = term;
    }
    if (log.role() != LogRole::LeaderActive) {
        return std::nullopt;
    }
    const std::size_t base = log.snapshot().len;  // below: check_snapshot compares it whole
    const std::size_t end = log.end_len();
    for (std::size_t k = std::max(done, base); k < history_.size(); ++k) {
        if (commit_term_[k] > term) {
            continue;
        }
        if (k >= end || log.at(k).lsn != history_[k].lsn) {
            return violation(ViolationKind::LogLeaderIncomplete, node,
                             "ACTIVE leader of term " + to_string(term) + " lacks " +
                                 entry_text(history_[k]) + " at index " + std::to_string(k) +
                                 ", committed in term " + to_string(commit_term_[k]) +
                                 (k < end ? "; it holds " + entry_text(log.at(k))
                                          : "; its log ends at index " + std::to_string(end)));
        }
    }
    done = history_.size();
    return std::nullopt;
}

std::map<std::size_t, Entry> LogHistory::scan_step(NodeId node, const LogActions& actions,
                                                   const ReplicatedLog& log) {
    // Entries applied in this step, by position (a snapshot's state restarts the positions).
    std::map<std::size_t, Entry> step_applied;
    std::size_t apply_pos = applied_[node.value];
    for (const LogAction& a : actions) {
        if (const auto* truncate = std::get_if<replication::TruncateEntries>(&a)) {
            // Compare again from the cut (it must not reach the committed prefix).
            const std::size_t cut = log.length_through(truncate->after_lsn).value_or(0);
            verified_len_[node.value] = std::min(verified_len_[node.value], cut);
            complete_len_[node.value] = std::min(complete_len_[node.value], cut);
        } else if (const auto* apply = std::get_if<ApplyCommitted>(&a)) {
            if (apply->snapshot_lsn != replication::kNoLsn) {
                auto at = std::lower_bound(history_.begin(), history_.end(), apply->snapshot_lsn,
                                           [](const Entry& e, Lsn l) { return e.lsn < l; });
                apply_pos = static_cast<std::size_t>(at - history_.begin()) + 1;
                verified_len_[node.value] =
                    std::max(verified_len_[node.value], std::min(apply_pos, history_.size()));
            } else {
                for (const Entry& e : apply->entries) {
                    step_applied.emplace(apply_pos++, e);
                }
            }
        }
    }
    return step_applied;
}

std::optional<Violation> LogHistory::check_driver(NodeId node, const ReplicatedLog& log,
                                                  const MemoryStorage& storage) {
    // The driver: promises durable, storage a mirror of the core's log.
    if (storage.meta().term != log.state().term) {
        return violation(ViolationKind::LogDriver, node,
                         "promised term " + to_string(log.state().term) +
                             " is not durable (storage has " + to_string(storage.meta().term) +
                             ")");
    }
    if (storage.entries().size() != log.entries().size() ||
        storage.snapshot().lsn != log.snapshot().lsn ||
        (!log.entries().empty() && storage.entries().back().lsn != log.last_lsn())) {
        return violation(ViolationKind::LogDriver, node,
                         "storage holds " + std::to_string(storage.entries().size()) +
                             " entries, the core " + std::to_string(log.entries().size()));
    }
    return std::nullopt;
}

std::optional<Violation> LogHistory::check_applied(NodeId node, const ApplyCommitted& apply) {
    if (apply.snapshot_lsn != replication::kNoLsn) {
        // A snapshot's state replaces what was applied: it must be the history's state.
        auto at = std::lower_bound(history_.begin(), history_.end(), apply.snapshot_lsn,
                                   [](const Entry& e, Lsn l) { return e.lsn < l; });
        if (at == history_.end() || at->lsn != apply.snapshot_lsn) {
            return violation(ViolationKind::LogDivergence, node,
                             "applied a snapshot at " + to_string(apply.snapshot_lsn) +
                                 ", which is not a committed entry");
        }
        const auto len = static_cast<std::size_t>(at - history_.begin()) + 1;
        if (apply.entries != state_of(history_, len)) {
            return violation(ViolationKind::LogDivergence, node,
                             "applied a snapshot at " + to_string(apply.snapshot_lsn) +
                                 " that is not the committed state up to it");
        }
        applied_[node.value] = len;
        return std::nullopt;
    }
    for (const Entry& e : apply.entries) {
        const std::size_t k = applied_[node.value]++;
        if (k >= history_.size() || history_[k] != e) {
            return violation(ViolationKind::LogDivergence, node,
                             "applied " + entry_text(e) + " as entry " + std::to_string(k) +
                                 ", which is not the committed one");
        }
    }
    return std::nullopt;
}

std::optional<Violation> LogHistory::check_result(NodeId node, const ProposeResult& result,
                                                  const ReplicatedLog& log) {
    auto proposed = proposed_.find(result.lsn);
    const bool appended = proposed != proposed_.end();
    // (A configuration change the simulator expected the core to refuse, R2, is not
    // recorded as proposed: its refusal is no finding.)
    if (result.error == ProposeError::InvalidEntry && appended) {
        return violation(
            ViolationKind::LogDriver, node,
            "a well-formed proposal " + to_string(result.lsn) + " was refused as invalid");
    }
    if (result.error != ProposeError::None) {
        if (appended) {
            proposed_.erase(proposed);  // outcome unknown: it may still commit
        }
        return std::nullopt;
    }
    if (!appended) {
        return violation(
            ViolationKind::LogDriver, node,
            "acknowledged " + to_string(result.lsn) + ", which no client proposal appended");
    }
    auto len = log.length_through(result.lsn);
    // Compacted already (committed and folded in the same step): find it in the history.
    std::optional<std::size_t> at_history;
    auto h = std::lower_bound(history_.begin(), history_.end(), result.lsn,
                              [](const Entry& e, Lsn l) { return e.lsn < l; });
    if (h != history_.end() && h->lsn == result.lsn) {
        at_history = static_cast<std::size_t>(h - history_.begin()) + 1;
    }
    if (!len && at_history && *at_history <= log.snapshot().len) {
        len = at_history;
    }
    if (!len || *len > log.state().commit_len || *len > history_.size() ||
        history_[*len - 1] != proposed->second) {
        return violation(
            ViolationKind::LogAckLost, node,
            "acknowledged " + entry_text(proposed->second) + " is not committed as proposed");
    }
    acked_[result.lsn] = *len - 1;
    proposed_.erase(proposed);
    return std::nullopt;
}

std::optional<Violation> LogHistory::on_result(NodeId node, const ProposeResult& result,
                                               const ReplicatedLog& log,
                                               const MemoryStorage& storage) {
    if (result.error == ProposeError::None && storage.meta().commit_lsn < result.lsn) {
        return violation(ViolationKind::LogAnswerNotDurable, node,
                         "acknowledged " + to_string(result.lsn) +
                             " while its stored commit point is " +
                             to_string(storage.meta().commit_lsn));
    }
    return check_result(node, result, log);
}

std::optional<Violation> LogHistory::after_step(NodeId node, const LogActions& actions,
                                                const std::vector<const ReplicatedLog*>& logs,
                                                const std::vector<MemoryStorage>& all_storage,
                                                bool storage_failed) {
    CONCLAVE_CHECK(node.value < nodes_ && logs.size() == nodes_ && logs[node.value],
                   "a step is checked against the log of one of the nodes");
    const ReplicatedLog& log = *logs[node.value];
    const std::map<std::size_t, Entry> step_applied = scan_step(node, actions, log);
    // (Not after a failed storage write: the core holds what storage refused.)
    if (!storage_failed) {
        if (auto v = check_driver(node, log, all_storage[node.value])) {
            return v;
        }
    }
    const std::size_t history_before = history_.size();
    if (auto v = check_prefix(node, log, step_applied)) {
        return v;
    }
    if (auto v = check_snapshot(node, log)) {
        return v;
    }
    // After the history checks, so that a wrong snapshot is reported by them (they hold the
    // definition: the committed history), not only by the core's own opinion of itself.
    if (std::string v = log.check_invariants(); !v.empty()) {
        return violation(ViolationKind::LogCoreCheck, node, "check_invariants: " + v);
    }
    if (options_.check_durable_quorum) {
        if (auto v = check_durable(node, history_before, all_storage)) {
            return v;
        }
    }
    for (const LogAction& a : actions) {
        if (const auto* apply = std::get_if<ApplyCommitted>(&a)) {
            if (auto v = check_applied(node, *apply)) {
                return v;
            }
        }
    }
    return check_after_actions(node, history_before, logs);
}

std::optional<Violation> LogHistory::check_after_actions(
    NodeId node, std::size_t history_before, const std::vector<const ReplicatedLog*>& logs) {
    const ReplicatedLog& log = *logs[node.value];
    if (applied_[node.value] != log.state().commit_len) {
        return violation(ViolationKind::LogDivergence, node,
                         "applied " + std::to_string(applied_[node.value]) +
                             " entries since its restart, but " +
                             std::to_string(log.state().commit_len) + " are committed");
    }
    if (auto v = check_complete(node, log)) {
        return v;
    }
    if (history_.size() > history_before) {
        for (std::size_t n = 0; n < nodes_; ++n) {
            if (n != node.value && logs[n]) {
                if (auto v = check_complete(NodeId{static_cast<std::uint16_t>(n)}, *logs[n])) {
                    return v;
                }
            }
        }
    }
    return std::nullopt;
}

std::optional<Violation> LogHistory::converged(
    const std::vector<const ReplicatedLog*>& logs) const {
    for (std::size_t n = 0; n < nodes_; ++n) {
        const NodeId node{static_cast<std::uint16_t>(n)};
        if (!logs[n]) {
            return violation(ViolationKind::LogLiveness, node, "not running at the end");
        }
        const ReplicatedLog& log = *logs[n];
        const std::size_t base = log.snapshot().len;
        const bool tail_equal = base <= history_.size() && log.end_len() == history_.size() &&
                                std::equal(log.entries().begin(), log.entries().end(),
                                           history_.begin() + static_cast<std::ptrdiff_t>(base));
        if (log.state().commit_len != history_.size() || !tail_equal ||
            (base > 0 && log.snapshot().entries != state_of(history_, base))) {
            return violation(ViolationKind::LogLiveness, node,
                             "did not converge: " + std::to_string(log.state().commit_len) +
                                 " committed and " + std::to_string(log.entries().size()) +
                                 " held of the " + std::to_string(history_.size()) +
                                 " committed entries");
        }
    }
    for (const auto& [lsn, index] : acked_) {
        if (index >= history_.size() || history_[index].lsn != lsn) {
            return Violation{ViolationKind::LogAckLost,
                             "acknowledged " + to_string(lsn) + " missing from the final history"};
        }
    }
    return std::nullopt;
}

}  // namespace conclave::sim
