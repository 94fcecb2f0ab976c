// SPDX-License-Identifier: Apache-2.0
#include <string>
#include <type_traits>
#include <vector>

#include "conclave/core/enum_names.hpp"
#include "conclave/replication/actions.hpp"

namespace conclave::replication {

std::string_view message_name(const LogMessageBody& body) {
    return kLogMessageNames[body.index()];
}

namespace {

void print_field(std::string& s, const char* name, const Lsn& v) {
    s += std::string(" ") + name + "=" + conclave::to_string(v);
}
void print_field(std::string& s, const char* name, std::uint64_t v) {
    s += std::string(" ") + name + "=" + std::to_string(v);
}
void print_field(std::string& s, const char* name, std::uint32_t v) {
    s += std::string(" ") + name + "=" + std::to_string(v);
}
void print_field(std::string& s, const char* name, bool v) {
    s += std::string(" ") + name + "=" + (v ? "true" : "false");
}
void print_field(std::string& s, const char* name, const std::vector<Entry>& v) {
    s += std::string(" ") + name + "=" + std::to_string(v.size());  // the count, not the entries
}

}  // namespace

// Every field of every body, in its BOOST_DESCRIBE_STRUCT order (messages.hpp).
std::string to_string(const LogMessage& m) {
    std::string s = std::string(message_name(m.body)) + "{from=" + conclave::to_string(m.from) +
                    " term=" + conclave::to_string(m.term);
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            boost::mp11::mp_for_each<elector::BodyFields<T>>(
                [&](auto field) { print_field(s, field.name, b.*field.pointer); });
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
    return enumerator_name(t);
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
