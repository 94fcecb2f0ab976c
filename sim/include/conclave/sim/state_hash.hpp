// SPDX-License-Identifier: Apache-2.0
// Hashes of the elector's plain-data state and messages (explorer state hashing, run fingerprints).
#pragma once

#include <cstdint>

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

/// A message packed into two words, unique for the values simulations produce (node ids below
/// 256, terms and round ids below 2^32, configuration versions below 2^8). Used to order and hash
/// the explorer's in-flight multiset.
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
            if constexpr (std::is_same_v<T, elector::ScoutingRequest>) {
                static_assert(elector::kBodyFieldCount<T> == 2,
                              "pack() must hash (or knowingly leave out) every field");
                p.body = b.round | (b.config_version << 40);
            } else if constexpr (std::is_same_v<T, elector::ScoutingResponse>) {
                static_assert(elector::kBodyFieldCount<T> == 4,
                              "pack() must hash (or knowingly leave out) every field");
                p.body = b.round | (b.config_version << 40) |
                         (static_cast<std::uint64_t>(b.refusal) << 56) |
                         (std::uint64_t{b.will_vote} << 63);
            } else if constexpr (std::is_same_v<T, elector::ElectionProposal>) {
                static_assert(elector::kBodyFieldCount<T> == 2,
                              "pack() must hash (or knowingly leave out) every field");
                p.body = (b.transfer ? 1U : 0U) | (b.config_version << 1);
            } else if constexpr (std::is_same_v<T, elector::ElectionResponse>) {
                static_assert(elector::kBodyFieldCount<T> == 4,
                              "pack() must hash (or knowingly leave out) every field");
                p.body = (b.granted ? 1U : 0U) | (static_cast<std::uint64_t>(b.refusal) << 1) |
                         (b.config_version << 4) | (b.voter_term.value << 12);
            } else if constexpr (std::is_same_v<T, elector::LeaderHeartbeat>) {
                static_assert(elector::kBodyFieldCount<T> == 3,
                              "pack() must hash (or knowingly leave out) every field");
                // The heartbeat round is left out, as time is: it only matters to the leader
                // lease, whose deadlines the explorer (like tla/Elector.tla) does not model.
                p.body = (b.lsn.term.value << 32) | (b.config_version << 24) | b.lsn.counter;
            } else if constexpr (std::is_same_v<T, elector::HeartbeatAck>) {
                static_assert(elector::kBodyFieldCount<T> == 1,
                              "pack() must hash (or knowingly leave out) every field");
                p.body = 0;  // its only field is the heartbeat round (see LeaderHeartbeat)
            } else if constexpr (std::is_same_v<T, elector::LeadershipCession>) {
                static_assert(elector::kBodyFieldCount<T> == 1,
                              "pack() must hash (or knowingly leave out) every field");
                p.body = optional_node_code(b.successor);
            } else {
                // Bodies not listed above carry no field; a new one with fields must be listed.
                static_assert(std::is_empty_v<T>, "pack() must hash every field of every body");
                p.body = 0;
            }
        },
        m.body);
    return p;
}

}  // namespace conclave::sim
