// SPDX-License-Identifier: Apache-2.0
#include "conclave/codec/json.hpp"

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "field_codec.hpp"

namespace conclave::codec {

using elector::DurableState;
using elector::ElectionProposal;
using elector::ElectionResponse;
using elector::HeartbeatAck;
using elector::HeartbeatResponse;
using elector::LeaderHeartbeat;
using elector::LeadershipCession;
using elector::Message;
using elector::MessageBody;
using elector::Refusal;
using elector::ScoutingRequest;
using elector::ScoutingResponse;
using nlohmann::json;

namespace {

using field_codec::fail;
using field_codec::node_from;
using field_codec::optional_node;
using field_codec::optional_node_from;

// The membership configuration versions (docs/membership.md): like terms, below 2^63 (one per
// committed change, nothing honest gets near it); written only when not 0, read as 0 when absent
// (frames from before the field existed, and frames of the default configuration).
using ConfigVersionFields =
    FieldSet<&ScoutingRequest::config_version, &ScoutingResponse::config_version,
             &ElectionProposal::config_version, &ElectionResponse::config_version,
             &LeaderHeartbeat::config_version>;

// Every field left out while it holds its default and read as the default when absent, so that
// frames of older nodes decode unchanged: the configuration versions; the scouting refusal
// (scouting names only the membership refusals); the leader lease's heartbeat round (any value is
// accepted: the leader counts an echoed round only if it still remembers sending it).
struct OmittedFields {
    template <auto Member>
    static constexpr bool contains = ConfigVersionFields::contains<Member> ||
                                     FieldSet<&ScoutingResponse::refusal, &LeaderHeartbeat::round,
                                              &HeartbeatAck::round>::contains<Member>;
};

// True when every described field named config_version is in ConfigVersionFields.
template <class... Bodies>
constexpr bool config_versions_listed(std::type_identity<std::variant<Bodies...>>) {
    bool listed = true;
    auto body = [&](auto tag) {
        using T = typename decltype(tag)::type;
        boost::mp11::mp_for_each<elector::BodyFields<T>>([&](auto d) {
            using D = decltype(d);
            if (std::string_view(D::name) == "config_version" &&
                !ConfigVersionFields::contains<D::pointer>) {
                listed = false;
            }
        });
    };
    (body(std::type_identity<Bodies>{}), ...);
    return listed;
}
static_assert(config_versions_listed(std::type_identity<MessageBody>{}),
              "a body's config_version is missing from ConfigVersionFields");

template <class Body>
void check_config_versions(const Body& b) {
    boost::mp11::mp_for_each<elector::BodyFields<Body>>([&](auto d) {
        using D = decltype(d);
        if constexpr (ConfigVersionFields::contains<D::pointer>) {
            const std::uint64_t v = b.*D::pointer;
            if (v >= elector::kConfigVersionLimit) {
                fail(std::string(D::name) + ": " + std::to_string(v) + " is not below 2^63");
            }
        }
    });
}

// Checks across the fields of one body, run on the decoded body: what the protocol cannot send.
template <class Body>
void check_body(const Body&, const json&) {}

void check_body(const ScoutingResponse& r, const json& j) {
    // Scouting names only the membership refusals, and only when it says no.
    if (!j.contains("refusal")) {
        return;
    }
    if (r.refusal != Refusal::StaleConfig && r.refusal != Refusal::NotAVoter) {
        fail("refusal: '" + std::string(to_string(r.refusal)) +
             "' is not a scouting refusal (stale-config or not-a-voter)");
    }
    if (r.will_vote) {
        fail("refusal: '" + std::string(to_string(r.refusal)) + "' with will_vote=true");
    }
}

void check_body(const ElectionResponse& r, const json&) {
    if (r.granted != (r.refusal == Refusal::None)) {
        fail("refusal: '" + std::string(to_string(r.refusal)) + "' with granted=" +
             (r.granted ? "true" : "false") + " (a vote is granted exactly when not refused)");
    }
}

void check_body(const LeaderHeartbeat& h, const json& j) {
    // A leader's LSN is of its own term or older, and a node that answers "follow us" carries
    // an LSN of at most its term (Elector.tla's TypeOK: lsn.term <= term): above the envelope
    // term is a forgery, which would raise a follower's recorded LSN above its own term.
    const Term term = get_term(j, "term");
    if (h.lsn.term > term) {
        fail("lsn: LSN term " + std::to_string(h.lsn.term.value) + " above the message term " +
             std::to_string(term.value));
    }
}

// Every field from its Describe list (field_codec.hpp), then the checks above.
template <class Body>
Body body_from_json(std::type_identity<Body>, const json& j) {
    Body b = field_codec::get_fields<field_codec::FieldCodec, OmittedFields, Body>(j);
    check_config_versions(b);
    check_body(b, j);
    return b;
}

}  // namespace

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
            field_codec::put_fields<field_codec::FieldCodec, OmittedFields>(
                j, b, field_codec::Form::Text);
        },
        m.body);
    return j;
}

json trace_step_line(std::string_view action, const elector::Actions& actions,
                     std::span<const NodeId> others, const elector::ElectorState& state,
                     NodeId self, const Message* received, std::optional<NodeId> peer,
                     std::optional<elector::TimerId> timer) {
    json sent = json::array();
    for (const elector::Action& a : actions) {
        if (const auto* to = std::get_if<elector::SendTo>(&a)) {
            sent.push_back(message_to_json(to->message, to->to));
        } else if (const auto* all = std::get_if<elector::Broadcast>(&a)) {
            for (const NodeId other : others) {
                sent.push_back(message_to_json(all->message, other));
            }
        }
    }
    json line{{"kind", "step"}, {"action", action}, {"sent", std::move(sent)}, {"state", state}};
    if (received) {
        line["msg"] = message_to_json(*received, self);
    }
    if (peer) {
        line["peer"] = peer->value;
    }
    if (timer) {
        line["timer"] = to_string(*timer);
    }
    return line;
}

Message message_from_json(const json& j) {
    Message m;
    m.from = node_from(j, "from");
    m.term = get_term(j, "term");
    const std::string type = get_string(j, "type");
    if (!field_codec::body_by_name(type, m.body,
                                   [&](auto tag) { return body_from_json(tag, j); })) {
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
