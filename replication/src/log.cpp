// SPDX-License-Identifier: Apache-2.0
// The replicated log core. Read replication/README.md first: it states the protocol and the
// invariants that the CONCLAVE_CHECKs below enforce.
#include "conclave/replication/log.hpp"
#include "conclave/core/enum_names.hpp"
#include "conclave/core/quorum.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "conclave/core/check.hpp"
#include "conclave/replication/key_state.hpp"

namespace conclave::replication {

namespace {
// The tiers of the log core's own checks after every input (ReplicatedLog::CheckInvariants):
// the O(1) invariants are always on; the whole check_invariants(), O(log length), runs after
// every input only in debug builds (no NDEBUG: the asan flavour) or when built with
// -DCONCLAVE_FULL_CHECKS. Release builds (conclaved) run the O(1) tier; the simulator runs
// the whole check_invariants() after every log step itself (sim/src/log_invariants.cpp).
#if !defined(NDEBUG) || defined(CONCLAVE_FULL_CHECKS)
constexpr bool kFullLogChecks = true;
#else
constexpr bool kFullLogChecks = false;
#endif
}  // namespace

namespace {

bool StrictlyIncreasing(Lsn after, const std::vector<Entry>& entries) {
    Lsn prev = after;
    for (const Entry& e : entries) {
        if (!(e.lsn > prev)) {
            return false;
        }
        prev = e.lsn;
    }
    return true;
}

}  // namespace

ReplicatedLog::ReplicatedLog(LogConfig config, RecoveredLog recovered)
    : config_(config),
      quorum_(config.effective_quorum()),
      snapshot_(std::move(recovered.snapshot)),
      entries_(std::move(recovered.entries)) {
    if (auto error = config_.validate()) {
        throw std::invalid_argument("replication config: " + *error);
    }
#ifdef CONCLAVE_PLANTED_BUGS
    if (to_string(config_.planted_bug) == "?") {
        throw std::invalid_argument("replication config: unknown planted_bug");
    }
#else
    if (config_.planted_bug != PlantedLogBug::None) {
        throw std::invalid_argument(
            "replication config: planted bugs exist only in conclave_replication_planted (the "
            "simulator's and the tests' build of this core)");
    }
#endif
    CONCLAVE_CHECK(quorum_ >= 1 && quorum_ <= config_.cluster_size, "quorum <= cluster size");
    CONCLAVE_CHECK(config_.self.value < config_.cluster_size, "node index in range");
    if (!StrictlyIncreasing(snapshot_.lsn, entries_)) {
        throw std::invalid_argument("recovered log: entry LSNs are not strictly increasing");
    }
    if ((snapshot_.len == 0) != (snapshot_.lsn == kNoLsn) ||
        snapshot_.entries.size() > snapshot_.len ||
        !StrictlyIncreasing(kNoLsn, snapshot_.entries) ||
        (!snapshot_.entries.empty() && snapshot_.entries.back().lsn > snapshot_.lsn)) {
        throw std::invalid_argument("recovered snapshot: inconsistent length, LSN or entries");
    }
    snapshot_bytes_ = snapshot_bytes(snapshot_);
    for (const Entry& e : entries_) {
        tail_bytes_ += entry_bytes(e);
    }
    state_.term = std::max(recovered.meta.term, snapshot_.lsn.term);
    if (!entries_.empty() && entries_.back().lsn.term > state_.term) {
        // The meta file lags the entries only if it was lost; the entries prove the term existed.
        state_.term = entries_.back().lsn.term;
    }
    // The recorded commit point is a lower bound; the recovered log may be shorter (torn tail).
    auto commit_end = std::upper_bound(entries_.begin(), entries_.end(), recovered.meta.commit_lsn,
                                       [](Lsn l, const Entry& e) { return l < e.lsn; });
    // The snapshot holds only committed entries.
    state_.commit_len = snapshot_.len + static_cast<std::size_t>(commit_end - entries_.begin());
    state_.durable_len = end_len();
    state_.repaired = recovered.meta.repaired;
    progress_.resize(config_.cluster_size);
    outgoing_.resize(config_.cluster_size);
    sync_.last_lsn.resize(config_.cluster_size);
    sync_.commit_lsn.resize(config_.cluster_size);
    // Membership: every configuration entry recovered must decode (it did when it was accepted);
    // the active configuration is the latest in the committed prefix (R9), the appended one the
    // latest held.
    if (MalformedConfig(snapshot_.entries) || MalformedConfig(entries_)) {
        throw std::invalid_argument(
            "recovered log: a configuration entry does not decode (or membership is off: "
            "LogConfig::decode_configuration is not set)");
    }
    active_ = LatestConfigBefore(state_.commit_len).second;
    leaving_until_.resize(config_.cluster_size, 0);
    leaving_deadline_.resize(config_.cluster_size, 0);
    GrowTable(active_.table);  // R9: the stored table, not the config file's, once it is longer
    if (auto [pos, cfg] = LatestConfigBefore(end_len()); pos) {
        appended_config_.emplace(*pos, cfg);
    }
}

// ---- Inputs ------------------------------------------------------------------------------------

LogActions ReplicatedLog::start(Millis) {
    if (snapshot_.len > 0 && state_.applied_len < snapshot_.len) {
        out_.push_back(ApplyCommitted{snapshot_.entries, snapshot_.lsn});
        state_.applied_len = snapshot_.len;
    }
    SetCommit(state_.commit_len);  // applies the recovered committed prefix
    out_.push_back(NotifyLogRole{state_.role, state_.term});
    if (active_.from_entry) {
        out_.push_back(Notice());
    }
    return Finish();
}

LogActions ReplicatedLog::on_leadership(Millis, const elector::LeadershipSnapshot& snapshot) {
    const bool self_leads =
        snapshot.role == elector::Role::Leader && snapshot.leader == config_.self;
    if (self_leads) {
        const bool already = IsLeader() && state_.term == snapshot.term;
        // A leadership of a term this log has already promised away (or seen another leader of)
        // is stale: the elector will catch up. Stay a follower.
        const bool stale = snapshot.term <= state_.term && !already;
        if (!already && !stale) {
            if (active_.is_voter(config_.self)) {
                BecomeLeader(snapshot.term);
            } else {
                // Not a voter of our active configuration (a learner, or removed): never lead
                // (R7, R8). The term is promised; the elector follows once set_voters reaches it.
                if (IsLeader()) {
                    StepDown(ProposeError::LeadershipLost);
                }
                AdoptTerm(snapshot.term, std::nullopt);
            }
        }
    } else if (IsLeader()) {
        StepDown(ProposeError::LeadershipLost);
    }
    return Finish();
}

LogActions ReplicatedLog::propose(Millis now, Lsn lsn, std::string key, std::string value) {
    return ProposeEntry(now, lsn, std::move(key), std::move(value), false);
}

LogActions ReplicatedLog::propose_config(Millis now, Lsn lsn, std::string value) {
    return ProposeEntry(now, lsn, std::string(kMembersKey), std::move(value), true);
}

LogActions ReplicatedLog::ProposeEntry(Millis now, Lsn lsn, std::string key, std::string value,
                                       bool config) {
    ProposeError error = ProposeError::None;
    if (!IsLeader() || lsn.term != state_.term) {
        error = ProposeError::NotLeader;
    } else if (state_.role != LogRole::LeaderActive &&
               !(config && planted(PlantedLogBug::SkipOwnTermCommit) && sync_.done)) {
        error = ProposeError::NotActive;  // R3: only once the sync point (own term) committed
    } else if (halted_) {
        error = ProposeError::NotActive;  // a rollback lost committed entries: no more writes
    } else if (key.empty() || key.size() > config_.max_key_bytes ||
               value.size() > config_.max_value_bytes || lsn.counter == 0 || !(lsn > last_lsn()) ||
               (!config && is_reserved_key(key))) {
        error = ProposeError::InvalidEntry;
    } else if (config) {
        std::optional<Configuration> cfg;
        if (config_.decode_configuration != nullptr) {
            cfg = config_.decode_configuration(value);
        }
        if (!cfg || check_config_change(*cfg)) {
            ++counters_.config_proposals_refused;
            error = ProposeError::InvalidEntry;
        }
    }
    if (error == ProposeError::None && !FitsQuota(16 + key.size() + value.size())) {
        error = ProposeError::NoSpace;
        ++counters_.nospace_refusals;
    }
    if (error != ProposeError::None) {
        ++counters_.proposals_failed;
        out_.push_back(ProposeResult{lsn, error, now});
        return Finish();
    }
    CONCLAVE_CHECK(lsn > last_lsn(), "LSNs increase");
    Push(Entry{lsn, std::move(key), std::move(value)});
    out_.push_back(PersistEntries{{entries_.back()}});
    pending_.push_back(Pending{lsn, now, state_.tick + config_.propose_timeout_ticks});
    const NodeSet targets = replication_targets();  // once per proposal, not once per node
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        if (targets.contains(NodeId{static_cast<std::uint16_t>(n)})) {
            Replicate(NodeId{static_cast<std::uint16_t>(n)});
        }
    }
    return Finish();
}

LogActions ReplicatedLog::receive(Millis, const LogMessage& m) {
    // The codec refuses terms >= 2^63; a core fed directly (simulator, tests) refuses them too.
    if (!IsPeer(m.from) || m.term.value >= kTermLimit) {
        Drop(IsPeer(m.from) ? LogDropReason::TermOutOfRange : LogDropReason::NotAPeer);
        return Finish();
    }
    const auto* snapshot_chunk = std::get_if<InstallSnapshot>(&m.body);
    const auto* snapshot_ack = std::get_if<SnapshotAck>(&m.body);
    // A fetch's SnapshotAck comes from the PASSIVE leader (like its FetchRequest); a leader's
    // chunks are requests, a source's are responses.
    const bool request = std::holds_alternative<SyncRequest>(m.body) ||
                         std::holds_alternative<Append>(m.body) ||
                         std::holds_alternative<FetchRequest>(m.body) ||
                         (snapshot_chunk != nullptr && !snapshot_chunk->fetch) ||
                         (snapshot_ack != nullptr && snapshot_ack->fetch);
    if (m.term < state_.term) {
        if (request) {
            RejectStale(m);
        }
        return Finish();  // a stale response: its sender has moved on, or it is a late duplicate
    }
    if (m.term > state_.term) {
        // A request comes from the (unique) leader of its term; a response in a higher term only
        // says that such a leader exists.
        if (IsLeader()) {
            StepDown(ProposeError::LeadershipLost);
        }
        AdoptTerm(m.term, request ? std::optional<NodeId>(m.from) : std::nullopt);
    } else if (request) {
        if (IsLeader() || (state_.leader && *state_.leader != m.from)) {
            ++counters_.two_leader_alarms;  // impossible with a correct elector; never obey it
            return Finish();
        }
        state_.leader = m.from;
    }
    std::visit(
        [&](const auto& body) {
            using T = std::decay_t<decltype(body)>;
            if constexpr (std::is_same_v<T, SyncRequest>) {
                HandleSyncRequest(m);
            } else if constexpr (std::is_same_v<T, SyncResponse>) {
                HandleSyncResponse(m, body);
            } else if constexpr (std::is_same_v<T, Append>) {
                HandleAppend(m, body);
            } else if constexpr (std::is_same_v<T, AppendAck>) {
                HandleAppendAck(m, body);
            } else if constexpr (std::is_same_v<T, FetchRequest>) {
                HandleFetchRequest(m, body);
            } else if constexpr (std::is_same_v<T, InstallSnapshot>) {
                HandleInstallSnapshot(m, body);
            } else if constexpr (std::is_same_v<T, SnapshotAck>) {
                HandleSnapshotAck(m, body);
            } else {
                static_assert(std::is_same_v<T, FetchResponse>);
                HandleFetchResponse(m, body);
            }
        },
        m.body);
    return Finish();
}

LogActions ReplicatedLog::timer_fired(Millis, LogTimer timer) {
    const auto bit = static_cast<std::uint8_t>(1U << static_cast<unsigned>(timer));
    if ((armed_timers_ & bit) == 0) {
        return Finish();
    }
    armed_timers_ = static_cast<std::uint8_t>(armed_timers_ & ~bit);
    switch (timer) {
        case LogTimer::Heartbeat:
            HeartbeatFired();
            break;
        case LogTimer::SyncRetry:
            SyncRetryFired();
            break;
    }
    return Finish();
}

LogActions ReplicatedLog::persisted(Millis, Lsn lsn) {
    auto len = length_through(lsn);
    if (!len) {
        // Written before a truncation removed it: says nothing about the current suffix.
        ++counters_.stale_completions;
        return Finish();
    }
    state_.durable_len = std::max(state_.durable_len, *len);
    if (IsLeader()) {
        AdvanceCommit();
    } else {
        MaybeAck(false);
    }
    return Finish();
}

LogActions ReplicatedLog::peer_up(Millis, NodeId peer) {
    if (!IsPeer(peer)) {
        return Finish();
    }
    if (IsLeader() && sync_.done && IsTarget(peer)) {
        // A reconnected follower may have restarted; under fsync "never" it may even have lost
        // what it acknowledged. Count nothing as matched until it acknowledges again.
        const std::size_t guess = progress_[peer.value].match_len;
        progress_[peer.value].match_len = 0;
        progress_[peer.value].acked_before_up = progress_[peer.value].acked;
        Rewind(peer, guess);
        if (outgoing_[peer.value]) {
            // What was in flight died with the connection: resume at the acknowledged offset.
            ResendSnapshot(peer, outgoing_[peer.value]->acked);
        }
        if (!Replicate(peer)) {
            SendHeartbeat(peer);
        }
    } else if (!IsLeader() && outgoing_[peer.value]) {
        // A sync source's transfer to a PASSIVE leader resumes the same way.
        ResendSnapshot(peer, outgoing_[peer.value]->acked);
        StreamSnapshot(peer);
    } else if (IsLeader() && !sync_.done) {
        if (!sync_.responded.contains(peer)) {
            Send(peer, SyncRequest{});
        } else if (sync_.source == peer) {
            SendFetch();
        }
    }
    return Finish();
}

LogActions ReplicatedLog::peer_down(Millis, NodeId peer) {
    if (!IsPeer(peer) || !IsLeader()) {
        return Finish();
    }
    if (sync_.done) {
        const std::size_t guess = progress_[peer.value].match_len;
        progress_[peer.value].match_len = 0;
        Rewind(peer, guess);
    } else if (sync_.source == peer) {
        AbandonSource();
    }
    return Finish();
}

// ---- Message handlers --------------------------------------------------------------------------
// Each handler checks its preconditions on entry and its postconditions on exit: receive() has
// adopted the message's term (or dropped it), so every handler runs in the sender's term; no
// handler changes the term, makes this node a leader (only on_leadership does) or moves the commit
// point back. A request comes from the leader of the term (receive() recorded it), so its handler
// runs on a follower and leaves it one.

ReplicatedLog::HandlerEntry ReplicatedLog::EnterHandler(const LogMessage& m) const {
    CONCLAVE_CHECK(m.term == state_.term, "a handler runs in the sender's term");
    CONCLAVE_CHECK(IsPeer(m.from), "a handler hears a peer");
    return HandlerEntry{state_.term, state_.commit_len, IsLeader()};
}

ReplicatedLog::HandlerEntry ReplicatedLog::EnterRequestHandler(const LogMessage& m) const {
    CONCLAVE_CHECK(!IsLeader(), "a leader's request is handled by a follower");
    CONCLAVE_CHECK(state_.leader == m.from, "a request comes from the leader of the term");
    return EnterHandler(m);
}

void ReplicatedLog::ExitHandler(const HandlerEntry& entry) const {
    CONCLAVE_CHECK(state_.term == entry.term, "a handler changes no term");
    CONCLAVE_CHECK(state_.commit_len >= entry.commit_len, "the commit point never moves back");
    CONCLAVE_CHECK(!IsLeader() || entry.leader, "only a leadership makes a leader");
    CONCLAVE_CHECK(state_.durable_len <= end_len(), "only held entries are durable");
}

// Follower: report our position. The promise (term) was made durable by AdoptTerm before this
// answer leaves (PersistMeta precedes the send in the same batch).
// Repaired (LogMeta::repaired): no answer at all. This node may have lost entries it helped
// commit, so its position must not count in any sync quorum (replication/README.md, "Repair").
void ReplicatedLog::HandleSyncRequest(const LogMessage& m) {
    const HandlerEntry entry = EnterRequestHandler(m);
    const std::size_t end_before = end_len();
    if (NonVoting()) {
        ++counters_.sync_requests_unanswered;
    } else {
        Send(*state_.leader, SyncResponse{last_lsn(), commit_lsn()});
    }
    ExitHandler(entry);
    CONCLAVE_CHECK(end_len() == end_before, "a sync request changes no log");
    CONCLAVE_CHECK(!IsLeader(), "a follower answers the sync request");
}

void ReplicatedLog::HandleSyncResponse(const LogMessage& m, const SyncResponse& body) {
    const HandlerEntry entry = EnterHandler(m);
    CountSyncResponse(m, body);
    ExitHandler(entry);
    CONCLAVE_CHECK(!sync_.done || !sync_.source, "a finished sync has no source");
    CONCLAVE_CHECK(sync_.source != config_.self, "a sync source is another node");
}

void ReplicatedLog::CountSyncResponse(const LogMessage& m, const SyncResponse& body) {
    if (state_.role != LogRole::LeaderPassive || sync_.done) {
        return;  // late: sync is over
    }
    // Nobody holds an entry of this term before its leader's sync point exists.
    if (body.last_lsn.term >= state_.term || body.commit_lsn > body.last_lsn) {
        Violation(m, LogViolationKind::SyncResponseAhead);
        return;
    }
    sync_.responded.insert(m.from);
    sync_.last_lsn[m.from.value] = body.last_lsn;
    sync_.commit_lsn[m.from.value] = body.commit_lsn;
    EvaluateSync();
}

void ReplicatedLog::HandleAppend(const LogMessage& m, const Append& body) {
    const HandlerEntry entry = EnterRequestHandler(m);
    AppendFromLeader(m, body);
    ExitHandler(entry);
    CONCLAVE_CHECK(!IsLeader(), "a follower takes the leader's entries");
    CONCLAVE_CHECK(state_.matched_len <= end_len(), "only held entries match the leader");
    CONCLAVE_CHECK(state_.acked_len <= state_.durable_len, "only durable entries are acknowledged");
    CONCLAVE_CHECK(state_.commit_len <= std::max(entry.commit_len, state_.matched_len),
                   "a follower commits only what matches the leader");
}

void ReplicatedLog::AppendFromLeader(const LogMessage& m, const Append& body) {
    // A plain length and a flag rather than std::optional: GCC 12 at -Os reports the optional's
    // payload "maybe uninitialized" after it was checked.
    const std::optional<std::size_t> through = length_through(body.prev_lsn);
    std::size_t start = through.value_or(0);
    bool known = through.has_value();
    // Compaction: an append whose prev_lsn is inside our snapshot (compacted here, or kNoLsn).
    // The leader of our term holds our snapshot's LSN X (committed: Leader Completeness), so
    // everything it sends below X is the committed prefix we folded: skip it, and merge what
    // follows X (a batch that jumps over X without naming it cannot come from that leader).
    const std::vector<Entry>* entries = &body.entries;
    std::vector<Entry> trimmed;
    if (snapshot_.len > 0 && (known ? start < snapshot_.len : body.prev_lsn < snapshot_.lsn)) {
        auto after = std::upper_bound(body.entries.begin(), body.entries.end(), snapshot_.lsn,
                                      [](Lsn l, const Entry& e) { return l < e.lsn; });
        const bool names_x = after != body.entries.begin() && (after - 1)->lsn == snapshot_.lsn;
        if (after != body.entries.end() && !names_x) {
            known = false;
        } else {
            trimmed.assign(after, body.entries.end());
            entries = &trimmed;
            start = snapshot_.len;
            known = true;
        }
    }
    if (!known) {
        ++counters_.appends_rejected;
        Send(m.from, AppendAck{false, body.prev_lsn, last_lsn(), commit_lsn()});
        return;
    }
    if (!ValidBatch(body.prev_lsn, body.entries)) {
        Drop(LogDropReason::InvalidBatch);
        return;
    }
    if (MalformedConfig(*entries)) {
        Violation(m, LogViolationKind::MalformedConfiguration);
        return;
    }
    if (const auto why = Contradiction(start, *entries)) {
        Violation(m, *why);
        if (*why == LogViolationKind::TruncatesCommitted ||
            *why == LogViolationKind::ContradictsCommitted) {
            RefuseTruncation(m, start, *entries);
        }
        return;
    }
    const std::size_t end = Merge(start, *entries);
    // Everything up to `end` now equals the leader's log (Log Matching: same LSN, same prefix).
    state_.matched_len = std::max(state_.matched_len, end);
    if (body.commit_lsn > commit_lsn()) {
        // Commit only what is known to match the leader: its commit point may lie beyond.
        const Lsn matched = lsn_at(state_.matched_len);
        const Lsn upto = std::min(body.commit_lsn, matched);
        auto len = length_through(upto);
        if (!len) {
            // A leader commits entries it holds: its commit point below our matched prefix
            // (which equals its log) names an entry in it, never a point between two entries.
            Violation(m, LogViolationKind::CommitBetweenEntries);
            return;
        }
        if (*len > state_.commit_len) {
            SetCommit(*len);
        }
    }
    // Answer now if the leader would otherwise hear nothing: a heartbeat, or an append whose
    // entries are all durable already (a re-sent batch whose ack was lost, or that the leader
    // forgot on peer_up). persisted() acknowledges the others once they are durable.
    MaybeAck(body.entries.empty() || end <= state_.durable_len);
}

void ReplicatedLog::HandleAppendAck(const LogMessage& m, const AppendAck& body) {
    const HandlerEntry entry = EnterHandler(m);
    const std::size_t match_before = progress_[m.from.value].match_len;
    CountAppendAck(m, body);
    ExitHandler(entry);
    const PeerProgress& p = progress_[m.from.value];
    CONCLAVE_CHECK(p.match_len >= match_before, "an ack never lowers what a follower matches");
    CONCLAVE_CHECK(!(IsLeader() && sync_.done) || p.match_len <= end_len(),
                   "a follower matches only entries the serving leader holds");
}

void ReplicatedLog::CountAppendAck(const LogMessage& m, const AppendAck& body) {
    if (!IsLeader() || !sync_.done) {
        return;
    }
    PeerProgress& p = progress_[m.from.value];
    // An ok ack names the end of the prefix it acknowledges; a refusal the end of the whole log.
    if (!CheckPeerRollback(m.from, body.ok ? std::nullopt : std::optional<Lsn>(body.last_lsn),
                           body.commit_lsn)) {
        return;
    }
    if (body.ok) {
        p.non_voting = body.non_voting;
        if (body.non_voting) {
            ++counters_.non_voting_acks;
        }
        auto len = length_through(body.last_lsn);
        if (!len) {
            if (body.last_lsn < snapshot_.lsn) {
                // Compacted since we sent it. The follower installed a snapshot we kept for it
                // (pinned): it holds that prefix; the current snapshot follows. Otherwise the
                // heartbeat's retransmission catches up.
                std::optional<Outgoing>& out = outgoing_[m.from.value];
                if (out && !out->fetch && out->lsn == body.last_lsn) {
                    p.match_len = std::max(p.match_len, out->len);
                    p.next_len = std::max(p.next_len, p.match_len);
                    out.reset();
                    Replicate(m.from);
                }
                return;
            }
            Drop(LogDropReason::UnknownAckedLsn);  // we never sent that LSN in this term
            return;
        }
        p.match_len = std::max(p.match_len, *len);
        p.acked = std::max(p.acked, body.last_lsn);
        p.next_len = std::max(p.next_len, p.match_len);
        p.probing = false;
        if (outgoing_[m.from.value] && outgoing_[m.from.value]->len <= p.match_len) {
            outgoing_[m.from.value].reset();  // installed (or no longer needed)
        }
        // R8: a removed node that knows its removal committed is told no more.
        if (const auto known = length_through(body.commit_lsn);
            leaving_until_[m.from.value] != 0 && known && *known >= leaving_until_[m.from.value]) {
            leaving_until_[m.from.value] = 0;
        }
        auto acked = std::upper_bound(p.inflight_ends.begin(), p.inflight_ends.end(), p.match_len);
        p.inflight_ends.erase(p.inflight_ends.begin(), acked);
        AdvanceCommit();
        Replicate(m.from);
        return;
    }
    // The follower lacked prev_lsn. A refusal of an append that is no longer the last probe, or
    // of a position already acknowledged, is stale (reordered): acting on it would only re-send.
    auto refused_len = length_through(body.prev_lsn);
    if (!refused_len || *refused_len <= p.match_len ||
        (p.probing && body.prev_lsn != p.probe_prev)) {
        return;
    }
    // Resume after its last entry if we hold it (then its whole log is a prefix of ours), else
    // after its commit point (committed entries are in our log), else from the start.
    std::size_t resume = 0;
    if (auto l = length_through(body.last_lsn)) {
        resume = *l;
    } else if (auto c = length_through(body.commit_lsn)) {
        resume = *c;
    }
    Rewind(m.from, std::max(std::min(resume, *refused_len - 1), p.match_len));
    Replicate(m.from);
}

void ReplicatedLog::HandleFetchRequest(const LogMessage& m, const FetchRequest& body) {
    const HandlerEntry entry = EnterRequestHandler(m);
    const std::size_t end_before = end_len();
    const std::size_t snapshot_before = snapshot_.len;
    AnswerFetch(m, body);
    ExitHandler(entry);
    CONCLAVE_CHECK(end_len() == end_before, "a sync source's log is only read");
    CONCLAVE_CHECK(snapshot_.len == snapshot_before, "a sync source's snapshot is only read");
    CONCLAVE_CHECK(state_.commit_len == entry.commit_len, "a fetch commits nothing on the source");
}

void ReplicatedLog::AnswerFetch(const LogMessage& m, const FetchRequest& body) {
    FetchResponse response{body.after_lsn, {}, last_lsn()};
    auto start_len = length_through(body.after_lsn);
    if (snapshot_.len > 0 &&
        (start_len ? *start_len < snapshot_.len : body.after_lsn < snapshot_.lsn)) {
        // Compacted away: the leader's commit point is inside our snapshot (which holds committed
        // entries only). Send the snapshot; the fetch goes on after it.
        SendSnapshot(m.from, true);
        return;
    }
    outgoing_[m.from.value].reset();  // a fetch after the snapshot: it was installed
    if (start_len) {
        const std::size_t max_entries = std::min<std::size_t>(
            std::max<std::uint32_t>(body.max_entries, 1), config_.max_batch_entries);
        std::size_t bytes = 0;
        for (std::size_t i = *start_len; i < end_len(); ++i) {
            const Entry& e = at(i);
            if (e.lsn > body.up_to_lsn || response.entries.size() >= max_entries ||
                (!response.entries.empty() && bytes + entry_bytes(e) > config_.max_batch_bytes)) {
                break;
            }
            bytes += entry_bytes(e);
            response.entries.push_back(e);
        }
    }
    Send(m.from, std::move(response));
}

void ReplicatedLog::HandleFetchResponse(const LogMessage& m, const FetchResponse& body) {
    const HandlerEntry entry = EnterHandler(m);
    MergeFetched(m, body);
    ExitHandler(entry);
    CONCLAVE_CHECK(!sync_.done || !sync_.source, "a finished sync has no source");
    CONCLAVE_CHECK(end_len() >= state_.commit_len, "a fetch truncates no committed entry");
}

void ReplicatedLog::MergeFetched(const LogMessage& m, const FetchResponse& body) {
    if (state_.role != LogRole::LeaderPassive || sync_.done || sync_.source != m.from ||
        body.after_lsn != sync_.fetch_after) {
        return;  // duplicate or late
    }
    auto start_len = length_through(body.after_lsn);
    if (body.entries.empty() || !start_len || !ValidBatch(body.after_lsn, body.entries) ||
        body.entries.back().lsn > sync_.target) {
        // The source no longer has what it reported (it restarted and lost a suffix that was not
        // durable): ask it again and choose anew.
        AbandonSource();
        return;
    }
    if (MalformedConfig(body.entries)) {
        Violation(m, LogViolationKind::MalformedConfiguration);
        AbandonSource();
        return;
    }
    if (const auto why = Contradiction(*start_len, body.entries)) {
        Violation(m, *why);
        AbandonSource();
        return;
    }
    counters_.entries_fetched += body.entries.size();
    Merge(*start_len, body.entries);
    sync_.fetch_after = body.entries.back().lsn;
    if (sync_.fetch_after == sync_.target) {
        CONCLAVE_CHECK(last_lsn() == sync_.target, "the adopted log ends at the sync target");
        FetchDone();
    } else {
        SendFetch();
    }
}

void ReplicatedLog::HeartbeatFired() {
    if (!IsLeader() || !sync_.done) {
        return;
    }
    ++state_.tick;
    const NodeSet targets = replication_targets();
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        const NodeId peer{static_cast<std::uint16_t>(n)};
        if (!targets.contains(peer)) {
            continue;  // R8: not a member of the active or the latest appended configuration
        }
        SnapshotStallTick(peer);
        PeerProgress& p = progress_[n];
        if (!p.inflight_ends.empty() && p.match_len == p.match_at_last_tick) {
            ++counters_.retransmissions;  // a whole period without progress: presume loss
            Rewind(peer, p.match_len);
        }
        p.match_at_last_tick = p.match_len;
        if (!Replicate(peer)) {
            SendHeartbeat(peer);
        }
    }
    while (!pending_.empty() && pending_.front().deadline_tick <= state_.tick) {
        ++counters_.proposals_failed;
        out_.push_back(ProposeResult{pending_.front().lsn, ProposeError::TimedOut,
                                     pending_.front().proposed_at});
        pending_.pop_front();
    }
    Arm(LogTimer::Heartbeat, config_.heartbeat_period);
}

void ReplicatedLog::SyncRetryFired() {
    if (state_.role != LogRole::LeaderPassive || sync_.done) {
        return;
    }
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        const NodeId peer{static_cast<std::uint16_t>(n)};
        if (IsPeer(peer) && !sync_.responded.contains(peer)) {
            Send(peer, SyncRequest{});
        }
    }
    if (sync_.source && incoming_ && incoming_->fetch && incoming_->from == *sync_.source) {
        // A snapshot is streaming from the source: ask it to send again from what we hold only
        // after a whole period without progress; after two, the source may no longer hold that
        // snapshot: a FetchRequest starts its current one.
        const std::size_t held = incoming_->snapshot.entries.size();
        if (held != incoming_->held_at_retry) {
            incoming_->retry_asked = false;
        } else if (!incoming_->retry_asked) {
            incoming_->retry_asked = true;
            Send(*sync_.source,
                 SnapshotAck{incoming_->snapshot.lsn, incoming_->snapshot.len, held, true, true});
        } else {
            incoming_->retry_asked = false;
            SendFetch();
        }
        incoming_->held_at_retry = held;
    } else if (sync_.source) {
        SendFetch();
    }
    Arm(LogTimer::SyncRetry, config_.sync_retry_period);
}

// ---- Transitions -------------------------------------------------------------------------------

void ReplicatedLog::BecomeLeader(Term term) {
    CONCLAVE_CHECK(term > state_.term, "a new leadership is of a term above every promise");
    if (IsLeader()) {
        StepDown(ProposeError::LeadershipLost);
    }
    AdoptTerm(term, config_.self);
    SetRole(LogRole::LeaderPassive);
    sync_ = SyncProgress{};
    sync_.last_lsn.assign(config_.cluster_size, kNoLsn);
    sync_.commit_lsn.assign(config_.cluster_size, kNoLsn);
    if (!NonVoting()) {
        sync_.responded.insert(config_.self);  // a repaired leader's own log is no answer
    }
    sync_.last_lsn[config_.self.value] = last_lsn();
    sync_.commit_lsn[config_.self.value] = commit_lsn();
    for (PeerProgress& p : progress_) {
        p = PeerProgress{};
    }
    state_.tick = 0;
    SendToAll(SyncRequest{});
    Arm(LogTimer::SyncRetry, config_.sync_retry_period);
    EvaluateSync();
}

void ReplicatedLog::StepDown(ProposeError reason) {
    CONCLAVE_CHECK(IsLeader(), "only a leader steps down");
    FailPending(reason);
    nospace_alarm_ = false;  // the next leader evaluates the quota anew
    Cancel(LogTimer::Heartbeat);
    Cancel(LogTimer::SyncRetry);
    sync_.done = false;
    sync_.source.reset();
    state_.leader.reset();
    for (auto& o : outgoing_) {
        o.reset();
    }
    SetRole(LogRole::Follower);
}

// Raises the promised term (durably, before anything that depends on it leaves the node) and
// forgets what was matched against the previous term's leader.
void ReplicatedLog::AdoptTerm(Term term, std::optional<NodeId> leader) {
    CONCLAVE_CHECK(term > state_.term, "terms only grow");
    state_.term = term;
    state_.leader = leader;
    state_.matched_len = 0;
    state_.acked_len = 0;
    for (auto& o : outgoing_) {
        o.reset();  // chunks of another term are not taken
    }
    out_.push_back(PersistMeta{Meta()});
}

// A request from a leader of an older term: answer in our term so that it learns it is deposed.
void ReplicatedLog::RejectStale(const LogMessage& m) {
    if (std::holds_alternative<SyncRequest>(m.body)) {
        Send(m.from, SyncResponse{last_lsn(), commit_lsn()});
    } else if (std::holds_alternative<Append>(m.body)) {
        Send(m.from, AppendAck{false, std::get<Append>(m.body).prev_lsn, last_lsn(), commit_lsn()});
    } else if (const auto* chunk = std::get_if<InstallSnapshot>(&m.body)) {
        Send(m.from, AppendAck{false, chunk->lsn, last_lsn(), commit_lsn()});
    } else if (const auto* ack = std::get_if<SnapshotAck>(&m.body)) {
        Send(m.from, FetchResponse{ack->lsn, {}, last_lsn()});
    } else {
        Send(m.from, FetchResponse{std::get<FetchRequest>(m.body).after_lsn, {}, last_lsn()});
    }
}

// With answers from a quorum (self included), adopt the most advanced log among them. That log
// holds every committed entry (README, "Why sync is safe").
void ReplicatedLog::EvaluateSync() {
    if (sync_.done || sync_.source) {
        return;
    }
    if (planted(PlantedLogBug::SkipSync)) {
        FinishSync();
        return;
    }
    if (!SyncQuorum()) {
        return;  // R6: a quorum of the active voters
    }
    // Our own log may have grown from a source abandoned half-way: it is still a prefix of a log
    // that held every committed entry, plus our own committed entries (README, "Sync").
    sync_.last_lsn[config_.self.value] = last_lsn();
    if (NonVoting()) {
        // Repaired: our log may lack committed entries and still end higher (entries of a stale
        // leader). Adopt the most advanced log among the others; ours only if it holds that
        // log's last entry (then, by Log Matching, that whole log is a prefix of ours).
        std::optional<NodeId> best;
        for (std::size_t n = 0; n < config_.cluster_size; ++n) {
            const NodeId node{static_cast<std::uint16_t>(n)};
            if (node != config_.self && sync_.responded.contains(node) &&
                (!best || sync_.last_lsn[n] > sync_.last_lsn[best->value])) {
                best = node;
            }
        }
        CONCLAVE_CHECK(best.has_value(), "a repaired leader's sync quorum holds others");
        const Lsn target = sync_.last_lsn[best->value];
        if (length_through(target) || target == snapshot_.lsn || target < snapshot_.lsn) {
            // Held (or compacted into our snapshot: committed, hence in every quorum's log).
            FinishSync();
            return;
        }
        sync_.source = *best;
        sync_.target = target;
        sync_.fetch_after = commit_lsn();
        SendFetch();
        return;
    }
    NodeId best = config_.self;
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        const NodeId node{static_cast<std::uint16_t>(n)};
        if (sync_.responded.contains(node) && sync_.last_lsn[n] > sync_.last_lsn[best.value]) {
            best = node;
        }
    }
    if (sync_.last_lsn[best.value] <= last_lsn()) {
        FinishSync();  // equal last LSNs mean equal logs
        return;
    }
    sync_.source = best;
    sync_.target = sync_.last_lsn[best.value];
    // Our committed prefix is committed, hence in the source's log at the same place.
    sync_.fetch_after = commit_lsn();
    SendFetch();
}

void ReplicatedLog::SendFetch() {
    Send(*sync_.source, FetchRequest{sync_.fetch_after, sync_.target, config_.max_batch_entries});
}

void ReplicatedLog::AbandonSource() {
    const NodeId source = *sync_.source;
    sync_.responded.erase(source);
    sync_.source.reset();
    Send(source, SyncRequest{});
    EvaluateSync();
}

void ReplicatedLog::FinishSync() {
    CONCLAVE_CHECK(state_.role == LogRole::LeaderPassive && !sync_.done, "sync finishes once");
    const Lsn sync_point{state_.term, 0};
    CONCLAVE_CHECK(last_lsn() < sync_point, "no entry of a term above the leader's");
    Push(Entry{sync_point, {}, {}});
    out_.push_back(PersistEntries{{entries_.back()}});
    state_.sync_index = end_len() - 1;
    sync_.done = true;
    sync_.source.reset();
    ++counters_.syncs_completed;
    Cancel(LogTimer::SyncRetry);
    const NodeSet targets = replication_targets();
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        const NodeId peer{static_cast<std::uint16_t>(n)};
        if (!targets.contains(peer)) {
            continue;
        }
        // Start where the follower's log (as reported) still matches ours; the first reply
        // corrects a wrong guess. Nothing counts as matched before an ack in this term.
        std::size_t next = state_.sync_index;
        if (sync_.responded.contains(peer)) {
            if (auto l = length_through(sync_.last_lsn[n])) {
                next = *l;
            } else if (auto c = length_through(sync_.commit_lsn[n])) {
                next = *c;
            }
        }
        progress_[n] = PeerProgress{};
        progress_[n].next_len = next;
        if (!Replicate(peer)) {
            SendHeartbeat(peer);
        }
    }
    Arm(LogTimer::Heartbeat, config_.heartbeat_period);
    AdvanceCommit();
}

std::size_t ReplicatedLog::Merge(std::size_t pos, const std::vector<Entry>& entries) {
    std::size_t first_new = entries.size();
    if (entries.empty()) {
        return pos;  // a heartbeat (prev_lsn may be kNoLsn below a snapshot)
    }
    CONCLAVE_CHECK(pos >= snapshot_.len, "merges happen after the snapshot");
    for (std::size_t i = 0; i < entries.size(); ++i, ++pos) {
        if (pos < end_len()) {
            if (at(pos).lsn == entries[i].lsn) {
                CONCLAVE_CHECK(at(pos) == entries[i], "one LSN names one entry");
                continue;
            }
            Truncate(pos);
        }
        first_new = i;
        break;
    }
    if (first_new == entries.size()) {
        return pos;
    }
    PersistEntries persist;
    CONCLAVE_CHECK(entries[first_new].lsn > last_lsn(), "LSNs increase");
    persist.entries.assign(entries.begin() + static_cast<std::ptrdiff_t>(first_new), entries.end());
    for (const Entry& e : persist.entries) {
        Push(e);
    }
    out_.push_back(std::move(persist));
    return end_len();
}

void ReplicatedLog::Truncate(std::size_t len) {
    CONCLAVE_CHECK(len >= state_.commit_len, "a committed entry is never truncated");
    CONCLAVE_CHECK(!(IsLeader() && sync_.done), "a leader's log is append-only once it serves");
    CONCLAVE_CHECK(len >= snapshot_.len, "the snapshot is never truncated");
    counters_.entries_truncated += end_len() - len;
    out_.push_back(TruncateEntries{lsn_at(len)});
    for (std::size_t pos = len; pos < end_len(); ++pos) {
        tail_bytes_ -= entry_bytes(at(pos));
    }
    entries_.resize(len - snapshot_.len);
    if (appended_config_ && appended_config_->first >= len) {
        appended_config_.reset();
        if (auto [pos, cfg] = LatestConfigBefore(len); pos) {
            appended_config_.emplace(*pos, cfg);
        }
    }
    state_.durable_len = std::min(state_.durable_len, len);
    state_.matched_len = std::min(state_.matched_len, len);
    state_.acked_len = std::min(state_.acked_len, len);
}

// Sends batches to `peer` while its window allows. Returns whether anything was sent.
bool ReplicatedLog::Replicate(NodeId peer) {
    if (!IsLeader() || !sync_.done) {
        return false;
    }
    PeerProgress& p = progress_[peer.value];
    const std::size_t window = p.probing ? 1 : config_.max_inflight_batches;
    bool sent = false;
    while (p.inflight_ends.size() < window && p.next_len < end_len()) {
        if (p.next_len < snapshot_.len) {
            // What it needs next was compacted away: the snapshot replaces it, streamed in a
            // window of chunks; appends follow once it acknowledges the snapshot's LSN.
            return SendSnapshot(peer, false) || sent;
        }
        std::size_t end = p.next_len;
        std::size_t bytes = 0;
        while (end < end_len() && end - p.next_len < config_.max_batch_entries &&
               (end == p.next_len || bytes + entry_bytes(at(end)) <= config_.max_batch_bytes)) {
            bytes += entry_bytes(at(end));
            ++end;
        }
        Append append{lsn_at(p.next_len), {}, commit_lsn()};
        p.probe_prev = append.prev_lsn;
        append.entries.assign(
            entries_.begin() + static_cast<std::ptrdiff_t>(p.next_len - snapshot_.len),
            entries_.begin() + static_cast<std::ptrdiff_t>(end - snapshot_.len));
        Send(peer, std::move(append));
        p.inflight_ends.push_back(end);
        p.next_len = end;
        sent = true;
    }
    return sent;
}

// An empty append: carries the commit point, and its reply tells whether the follower diverged.
void ReplicatedLog::SendHeartbeat(NodeId peer) {
    // A match inside our snapshot is not held any more: probe from the start (the reply tells).
    const std::size_t match = progress_[peer.value].match_len;
    Send(peer, Append{lsn_at(match >= snapshot_.len ? match : 0), {}, commit_lsn()});
}

void ReplicatedLog::Rewind(NodeId peer, std::size_t next_len) {
    PeerProgress& p = progress_[peer.value];
    p.next_len = std::min(next_len, end_len());
    p.inflight_ends.clear();
    p.probing = true;
}

// Committed = durable on a quorum (self included) in this term, at or after our sync point.
// Entries before the sync point commit with it (they are a prefix of it).
// R1: counted over the voters of the active configuration at the time of counting (learners and
// removed nodes count for nothing; our own copy only while we are a voter). A commit that changes
// the active configuration is followed by a count over the new one.
void ReplicatedLog::AdvanceCommit() {
    if (!IsLeader() || !sync_.done) {
        return;
    }
    std::array<std::size_t, kMaxClusterSize> lens{};  // no allocation on the hot path
    // A repaired node (ourselves, or a follower whose acks say so) counts for nothing.
    const bool ignore_marker = planted(PlantedLogBug::CountRepaired);
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        if (!active_.is_voter(NodeId{static_cast<std::uint16_t>(n)})) {
            lens[n] = 0;
        } else if (n == config_.self.value) {
            lens[n] = NonVoting() ? 0 : state_.durable_len;
        } else {
            const bool marked = progress_[n].non_voting && !ignore_marker;
            lens[n] = marked || progress_[n].regressed ? 0 : progress_[n].match_len;
        }
    }
    std::size_t quorum = active_.from_entry ? active_.quorum() : quorum_;
    if (planted(PlantedLogBug::CommitWithoutQuorum) && quorum > 1) {
        --quorum;
    }
    const auto end = lens.begin() + static_cast<std::ptrdiff_t>(config_.cluster_size);
    const std::size_t stored_on_quorum = quorum_th_largest(lens.begin(), end, quorum);
    if (stored_on_quorum > state_.sync_index && stored_on_quorum > state_.commit_len) {
        const std::uint64_t changes = counters_.config_changes;
        SetCommit(stored_on_quorum);
        if (counters_.config_changes != changes) {
            AdvanceCommit();  // re-count over the new voters (we may have stepped down)
            return;
        }
    }
    if (state_.role == LogRole::LeaderPassive && state_.commit_len > state_.sync_index) {
        SetRole(LogRole::LeaderActive);
    }
}

void ReplicatedLog::SetCommit(std::size_t len) {
    CONCLAVE_CHECK(len >= state_.commit_len, "the commit point never moves back");
    CONCLAVE_CHECK(len <= end_len(), "only held entries commit");
    // Membership: the latest configuration entry among the newly committed ones becomes active.
    std::optional<std::size_t> config_pos;
    for (std::size_t pos = len; pos > std::max(state_.commit_len, snapshot_.len); --pos) {
        if (is_config_entry(at(pos - 1))) {
            config_pos = pos - 1;
            break;
        }
    }
    counters_.entries_committed += len - state_.commit_len;
    state_.commit_len = len;
    if (state_.applied_len < len) {
        CONCLAVE_CHECK(state_.applied_len >= snapshot_.len, "the snapshot was applied");
        ApplyCommitted apply;
        apply.entries.assign(
            entries_.begin() + static_cast<std::ptrdiff_t>(state_.applied_len - snapshot_.len),
            entries_.begin() + static_cast<std::ptrdiff_t>(len - snapshot_.len));
        out_.push_back(std::move(apply));
        state_.applied_len = len;
    }
    const Lsn committed = commit_lsn();
    if (!pending_.empty() && pending_.front().lsn <= committed &&
        !planted(PlantedLogBug::ForgetCommitPoint)) {
        // The commit point is durable before a writer hears "committed": after a restart this
        // node still refuses to discard what it acknowledged (RefuseTruncation). Only the
        // ProposeResults below wait for it (PersistMeta::before_results).
        out_.push_back(PersistMeta{Meta(), true});
    }
    while (!pending_.empty() && pending_.front().lsn <= committed) {
        ++counters_.proposals_committed;
        out_.push_back(
            ProposeResult{pending_.front().lsn, ProposeError::None, pending_.front().proposed_at});
        pending_.pop_front();
    }
    if (config_pos) {
        auto cfg = ResolveEntry(at(*config_pos));
        CONCLAVE_CHECK(cfg.has_value(), "a held configuration entry decodes");
        Activate(*cfg);
    }
}

// Follower: acknowledge the durable part of what matches the leader.
void ReplicatedLog::MaybeAck(bool force) {
    if (IsLeader() || !state_.leader) {
        return;
    }
    const std::size_t ack_len = std::min(state_.durable_len, state_.matched_len);
    if (force || ack_len > state_.acked_len) {
        Send(*state_.leader, AppendAck{true, {}, lsn_at(ack_len), commit_lsn(), NonVoting()});
        state_.acked_len = std::max(state_.acked_len, ack_len);
    }
}

void ReplicatedLog::FailPending(ProposeError error) {
    for (const Pending& p : pending_) {
        ++counters_.proposals_failed;
        out_.push_back(ProposeResult{p.lsn, error, p.proposed_at});
    }
    pending_.clear();
}

std::optional<LogViolationKind> ReplicatedLog::Contradiction(
    std::size_t pos, const std::vector<Entry>& entries) const {
    for (const Entry& e : entries) {
        if (pos >= end_len()) {
            return std::nullopt;
        }
        if (at(pos).lsn != e.lsn) {
            // Merge truncates here.
            if (pos < state_.commit_len) {
                return LogViolationKind::TruncatesCommitted;
            }
            return std::nullopt;
        }
        if (!(at(pos) == e)) {
            return pos < state_.commit_len ? LogViolationKind::ContradictsCommitted
                                           : LogViolationKind::OneLsnTwoEntries;
        }
        ++pos;
    }
    return std::nullopt;
}

void ReplicatedLog::Violation(const LogMessage& m, LogViolationKind kind) {
    ++counters_.protocol_violation_alarms;
    ++counters_.violations_by_kind[static_cast<std::size_t>(kind)];
    last_violation_ = LogViolation{describe(kind), kind, m.from, m.term};
}

void ReplicatedLog::Drop(LogDropReason reason) {
    ++counters_.messages_dropped;
    ++counters_.dropped_by_reason[static_cast<std::size_t>(reason)];
}

// Follower: the leader of our term asks us to discard entries we know committed. Never obeyed
// (Contradiction): alarm, naming the range, and answer with our log's end and commit point, so
// that the leader learns that it lacks committed entries (CheckPeerRollback) and stops.
void ReplicatedLog::RefuseTruncation(const LogMessage& m, std::size_t pos,
                                     const std::vector<Entry>& entries) {
    std::size_t first = pos;
    for (const Entry& e : entries) {
        if (first >= end_len() || at(first).lsn != e.lsn || !(at(first) == e)) {
            break;
        }
        ++first;
    }
    Rollback(RollbackKind::RefusedTruncation, m.from,
             first > snapshot_.len ? lsn_at(first) : snapshot_.lsn, commit_lsn());
    const Lsn prev =
        std::holds_alternative<Append>(m.body) ? std::get<Append>(m.body).prev_lsn : kNoLsn;
    Send(m.from, AppendAck{false, prev, last_lsn(), commit_lsn()});
}

bool ReplicatedLog::CheckPeerRollback(NodeId peer, std::optional<Lsn> log_end, Lsn commit) {
    PeerProgress& p = progress_[peer.value];
    // Every committed entry is in a serving leader's log (sync adopted the most advanced log of
    // a quorum). A committed point we do not hold (and did not compact) means that quorum's logs
    // had lost committed entries: a rollback. Take no more writes rather than lose them.
    if (commit > snapshot_.lsn && !length_through(commit)) {
        if (!halted_) {
            Rollback(RollbackKind::LeaderLacksCommitted, peer, commit_lsn(), commit);
        }
        halted_ = true;
        FailPending(ProposeError::LeadershipLost);
        return false;
    }
    // Within a term a follower never loses what it acknowledged (it truncates only entries that
    // contradict this leader's, and acknowledges only durable ones): a log ending below it after
    // a reconnection is an older copy of its state, or a disk that lost acknowledged entries.
    if (log_end && *log_end < p.acked_before_up && !p.regressed) {
        p.regressed = true;
        Rollback(RollbackKind::FollowerRegressed, peer, *log_end, p.acked_before_up);
    }
    return true;
}

void ReplicatedLog::Rollback(RollbackKind kind, NodeId peer, Lsn from, Lsn to) {
    ++counters_.rollback_alarms;
    ++counters_.rollbacks_by_kind[static_cast<std::size_t>(kind)];
    // The first one, unless a follower's regression is followed by one about this node's own log
    // (a refusal, or a leader lacking committed entries), which says more.
    if (!rollback_alarm_ || (rollback_alarm_->kind == RollbackKind::FollowerRegressed &&
                             kind != RollbackKind::FollowerRegressed)) {
        rollback_alarm_ = RollbackAlarm{kind, peer, state_.term, from, to};
    }
}

std::string_view to_string(RollbackKind kind) {
    return enum_name<NameStyle::Snake>(kind);
}

std::string describe(const RollbackAlarm& a, const std::vector<std::string>& node_ids) {
    const std::string peer =
        a.peer.value < node_ids.size() ? node_ids[a.peer.value] : std::to_string(a.peer.value);
    const std::string range = "after " + to_string(a.from) + " up to " + to_string(a.to);
    switch (a.kind) {
        case RollbackKind::RefusedTruncation:
            return "refused to discard the committed entries " + range + ": the leader of term " +
                   std::to_string(a.term.value) + " (" + peer +
                   ") lacks them (a node's state was restored from an older copy or lost); the "
                   "cluster must not go on without them";
        case RollbackKind::LeaderLacksCommitted:
            return "this leader (term " + std::to_string(a.term.value) +
                   ") lacks committed entries " + range + " that " + peer +
                   " holds (a node's state was restored from an older copy or lost): it takes "
                   "no writes";
        case RollbackKind::FollowerRegressed:
            return peer + "'s log ends at " + to_string(a.from) + ", below " + to_string(a.to) +
                   " that it acknowledged in term " + std::to_string(a.term.value) +
                   " (its state was restored from an older copy or lost): its acknowledgements "
                   "count for nothing in this term";
    }
    return "unknown rollback";
}

std::string_view to_string(LogDropReason reason) {
    return enum_name<NameStyle::Snake>(reason);
}

std::string_view to_string(LogViolationKind kind) {
    return enum_name<NameStyle::Snake>(kind);
}

const char* describe(LogViolationKind kind) {
    switch (kind) {
        case LogViolationKind::SyncResponseAhead:
            return "SyncResponse reports entries of the syncing leader's term";
        case LogViolationKind::TruncatesCommitted:
            return "a committed entry would be truncated";
        case LogViolationKind::ContradictsCommitted:
            return "contradicts a committed entry (one LSN, two entries)";
        case LogViolationKind::OneLsnTwoEntries:
            return "one LSN names two entries";
        case LogViolationKind::CommitBetweenEntries:
            return "Append commits a point between entries of the matched prefix";
        case LogViolationKind::SnapshotAbsurdLength:
            return "InstallSnapshot of an absurd length";
        case LogViolationKind::SnapshotTooManyEntries:
            return "InstallSnapshot holds more entries than its length";
        case LogViolationKind::SnapshotNotOrdered:
            return "InstallSnapshot is not an ordered state at its LSN";
        case LogViolationKind::SnapshotLengthContradicts:
            return "InstallSnapshot's length contradicts our log";
        case LogViolationKind::SnapshotInsideCommitted:
            return "InstallSnapshot ends inside our committed prefix but is not in our log";
        case LogViolationKind::SnapshotTooLarge:
            return "InstallSnapshot holds more bytes than max_snapshot_bytes";
        case LogViolationKind::SnapshotChunkInconsistent:
            return "InstallSnapshot chunk does not fit its snapshot's entry count";
        case LogViolationKind::SnapshotChecksum:
            return "InstallSnapshot's entries do not match its checksum";
        case LogViolationKind::MalformedConfiguration:
            return "a configuration entry does not decode or names an unknown node id";
    }
    return "unknown protocol violation";
}

bool ReplicatedLog::ValidBatch(Lsn after, const std::vector<Entry>& entries) const {
    if (!StrictlyIncreasing(after, entries)) {
        return false;
    }
    return std::all_of(entries.begin(), entries.end(), [&](const Entry& e) {
        return e.lsn.term <= state_.term && is_sync_point(e) == e.key.empty() &&
               !(is_sync_point(e) && !e.value.empty());
    });
}

// A snapshot chunk: from the leader (a follower whose next entry the leader compacted away), or
// from the sync source (our fetch started inside its snapshot). Chunks are collected in order,
// each acknowledged (SnapshotAck: the sender keeps a bounded window in flight); the last one
// installs the snapshot. A snapshot this log already covers needs no entries.
void ReplicatedLog::HandleInstallSnapshot(const LogMessage& m, const InstallSnapshot& body) {
    const HandlerEntry entry = EnterHandler(m);
    const std::size_t snapshot_before = snapshot_.len;
    TakeSnapshotChunk(m, body);
    ExitHandler(entry);
    // (The planted CompactUncommitted breaks these on purpose: CheckInvariants.)
    const bool compacts_uncommitted = planted(PlantedLogBug::CompactUncommitted);
    CONCLAVE_CHECK(snapshot_.len >= snapshot_before || compacts_uncommitted,
                   "an installed snapshot never goes back");
    CONCLAVE_CHECK(snapshot_.len <= state_.commit_len || compacts_uncommitted,
                   "an installed snapshot holds committed entries only");
    CONCLAVE_CHECK(state_.applied_len == state_.commit_len, "an installed snapshot is applied");
}

void ReplicatedLog::TakeSnapshotChunk(const LogMessage& m, const InstallSnapshot& body) {
    if (body.fetch ? (state_.role != LogRole::LeaderPassive || sync_.done || sync_.source != m.from)
                   : IsLeader()) {
        return;  // late, or not for us
    }
    if (body.lsn == kNoLsn || body.len == 0 || body.lsn.term > state_.term) {
        RefuseSnapshot(m, body, LogViolationKind::SnapshotNotOrdered);
        return;
    }
    if (body.fetch && body.lsn > sync_.target) {
        AbandonSource();  // beyond the log we adopt: not the source we chose
        return;
    }
    if (CoversSnapshot(m, body)) {
        CoveredSnapshot(m, body);
        return;
    }
    std::optional<Snapshot> whole = CollectSnapshotChunk(m, body);
    if (!whole || !SnapshotAcceptable(m, body, *whole)) {
        return;
    }
    if (whole->len < state_.commit_len || whole->lsn <= commit_lsn()) {
        RefuseSnapshot(m, body, LogViolationKind::SnapshotInsideCommitted);
        return;
    }
    InstallWhole(std::move(*whole));
    if (body.fetch && state_.role != LogRole::LeaderPassive) {
        return;  // its configuration does not have us as a voter: we stepped down (R6)
    }
    CoveredSnapshot(m, body);  // now held: acknowledge it, or go on fetching after it
}

bool ReplicatedLog::CoversSnapshot(const LogMessage&, const InstallSnapshot& body) const {
    return (snapshot_.len > 0 && body.lsn <= snapshot_.lsn) || length_through(body.lsn);
}

// A snapshot at or below our own, or whose LSN we hold: our prefix up to there is the sender's
// (Log Matching) and committed. A follower acknowledges it; a PASSIVE leader fetches after it.
void ReplicatedLog::CoveredSnapshot(const LogMessage& m, const InstallSnapshot& body) {
    if (body.fetch && body.lsn <= sync_.fetch_after) {
        return;  // a late chunk of a snapshot the fetch is past
    }
    if (body.lsn < snapshot_.lsn) {
        // Older than ours: our snapshot covers it (both are the committed history's prefixes).
        if (body.fetch) {
            AbandonSource();
            return;
        }
        state_.matched_len = std::max(state_.matched_len, snapshot_.len);
        MaybeAck(true);
        return;
    }
    const std::optional<std::size_t> held = length_through(body.lsn);
    CONCLAVE_CHECK(held.has_value(), "a covered snapshot's LSN is held");
    if (*held != body.len) {
        RefuseSnapshot(m, body, LogViolationKind::SnapshotLengthContradicts);
        return;
    }
    if (!body.fetch) {
        state_.matched_len = std::max(state_.matched_len, *held);
        if (*held > state_.commit_len) {
            SetCommit(*held);
        }
        MaybeAck(true);
        return;
    }
    // The fetch goes on after the snapshot.
    sync_.fetch_after = body.lsn;
    if (sync_.fetch_after == sync_.target) {
        FetchDone();
    } else {
        SendFetch();
    }
}

std::optional<Snapshot> ReplicatedLog::CollectSnapshotChunk(const LogMessage& m,
                                                            const InstallSnapshot& body) {
    const bool same = incoming_ && incoming_->from == m.from && incoming_->term == m.term &&
                      incoming_->fetch == body.fetch && incoming_->snapshot.lsn == body.lsn &&
                      incoming_->snapshot.len == body.len && incoming_->count == body.count &&
                      incoming_->crc == body.crc;
    if (!same && !StartIncoming(m, body)) {
        return std::nullopt;
    }
    Incoming& in = *incoming_;
    const std::size_t held = in.snapshot.entries.size();
    if (body.offset != held) {
        Drop(LogDropReason::SnapshotChunkOutOfOrder);
        if (body.offset < held) {
            AckChunk(m.from, body, false);  // a duplicate: say where we are, the sender skips on
        } else if (!in.resend_asked) {
            in.resend_asked = true;  // a gap (a lost chunk, or one we never had): once per gap
            AckChunk(m.from, body, true);
        }
        return std::nullopt;
    }
    if (!ChunkAcceptable(m, body)) {
        return std::nullopt;
    }
    for (const Entry& e : body.entries) {
        in.so_far = snapshot_crc(in.so_far, e);
    }
    in.snapshot.entries.insert(in.snapshot.entries.end(), body.entries.begin(), body.entries.end());
    in.resend_asked = false;
    if (!body.done) {
        AckChunk(m.from, body, false);
        return std::nullopt;
    }
    if (in.so_far != in.crc) {
        incoming_.reset();
        RefuseSnapshot(m, body, LogViolationKind::SnapshotChecksum);
        return std::nullopt;
    }
    Snapshot snapshot = std::move(in.snapshot);
    incoming_.reset();
    return snapshot;
}

// The first chunk seen of a snapshot (any offset: a later one asks for a resend from 0).
bool ReplicatedLog::StartIncoming(const LogMessage& m, const InstallSnapshot& body) {
    incoming_.reset();
    if (body.len > std::uint64_t{1} << 48) {
        Violation(m, LogViolationKind::SnapshotAbsurdLength);
        return false;
    }
    if (body.count > body.len) {
        RefuseSnapshot(m, body, LogViolationKind::SnapshotTooManyEntries);
        return false;
    }
    incoming_ = Incoming{};
    incoming_->from = m.from;
    incoming_->term = m.term;
    incoming_->fetch = body.fetch;
    incoming_->snapshot = Snapshot{body.lsn, static_cast<std::size_t>(body.len), {}};
    incoming_->count = body.count;
    incoming_->crc = body.crc;
    return true;
}

// The chunk that follows what we hold: it must fit the announced count (the last one exactly),
// continue the order of LSNs up to the snapshot's, and keep within max_snapshot_bytes.
bool ReplicatedLog::ChunkAcceptable(const LogMessage& m, const InstallSnapshot& body) {
    Incoming& in = *incoming_;
    const std::uint64_t end = in.snapshot.entries.size() + body.entries.size();
    std::optional<LogViolationKind> wrong;
    if (end > in.count || body.done != (end == in.count)) {
        wrong = LogViolationKind::SnapshotChunkInconsistent;
    } else if (!StrictlyIncreasing(
                   in.snapshot.entries.empty() ? kNoLsn : in.snapshot.entries.back().lsn,
                   body.entries) ||
               (!body.entries.empty() && body.entries.back().lsn > body.lsn) ||
               std::any_of(body.entries.begin(), body.entries.end(),
                           [](const Entry& e) { return e.key.empty() || is_sync_point(e); })) {
        wrong = LogViolationKind::SnapshotNotOrdered;
    }
    // Bounded in bytes: what a snapshot may hold here is collected, never more.
    std::size_t bytes = in.bytes;
    for (const Entry& e : body.entries) {
        bytes += entry_bytes(e);
    }
    if (!wrong && bytes > config_.effective_max_snapshot_bytes()) {
        wrong = LogViolationKind::SnapshotTooLarge;
    }
    if (wrong) {
        incoming_.reset();
        RefuseSnapshot(m, body, *wrong);  // a fetch abandons its source: another may do better
        return false;
    }
    in.bytes = bytes;
    return true;
}

void ReplicatedLog::AckChunk(NodeId to, const InstallSnapshot& body, bool resend) {
    const std::size_t held = incoming_ ? incoming_->snapshot.entries.size() : 0;
    Send(to, SnapshotAck{body.lsn, body.len, held, body.fetch, resend});
}

bool ReplicatedLog::SnapshotAcceptable(const LogMessage& m, const InstallSnapshot& body,
                                       const Snapshot& snapshot) {
    const bool well_formed =
        snapshot.len > 0 && snapshot.lsn != kNoLsn && snapshot.lsn.term <= state_.term &&
        StrictlyIncreasing(kNoLsn, snapshot.entries) &&
        (snapshot.entries.empty() || snapshot.entries.back().lsn <= snapshot.lsn) &&
        std::none_of(snapshot.entries.begin(), snapshot.entries.end(),
                     [](const Entry& e) { return e.key.empty() || is_sync_point(e); });
    if (!well_formed) {
        RefuseSnapshot(m, body, LogViolationKind::SnapshotNotOrdered);
        return false;
    }
    if (MalformedConfig(snapshot.entries)) {
        RefuseSnapshot(m, body, LogViolationKind::MalformedConfiguration);
        return false;
    }
    return true;
}

void ReplicatedLog::RefuseSnapshot(const LogMessage& m, const InstallSnapshot& body,
                                   LogViolationKind kind) {
    Violation(m, kind);
    if (body.fetch) {
        AbandonSource();
    }
}

// ---- Compaction and quota -----------------------------------------------------------------------

void ReplicatedLog::Push(Entry entry) {
    tail_bytes_ += entry_bytes(entry);
    entries_.push_back(std::move(entry));
    if (is_config_entry(entries_.back())) {
        auto cfg = ResolveEntry(entries_.back());
        CONCLAVE_CHECK(cfg.has_value(), "configuration entries are checked before they are held");
        appended_config_.emplace(end_len() - 1, *cfg);
    }
}

bool ReplicatedLog::FitsQuota(std::size_t bytes) {
    const auto over = [&] {
        return (config_.quota_entries != 0 && used_entries() + 1 > config_.quota_entries) ||
               (config_.quota_bytes != 0 && used_bytes() + bytes > config_.quota_bytes);
    };
    if (nospace_alarm_) {
        return false;
    }
    if (!over()) {
        return true;
    }
    // Full: fold everything committed (and durable here) into the snapshot first; superseded
    // values free space. Still full: NOSPACE until a compaction frees space or leadership moves.
    const std::size_t upto = std::min(state_.commit_len, state_.durable_len);
    if (upto > snapshot_.len) {
        Compact(upto);
    }
    if (!over()) {
        return true;
    }
    nospace_alarm_ = true;
    return false;
}

void ReplicatedLog::MaybeCompact() {
    if (config_.compact_threshold == 0) {
        return;
    }
    std::size_t upto = std::min(state_.commit_len, state_.durable_len);
    if (planted(PlantedLogBug::CompactUncommitted)) {
        upto = state_.durable_len;  // wrong: past the commit point
    }
    if (upto <= snapshot_.len || upto - snapshot_.len <= config_.compact_threshold) {
        return;
    }
    // A leader streaming its snapshot to a follower that makes progress waits (the quota does
    // not): compacting now would leave that follower a snapshot behind, the entries after it
    // gone, and another whole snapshot to receive.
    for (std::size_t n = 0; n < outgoing_.size(); ++n) {
        const std::optional<Outgoing>& out = outgoing_[n];
        if (IsLeader() && out && !out->fetch && !out->pinned &&
            out->stalled_ticks < kStreamingTicks &&
            IsTarget(NodeId{static_cast<std::uint16_t>(n)})) {
            return;
        }
    }
    Compact(upto - config_.compact_retain);
}

void ReplicatedLog::Compact(std::size_t len) {
    if (!planted(PlantedLogBug::CompactUncommitted)) {
        CONCLAVE_CHECK(len <= state_.commit_len, "only committed entries are compacted");
    }
    CONCLAVE_CHECK(len > snapshot_.len && len <= state_.durable_len, "compaction of held entries");
    const std::size_t used_before = used_bytes();
    const std::size_t count_before = used_entries();
    KeyState latest;
    for (Entry& e : snapshot_.entries) {
        latest.apply(std::move(e));  // snapshot_ is replaced below
    }
    for (std::size_t pos = snapshot_.len; pos < len; ++pos) {
        latest.apply(at(pos));
    }
    Snapshot next{lsn_at(len), len, latest.take_in_lsn_order()};
    const std::size_t folded = len - snapshot_.len;
    for (std::size_t pos = snapshot_.len; pos < len; ++pos) {
        tail_bytes_ -= entry_bytes(at(pos));
    }
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(folded));
    PinOutgoing();
    snapshot_ = std::move(next);
    snapshot_bytes_ = snapshot_bytes(snapshot_);
    ++counters_.compactions;
    counters_.entries_compacted += folded;
    out_.push_back(PersistSnapshot{snapshot_});
    if (nospace_alarm_ && (used_bytes() < used_before || used_entries() < count_before)) {
        nospace_alarm_ = false;
    }
}

void ReplicatedLog::InstallWhole(Snapshot snapshot) {
    CONCLAVE_CHECK(snapshot.len >= state_.commit_len, "a snapshot covers the committed prefix");
    ++counters_.snapshots_installed;
    counters_.entries_truncated += entries_.size();
    counters_.entries_committed += snapshot.len - state_.commit_len;
    entries_.clear();
    tail_bytes_ = 0;
    PinOutgoing();
    snapshot_ = std::move(snapshot);
    snapshot_bytes_ = snapshot_bytes(snapshot_);
    out_.push_back(PersistSnapshot{snapshot_});
    state_.commit_len = snapshot_.len;
    state_.durable_len = snapshot_.len;  // PersistSnapshot is durable when performed
    state_.matched_len = std::min(state_.matched_len, snapshot_.len);
    state_.acked_len = std::min(state_.acked_len, snapshot_.len);
    out_.push_back(ApplyCommitted{snapshot_.entries, snapshot_.lsn});
    state_.applied_len = snapshot_.len;
    // The snapshot keeps the latest configuration entry as the value of its key.
    appended_config_.reset();
    auto [pos, cfg] = LatestConfigBefore(snapshot_.len);
    if (pos) {
        appended_config_.emplace(*pos, cfg);
    }
    Activate(cfg);
}

// ---- Snapshot streaming (sender) ----------------------------------------------------------------

// Leader (fetch false): a follower needs the snapshot; a transfer under way goes on (also of a
// snapshot that compaction since replaced: pinned), else one of our snapshot starts. Sync source
// (fetch true): the PASSIVE leader asked for it, and has none of it: a transfer starts.
bool ReplicatedLog::SendSnapshot(NodeId peer, bool fetch) {
    const std::optional<Outgoing>& out = outgoing_[peer.value];
    if (fetch || !out || out->fetch) {
        StartOutgoing(peer, fetch);
    }
    return StreamSnapshot(peer);
}

void ReplicatedLog::StartOutgoing(NodeId peer, bool fetch) {
    if (!snapshot_crc_ || snapshot_crc_->first != snapshot_.lsn) {
        std::uint32_t crc = 0;
        for (const Entry& e : snapshot_.entries) {
            crc = snapshot_crc(crc, e);
        }
        snapshot_crc_.emplace(snapshot_.lsn, crc);
    }
    std::optional<Outgoing>& out = outgoing_[peer.value];
    out = Outgoing{};
    out->lsn = snapshot_.lsn;
    out->len = snapshot_.len;
    out->crc = snapshot_crc_->second;
    out->fetch = fetch;
    ++counters_.snapshots_sent;
}

// Sends chunks from `sent` while fewer than max_inflight_batches are unacknowledged (one while
// probing after a stall): a snapshot of any size never has more than a window in the mesh's
// send queue.
bool ReplicatedLog::StreamSnapshot(NodeId peer) {
    Outgoing& out = *outgoing_[peer.value];
    const Snapshot& s = out.pinned ? *out.pinned : snapshot_;
    CONCLAVE_CHECK(s.lsn == out.lsn && s.len == out.len, "a transfer sends its own snapshot");
    std::size_t window = out.probing ? 1 : config_.max_inflight_batches;
    if (planted(PlantedLogBug::IgnoreSnapshotWindow)) {
        window = std::numeric_limits<std::size_t>::max();  // wrong: the whole snapshot at once
    }
    bool sent = false;
    while (!out.sent_done && out.inflight_ends.size() < window) {
        InstallSnapshot chunk{s.lsn, s.len,     out.sent,         {},
                              false, out.fetch, s.entries.size(), out.crc};
        std::size_t bytes = 0;
        while (out.sent < s.entries.size() && chunk.entries.size() < config_.max_batch_entries &&
               (chunk.entries.empty() ||
                bytes + entry_bytes(s.entries[out.sent]) <= config_.max_batch_bytes)) {
            bytes += entry_bytes(s.entries[out.sent]);
            chunk.entries.push_back(s.entries[out.sent]);
            ++out.sent;
        }
        chunk.done = out.sent == s.entries.size();
        out.sent_done = chunk.done;
        out.inflight_ends.push_back(out.sent);
        Send(peer, std::move(chunk));
        sent = true;
    }
    return sent;
}

// Sends again from `offset` (what the receiver holds): after a reconnection, a gap it reported,
// or a stall. Nothing before it is sent again.
void ReplicatedLog::ResendSnapshot(NodeId peer, std::size_t offset) {
    Outgoing& out = *outgoing_[peer.value];
    out.acked = offset;
    out.sent = offset;
    out.sent_done = false;
    out.inflight_ends.clear();
}

// The receiver says how much of the snapshot it holds: the window moves on, or (resend) the
// chunks after that are sent again.
void ReplicatedLog::HandleSnapshotAck(const LogMessage& m, const SnapshotAck& body) {
    const HandlerEntry entry = EnterHandler(m);
    const std::size_t end_before = end_len();
    const std::size_t snapshot_before = snapshot_.len;
    MoveSnapshotWindow(m, body);
    ExitHandler(entry);
    CONCLAVE_CHECK(end_len() == end_before, "a snapshot ack changes no log");
    CONCLAVE_CHECK(snapshot_.len == snapshot_before, "a snapshot ack changes no snapshot");
    CONCLAVE_CHECK(state_.commit_len == entry.commit_len, "a snapshot ack commits nothing");
}

void ReplicatedLog::MoveSnapshotWindow(const LogMessage& m, const SnapshotAck& body) {
    if (body.fetch ? IsLeader() : (!IsLeader() || !sync_.done)) {
        return;
    }
    std::optional<Outgoing>& out = outgoing_[m.from.value];
    if (!out && body.fetch && body.resend && body.lsn == snapshot_.lsn &&
        body.len == snapshot_.len) {
        StartOutgoing(m.from, true);  // we dropped the transfer (compaction): take it up again
    }
    if (!out || out->fetch != body.fetch || out->lsn != body.lsn || out->len != body.len) {
        return;  // late: that transfer is over
    }
    const std::size_t count = out->pinned ? out->pinned->entries.size() : snapshot_.entries.size();
    if (body.offset > count) {
        Drop(LogDropReason::SnapshotAckOutOfRange);
        return;
    }
    const auto offset = static_cast<std::size_t>(body.offset);
    if (body.resend) {
        ResendSnapshot(m.from, offset);
        out->probing = true;  // one chunk until the receiver shows progress again
    } else if (offset > out->acked) {
        out->acked = offset;
        out->sent = std::max(out->sent, offset);
        auto acked = std::upper_bound(out->inflight_ends.begin(), out->inflight_ends.end(), offset);
        out->inflight_ends.erase(out->inflight_ends.begin(), acked);
        out->probing = false;
    } else {
        return;  // a duplicate or a reordered ack
    }
    StreamSnapshot(m.from);
}

// Leader heartbeat: a transfer with chunks in flight and no progress for a whole period sends
// again from the acknowledged offset, one chunk at a time, after 1, 2, 4, ... 64 periods, then
// every 64 (what a stalled receiver was sent stays bounded).
void ReplicatedLog::SnapshotStallTick(NodeId peer) {
    std::optional<Outgoing>& out = outgoing_[peer.value];
    if (!out || out->fetch) {
        return;
    }
    if (out->inflight_ends.empty() || out->acked != out->acked_at_last_tick) {
        out->stalled_ticks = 0;
    } else {
        const std::uint32_t n = ++out->stalled_ticks;
        if ((n & (n - 1)) == 0 ? n <= 64 : n % 64 == 0) {
            ++counters_.retransmissions;
            ResendSnapshot(peer, out->acked);
            out->probing = true;
        }
    }
    out->acked_at_last_tick = out->acked;
}

// Compaction (or an installed snapshot) replaces snapshot_: transfers that made progress keep
// the one they send (shared, moved, not copied); the others start again with the new one.
void ReplicatedLog::PinOutgoing() {
    std::shared_ptr<const Snapshot> old;
    for (std::optional<Outgoing>& out : outgoing_) {
        if (!out || out->pinned) {
            continue;
        }
        if (out->acked == 0) {
            out.reset();
            continue;
        }
        if (!old) {
            old = std::make_shared<const Snapshot>(std::move(snapshot_));
        }
        out->pinned = old;
    }
}

// ---- Observation -------------------------------------------------------------------------------

Lsn ReplicatedLog::lsn_at(std::size_t len) const {
    if (len == 0) {
        return kNoLsn;
    }
    if (len == snapshot_.len) {
        return snapshot_.lsn;
    }
    CONCLAVE_CHECK(len > snapshot_.len && len <= end_len(), "a position held in the log");
    return entries_[len - snapshot_.len - 1].lsn;
}

std::optional<std::size_t> ReplicatedLog::length_through(Lsn lsn) const {
    if (lsn == kNoLsn) {
        return 0;
    }
    if (lsn == snapshot_.lsn) {
        return snapshot_.len;
    }
    auto it = std::lower_bound(entries_.begin(), entries_.end(), lsn,
                               [](const Entry& e, Lsn l) { return e.lsn < l; });
    if (it == entries_.end() || it->lsn != lsn) {
        return std::nullopt;
    }
    return snapshot_.len + static_cast<std::size_t>(it - entries_.begin()) + 1;
}

// Compaction: entries before the snapshot's LSN are served from the snapshot (the last entry of
// each key, in LSN order), then the committed tail.
std::vector<Entry> ReplicatedLog::committed_after(Lsn after, std::size_t max_entries) const {
    std::vector<Entry> out;
    const auto by_lsn = [](Lsn l, const Entry& e) { return l < e.lsn; };
    if (after < snapshot_.lsn) {
        auto first =
            std::upper_bound(snapshot_.entries.begin(), snapshot_.entries.end(), after, by_lsn);
        for (; first != snapshot_.entries.end() && out.size() < max_entries; ++first) {
            out.push_back(*first);
        }
    }
    const auto tail_end =
        entries_.begin() + static_cast<std::ptrdiff_t>(state_.commit_len - snapshot_.len);
    auto first = std::upper_bound(entries_.begin(), tail_end, after, by_lsn);
    for (; first != tail_end && out.size() < max_entries; ++first) {
        out.push_back(*first);
    }
    return out;
}

std::string ReplicatedLog::check_invariants() const {
    std::string violated = CheapInvariants();
    return violated.empty() ? FullInvariants() : violated;
}

std::string ReplicatedLog::CheapInvariants() const {
    if (snapshot_.len > state_.commit_len) {
        return "the snapshot (length " + std::to_string(snapshot_.len) +
               ") covers uncommitted entries (commit length " + std::to_string(state_.commit_len) +
               ")";
    }
    if (state_.commit_len > end_len() || state_.applied_len != state_.commit_len ||
        state_.durable_len > end_len() || state_.matched_len > end_len()) {
        return "a prefix length exceeds the log";
    }
    if (!entries_.empty() && entries_.back().lsn.term > state_.term) {
        return "the last entry " + to_string(entries_.back().lsn) +
               " is of a term above the promised term";
    }
    if (state_.role == LogRole::LeaderActive) {
        if (!sync_.done || state_.sync_index >= state_.commit_len ||
            (state_.sync_index >= snapshot_.len &&
             at(state_.sync_index).lsn != Lsn{state_.term, 0})) {
            return "an ACTIVE leader's sync point is not committed";
        }
    }
    if (IsLeader() && state_.leader != config_.self) {
        return "a leader does not name itself leader";
    }
    if (IsLeader() && !active_.is_voter(config_.self)) {
        return "a leader is not a voter of its active configuration";
    }
    return {};
}

std::string ReplicatedLog::FullInvariants() const {
    if (!StrictlyIncreasing(snapshot_.lsn, entries_)) {
        return "entry LSNs are not strictly increasing";
    }
    if (!StrictlyIncreasing(kNoLsn, snapshot_.entries) ||
        (!snapshot_.entries.empty() && snapshot_.entries.back().lsn > snapshot_.lsn) ||
        snapshot_.entries.size() > snapshot_.len || snapshot_bytes_ != snapshot_bytes(snapshot_)) {
        return "the snapshot's entries are not an ordered state at its LSN";
    }
    for (const Entry& e : entries_) {
        if (e.lsn.term > state_.term) {
            return "entry " + to_string(e.lsn) + " is of a term above the promised term";
        }
        if (is_sync_point(e) != e.key.empty()) {
            return "entry " + to_string(e.lsn) + ": only sync points have an empty key";
        }
    }
    if (!(LatestConfigBefore(state_.commit_len).second == active_)) {
        return "the active configuration is not the latest configuration entry of the committed "
               "prefix";
    }
    // (Pending proposals exist only while ACTIVE because of R3; the planted SkipOwnTermCommit
    // makes a PASSIVE leader hold one: its effects on safety are what the simulator looks for.)
    const bool passive_may_pend = planted(PlantedLogBug::SkipOwnTermCommit) && IsLeader();
    for (const Pending& p : pending_) {
        if ((state_.role != LogRole::LeaderActive && !passive_may_pend) || !length_through(p.lsn) ||
            p.lsn <= commit_lsn()) {
            return "pending proposal " + to_string(p.lsn) + " is not an uncommitted entry";
        }
    }
    return {};
}

void ReplicatedLog::CheckInvariants() const {
    // The planted CompactUncommitted breaks the snapshot invariant on purpose: the simulator's
    // history check must find it (tests/sim/log_test.cpp), so the core leaves it to that check.
    if (planted(PlantedLogBug::CompactUncommitted)) {
        return;
    }
    const std::string violated = kFullLogChecks ? check_invariants() : CheapInvariants();
    if (!violated.empty()) [[unlikely]] {
        ::conclave::invariant_failed(__FILE__, __LINE__, "check_invariants()", violated.c_str());
    }
}

// ---- Primitive outputs -------------------------------------------------------------------------

bool ReplicatedLog::planted([[maybe_unused]] PlantedLogBug bug) const {
#ifdef CONCLAVE_PLANTED_BUGS
    return config_.planted_bug == bug;
#else
    return false;
#endif
}

bool ReplicatedLog::IsPeer(NodeId n) const {
    return n.value < config_.cluster_size && n != config_.self;
}

// ---- Membership (docs/membership.md §6 "Log core") --------------------------------------------

ActiveConfig ReplicatedLog::Implicit() const {
    ActiveConfig c;
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        c.voters.insert(NodeId{static_cast<std::uint16_t>(n)});
    }
    return c;
}

std::string ReplicatedLog::IdOf(std::size_t n) const {
    return config_.node_ids.empty() ? std::to_string(n) : config_.node_ids[n];
}

std::optional<ActiveConfig> ReplicatedLog::resolve(const Configuration& cfg) const {
    // The table the ids are looked up in: the configuration's (§8: it extends ours, or is a
    // prefix of ours when this node's own table is already longer), else ours.
    std::vector<std::string> table = cfg.table;
    if (table.empty()) {
        for (std::size_t n = 0; n < config_.cluster_size; ++n) {
            table.push_back(IdOf(n));
        }
    } else {
        if (table.size() > kMaxClusterSize) {
            return std::nullopt;
        }
        for (std::size_t n = 0; n < std::min(table.size(), config_.cluster_size); ++n) {
            if (table[n] != IdOf(n)) {
                return std::nullopt;  // another history of the table
            }
        }
        for (std::size_t n = 0; n < table.size(); ++n) {
            if (table[n].empty() ||
                std::find(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(n),
                          table[n]) != table.begin() + static_cast<std::ptrdiff_t>(n)) {
                return std::nullopt;  // an empty id, or one named twice
            }
        }
    }
    ActiveConfig out;
    out.version = cfg.version;
    out.from_entry = true;
    out.table = cfg.table;
    for (const auto* list : {&cfg.voters, &cfg.learners}) {
        for (const Member& m : *list) {
            const auto it = std::find(table.begin(), table.end(), m.id);
            const NodeId id{static_cast<std::uint16_t>(it - table.begin())};
            if (it == table.end() || out.is_member(id)) {
                return std::nullopt;  // unknown id (the table only grows), or named twice
            }
            (list == &cfg.voters ? out.voters : out.learners).insert(id);
            out.members.push_back(m);
        }
    }
    if (out.voters.empty() || cfg.version >= kTermLimit) {
        return std::nullopt;
    }
    return out;
}

std::optional<ActiveConfig> ReplicatedLog::ResolveEntry(const Entry& e) const {
    if (config_.decode_configuration == nullptr) {
        return std::nullopt;
    }
    const auto cfg = config_.decode_configuration(e.value);
    if (!cfg) {
        return std::nullopt;
    }
    return resolve(*cfg);
}

bool ReplicatedLog::MalformedConfig(const std::vector<Entry>& entries) const {
    return std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
        return is_config_entry(e) ? !ResolveEntry(e).has_value() : false;
    });
}

std::pair<std::optional<std::size_t>, ActiveConfig> ReplicatedLog::LatestConfigBefore(
    std::size_t len) const {
    for (std::size_t pos = len; pos > snapshot_.len; --pos) {
        if (is_config_entry(at(pos - 1))) {
            auto cfg = ResolveEntry(at(pos - 1));
            CONCLAVE_CHECK(cfg.has_value(), "a held configuration entry decodes");
            return {pos - 1, *cfg};
        }
    }
    // The snapshot keeps the latest value of the key (compaction); its position is not held,
    // so it is reported as the snapshot's (what R8 needs: it is committed).
    for (auto it = snapshot_.entries.rbegin(); it != snapshot_.entries.rend(); ++it) {
        if (is_config_entry(*it)) {
            auto cfg = ResolveEntry(*it);
            CONCLAVE_CHECK(cfg.has_value(), "a held configuration entry decodes");
            return {snapshot_.len == 0 ? 0 : snapshot_.len - 1, *cfg};
        }
    }
    return {std::nullopt, Implicit()};
}

NodeSet ReplicatedLog::replication_targets() const {
    NodeSet out{active_.voters.bits | active_.learners.bits};
    if (appended_config_) {
        out.bits |= appended_config_->second.voters.bits | appended_config_->second.learners.bits;
    }
    // R8: a removed node until it holds its removal.
    for (std::size_t n = 0; n < leaving_until_.size(); ++n) {
        if (leaving_until_[n] != 0 && state_.tick <= leaving_deadline_[n]) {
            out.insert(NodeId{static_cast<std::uint16_t>(n)});
        }
    }
    // Only nodes of this node's table: a node an appended configuration adds is reached once
    // that configuration commits and the table grows (§8).
    out.bits &= NodeSet::first(config_.cluster_size).bits;
    out.erase(config_.self);
    return out;
}

std::optional<std::string> ReplicatedLog::check_config_change(const Configuration& cfg) const {
    if (state_.role != LogRole::LeaderActive &&
        !(state_.role == LogRole::LeaderPassive && sync_.done &&
          planted(PlantedLogBug::SkipOwnTermCommit))) {
        return "not the ACTIVE leader (R3: its sync point, of its own term, is not committed)";
    }
    if (config_pending()) {
        return "a configuration change is pending (R2: one at a time)";
    }
    const auto next = resolve(cfg);
    if (!next) {
        return "the configuration names an unknown or repeated id, a member twice, or no voter, "
               "or its node table does not extend this node's";
    }
    const ActiveConfig& cur = active_;
    if (cfg.table.size() < cur.table.size()) {
        return "the node table never shrinks (§8): the active configuration's has " +
               std::to_string(cur.table.size()) + " ids, this one " +
               std::to_string(cfg.table.size());
    }
    if (!cur.from_entry && cfg.version == 0) {
        // The bootstrap entry: the implicit configuration written out.
        if (next->voters == cur.voters && next->learners.empty()) {
            return std::nullopt;
        }
        return "a version 0 configuration must be the implicit one (every node a voter)";
    }
    if (cfg.version != cur.version + 1) {
        return "version must be " + std::to_string(cur.version + 1) + " (active + 1), got " +
               std::to_string(cfg.version);
    }
    const std::uint64_t voters_diff = cur.voters.bits ^ next->voters.bits;
    const std::uint64_t learners_diff = cur.learners.bits ^ next->learners.bits;
    const auto one_bit = [](std::uint64_t b) { return b != 0 && (b & (b - 1)) == 0; };
    bool adjacent = false;
    if (voters_diff == 0) {
        adjacent = one_bit(learners_diff);  // one learner added or removed
    } else if (one_bit(voters_diff)) {
        if ((next->voters.bits & voters_diff) != 0) {
            // A voter added: only a learner promoted (it leaves the learners).
            adjacent = learners_diff == voters_diff && (cur.learners.bits & voters_diff) != 0;
        } else {
            adjacent = learners_diff == 0;  // a voter removed
        }
    }
    if (!adjacent) {
        return "not a single change (R2): promote one learner, remove one voter, or add or remove "
               "one learner";
    }
    return std::nullopt;
}

void ReplicatedLog::Activate(const ActiveConfig& next) {
    if (next == active_) {
        return;
    }
    CONCLAVE_CHECK(!active_.from_entry || !next.from_entry || next.version >= active_.version,
                   "the active configuration version never goes back");
    // R8: members the new configuration removes stay replication targets until they hold the
    // removal, i.e. the entry that made `next` active (the commit point's prefix holds it).
    const NodeSet removed{(active_.voters.bits | active_.learners.bits) &
                          ~(next.voters.bits | next.learners.bits)};
    active_ = next;
    ++counters_.config_changes;
    GrowTable(active_.table);
    for (std::size_t n = 0; n < config_.cluster_size; ++n) {
        if (removed.contains(NodeId{static_cast<std::uint16_t>(n)})) {
            leaving_until_[n] = state_.commit_len;
            leaving_deadline_[n] = state_.tick + kLeavingTicks;
        } else if (active_.is_member(NodeId{static_cast<std::uint16_t>(n)})) {
            leaving_until_[n] = 0;  // re-added
        }
    }
    // R4: the commit point that made it active is durable before anything acknowledges it (a
    // crash must not take the active version back).
    out_.push_back(PersistMeta{Meta()});
    out_.push_back(Notice());
    if (IsLeader() && !active_.is_voter(config_.self)) {
        StepDown(ProposeError::LeadershipLost);  // removed (or demoted): R6, §5.9
    } else if (state_.role == LogRole::LeaderPassive && !sync_.done && !sync_.source) {
        EvaluateSync();  // R6: re-count the answers over the new voters
    }
}

NotifyMembership ReplicatedLog::Notice() const {
    return NotifyMembership{active_.version, active_.voters, active_.learners, active_.table,
                            active_.members};
}

void ReplicatedLog::GrowTable(const std::vector<std::string>& table) {
    if (table.size() <= config_.cluster_size) {
        return;  // resolve() checked that it agrees with ours
    }
    config_.node_ids = table;
    config_.cluster_size = table.size();
    progress_.resize(config_.cluster_size);
    outgoing_.resize(config_.cluster_size);
    sync_.last_lsn.resize(config_.cluster_size, kNoLsn);
    sync_.commit_lsn.resize(config_.cluster_size, kNoLsn);
    leaving_until_.resize(config_.cluster_size, 0);
    leaving_deadline_.resize(config_.cluster_size, 0);
    ++counters_.table_growths;
    CONCLAVE_CHECK(!config_.validate(), "a grown table is a valid configuration");
}

bool ReplicatedLog::SyncQuorum() const {
    if (!active_.from_entry) {
        return sync_.responded.size() >= quorum_;
    }
    return NodeSet{sync_.responded.bits & active_.voters.bits}.size() >= active_.quorum();
}

void ReplicatedLog::FetchDone() {
    if (SyncQuorum()) {
        FinishSync();
        return;
    }
    // The fetch installed a snapshot that changed the active configuration and the answers are
    // no quorum of its voters any more: wait for more (SyncRetry asks the others again).
    sync_.source.reset();
}

void ReplicatedLog::Send(NodeId to, LogMessageBody body) {
    CONCLAVE_CHECK(IsPeer(to), "node index in range: messages go to peers");
    out_.push_back(SendLog{to, LogMessage{config_.self, state_.term, std::move(body)}});
}

void ReplicatedLog::SendToAll(LogMessageBody body) {
    if (config_.cluster_size > 1) {
        out_.push_back(BroadcastLog{LogMessage{config_.self, state_.term, std::move(body)}});
    }
}

void ReplicatedLog::Arm(LogTimer timer, Millis delay) {
    armed_timers_ = static_cast<std::uint8_t>(armed_timers_ | (1U << static_cast<unsigned>(timer)));
    out_.push_back(ArmLogTimer{timer, delay});
}

void ReplicatedLog::Cancel(LogTimer timer) {
    const auto bit = static_cast<std::uint8_t>(1U << static_cast<unsigned>(timer));
    if ((armed_timers_ & bit) != 0) {
        armed_timers_ = static_cast<std::uint8_t>(armed_timers_ & ~bit);
        out_.push_back(CancelLogTimer{timer});
    }
}

void ReplicatedLog::SetRole(LogRole role) {
    if (state_.role != role) {
        state_.role = role;
        out_.push_back(NotifyLogRole{role, state_.term});
    }
}

bool ReplicatedLog::NonVoting() const {
    return state_.repaired.has_value() && !planted(PlantedLogBug::CountRepaired);
}

// The marker goes once this node holds, durably, a prefix of the log of the leader of our term
// T > R up to that leader's commit point, at or after its sync point (T, 0): that log holds every
// entry committed in a term <= T (Leader Completeness), and our durable promise is T > R. A commit
// point of term T can only come from that leader (everything recovered is of a term <= R).
void ReplicatedLog::MaybeClearRepaired() {
    if (!state_.repaired || state_.term <= *state_.repaired || state_.commit_len == 0 ||
        commit_lsn().term != state_.term || state_.durable_len < state_.commit_len) {
        return;
    }
    if (IsLeader() ? !sync_.done : (!state_.leader || state_.matched_len < state_.commit_len)) {
        return;
    }
    state_.repaired.reset();
    ++counters_.repairs_cleared;
    out_.push_back(PersistMeta{Meta()});  // durable before the voting ack below leaves
    if (!IsLeader()) {
        MaybeAck(true);
    } else {
        AdvanceCommit();
    }
}

LogActions ReplicatedLog::Finish() {
    MaybeClearRepaired();
    MaybeCompact();  // after every input: never in the middle of a handler
    CheckInvariants();
    LogActions out;
    out.swap(out_);
    return out;
}

}  // namespace conclave::replication
