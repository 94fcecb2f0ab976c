// SPDX-License-Identifier: Apache-2.0
// The elector's message model: one envelope (sender, term) around a variant of bodies.
//
// This is the only message model in Conclave: the core consumes and produces it, the codec puts it
// on the wire (CBOR) and in logs/traces (JSON), the simulator routes it, and the TLA+ spec has one
// record type per body with the same field names.
//
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
#pragma once

#include <array>
#include <boost/describe/enum.hpp>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include <boost/describe/class.hpp>
#include <boost/describe/members.hpp>
#include <boost/mp11/algorithm.hpp>

#include "conclave/core/enum_names.hpp"
#include "conclave/core/types.hpp"

namespace conclave::elector {

/// Membership configuration versions (docs/membership.md) stay below 2^63, like terms: the
/// decoder refuses a `config_version` at or above it, and set_voters() refuses one too.
inline constexpr std::uint64_t kConfigVersionLimit = std::uint64_t{1} << 63;

/// "If I proposed an election for `term` (= my term + 1), would you support me?" (PreVote).
/// Does not change anybody's term. `round` identifies the sender's scouting round so that a late
/// reply to an older round is not counted (departure 2). `config_version` is the version of the
/// sender's active configuration (docs/membership.md, R5: a voter of a newer one says no).
struct ScoutingRequest {
    static constexpr std::string_view kName = "ScoutingRequest";
    std::uint64_t round = 0;
    std::uint64_t config_version = 0;
    bool operator==(const ScoutingRequest&) const = default;
};

/// Why a vote (or scouting support) was refused (departure 4: refusals are explicit).
BOOST_DEFINE_FIXED_ENUM_CLASS(
    Refusal, std::uint8_t,
    None,          // the vote was granted
    StaleTerm,     // proposal term <= my term and I did not vote for you in it
    AlreadyVoted,  // I voted for another node in this term
    HasLeader,     // I follow a live leader (sticky leader)
    IAmLeader,     // I am the leader
    StaleConfig,   // your configuration is older than mine (membership R5, the version fence)
    NotAVoter      // I am not a voter of my configuration, and yours is not newer (R5, R7)
)
inline constexpr std::size_t kVoteRefusalCount = kEnumeratorCount<Refusal>;

/// Reply to a ScoutingRequest. The envelope term echoes the proposed term of the request.
/// `refusal` is set only for the membership refusals (StaleConfig, NotAVoter; None otherwise,
/// also for the other reasons to say no, which scouting does not name); `config_version` is the
/// responder's active configuration version.
struct ScoutingResponse {
    static constexpr std::string_view kName = "ScoutingResponse";
    std::uint64_t round = 0;
    bool will_vote = false;
    Refusal refusal = Refusal::None;
    std::uint64_t config_version = 0;
    bool operator==(const ScoutingResponse&) const = default;
};

/// A candidate asks for votes in the envelope term. `transfer` is set when the candidate was named
/// successor by the leader (leadership transfer): followers then vote even though they know a
/// leader. `config_version`: the candidate's active configuration version (R5).
struct ElectionProposal {
    static constexpr std::string_view kName = "ElectionProposal";
    bool transfer = false;
    std::uint64_t config_version = 0;
    bool operator==(const ElectionProposal&) const = default;
};

/// A vote (granted) or an explicit refusal. The envelope term echoes the proposal's term, so that a
/// candidate counts only answers to its current election; `voter_term` is the voter's own term
/// (higher than the proposal's when the voter has moved on). A granted response is also sent
/// unsolicited by a follower that discovers a leader, so that the leader counts it as a supporter.
/// `config_version`: the voter's active configuration version (says why StaleConfig refused).
struct ElectionResponse {
    static constexpr std::string_view kName = "ElectionResponse";
    bool granted = false;
    Refusal refusal = Refusal::None;
    Term voter_term{};
    std::uint64_t config_version = 0;
    bool operator==(const ElectionResponse&) const = default;
};

/// Periodic leader heartbeat. Carries the leader's latest issued Leader Sequence Number, its
/// active configuration version (a follower of a newer one still follows it and counts it, R5)
/// and the heartbeat round (numbered from 0 in each leadership), which the follower's
/// HeartbeatAck echoes: the leader lease starts at the round's send time (docs/design.md).
struct LeaderHeartbeat {
    static constexpr std::string_view kName = "LeaderHeartbeat";
    Lsn lsn{};
    std::uint64_t config_version = 0;
    std::uint64_t round = 0;
    bool operator==(const LeaderHeartbeat&) const = default;
};

/// A follower's acknowledgement of a heartbeat in the envelope term; lets the leader run
/// check-quorum on what it hears rather than on TCP connection state (departure 3). `round`
/// echoes the acknowledged heartbeat's round (the leader lease).
struct HeartbeatAck {
    static constexpr std::string_view kName = "HeartbeatAck";
    std::uint64_t round = 0;
    bool operator==(const HeartbeatAck&) const = default;
};

/// The article's "InvalidHeartbeat": your heartbeat is stale, here is my (higher) term.
struct HeartbeatResponse {
    static constexpr std::string_view kName = "HeartbeatResponse";
    bool operator==(const HeartbeatResponse&) const = default;
};

/// The sender gives up its leadership of the envelope term. `successor`, when set, is the node the
/// leader hands over to (leadership transfer): that node starts an election at once.
struct LeadershipCession {
    static constexpr std::string_view kName = "LeadershipCession";
    std::optional<NodeId> successor;
    bool operator==(const LeadershipCession&) const = default;
};

using MessageBody =
    std::variant<ScoutingRequest, ScoutingResponse, ElectionProposal, ElectionResponse,
                 LeaderHeartbeat, HeartbeatAck, HeartbeatResponse, LeadershipCession>;

// Each body's fields, listed once (Boost.Describe). Derived from them: the printer (to_string.cpp),
// the codec (codec/src/field_codec.hpp: every field under its C++ name) and the explorer's message
// hash (sim/.../state_hash.hpp, pack()); a field of a type one of them lacks fails its build. CTest
// tla_message_fields checks tla/trace_to_tla.py's table against them. kAllFieldsDescribed (below)
// fails the build when a body has a field its list leaves out.
BOOST_DESCRIBE_STRUCT(ScoutingRequest, (), (round, config_version))
BOOST_DESCRIBE_STRUCT(ScoutingResponse, (), (round, will_vote, refusal, config_version))
BOOST_DESCRIBE_STRUCT(ElectionProposal, (), (transfer, config_version))
BOOST_DESCRIBE_STRUCT(ElectionResponse, (), (granted, refusal, voter_term, config_version))
BOOST_DESCRIBE_STRUCT(LeaderHeartbeat, (), (lsn, config_version, round))
BOOST_DESCRIBE_STRUCT(HeartbeatAck, (), (round))
BOOST_DESCRIBE_STRUCT(HeartbeatResponse, (), ())
BOOST_DESCRIBE_STRUCT(LeadershipCession, (), (successor))

/// The described fields of a message body, in declaration order.
template <class Body>
using BodyFields = boost::describe::describe_members<Body, boost::describe::mod_public>;
template <class Body>
inline constexpr std::size_t kBodyFieldCount = boost::mp11::mp_size<BodyFields<Body>>::value;

namespace detail {
/// Converts to any field type: counts an aggregate's fields (unevaluated contexts only).
struct AnyField {
    template <class T>
    operator T() const;  // NOLINT(google-explicit-constructor): the point is implicit
};
template <class T, class... Fields>
constexpr std::size_t aggregate_field_count() {
    if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
        return aggregate_field_count<T, Fields..., AnyField>();
    } else {
        return sizeof...(Fields);
    }
}
template <class... Bodies>
constexpr bool all_fields_described(const std::variant<Bodies...>*) {
    return ((aggregate_field_count<Bodies>() == kBodyFieldCount<Bodies>)&&...);
}
}  // namespace detail

/// True when every body's BOOST_DESCRIBE_STRUCT lists all of its fields.
template <class Variant>
inline constexpr bool kAllFieldsDescribed =
    detail::all_fields_described(static_cast<const Variant*>(nullptr));

/// Every message carries its sender and a term.
struct Message {
    NodeId from{};
    Term term{};
    MessageBody body;
    bool operator==(const Message&) const = default;
};

/// Every message kind is declared once, above, with its name (`kName`, as used in traces,
/// metrics, the wire and the TLA+ spec); the tables below are derived from the variant, so a body
/// without a name fails to compile.
inline constexpr std::size_t kMessageKindCount = std::variant_size_v<MessageBody>;

template <class Variant, std::size_t... I>
constexpr std::array<std::string_view, sizeof...(I)> body_names(std::index_sequence<I...>) {
    return {std::variant_alternative_t<I, Variant>::kName...};
}

static_assert(kAllFieldsDescribed<MessageBody>,
              "every field of every elector message body is in its BOOST_DESCRIBE_STRUCT list");

/// Names of MessageBody's alternatives, by index.
inline constexpr std::array<std::string_view, kMessageKindCount> kMessageNames =
    body_names<MessageBody>(std::make_index_sequence<kMessageKindCount>{});

/// The name of a message body, as used in traces, metrics and the TLA+ spec.
std::string_view message_name(const MessageBody& body);
std::string_view to_string(Refusal r);
std::string to_string(const Message& m);

}  // namespace conclave::elector
