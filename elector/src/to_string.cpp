// SPDX-License-Identifier: Apache-2.0
// Human-readable names for logs, traces and test failure messages.
#include <sstream>

#include "conclave/core/types.hpp"
#include "conclave/elector/actions.hpp"
#include "conclave/elector/messages.hpp"

namespace conclave {

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

std::string to_string(const Message& m) {
    std::ostringstream os;
    os << message_name(m.body) << "{from=" << to_string(m.from) << " term=" << m.term.value;
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, ScoutingRequest>) {
                os << " round=" << b.round << " config_version=" << b.config_version;
            } else if constexpr (std::is_same_v<T, ScoutingResponse>) {
                os << " round=" << b.round << " will_vote=" << b.will_vote;
                if (b.refusal != Refusal::None) {
                    os << " refusal=" << to_string(b.refusal);
                }
                os << " config_version=" << b.config_version;
            } else if constexpr (std::is_same_v<T, ElectionProposal>) {
                os << " transfer=" << b.transfer << " config_version=" << b.config_version;
            } else if constexpr (std::is_same_v<T, ElectionResponse>) {
                os << " granted=" << b.granted << " refusal=" << to_string(b.refusal)
                   << " voter_term=" << b.voter_term.value
                   << " config_version=" << b.config_version;
            } else if constexpr (std::is_same_v<T, LeaderHeartbeat>) {
                os << " lsn=" << to_string(b.lsn) << " config_version=" << b.config_version
                   << " round=" << b.round;
            } else if constexpr (std::is_same_v<T, HeartbeatAck>) {
                os << " round=" << b.round;
            } else if constexpr (std::is_same_v<T, LeadershipCession>) {
                if (b.successor) {
                    os << " successor=" << to_string(*b.successor);
                }
            }
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
                return "Alarm(" + std::string(to_string(x.kind)) + " peer=" + to_string(x.peer) +
                       " term=" + to_string(x.term) + ")";
            }
        },
        a);
}

}  // namespace conclave
