// SPDX-License-Identifier: Apache-2.0
// Safety invariants of the replicated log in the simulator, checked after every step of every
// node's log core (history variables, like those of tla/ReplicatedLog.tla):
//   - check_invariants() of the core holds (LogCoreCheck), and no CONCLAVE_CHECK fired;
//   - committed prefixes are prefixes of one history: every node's committed prefix equals the
//     history's prefix of the same length, LSN and content (LogDivergence, CommittedPrefixesAgree);
//   - an acknowledged (ProposeResult::None) entry is in that history, with the LSN and content the
//     client proposed; it therefore stays at its index in every committed prefix, forever
//     (LogAckLost, AckedNeverLost); answers are checked as the runtime releases them
//     (on_result), not as the core emits them: a deferred commit point holds them back;
//   - a writer hears "committed" only once its node's stored commit point covers the entry
//     (LogAnswerNotDurable): a restarted node then still refuses to discard it;
//   - Leader Completeness: an ACTIVE leader of term T holds, at the same index, every entry
//     committed in a term <= T (LogLeaderIncomplete);
//   - a newly committed entry is durable (flushed, at its index) in the storage of a majority
//     (LogNotDurable): the definition of "committed", checked against storage, not the cores;
//   - applied == committed: ApplyCommitted hands out the committed prefix, each entry once, in
//     order, since the node's last restart (LogDivergence);
//   - compaction: a node's snapshot ends at a committed history entry and holds exactly the state
//     (last entry of each key) of the history up to it; a snapshot applied (installed or
//     recovered) is that state too; durable on a majority counts snapshots (LogDivergence);
//   - the driver's side: the promised term is durable in storage after every step, storage mirrors
//     the core's log, and only well-formed refusals come back (LogDriver).
// Liveness (a healed cluster converges and commits a fresh proposal) is checked by run_seed.
//
// Cost: the checks are incremental (each index of each log is compared with the history once per
// incarnation, term and role), relying on two facts that are themselves checked: a log changes
// below its end only through a TruncateEntries action (storage must mirror the core after every
// step, and the core's Merge checks that one LSN names one entry), and a committed entry is never
// truncated (the core's CONCLAVE_CHECK, which the simulator turns into a violation).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/sim/invariants.hpp"

namespace conclave::sim {

struct LogHistoryOptions {
    /// Off only to measure how often the other checks catch a commit without a quorum through
    /// its consequences (an acknowledged entry lost, a divergence).
    bool check_durable_quorum = true;
    /// The simulator's LogTruncated check at every restart (a node starts on at least what its
    /// storage held durably when it stopped, unless it carries the repaired marker). Off only to
    /// measure how often the other checks catch a silent repair through its consequences.
    bool check_recovered_floor = true;
    /// Membership: the decoder of configuration entries (the log's own,
    /// LogConfig::decode_configuration; the simulator sets it). With it, "durable on a majority"
    /// counts the voters of the configuration in effect at the entry (the latest configuration
    /// entry before it in the history) or of the one before that (a leader's commit may reach
    /// past a configuration entry on its predecessor's count before re-counting, R1). Ids are the
    /// decimal NodeIds (the simulator's clusters have no id table).
    replication::ConfigurationDecoder decode_configuration = nullptr;
    /// Node-table growth (SimOptions::initial_table): the nodes of the table every node starts
    /// with (0: all). Before the first configuration entry, "a majority" is a majority of these
    /// (the implicit configuration: every node of the initial table votes).
    std::size_t initial_table = 0;
};

class LogHistory {
  public:
    explicit LogHistory(std::size_t nodes, LogHistoryOptions options = {});

    /// A client proposal was appended by a leader's log (its outcome comes later).
    void on_proposed(const replication::Entry& entry);
    /// A node's process restarted (its applied count starts again from zero).
    void on_restart(NodeId node);
    /// `node` crashed and its repair dropped the durable entries `lost`; `unaware`: the nodes
    /// connected to it when it crashed, whose logs have not yet been told (peer_down pending).
    /// Until a node of `unaware` is told, its log may still count `node`'s acknowledgements of
    /// `lost`: nothing can tell it otherwise (replication/README.md, "Acknowledged on a
    /// majority").
    void on_repair_loss(NodeId node, std::vector<Lsn> lost, NodeSet unaware);
    /// `observer`'s log core was told that its connection to `peer` went down or came up.
    void on_peer_event(NodeId observer, NodeId peer);

    /// The runtime of `node` released `result` to the client (after the step that produced it, or
    /// later, once its deferred commit point was written; `storage`: the node's). Checks the
    /// outcome against the history, and an acknowledgement against the stored commit point.
    std::optional<Violation> on_result(NodeId node, const replication::ProposeResult& result,
                                       const replication::ReplicatedLog& log,
                                       const replication::MemoryStorage& storage);

    /// Checks everything after `node`'s log core took one step that returned `actions` (its
    /// ProposeResults excepted: on_result checks them as the runtime releases them). `logs` has
    /// one entry per node (nullptr for a crashed node). Returns the first violation, if any.
    /// `storage_failed`: a storage write of this step failed (the node leaves service at once),
    /// so the node's storage is not required to mirror its core.
    std::optional<Violation> after_step(NodeId node, const replication::LogActions& actions,
                                        const std::vector<const replication::ReplicatedLog*>& logs,
                                        const std::vector<replication::MemoryStorage>& storage,
                                        bool storage_failed = false);

    /// End of a run: every node alive, its log equal to the whole history, all of it committed.
    std::optional<Violation> converged(
        const std::vector<const replication::ReplicatedLog*>& logs) const;

    /// Whether the proposal `lsn` was acknowledged (ProposeResult::None).
    bool acknowledged(Lsn lsn) const;

    const std::vector<replication::Entry>& history() const { return history_; }
    std::size_t acked() const { return acked_.size(); }
    /// Entries whose majority at commit included a copy lost in a crash + repair that the
    /// committing leader had not been told of yet (the one case check_durable admits).
    std::size_t commits_on_unnoticed_loss() const { return commits_on_unnoticed_loss_; }

  private:
    // after_step(), in parts: what the step applied and truncated; storage against the core;
    // each applied batch and each proposal outcome; the counts and completeness after them.
    std::map<std::size_t, replication::Entry> scan_step(NodeId node,
                                                        const replication::LogActions& actions,
                                                        const replication::ReplicatedLog& log);
    std::optional<Violation> check_driver(NodeId node, const replication::ReplicatedLog& log,
                                          const replication::MemoryStorage& storage);
    std::optional<Violation> check_applied(NodeId node, const replication::ApplyCommitted& apply);
    std::optional<Violation> check_result(NodeId node, const replication::ProposeResult& result,
                                          const replication::ReplicatedLog& log);
    std::optional<Violation> check_after_actions(
        NodeId node, std::size_t history_before,
        const std::vector<const replication::ReplicatedLog*>& logs);
    std::optional<Violation> check_prefix(
        NodeId node, const replication::ReplicatedLog& log,
        const std::map<std::size_t, replication::Entry>& step_applied);
    std::optional<Violation> check_snapshot(NodeId node, const replication::ReplicatedLog& log);
    std::optional<Violation> check_durable(NodeId committer, std::size_t from,
                                           const std::vector<replication::MemoryStorage>& storage);
    std::optional<Violation> check_complete(NodeId node, const replication::ReplicatedLog& log);
    std::optional<Violation> check_durable_voters(
        std::size_t k, const std::vector<replication::MemoryStorage>& storage) const;
    /// `s` holds history_[k] durably (flushed at k, or inside its snapshot).
    bool holds(const replication::MemoryStorage& s, std::size_t k) const;

    std::size_t nodes_;
    std::size_t majority_;
    LogHistoryOptions options_;
    std::vector<std::size_t> verified_len_;    // per node: committed prefix compared with history_
    std::vector<std::size_t> complete_len_;    // per ACTIVE node: history_ prefix found in its log
    std::vector<Term> complete_term_;          // the term complete_len_ was established in
    std::vector<replication::Entry> history_;  // the one committed history
    std::vector<Term> commit_term_;            // term in which history_[k] was first committed
    std::vector<std::size_t> applied_;         // per node, entries applied since its restart
    std::map<Lsn, std::size_t> acked_;         // acknowledged LSN -> its index in history_
    std::map<Lsn, replication::Entry> proposed_;  // appended proposals not yet answered
    std::vector<Lsn> snapshot_checked_;           // per node: the snapshot last found correct
    std::vector<std::vector<Lsn>> repair_lost_;   // per node: durable entries its repair dropped
    std::vector<NodeSet> loss_unnoticed_by_;      // per node: who has not been told of its crash
    std::size_t commits_on_unnoticed_loss_ = 0;
    // Membership: history index and voters of each configuration entry of the history, in order.
    std::vector<std::pair<std::size_t, NodeSet>> configs_;
};

}  // namespace conclave::sim
