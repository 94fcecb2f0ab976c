// SPDX-License-Identifier: Apache-2.0
// Hashes of the elector's plain-data state and messages (explorer state hashing, run fingerprints).
#pragma once

#include <boost/mp11/algorithm.hpp>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <variant>

#include "conclave/core/field_set.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/sim/rng.hpp"

namespace conclave::sim {

inline std::uint64_t optional_node_code(const std::optional<NodeId>& n) {
    return n ? std::uint64_t{n->value} + 1 : 0;
}

/// One step of the state hash: a bijection of `h` for every `v` (xor, odd multiply, xorshift), so
/// states that differ in one field never collide through that field; half the latency of
/// hash_mix, which matters because the simulator hashes the stepping node's state at every step.
inline std::uint64_t hash_fold(std::uint64_t h, std::uint64_t v) {
    h = (h ^ v) * 0x9fb21c651e98df25ULL;
    return h ^ (h >> 28);
}

/// Two independent lanes (the processor folds them in parallel), joined at the end.
inline std::uint64_t hash_state(const elector::ElectorState& s) {
    std::uint64_t a = static_cast<std::uint64_t>(s.role);
    std::uint64_t b = s.term.value;
    a = hash_fold(a, optional_node_code(s.voted_for) | (optional_node_code(s.leader) << 16) |
                         (optional_node_code(s.tentative_leader) << 32) |
                         (std::uint64_t{s.armed_timers} << 48));
    b = hash_fold(b, s.supporters.bits);
    a = hash_fold(a, s.refusals.bits);
    b = hash_fold(b, s.heard_since_check.bits);
    a = hash_fold(a, s.peers_up.bits);
    b = hash_fold(b, s.missed_checks);
    a = hash_fold(a, s.round.id);
    b = hash_fold(b, s.round.term.value);
    a = hash_fold(a, s.round.yes.bits);
    b = hash_fold(b, s.round.no.bits);
    a = hash_fold(a, s.last_round_id);
    b = hash_fold(b, s.lsn.term.value);
    a = hash_fold(a, s.lsn.counter);
    b = hash_fold(b, s.voters.bits);
    a = hash_fold(a, s.config_version);
    a ^= Rng::splitmix64(b);
    return Rng::splitmix64(a);
}

/// Message body fields the explorer does not tell apart: the heartbeat round, as time: it only
/// matters to the leader lease, whose deadlines the explorer (like tla/Elector.tla) does not model.
using UnhashedFields = FieldSet<&elector::LeaderHeartbeat::round, &elector::HeartbeatAck::round>;

/// One body field into the message hash, chosen by the field's type: a new field of one of these
/// types is hashed without an edit; a field of any other type fails to compile (the deleted
/// template is the exact match, so no implicit conversion picks an overload by accident).
template <class T>
std::uint64_t hash_field(std::uint64_t h, const T& v) = delete;
inline std::uint64_t hash_field(std::uint64_t h, const std::uint64_t& v) {
    return hash_fold(h, v);
}
inline std::uint64_t hash_field(std::uint64_t h, const bool& v) {
    return hash_fold(h, v ? 1U : 0U);
}
inline std::uint64_t hash_field(std::uint64_t h, const elector::Refusal& v) {
    return hash_fold(h, static_cast<std::uint64_t>(v));
}
inline std::uint64_t hash_field(std::uint64_t h, const Term& v) {
    return hash_fold(h, v.value);
}
inline std::uint64_t hash_field(std::uint64_t h, const Lsn& v) {
    return hash_fold(hash_fold(h, v.term.value), v.counter);
}
inline std::uint64_t hash_field(std::uint64_t h, const std::optional<NodeId>& v) {
    return hash_fold(h, optional_node_code(v));
}

/// A message in two words: `head` packs the routing (unique for node ids below 256 and terms
/// below 2^40), `body` hashes every field of the body (its BOOST_DESCRIBE_STRUCT list in
/// elector/messages.hpp) but the UnhashedFields. Used to order and hash the explorer's in-flight
/// multiset.
struct PackedMessage {
    std::uint64_t head = 0;  // to | from << 8 | type << 16 | term << 24
    std::uint64_t body = 0;
    auto operator<=>(const PackedMessage&) const = default;
};

inline PackedMessage pack(NodeId to, const elector::Message& m) {
    PackedMessage p;
    p.head = std::uint64_t{to.value} | (std::uint64_t{m.from.value} << 8) |
             (static_cast<std::uint64_t>(m.body.index()) << 16) | (m.term.value << 24);
    std::visit(
        [&](const auto& b) {
            using T = std::decay_t<decltype(b)>;
            boost::mp11::mp_for_each<elector::BodyFields<T>>([&](auto d) {
                using D = decltype(d);
                if constexpr (!UnhashedFields::contains<D::pointer>) {
                    p.body = hash_field(p.body, b.*D::pointer);
                }
            });
        },
        m.body);
    return p;
}

}  // namespace conclave::sim
