// SPDX-License-Identifier: Apache-2.0
// What the elector core asks its driver to do. Handlers return an ordered list of these.
//
// Ordering contract for drivers: perform the actions in order; a PersistState must be durable
// (fsync + atomic rename) before any later Send/Broadcast of the same batch leaves the node.
//
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
#pragma once

#include <boost/describe/enum.hpp>
#include <string_view>
#include <variant>
#include <vector>

#include "conclave/core/enum_names.hpp"
#include "conclave/core/types.hpp"
#include "conclave/elector/messages.hpp"

namespace conclave::elector {

BOOST_DEFINE_FIXED_ENUM_CLASS(Role, std::uint8_t, Stopped, Follower, Candidate, Leader)

/// Why the leadership snapshot (or the role) changed. Every transition carries one.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    Reason, std::uint8_t,
    Started,                // node started (follower, no leader yet)
    Stopped,                // node stopped
    LeaderDiscovered,       // a follower learnt of the leader from its heartbeat
    ElectionStarted,        // became candidate
    ElectionWon,            // became leader with a quorum of votes
    ElectionPreempted,      // candidate saw a higher term or a leader
    QuorumNotAchieved,      // candidate's election failed, or a leader lost connected supporters
    ElectionRefused,        // candidate was refused by enough nodes that it cannot win
    LeaderNoHeartbeat,      // follower heard no heartbeat within the inactivity interval
    LeaderUnavailable,      // follower's connection to the leader went down
    LeaderPreempted,        // leader saw a higher term
    LeaderCeded,            // follower's leader gave up leadership
    CheckQuorumFailed,      // leader heard from less than a quorum within the inactivity interval
    LeadershipTransferred,  // leader handed leadership over to a chosen node
    VotersChanged,          // set_voters(): a leader or candidate is no longer a voter, or a
                            // candidate's election was asked under the previous configuration
                            // (or set_priority(): this node's priority became 0)
    NewerTermSeen,          // a leaderless follower refused a candidate of an older configuration
                            // whose term is ahead of its own, and took that term (membership R5)
    LeaseExpired            // leader's lease ran out (no quorum acknowledged a recent heartbeat)
)

/// Which leadership the application sees. The tentative leader is never shown.
struct LeadershipSnapshot {
    Role role = Role::Stopped;
    Term term{};
    std::optional<NodeId> leader;
    /// Monotonically increasing with every leadership the node observes: the term of the known
    /// leader, or 0 when no leader is known. A store that saw token k rejects anything below k.
    std::uint64_t fencing_token = 0;
    Reason reason = Reason::Stopped;
    /// The `now` of the input that caused the change.
    Millis changed_at{};
    /// Leader: the end of its lease on the driver's clock (docs/design.md, the leader lease);
    /// none when not a leader or while no quorum has acknowledged a heartbeat round. Renewed
    /// every heartbeat round without a notification: it is not part of a leadership change
    /// (operator== leaves it out), and Elector::snapshot() always carries the current one.
    std::optional<Millis> lease_end;
    /// True iff this node leads and `now` (the driver's clock) is before the lease's end. An
    /// application checks it right before it acts: after a pause it is false before the elector
    /// has run again.
    bool valid_at(Millis now) const {
        return role == Role::Leader && lease_end.has_value() && now < *lease_end;
    }
    /// A leadership change: role, term, leader, token, reason and time (not the lease).
    bool operator==(const LeadershipSnapshot& o) const {
        return role == o.role && term == o.term && leader == o.leader &&
               fencing_token == o.fencing_token && reason == o.reason && changed_at == o.changed_at;
    }
};

/// The elector's timers. A driver keeps at most one pending instance of each: arming an armed
/// timer replaces it. Recurring timers are re-armed explicitly by the core.
BOOST_DEFINE_FIXED_ENUM_CLASS(TimerId, std::uint8_t,
                              InitialWait,         // look for an existing leader after start
                              RandomWait,          // backoff before scouting
                              ScoutingResult,      // end of a scouting round
                              ElectionResult,      // end of an election
                              HeartbeatBroadcast,  // leader: send heartbeats (recurring)
                              HeartbeatCheck,      // follower: count missed heartbeats (recurring)
                              CheckQuorum          // leader: count followers heard from (recurring)
)
inline constexpr std::size_t kTimerCount = kEnumeratorCount<TimerId>;

/// Term and vote: what must survive a crash (departure 1).
struct DurableState {
    Term term{};
    std::optional<NodeId> voted_for;
    bool operator==(const DurableState&) const = default;
};

/// Things that must never happen and are detected anyway (departure 6).
BOOST_DEFINE_FIXED_ENUM_CLASS(
    AlarmKind, std::uint8_t,
    TwoLeadersInTerm  // a leader or follower saw a second leader claim the same term
)

struct SendTo {
    NodeId to{};
    Message message;
    bool operator==(const SendTo&) const = default;
};
struct Broadcast {  // to every other node in the cluster
    Message message;
    bool operator==(const Broadcast&) const = default;
};
struct ArmTimer {
    TimerId timer{};
    Millis delay{};
    bool operator==(const ArmTimer&) const = default;
};
struct CancelTimer {
    TimerId timer{};
    bool operator==(const CancelTimer&) const = default;
};
struct PersistState {
    DurableState state;
    bool operator==(const PersistState&) const = default;
};
struct NotifyLeadership {
    LeadershipSnapshot snapshot;
    bool operator==(const NotifyLeadership&) const = default;
};
struct RaiseAlarm {
    AlarmKind kind{};
    NodeId peer{};
    Term term{};
    bool operator==(const RaiseAlarm&) const = default;
};

using Action = std::variant<SendTo, Broadcast, ArmTimer, CancelTimer, PersistState,
                            NotifyLeadership, RaiseAlarm>;
using Actions = std::vector<Action>;

std::string_view to_string(Role r);
std::string_view to_string(Reason r);
std::string_view to_string(TimerId t);
std::string_view to_string(AlarmKind k);
std::string to_string(const Action& a);

}  // namespace conclave::elector
