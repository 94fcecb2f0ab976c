// SPDX-License-Identifier: Apache-2.0
#include "conclave/codec/json.hpp"

#include <array>
#include <limits>
#include <type_traits>
#include <utility>

namespace conclave::codec {

using elector::DurableState;
using elector::ElectionProposal;
using elector::ElectionResponse;
using elector::HeartbeatAck;
using elector::HeartbeatResponse;
using elector::kBodyFieldCount;
using elector::LeaderHeartbeat;
using elector::LeadershipCession;
using elector::Message;
using elector::MessageBody;
using elector::Refusal;
using elector::ScoutingRequest;
using elector::ScoutingResponse;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw DecodeError(what);
}

NodeId node_from(const json& j, const char* field) {
    const std::uint64_t v = get_u64(j, field);
    if (v >= kMaxClusterSize) {
        fail(std::string(field) + ": node index " + std::to_string(v) + " out of range");
    }
    return NodeId{static_cast<std::uint16_t>(v)};
}

std::optional<NodeId> optional_node_from(const json& j, const char* field) {
    const json& f = get_field(j, field);
    if (f.is_null()) {
        return std::nullopt;
    }
    return node_from(j, field);
}

json optional_node(const std::optional<NodeId>& n) {
    return n ? json(n->value) : json(nullptr);
}

constexpr std::array<Refusal, elector::kVoteRefusalCount> kRefusals = {
    Refusal::None,      Refusal::StaleTerm,   Refusal::AlreadyVoted, Refusal::HasLeader,
    Refusal::IAmLeader, Refusal::StaleConfig, Refusal::NotAVoter};

Refusal refusal_from(const json& j) {
    const std::string name = get_string(j, "refusal");
    for (Refusal r : kRefusals) {
        if (to_string(r) == name) {
            return r;
        }
    }
    fail("refusal: unknown value '" + name.substr(0, 64) + "'");
}

// Membership (docs/membership.md): a configuration version. Frames from before the field
// existed, and frames of the default configuration (version 0, not encoded), decode as 0. Like
// terms, versions stay below 2^63: one per committed change, nothing honest gets near it.
std::uint64_t config_version_from(const json& j) {
    if (j.is_object() && !j.contains("config_version")) {
        return 0;
    }
    const std::uint64_t v = get_u64(j, "config_version");
    if (v >= elector::kConfigVersionLimit) {
        fail("config_version: " + std::to_string(v) + " is not below 2^63");
    }
    return v;
}

void put_config_version(json& j, std::uint64_t version) {
    if (version != 0) {
        j["config_version"] = version;
    }
}

// The leader lease's heartbeat round: frames from before the field existed, and round 0 (not
// encoded), decode as 0. Any value is accepted: the leader counts an echoed round only if it
// still remembers sending it.
std::uint64_t heartbeat_round_from(const json& j) {
    if (j.is_object() && !j.contains("round")) {
        return 0;
    }
    return get_u64(j, "round");
}

void put_heartbeat_round(json& j, std::uint64_t round) {
    if (round != 0) {
        j["round"] = round;
    }
}

// One decoder per body, found by overload resolution: a body without one fails to compile.
ScoutingRequest body_from_json(std::type_identity<ScoutingRequest>, const json& j) {
    static_assert(kBodyFieldCount<ScoutingRequest> == 2, "body_from_json must decode every field");
    return ScoutingRequest{get_u64(j, "round"), config_version_from(j)};
}
ScoutingResponse body_from_json(std::type_identity<ScoutingResponse>, const json& j) {
    static_assert(kBodyFieldCount<ScoutingResponse> == 4, "body_from_json must decode every field");
    ScoutingResponse r{get_u64(j, "round"), get_bool(j, "will_vote")};
    // Scouting names only the membership refusals; absent (older frames): none.
    if (j.contains("refusal")) {
        r.refusal = refusal_from(j);
        if (r.refusal != Refusal::StaleConfig && r.refusal != Refusal::NotAVoter) {
            fail("refusal: '" + std::string(to_string(r.refusal)) +
                 "' is not a scouting refusal (stale-config or not-a-voter)");
        }
        if (r.will_vote) {
            fail("refusal: '" + std::string(to_string(r.refusal)) + "' with will_vote=true");
        }
    }
    r.config_version = config_version_from(j);
    return r;
}
ElectionProposal body_from_json(std::type_identity<ElectionProposal>, const json& j) {
    static_assert(kBodyFieldCount<ElectionProposal> == 2, "body_from_json must decode every field");
    return ElectionProposal{get_bool(j, "transfer"), config_version_from(j)};
}
ElectionResponse body_from_json(std::type_identity<ElectionResponse>, const json& j) {
    static_assert(kBodyFieldCount<ElectionResponse> == 4, "body_from_json must decode every field");
    const ElectionResponse r{get_bool(j, "granted"), refusal_from(j), get_term(j, "voter_term"),
                             config_version_from(j)};
    if (r.granted != (r.refusal == Refusal::None)) {
        fail("refusal: '" + std::string(to_string(r.refusal)) + "' with granted=" +
             (r.granted ? "true" : "false") + " (a vote is granted exactly when not refused)");
    }
    return r;
}
LeaderHeartbeat body_from_json(std::type_identity<LeaderHeartbeat>, const json& j) {
    static_assert(kBodyFieldCount<LeaderHeartbeat> == 3, "body_from_json must decode every field");
    return LeaderHeartbeat{lsn_from_json(get_field(j, "lsn")), config_version_from(j),
                           heartbeat_round_from(j)};
}
HeartbeatAck body_from_json(std::type_identity<HeartbeatAck>, const json& j) {
    static_assert(kBodyFieldCount<HeartbeatAck> == 1, "body_from_json must decode every field");
    return HeartbeatAck{heartbeat_round_from(j)};
}
HeartbeatResponse body_from_json(std::type_identity<HeartbeatResponse>, const json&) {
    static_assert(kBodyFieldCount<HeartbeatResponse> == 0,
                  "body_from_json must decode every field");
    return HeartbeatResponse{};
}
LeadershipCession body_from_json(std::type_identity<LeadershipCession>, const json& j) {
    static_assert(kBodyFieldCount<LeadershipCession> == 1,
                  "body_from_json must decode every field");
    return LeadershipCession{optional_node_from(j, "successor")};
}

// Decodes the body whose kName is `type`; false when no body has that name.
template <std::size_t... I>
bool body_by_name(std::string_view type, const json& j, MessageBody& out,
                  std::index_sequence<I...>) {
    auto one = [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (type != T::kName) {
            return false;
        }
        out = body_from_json(tag, j);
        return true;
    };
    return (one(std::type_identity<std::variant_alternative_t<I, MessageBody>>{}) || ...);
}

constexpr std::uint64_t kCborIndefinite = std::numeric_limits<std::uint64_t>::max();

// Reads the argument of a CBOR head whose additional information is `info` (its bytes follow at
// `pos`, which advances past them); kCborIndefinite for 31. False when it is malformed.
bool read_cbor_argument(std::span<const std::uint8_t> in, std::size_t& pos, std::uint8_t info,
                        std::uint64_t& value) {
    if (info < 24) {
        value = info;
        return true;
    }
    if (info == 31) {
        value = kCborIndefinite;
        return true;
    }
    if (info > 27) {
        return false;
    }
    const std::size_t len = std::size_t{1} << (info - 24);
    if (in.size() - pos < len) {
        return false;
    }
    value = 0;
    for (std::size_t i = 0; i < len; ++i) {
        value = (value << 8) | in[pos++];
    }
    return true;
}

}  // namespace

// nlohmann's CBOR reader recurses once per nesting level, so a hostile frame of a million nested
// arrays would overflow the stack. This iterative walk bounds the nesting depth before parsing.
// Returns false for too-deep or structurally broken input (the parser would reject the latter).
bool cbor_depth_ok(std::span<const std::uint8_t> in, std::size_t max_depth) {
    constexpr std::uint64_t kIndefinite = kCborIndefinite;
    std::vector<std::uint64_t> open;  // items still expected by each open array/map/tag
    std::size_t pos = 0;
    auto read_arg = [&](std::uint8_t info, std::uint64_t& value) {
        return read_cbor_argument(in, pos, info, value);
    };
    do {
        if (pos >= in.size()) {
            return false;
        }
        const std::uint8_t initial = in[pos++];
        if (initial == 0xff) {  // break: closes an indefinite container
            if (open.empty() || open.back() != kIndefinite) {
                return false;
            }
            open.pop_back();
        } else {
            const auto major = static_cast<std::uint8_t>(initial >> 5);
            std::uint64_t arg = 0;
            if (!read_arg(static_cast<std::uint8_t>(initial & 0x1f), arg)) {
                return false;
            }
            if (major == 2 || major == 3) {  // byte/text string: skip its bytes
                if (arg == kIndefinite) {
                    open.push_back(kIndefinite);  // chunks follow, then a break
                } else if (arg > in.size() - pos) {
                    return false;
                } else {
                    pos += static_cast<std::size_t>(arg);
                }
            } else if (major == 4 || major == 5 || major == 6) {
                std::uint64_t items = major == 6 ? 1 : arg;
                if (major == 5 && arg != kIndefinite) {
                    if (arg > in.size()) {
                        return false;
                    }
                    items = arg * 2;
                }
                if (items != 0) {
                    open.push_back(items);
                    if (open.size() > max_depth) {
                        return false;
                    }
                    continue;  // the container's items follow; nothing completed yet
                }
            }
        }
        // One item completed: count it against the enclosing definite containers.
        while (!open.empty() && open.back() != kIndefinite && --open.back() == 0) {
            open.pop_back();
        }
    } while (!open.empty());
    return true;
}

const json& get_field(const json& j, const char* field) {
    if (!j.is_object()) {
        fail(std::string(field) + ": expected an object around this field");
    }
    auto it = j.find(field);
    if (it == j.end()) {
        fail(std::string(field) + ": missing");
    }
    return *it;
}

std::uint64_t get_u64(const json& j, const char* field) {
    const json& f = get_field(j, field);
    if (!f.is_number_unsigned()) {
        fail(std::string(field) + ": expected a non-negative integer");
    }
    return f.get<std::uint64_t>();
}

Term get_term(const json& j, const char* field) {
    const std::uint64_t v = get_u64(j, field);
    if (v >= kTermLimit) {
        fail(std::string(field) + ": term " + std::to_string(v) + " is not below 2^63");
    }
    return Term{v};
}

bool get_bool(const json& j, const char* field) {
    const json& f = get_field(j, field);
    if (!f.is_boolean()) {
        fail(std::string(field) + ": expected a boolean");
    }
    return f.get<bool>();
}

std::string get_string(const json& j, const char* field) {
    const json& f = get_field(j, field);
    if (!f.is_string()) {
        fail(std::string(field) + ": expected a string");
    }
    return f.get<std::string>();
}

Lsn lsn_from_json(const json& j) {
    const json& l = j;
    return Lsn{get_term(l, "term"), get_u64(l, "counter")};
}

json message_to_json(const Message& m, std::optional<NodeId> to) {
    json j{{"type", elector::message_name(m.body)}, {"from", m.from.value}, {"term", m.term.value}};
    if (to) {
        j["to"] = to->value;
    }
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            if constexpr (std::is_same_v<T, ScoutingRequest>) {
                static_assert(kBodyFieldCount<T> == 2, "message_to_json must encode every field");
                j["round"] = b.round;
                put_config_version(j, b.config_version);
            } else if constexpr (std::is_same_v<T, ScoutingResponse>) {
                static_assert(kBodyFieldCount<T> == 4, "message_to_json must encode every field");
                j["round"] = b.round;
                j["will_vote"] = b.will_vote;
                if (b.refusal != Refusal::None) {
                    j["refusal"] = to_string(b.refusal);
                }
                put_config_version(j, b.config_version);
            } else if constexpr (std::is_same_v<T, ElectionProposal>) {
                static_assert(kBodyFieldCount<T> == 2, "message_to_json must encode every field");
                j["transfer"] = b.transfer;
                put_config_version(j, b.config_version);
            } else if constexpr (std::is_same_v<T, ElectionResponse>) {
                static_assert(kBodyFieldCount<T> == 4, "message_to_json must encode every field");
                j["granted"] = b.granted;
                j["refusal"] = to_string(b.refusal);
                j["voter_term"] = b.voter_term.value;
                put_config_version(j, b.config_version);
            } else if constexpr (std::is_same_v<T, LeaderHeartbeat>) {
                static_assert(kBodyFieldCount<T> == 3, "message_to_json must encode every field");
                j["lsn"] = b.lsn;
                put_config_version(j, b.config_version);
                put_heartbeat_round(j, b.round);
            } else if constexpr (std::is_same_v<T, HeartbeatAck>) {
                static_assert(kBodyFieldCount<T> == 1, "message_to_json must encode every field");
                put_heartbeat_round(j, b.round);
            } else if constexpr (std::is_same_v<T, LeadershipCession>) {
                static_assert(kBodyFieldCount<T> == 1, "message_to_json must encode every field");
                j["successor"] = optional_node(b.successor);
            } else {
                static_assert(std::is_empty_v<T>, "message_to_json must encode every field");
            }
        },
        m.body);
    return j;
}

Message message_from_json(const json& j) {
    Message m;
    m.from = node_from(j, "from");
    m.term = get_term(j, "term");
    const std::string type = get_string(j, "type");
    if (!body_by_name(type, j, m.body, std::make_index_sequence<elector::kMessageKindCount>{})) {
        fail("type: unknown message type '" + type.substr(0, 64) + "'");
    }
    return m;
}

DurableState durable_state_from_json(const json& j) {
    return DurableState{get_term(j, "term"), optional_node_from(j, "voted_for")};
}

std::vector<std::uint8_t> encode_cbor(const Message& m) {
    json j = message_to_json(m);
    j["v"] = kMessageFormatVersion;
    return json::to_cbor(j);
}

json cbor_document(std::span<const std::uint8_t> bytes, std::uint64_t format_version,
                   std::string_view family) {
    if (!cbor_depth_ok(bytes, kMaxCborDepth)) {
        fail("cbor: malformed or nested deeper than " + std::to_string(kMaxCborDepth));
    }
    json j =
        json::from_cbor(bytes.begin(), bytes.end(), /*strict=*/true, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        fail("cbor: malformed");
    }
    const std::uint64_t version = get_u64(j, "v");
    if (version != format_version) {
        fail("v: unsupported " + std::string(family) + " format version " +
             std::to_string(version));
    }
    return j;
}

Message decode_cbor(std::span<const std::uint8_t> bytes) {
    return message_from_json(cbor_document(bytes, kMessageFormatVersion, "message"));
}

}  // namespace conclave::codec

namespace conclave {

using nlohmann::json;

void to_json(json& j, NodeId n) {
    j = n.value;
}
void to_json(json& j, Term t) {
    j = t.value;
}
void to_json(json& j, const Lsn& l) {
    j = json{{"term", l.term.value}, {"counter", l.counter}};
}
void to_json(json& j, const NodeSet& s) {
    j = json::array();
    for (std::uint16_t i = 0; i < kMaxClusterSize; ++i) {
        if (s.contains(NodeId{i})) {
            j.push_back(i);
        }
    }
}

}  // namespace conclave

namespace conclave::elector {

using codec::optional_node;
using nlohmann::json;

void to_json(json& j, const Message& m) {
    j = codec::message_to_json(m);
}

void to_json(json& j, const ElectorState& s) {
    json timers = json::array();
    for (std::size_t i = 0; i < kTimerCount; ++i) {
        const auto t = static_cast<TimerId>(i);
        if (s.timer_armed(t)) {
            timers.push_back(to_string(t));
        }
    }
    j = json{{"role", to_string(s.role)},
             {"term", s.term.value},
             {"voted_for", optional_node(s.voted_for)},
             {"leader", optional_node(s.leader)},
             {"tentative_leader", optional_node(s.tentative_leader)},
             {"supporters", s.supporters},
             {"refusals", s.refusals},
             {"heard_since_check", s.heard_since_check},
             {"peers_up", s.peers_up},
             {"missed_checks", s.missed_checks},
             {"round",
              {{"id", s.round.id},
               {"term", s.round.term.value},
               {"yes", s.round.yes},
               {"no", s.round.no}}},
             {"last_round_id", s.last_round_id},
             {"lsn", s.lsn},
             {"armed_timers", timers},
             {"voters", s.voters},
             {"config_version", s.config_version}};
}

void to_json(json& j, const LeadershipSnapshot& s) {
    j = json{{"role", to_string(s.role)},         {"term", s.term.value},
             {"leader", optional_node(s.leader)}, {"fencing_token", s.fencing_token},
             {"reason", to_string(s.reason)},     {"changed_at_ms", s.changed_at.count()}};
}

void to_json(json& j, const DurableState& s) {
    j = json{{"term", s.term.value}, {"voted_for", optional_node(s.voted_for)}};
}

}  // namespace conclave::elector
