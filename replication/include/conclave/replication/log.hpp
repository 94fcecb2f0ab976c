// SPDX-License-Identifier: Apache-2.0
// The replicated metadata log core: a pure, deterministic state machine beside the elector.
//
// Inputs are method calls (start, on_leadership, propose, receive, timer_fired, persisted,
// peer_up, peer_down), each carrying `now`; each returns the ordered actions the driver performs
// (see actions.hpp for the contract). No clock, socket, file or thread in here: the log lives in
// memory (`entries()`), storage mirrors it through PersistEntries / TruncateEntries / PersistMeta
// and gives it back at construction after a restart.
//
// Protocol (details and proofs in replication/README.md):
// - The elector decides who leads; the log follows the LeadershipSnapshot. Any node may win an
//   election whatever its log, so a new leader of term T is PASSIVE: it collects (last, commit)
//   from a quorum including itself (SyncRequest/SyncResponse, each answer a durable promise to
//   refuse lower terms), adopts the most advanced of those logs (FetchRequest/FetchResponse),
//   appends the sync point (T, 0) and replicates it. Once the sync point is committed the leader
//   is ACTIVE and accepts proposals.
// - Followers accept appends of their term whose prev_lsn they hold, truncate a conflicting
//   (never committed) suffix, and acknowledge only what is durable.
// - Committed = durable on a quorum in the leader's term, at or after its sync point.
#pragma once

#include <array>
#include <boost/describe/enum.hpp>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conclave/core/enum_names.hpp"
#include "conclave/elector/actions.hpp"
#include "conclave/replication/actions.hpp"
#include "conclave/replication/config.hpp"
#include "conclave/replication/entry.hpp"
#include "conclave/replication/membership.hpp"
#include "conclave/replication/messages.hpp"

namespace conclave::replication {

/// What storage hands back after a restart (see storage.hpp).
struct RecoveredLog {
    RecoveredLog() = default;
    RecoveredLog(std::vector<Entry> entries_in, LogMeta meta_in = {}, Snapshot snapshot_in = {})
        : entries(std::move(entries_in)), meta(meta_in), snapshot(std::move(snapshot_in)) {}
    std::vector<Entry> entries;  // the entries after snapshot.lsn
    LogMeta meta;
    Snapshot snapshot;  // compaction: the state of the committed prefix before `entries`
};

/// Leader: what it knows about one follower. Lengths count entries from the start of the log.
struct PeerProgress {
    std::size_t match_len = 0;  // the follower holds (durably, matching ours) this prefix
    std::size_t next_len = 0;   // entries before this position have been sent (or need not be)
    std::vector<std::size_t> inflight_ends;  // end positions of unacknowledged batches, ascending
    std::size_t match_at_last_tick = 0;      // to detect a follower that made no progress
    bool probing =
        true;          // position unsure: one batch at a time until an ok ack (etcd-raft's probe)
    Lsn probe_prev{};  // prev_lsn of the last batch sent while probing
    bool non_voting = false;  // its last ok ack said it is repaired: match_len is not counted
    /// The highest LSN it acknowledged in this term before its last reconnection (peer_up): a
    /// later answer whose log ends below it shows a follower whose state regressed.
    Lsn acked_before_up{};
    Lsn acked{};             // the highest LSN it acknowledged in this term
    bool regressed = false;  // its state regressed in this term: its acks count for nothing
    bool operator==(const PeerProgress&) const = default;
};

/// PASSIVE leader: the sync round.
struct SyncProgress {
    NodeSet responded;          // includes self
    std::vector<Lsn> last_lsn;  // per node, from its SyncResponse
    std::vector<Lsn> commit_lsn;
    std::optional<NodeId> source;  // node whose log is being fetched
    Lsn target{};                  // its last LSN: the log to adopt ends there
    Lsn fetch_after{};             // the outstanding FetchRequest's after_lsn
    bool done = false;             // sync point appended
    bool operator==(const SyncProgress&) const = default;
};

/// Everything the protocol's decisions depend on, besides the entries.
struct LogState {
    LogRole role = LogRole::Follower;
    Term term{};                   // durable promise (LogMeta::term)
    std::optional<NodeId> leader;  // leader of `term`, as far as the log knows
    std::size_t commit_len = 0;    // committed prefix
    std::size_t applied_len = 0;   // prefix handed to ApplyCommitted in this run
    std::size_t durable_len = 0;   // prefix reported durable by storage
    std::size_t matched_len = 0;   // follower: prefix known to match the leader of `term`
    std::size_t acked_len = 0;     // follower: prefix acknowledged to the leader of `term`
    std::size_t sync_index = 0;    // leader: position of the sync point (term, 0), once done
    std::uint64_t tick = 0;        // leader: heartbeat ticks in this term
    /// The repaired marker R (LogMeta::repaired, `conclaved --repair`): while set, this node gives
    /// no sync promise, its acks are non-voting and, leading, its own log counts for nothing.
    std::optional<Term> repaired;
    bool operator==(const LogState&) const = default;
};

/// Why the core dropped a message without acting on it (LogCounters::dropped_by_reason).
BOOST_DEFINE_FIXED_ENUM_CLASS(
    LogDropReason, std::uint8_t,
    NotAPeer,         // the sender is not another member of the cluster
    TermOutOfRange,   // a term >= 2^63, which no correct node can reach
    InvalidBatch,     // Append entries not strictly increasing, above the term, or malformed
    UnknownAckedLsn,  // an AppendAck for an LSN this leader never sent in its term
    SnapshotChunkOutOfOrder,  // an InstallSnapshot chunk not following the one before (resent)
    SnapshotAckOutOfRange     // a SnapshotAck of more entries than the snapshot being sent holds
)
inline constexpr std::size_t kLogDropReasonCount = kEnumeratorCount<LogDropReason>;

/// What a protocol violation was (LogCounters::violations_by_kind, LogViolation::kind).
BOOST_DEFINE_FIXED_ENUM_CLASS(
    LogViolationKind, std::uint8_t,
    SyncResponseAhead,          // a SyncResponse reports entries of the syncing leader's own term
    TruncatesCommitted,         // entries that would truncate a committed entry
    ContradictsCommitted,       // one LSN, two entries, the one here committed
    OneLsnTwoEntries,           // one LSN, two entries (neither committed here)
    CommitBetweenEntries,       // a commit point between two entries of the matched prefix
    SnapshotAbsurdLength,       // InstallSnapshot: a history length no log can have
    SnapshotTooManyEntries,     // InstallSnapshot: more entries than its history length
    SnapshotNotOrdered,         // InstallSnapshot: not an ordered state at its LSN
    SnapshotLengthContradicts,  // InstallSnapshot: its length contradicts our log
    SnapshotInsideCommitted,    // InstallSnapshot: ends inside our committed prefix, not ours
    SnapshotTooLarge,           // InstallSnapshot: more bytes than max_snapshot_bytes
    SnapshotChunkInconsistent,  // InstallSnapshot: a chunk's entries do not fit its count/done
    SnapshotChecksum,           // InstallSnapshot: the entries do not match the snapshot's crc
    MalformedConfiguration      // a configuration entry (Append, fetch, snapshot) that does not
                                // decode, or names an id outside the id table
)
inline constexpr std::size_t kLogViolationKindCount = kEnumeratorCount<LogViolationKind>;

/// A rollback seen (a data directory restored from an older copy, a disk that lost what it
/// acknowledged): the node refuses to go on as if nothing happened (LogCounters::rollback_alarms,
/// ReplicatedLog::rollback_alarm()).
BOOST_DEFINE_FIXED_ENUM_CLASS(
    RollbackKind, std::uint8_t,
    RefusedTruncation,     // asked to discard entries at or below this node's commit point: refused
    LeaderLacksCommitted,  // leader: a follower reports a commit point this log does not hold; the
                           // leader takes no more writes
    FollowerRegressed      // leader: a follower's log ends below what it acknowledged in this term;
                           // its acks count for nothing for the rest of the term
)
inline constexpr std::size_t kRollbackKindCount = kEnumeratorCount<RollbackKind>;

/// The first rollback this node saw in this run: what, who, in which term, and the range of
/// entries concerned (`from` exclusive .. `to` inclusive: the entries that would be or were lost).
struct RollbackAlarm {
    RollbackKind kind{};
    NodeId peer{};
    Term term{};
    Lsn from{};
    Lsn to{};
    bool operator==(const RollbackAlarm&) const = default;
};

/// Metric label values: "not_a_peer", "sync_response_ahead", ...
std::string_view to_string(LogDropReason reason);
std::string_view to_string(LogViolationKind kind);
std::string_view to_string(RollbackKind kind);
/// The sentence for logs and /status, naming the range and the peer.
std::string describe(const RollbackAlarm& alarm, const std::vector<std::string>& node_ids);
/// The sentence for logs: "contradicts a committed entry (one LSN, two entries)", ...
const char* describe(LogViolationKind kind);

struct LogCounters {
    std::uint64_t entries_committed = 0;
    std::uint64_t proposals_committed = 0;
    std::uint64_t proposals_failed = 0;
    std::uint64_t syncs_completed = 0;
    std::uint64_t entries_fetched = 0;
    std::uint64_t entries_truncated = 0;
    std::uint64_t appends_rejected = 0;   // follower: prev_lsn missing
    std::uint64_t retransmissions = 0;    // leader: batches re-sent after no progress
    std::uint64_t messages_dropped = 0;   // malformed or from an unknown sender
    std::uint64_t two_leader_alarms = 0;  // a second node claimed leadership of one term
    std::uint64_t stale_completions = 0;  // persisted() for an LSN no longer in the log
    /// Messages dropped because no correct node could have sent them (they contradict a committed
    /// entry, name one LSN for two entries, commit between entries, ...): a broken or lying peer.
    std::uint64_t protocol_violation_alarms = 0;
    // Compaction and quota.
    std::uint64_t compactions = 0;          // snapshots taken locally
    std::uint64_t entries_compacted = 0;    // entries folded into snapshots
    std::uint64_t snapshots_sent = 0;       // leader/source: snapshots sent (all chunks)
    std::uint64_t snapshots_installed = 0;  // snapshots received and installed
    std::uint64_t nospace_refusals = 0;     // proposals refused by the quota
    // Repair (`conclaved --repair`).
    std::uint64_t sync_requests_unanswered = 0;  // repaired: SyncRequests not answered
    std::uint64_t non_voting_acks = 0;           // leader: ok acks not counted for commit
    std::uint64_t repairs_cleared = 0;           // the repaired marker was removed
    // Membership.
    std::uint64_t config_changes = 0;            // the active configuration changed
    std::uint64_t table_growths = 0;             // a configuration made the node table longer (§8)
    std::uint64_t config_proposals_refused = 0;  // propose_config refusals (R2, R3, malformed)
    /// messages_dropped and protocol_violation_alarms split by reason (the totals stay).
    std::array<std::uint64_t, kLogDropReasonCount> dropped_by_reason{};
    std::array<std::uint64_t, kLogViolationKindCount> violations_by_kind{};
    /// Rollbacks seen (RollbackAlarm), by kind.
    std::uint64_t rollback_alarms = 0;
    std::array<std::uint64_t, kRollbackKindCount> rollbacks_by_kind{};
};

/// The last protocol violation seen (LogCounters::protocol_violation_alarms), for logs and
/// /status: what was wrong, who sent it, in which term. `reason` is a static string.
struct LogViolation {
    const char* reason = "";
    LogViolationKind kind{};
    NodeId from{};
    Term term{};
};

class ReplicatedLog {
  public:
    /// `config` must validate and `recovered.entries` must be strictly increasing (throws
    /// std::invalid_argument naming the problem otherwise).
    ReplicatedLog(LogConfig config, RecoveredLog recovered);

    // ---- Inputs -------------------------------------------------------------------------------
    /// Hands the committed prefix recovered from storage to the subscribers.
    LogActions start(Millis now);
    /// The elector's snapshot changed. A snapshot naming this node leader of a new term starts
    /// leader sync; any other snapshot makes this node a follower (failing pending proposals).
    LogActions on_leadership(Millis now, const elector::LeadershipSnapshot& snapshot);
    /// ACTIVE leader only. `lsn` comes from Elector::issue_lsn(). The outcome is reported by a
    /// ProposeResult action (at once for a refusal).
    /// Keys of the reserved space `_conclave/` are refused (InvalidEntry): only propose_config
    /// writes there.
    LogActions propose(Millis now, Lsn lsn, std::string key, std::string value);
    /// Membership: appends a configuration entry (key kMembersKey, `value` the codec's
    /// JSON of the new Configuration). Refused (ProposeResult, InvalidEntry; the reason from
    /// check_config_change) unless this node is the ACTIVE leader (R3), no configuration entry is
    /// pending (R2), and the change is adjacent to the active configuration: one learner promoted
    /// to voter, one voter removed, or one learner added or removed, with version = active + 1
    /// (or the bootstrap: version 0, the implicit configuration written out).
    LogActions propose_config(Millis now, Lsn lsn, std::string value);
    LogActions receive(Millis now, const LogMessage& message);
    /// Firings of timers that are not armed are ignored.
    LogActions timer_fired(Millis now, LogTimer timer);
    /// Storage reports that every entry handed over up to and including `lsn` is durable.
    LogActions persisted(Millis now, Lsn lsn);
    LogActions peer_up(Millis now, NodeId peer);
    LogActions peer_down(Millis now, NodeId peer);

    // ---- Observation --------------------------------------------------------------------------
    const LogState& state() const { return state_; }
    const LogConfig& config() const { return config_; }
    const LogCounters& counters() const { return counters_; }
    /// Valid when counters().protocol_violation_alarms > 0.
    const LogViolation& last_violation() const { return last_violation_; }
    /// The first rollback seen in this run (nullopt: none). While set on a leader
    /// (LeaderLacksCommitted), it takes no writes: the cluster stops rather than lose acknowledged
    /// entries.
    const std::optional<RollbackAlarm>& rollback_alarm() const { return rollback_alarm_; }
    /// The entries after the snapshot (all of them while nothing was compacted). Positions
    /// (lengths, LogState's *_len) count from the start of the history: entries()[i] is at
    /// position snapshot().len + i.
    const std::vector<Entry>& entries() const { return entries_; }
    const Snapshot& snapshot() const { return snapshot_; }
    /// Length of the whole history held (snapshot + entries).
    std::size_t end_len() const { return snapshot_.len + entries_.size(); }
    /// The entry at position `pos` (snapshot().len <= pos < end_len()).
    const Entry& at(std::size_t pos) const { return entries_[pos - snapshot_.len]; }
    /// What the quota counts: entries and entry_bytes() held (snapshot + tail).
    std::size_t used_entries() const { return snapshot_.entries.size() + entries_.size(); }
    std::size_t used_bytes() const { return snapshot_bytes_ + tail_bytes_; }
    /// NOSPACE: a proposal was refused by the quota and no compaction has freed space since.
    bool nospace_alarm() const { return nospace_alarm_; }
    const std::vector<PeerProgress>& progress() const { return progress_; }
    const SyncProgress& sync() const { return sync_; }
    LogRole role() const { return state_.role; }
    bool can_propose() const { return state_.role == LogRole::LeaderActive && !halted_; }
    /// Membership: the active configuration (latest configuration entry of the committed
    /// prefix; without any, every node of the cluster votes at version 0).
    const ActiveConfig& active_config() const { return active_; }
    /// Why `cfg` may not be appended now (R2, R3, id table), or nullopt.
    std::optional<std::string> check_config_change(const Configuration& cfg) const;
    /// R2: a configuration entry is appended and not committed yet.
    bool config_pending() const {
        return appended_config_ && appended_config_->first >= state_.commit_len;
    }
    /// R8: the nodes a leader replicates to: the members of the active configuration and of the
    /// latest appended one, and removed nodes until they acknowledge their removal's commit or
    /// for kLeavingTicks heartbeats (self excluded; only nodes of this node's table).
    NodeSet replication_targets() const;
    /// The NodeIds of a configuration, or nullopt when it names an unknown or repeated id, a
    /// member both voter and learner, or no voter, or when its node table does not agree with
    /// this node's (§8: one is a prefix of the other; ids unique and non-empty).
    std::optional<ActiveConfig> resolve(const Configuration& cfg) const;
    /// The repaired marker R, while this node is non-voting (LogMeta::repaired).
    std::optional<Term> repaired() const { return state_.repaired; }
    Lsn last_lsn() const { return lsn_at(end_len()); }
    Lsn commit_lsn() const { return lsn_at(state_.commit_len); }
    /// Committed entries after `after` (exclusive), at most `max_entries` (GET /metadata?from=).
    std::vector<Entry> committed_after(Lsn after, std::size_t max_entries) const;
    /// Empty when every local invariant holds; otherwise a description of the first violation.
    /// O(log length). After every input the core checks the O(1) part itself (always on) and
    /// the whole of it in debug builds (kFullLogChecks, log.cpp); the simulator calls it after
    /// every log step.
    std::string check_invariants() const;

    /// LSN of the last entry of the prefix of length `len` (kNoLsn for 0, the snapshot's LSN for
    /// its length). Positions inside the snapshot are not held: asking for one fails a check.
    Lsn lsn_at(std::size_t len) const;
    /// Length of the prefix ending at `lsn` (0 for kNoLsn), or nullopt if `lsn` is not in the log
    /// (or compacted into the snapshot, except the snapshot's own LSN).
    std::optional<std::size_t> length_through(Lsn lsn) const;

  private:
    // ---- Handlers (one per event; names match tla/ReplicatedLog.tla's actions) ----------------
    // Private: only the inputs above reach them (receive() applies the term rules and the peer
    // check first; timer_fired() only for an armed timer), and each input ends with Finish(),
    // which hands the batch of actions out. Tests drive them through the inputs.
    void HandleSyncRequest(const LogMessage& m);
    // check_invariants() in two tiers: O(1) (always on after every input) and the rest.
    std::string CheapInvariants() const;
    std::string FullInvariants() const;
    /// After every input (Finish): a violation fails a CONCLAVE_CHECK.
    void CheckInvariants() const;
    void HandleSyncResponse(const LogMessage& m, const SyncResponse& body);
    void HandleAppend(const LogMessage& m, const Append& body);
    void HandleAppendAck(const LogMessage& m, const AppendAck& body);
    void HandleFetchRequest(const LogMessage& m, const FetchRequest& body);
    void HandleFetchResponse(const LogMessage& m, const FetchResponse& body);
    void HandleInstallSnapshot(const LogMessage& m, const InstallSnapshot& body);
    void HandleSnapshotAck(const LogMessage& m, const SnapshotAck& body);
    // Pre- and postconditions every handler shares (HACKING.md, "Pre- and postconditions"):
    // what the node held on entry, checked against what it holds on exit.
    struct HandlerEntry {
        Term term;
        std::size_t commit_len = 0;
        bool leader = false;
    };
    HandlerEntry EnterHandler(const LogMessage& m) const;
    HandlerEntry EnterRequestHandler(const LogMessage& m) const;
    void ExitHandler(const HandlerEntry& entry) const;
    // The handlers' steps, between their entry and exit checks.
    void CountSyncResponse(const LogMessage& m, const SyncResponse& body);
    void AppendFromLeader(const LogMessage& m, const Append& body);
    void CountAppendAck(const LogMessage& m, const AppendAck& body);
    void AnswerFetch(const LogMessage& m, const FetchRequest& body);
    void MergeFetched(const LogMessage& m, const FetchResponse& body);
    void TakeSnapshotChunk(const LogMessage& m, const InstallSnapshot& body);
    void MoveSnapshotWindow(const LogMessage& m, const SnapshotAck& body);
    // Steps of HandleInstallSnapshot: a snapshot this log already covers (no entries needed),
    // collecting a chunk (the whole snapshot once the last one is in), the checks of a chunk and
    // of a whole snapshot, and a refusal (a violation; a fetch abandons its source).
    bool CoversSnapshot(const LogMessage& m, const InstallSnapshot& body) const;
    void CoveredSnapshot(const LogMessage& m, const InstallSnapshot& body);
    std::optional<Snapshot> CollectSnapshotChunk(const LogMessage& m, const InstallSnapshot& body);
    bool StartIncoming(const LogMessage& m, const InstallSnapshot& body);
    bool ChunkAcceptable(const LogMessage& m, const InstallSnapshot& body);
    void AckChunk(NodeId to, const InstallSnapshot& body, bool resend);
    bool SnapshotAcceptable(const LogMessage& m, const InstallSnapshot& body,
                            const Snapshot& snapshot);
    void RefuseSnapshot(const LogMessage& m, const InstallSnapshot& body, LogViolationKind kind);
    void HeartbeatFired();
    void SyncRetryFired();

    // ---- Helpers ------------------------------------------------------------------------------
    bool IsLeader() const { return state_.role != LogRole::Follower; }
    /// True when `bug` is planted. Always false in the production library (conclave_replication):
    /// only conclave_replication_planted, built with CONCLAVE_PLANTED_BUGS for the simulator and
    /// the tests, has planted-bug code paths.
    bool planted(PlantedLogBug bug) const;
    /// Repaired and acting on it (the planted CountRepaired ignores the marker).
    bool NonVoting() const;
    /// Removes the repaired marker once this node holds, durably, the log of a leader of a term
    /// above R up to a commit point at or after that leader's sync point.
    void MaybeClearRepaired();
    LogMeta Meta() const { return LogMeta{state_.term, commit_lsn(), state_.repaired}; }
    bool IsPeer(NodeId n) const;
    // Membership.
    bool IsTarget(NodeId n) const { return IsPeer(n) && replication_targets().contains(n); }
    ActiveConfig Implicit() const;
    /// The id of table index `n` (the decimal index when LogConfig::node_ids is empty).
    std::string IdOf(std::size_t n) const;
    /// §8: the active configuration's table is longer than ours: take it (ids, progress).
    void GrowTable(const std::vector<std::string>& table);
    /// The NotifyMembership of the active configuration.
    NotifyMembership Notice() const;
    /// The resolved configuration of a configuration entry (nullopt: malformed).
    std::optional<ActiveConfig> ResolveEntry(const Entry& e) const;
    /// Whether `entries` holds a malformed configuration entry.
    bool MalformedConfig(const std::vector<Entry>& entries) const;
    /// The latest configuration entry among the held entries before position `len` (snapshot
    /// included), resolved; the implicit configuration when there is none.
    std::pair<std::optional<std::size_t>, ActiveConfig> LatestConfigBefore(std::size_t len) const;
    /// Makes `next` active: NotifyMembership, PersistMeta (R4), and a leader that is not one of
    /// its voters steps down (R6, removing the leader).
    void Activate(const ActiveConfig& next);
    /// The sync round holds answers from a quorum of the active voters (R6).
    bool SyncQuorum() const;
    /// The fetch reached its target: finish the sync if the answers still make a quorum of the
    /// (possibly changed) active voters, else wait for more answers.
    void FetchDone();
    LogActions ProposeEntry(Millis now, Lsn lsn, std::string key, std::string value, bool config);
    void BecomeLeader(Term term);
    void StepDown(ProposeError reason);
    void AdoptTerm(Term term, std::optional<NodeId> leader);
    void RejectStale(const LogMessage& m);
    void EvaluateSync();
    void SendFetch();
    void AbandonSource();
    void FinishSync();
    /// Appends `entries` (which follow position `pos`), skipping those already held and
    /// truncating a conflicting suffix. Returns the position after the last of them.
    std::size_t Merge(std::size_t pos, const std::vector<Entry>& entries);
    void Truncate(std::size_t len);
    /// Folds the prefix of length `len` into the snapshot (PersistSnapshot). Committed only.
    void Compact(std::size_t len);
    void MaybeCompact();
    /// Whether a new entry of `bytes` fits the quota (compacting first if that frees space);
    /// raises the NOSPACE alarm when it does not.
    bool FitsQuota(std::size_t bytes);
    /// Snapshot streaming (sender side): starts a transfer of our snapshot to `peer` (unless one
    /// of the same snapshot is going on), sends chunks while its window allows, sends again from
    /// the receiver's acknowledged offset, notices stalls (with backoff), and keeps a snapshot
    /// being sent when compaction replaces it (pinned).
    bool SendSnapshot(NodeId peer, bool fetch);
    void StartOutgoing(NodeId peer, bool fetch);
    bool StreamSnapshot(NodeId peer);
    void ResendSnapshot(NodeId peer, std::size_t offset);
    void SnapshotStallTick(NodeId peer);
    void PinOutgoing();
    /// Replaces the whole log by `snapshot` (its LSN is not held; it covers our commit point).
    void InstallWhole(Snapshot snapshot);
    void Push(Entry entry);
    bool Replicate(NodeId peer);
    void SendHeartbeat(NodeId peer);
    void Rewind(NodeId peer, std::size_t next_len);
    void AdvanceCommit();
    void SetCommit(std::size_t len);
    void MaybeAck(bool force);
    void FailPending(ProposeError error);
    bool ValidBatch(Lsn after, const std::vector<Entry>& entries) const;
    /// Why merging `entries` at `pos` would contradict this log, or nullptr: an LSN we hold named
    /// for a different entry ("one LSN names one entry"), or a committed entry to be truncated.
    std::optional<LogViolationKind> Contradiction(std::size_t pos,
                                                  const std::vector<Entry>& entries) const;
    /// Counts and records a message no correct peer sends; the caller drops it.
    void Violation(const LogMessage& m, LogViolationKind kind);
    void Drop(LogDropReason reason);
    /// Counts a rollback; the first one of the run is kept (rollback_alarm()), or the first about
    /// this node's own log after a follower's regression.
    void Rollback(RollbackKind kind, NodeId peer, Lsn from, Lsn to);
    /// Leader: `peer`'s answer says it holds `commit` committed (and, for a refusal, that its log
    /// ends at `log_end`). A commit point this log lacks, or a log end below what the peer
    /// acknowledged before it reconnected, is a rollback. Returns false when the answer must not
    /// be acted on.
    bool CheckPeerRollback(NodeId peer, std::optional<Lsn> log_end, Lsn commit);
    /// Follower: an Append would discard committed entries (Contradiction): refused loudly.
    void RefuseTruncation(const LogMessage& m, std::size_t pos, const std::vector<Entry>& entries);

    void Send(NodeId to, LogMessageBody body);
    void SendToAll(LogMessageBody body);
    void Arm(LogTimer timer, Millis delay);
    void Cancel(LogTimer timer);
    void SetRole(LogRole role);
    LogActions Finish();

    struct Pending {
        Lsn lsn{};
        Millis proposed_at{};
        std::uint64_t deadline_tick = 0;
    };

    LogConfig config_;
    std::size_t quorum_;
    ActiveConfig active_;
    /// The latest configuration entry held (position, resolved), if any: R8's other half.
    std::optional<std::pair<std::size_t, ActiveConfig>> appended_config_;
    /// R8: per node, the commit length that removed it (0: not being removed); a leader
    /// replicates to it until it acknowledges a commit point that far (it knows its removal), or
    /// for at most kLeavingTicks heartbeats (a removed node that is down is not waited for).
    std::vector<std::size_t> leaving_until_;
    std::vector<std::uint64_t> leaving_deadline_;
    static constexpr std::uint64_t kLeavingTicks = 10;
    LogState state_;
    Snapshot snapshot_;
    std::vector<Entry> entries_;  // after snapshot_.lsn
    std::size_t snapshot_bytes_ = 0;
    std::size_t tail_bytes_ = 0;
    bool nospace_alarm_ = false;
    /// A snapshot being received in chunks (from, term, and the chunks so far). Kept across
    /// reconnections: the sender resumes at the offset acknowledged.
    struct Incoming {
        NodeId from{};
        Term term{};
        bool fetch = false;
        Snapshot snapshot;
        std::size_t bytes = 0;          // entry_bytes() of snapshot.entries (bounded)
        std::uint64_t count = 0;        // entries announced
        std::uint32_t crc = 0;          // announced: snapshot_crc() of all of them
        std::uint32_t so_far = 0;       // snapshot_crc() of snapshot.entries
        bool resend_asked = false;      // a gap was reported; no more until a chunk fits
        std::size_t held_at_retry = 0;  // fetch: entries held at the last SyncRetry
        bool retry_asked = false;       // fetch: a resend was asked at the last SyncRetry
    };
    std::optional<Incoming> incoming_;
    /// A snapshot being sent to one peer (leader: a follower; sync source: the PASSIVE leader).
    struct Outgoing {
        std::shared_ptr<const Snapshot> pinned;  // null: snapshot_ (still the current one)
        Lsn lsn{};
        std::size_t len = 0;
        std::uint32_t crc = 0;
        bool fetch = false;
        std::size_t acked = 0;                   // entries the receiver said it holds
        std::size_t sent = 0;                    // offset of the next chunk
        bool sent_done = false;                  // the last chunk is sent (since the last resend)
        std::vector<std::size_t> inflight_ends;  // unacknowledged chunks (end offsets)
        bool probing = false;                    // resent after a stall: one chunk at a time
        std::size_t acked_at_last_tick = 0;
        std::uint32_t stalled_ticks = 0;  // heartbeats without progress (resend at powers of 2)
    };
    std::vector<std::optional<Outgoing>> outgoing_;
    /// Threshold compaction waits for a transfer that stalled fewer heartbeats than this.
    static constexpr std::uint32_t kStreamingTicks = 8;
    /// snapshot_crc() of all of snapshot_.entries, computed once per snapshot when first sent.
    std::optional<std::pair<Lsn, std::uint32_t>> snapshot_crc_;
    std::vector<PeerProgress> progress_;
    SyncProgress sync_;
    std::deque<Pending> pending_;
    std::uint8_t armed_timers_ = 0;
    LogCounters counters_;
    LogViolation last_violation_;
    std::optional<RollbackAlarm> rollback_alarm_;
    bool halted_ = false;  // LeaderLacksCommitted: no more writes in this run
    LogActions out_;
};

}  // namespace conclave::replication
