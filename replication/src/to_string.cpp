// SPDX-License-Identifier: Apache-2.0
#include <string>
#include <type_traits>

#include "conclave/replication/actions.hpp"

namespace conclave::replication {

std::string_view message_name(const LogMessageBody& body) {
    return kLogMessageNames[body.index()];
}

std::string to_string(const LogMessage& m) {
    std::string s = std::string(message_name(m.body)) + "{from=" + conclave::to_string(m.from) +
                    " term=" + conclave::to_string(m.term);
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, SyncResponse>) {
                s += " last=" + conclave::to_string(b.last_lsn) +
                     " commit=" + conclave::to_string(b.commit_lsn);
            } else if constexpr (std::is_same_v<T, Append>) {
                s += " prev=" + conclave::to_string(b.prev_lsn) +
                     " entries=" + std::to_string(b.entries.size()) +
                     " commit=" + conclave::to_string(b.commit_lsn);
            } else if constexpr (std::is_same_v<T, AppendAck>) {
                s += std::string(" ok=") + (b.ok ? "true" : "false") +
                     " last=" + conclave::to_string(b.last_lsn) +
                     " commit=" + conclave::to_string(b.commit_lsn) +
                     (b.non_voting ? " non_voting" : "");
            } else if constexpr (std::is_same_v<T, FetchRequest>) {
                s += " after=" + conclave::to_string(b.after_lsn) +
                     " up_to=" + conclave::to_string(b.up_to_lsn) +
                     " max=" + std::to_string(b.max_entries);
            } else if constexpr (std::is_same_v<T, FetchResponse>) {
                s += " after=" + conclave::to_string(b.after_lsn) +
                     " entries=" + std::to_string(b.entries.size()) +
                     " last=" + conclave::to_string(b.last_lsn);
            } else if constexpr (std::is_same_v<T, InstallSnapshot>) {
                s += " lsn=" + conclave::to_string(b.lsn) + " len=" + std::to_string(b.len) +
                     " offset=" + std::to_string(b.offset) +
                     " entries=" + std::to_string(b.entries.size()) + (b.done ? " done" : "") +
                     (b.fetch ? " fetch" : "");
            } else {
                static_assert(std::is_same_v<T, SyncRequest>, "to_string must print every message");
            }
        },
        m.body);
    return s + "}";
}

std::string_view to_string(LogRole r) {
    switch (r) {
        case LogRole::Follower:
            return "follower";
        case LogRole::LeaderPassive:
            return "passive";
        case LogRole::LeaderActive:
            return "active";
    }
    return "?";
}

std::string_view to_string(LogTimer t) {
    switch (t) {
        case LogTimer::Heartbeat:
            return "Heartbeat";
        case LogTimer::SyncRetry:
            return "SyncRetry";
    }
    return "?";
}

std::string_view to_string(ProposeError e) {
    switch (e) {
        case ProposeError::None:
            return "committed";
        case ProposeError::NotLeader:
            return "not_leader";
        case ProposeError::NotActive:
            return "not_active";
        case ProposeError::InvalidEntry:
            return "invalid_entry";
        case ProposeError::TimedOut:
            return "timed_out";
        case ProposeError::LeadershipLost:
            return "leadership_lost";
        case ProposeError::NoSpace:
            return "nospace";
    }
    return "?";
}

std::string to_string(const LogAction& a) {
    return std::visit(
        [](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, SendLog>) {
                return "SendLog{to=" + conclave::to_string(x.to) + " " + to_string(x.message) + "}";
            } else if constexpr (std::is_same_v<T, BroadcastLog>) {
                return "BroadcastLog{" + to_string(x.message) + "}";
            } else if constexpr (std::is_same_v<T, PersistMeta>) {
                return "PersistMeta{term=" + conclave::to_string(x.meta.term) +
                       " commit=" + conclave::to_string(x.meta.commit_lsn) +
                       (x.meta.repaired ? " repaired=" + conclave::to_string(*x.meta.repaired)
                                        : std::string()) +
                       "}";
            } else if constexpr (std::is_same_v<T, PersistEntries>) {
                return "PersistEntries{" + std::to_string(x.entries.size()) + " up to " +
                       (x.entries.empty() ? std::string("-")
                                          : conclave::to_string(x.entries.back().lsn)) +
                       "}";
            } else if constexpr (std::is_same_v<T, TruncateEntries>) {
                return "TruncateEntries{after=" + conclave::to_string(x.after_lsn) + "}";
            } else if constexpr (std::is_same_v<T, PersistSnapshot>) {
                return "PersistSnapshot{lsn=" + conclave::to_string(x.snapshot.lsn) +
                       " len=" + std::to_string(x.snapshot.len) +
                       " entries=" + std::to_string(x.snapshot.entries.size()) + "}";
            } else if constexpr (std::is_same_v<T, ArmLogTimer>) {
                return "ArmLogTimer{" + std::string(to_string(x.timer)) + " " +
                       std::to_string(x.delay.count()) + "ms}";
            } else if constexpr (std::is_same_v<T, CancelLogTimer>) {
                return "CancelLogTimer{" + std::string(to_string(x.timer)) + "}";
            } else if constexpr (std::is_same_v<T, ApplyCommitted>) {
                return "ApplyCommitted{" + std::to_string(x.entries.size()) +
                       (x.snapshot_lsn == kNoLsn
                            ? std::string()
                            : " snapshot=" + conclave::to_string(x.snapshot_lsn)) +
                       "}";
            } else if constexpr (std::is_same_v<T, ProposeResult>) {
                return "ProposeResult{" + conclave::to_string(x.lsn) + " " +
                       std::string(to_string(x.error)) + "}";
            } else if constexpr (std::is_same_v<T, NotifyMembership>) {
                return "NotifyMembership{version=" + std::to_string(x.version) +
                       " voters=" + std::to_string(x.voters.size()) +
                       " learners=" + std::to_string(x.learners.size()) + "}";
            } else {
                static_assert(std::is_same_v<T, NotifyLogRole>);
                return "NotifyLogRole{" + std::string(to_string(x.role)) +
                       " term=" + conclave::to_string(x.term) + "}";
            }
        },
        a);
}

}  // namespace conclave::replication
