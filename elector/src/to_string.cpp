// SPDX-License-Identifier: Apache-2.0
// Human-readable names for logs, traces and test failure messages.
#include <optional>
#include <sstream>
#include <type_traits>

#include "conclave/core/types.hpp"
#include "conclave/elector/actions.hpp"
#include "conclave/elector/messages.hpp"

namespace conclave::elector {

std::string_view message_name(const MessageBody& body) {
    return kMessageNames[body.index()];
}

std::string_view to_string(Refusal r) {
    switch (r) {
        case Refusal::None:
            return "none";
        case Refusal::StaleTerm:
            return "stale-term";
        case Refusal::AlreadyVoted:
            return "already-voted";
        case Refusal::HasLeader:
            return "has-leader";
        case Refusal::IAmLeader:
            return "i-am-leader";
        case Refusal::StaleConfig:
            return "stale-config";
        case Refusal::NotAVoter:
            return "not-a-voter";
    }
    return "?";
}

namespace {

void print_field(std::ostream& os, const char* name, std::uint64_t v) {
    os << ' ' << name << '=' << v;
}
void print_field(std::ostream& os, const char* name, bool v) {
    os << ' ' << name << '=' << v;
}
void print_field(std::ostream& os, const char* name, Refusal v) {
    os << ' ' << name << '=' << to_string(v);
}
void print_field(std::ostream& os, const char* name, Term v) {
    os << ' ' << name << '=' << v.value;
}
void print_field(std::ostream& os, const char* name, const Lsn& v) {
    os << ' ' << name << '=' << to_string(v);
}
void print_field(std::ostream& os, const char* name, const std::optional<NodeId>& v) {
    if (v) {  // left out when unset
        os << ' ' << name << '=' << to_string(*v);
    }
}

}  // namespace

// Every field of every body, in its BOOST_DESCRIBE_STRUCT order (messages.hpp): a new field is
// printed without a change here (or fails to compile until print_field knows its type).
std::string to_string(const Message& m) {
    std::ostringstream os;
    os << message_name(m.body) << "{from=" << to_string(m.from) << " term=" << m.term.value;
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            boost::mp11::mp_for_each<BodyFields<T>>(
                [&](auto field) { print_field(os, field.name, b.*field.pointer); });
        },
        m.body);
    os << "}";
    return os.str();
}

std::string_view to_string(Role r) {
    switch (r) {
        case Role::Stopped:
            return "stopped";
        case Role::Follower:
            return "follower";
        case Role::Candidate:
            return "candidate";
        case Role::Leader:
            return "leader";
    }
    return "?";
}

std::string_view to_string(Reason r) {
    switch (r) {
        case Reason::Started:
            return "STARTED";
        case Reason::Stopped:
            return "STOPPED";
        case Reason::LeaderDiscovered:
            return "LEADER_DISCOVERED";
        case Reason::ElectionStarted:
            return "ELECTION_STARTED";
        case Reason::ElectionWon:
            return "ELECTION_WON";
        case Reason::ElectionPreempted:
            return "ELECTION_PREEMPTED";
        case Reason::QuorumNotAchieved:
            return "QUORUM_NOT_ACHIEVED";
        case Reason::ElectionRefused:
            return "ELECTION_REFUSED";
        case Reason::LeaderNoHeartbeat:
            return "LEADER_NO_HEARTBEAT";
        case Reason::LeaderUnavailable:
            return "LEADER_UNAVAILABLE";
        case Reason::LeaderPreempted:
            return "LEADER_PREEMPTED";
        case Reason::LeaderCeded:
            return "LEADER_CEDED";
        case Reason::CheckQuorumFailed:
            return "CHECK_QUORUM_FAILED";
        case Reason::LeadershipTransferred:
            return "LEADERSHIP_TRANSFERRED";
        case Reason::LeaseExpired:
            return "LEASE_EXPIRED";
        case Reason::VotersChanged:
            return "VOTERS_CHANGED";
        case Reason::NewerTermSeen:
            return "NEWER_TERM_SEEN";
    }
    return "?";
}

std::string_view to_string(TimerId t) {
    switch (t) {
        case TimerId::InitialWait:
            return "InitialWait";
        case TimerId::RandomWait:
            return "RandomWait";
        case TimerId::ScoutingResult:
            return "ScoutingResult";
        case TimerId::ElectionResult:
            return "ElectionResult";
        case TimerId::HeartbeatBroadcast:
            return "HeartbeatBroadcast";
        case TimerId::HeartbeatCheck:
            return "HeartbeatCheck";
        case TimerId::CheckQuorum:
            return "CheckQuorum";
    }
    return "?";
}

std::string_view to_string(AlarmKind k) {
    switch (k) {
        case AlarmKind::TwoLeadersInTerm:
            return "TWO_LEADERS_IN_TERM";
    }
    return "?";
}

std::string to_string(const Action& a) {
    return std::visit(
        [](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, SendTo>) {
                return "SendTo(" + to_string(x.to) + ", " + to_string(x.message) + ")";
            } else if constexpr (std::is_same_v<T, Broadcast>) {
                return "Broadcast(" + to_string(x.message) + ")";
            } else if constexpr (std::is_same_v<T, ArmTimer>) {
                return "ArmTimer(" + std::string(to_string(x.timer)) + ", " +
                       std::to_string(x.delay.count()) + "ms)";
            } else if constexpr (std::is_same_v<T, CancelTimer>) {
                return "CancelTimer(" + std::string(to_string(x.timer)) + ")";
            } else if constexpr (std::is_same_v<T, PersistState>) {
                return "Persist(term=" + to_string(x.state.term) + " voted_for=" +
                       (x.state.voted_for ? to_string(*x.state.voted_for) : "none") + ")";
            } else if constexpr (std::is_same_v<T, NotifyLeadership>) {
                const auto& s = x.snapshot;
                return "Notify(" + std::string(to_string(s.role)) + " term=" + to_string(s.term) +
                       " leader=" + (s.leader ? to_string(*s.leader) : "none") +
                       " token=" + std::to_string(s.fencing_token) +
                       " reason=" + std::string(to_string(s.reason)) + ")";
            } else {
                static_assert(std::is_same_v<T, RaiseAlarm>, "to_string must print every action");
                return "Alarm(" + std::string(to_string(x.kind)) + " peer=" + to_string(x.peer) +
                       " term=" + to_string(x.term) + ")";
            }
        },
        a);
}

}  // namespace conclave::elector
