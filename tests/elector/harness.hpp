// SPDX-License-Identifier: Apache-2.0
// Test harness for the elector core: a node under test driven through its public inputs, builders
// for the actions it is expected to emit, and builders that put a node into each state of the
// transition table (tests/elector/README.md).
//
// Conventions used by every cell test:
//   - a 3-node cluster with the fast profile; the node under test is A (#0), its peers B and C;
//   - the random source always returns 7, so every random backoff is 7 ms;
//   - the state builders restore the durable term 5, so "lower / equal / higher" terms are 4/5/6
//     for a follower at term 5 and 5/6/7 for a node at term 6;
//   - after a builder returns, `now` is 1000 ms, so notifications emitted by the cell under test
//     carry changed_at = 1000 ms.
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "conclave/elector/elector.hpp"

namespace conclave::test {

inline constexpr NodeId A{0};
inline constexpr NodeId B{1};
inline constexpr NodeId C{2};
inline constexpr std::optional<NodeId> kNone = std::nullopt;
inline constexpr std::uint64_t kRandomValue = 7;  // every backoff is 7 ms with the fast profile
inline constexpr Millis kBackoff{7};
inline constexpr Millis kNow{1000};

// The cell tests pin the uniform backoff (BlazingMQ's, the `reference` profile's): every wait is
// the random draw, so each expected action list names one delay. The ranked backoff, the `fast`
// profile's default, has its own tests (backoff_test.cpp).
inline elector::Config fast3() {
    elector::Config c = elector::Config::fast(3, A);
    c.backoff = elector::Backoff::Uniform;
    return c;
}

// ---- Expected actions --------------------------------------------------------------------------

inline elector::Action send(NodeId to, std::uint64_t term, elector::MessageBody body) {
    return elector::SendTo{to, elector::Message{A, Term{term}, std::move(body)}};
}
inline elector::Action bcast(std::uint64_t term, elector::MessageBody body) {
    return elector::Broadcast{elector::Message{A, Term{term}, std::move(body)}};
}
inline elector::Action arm(elector::TimerId timer, Millis delay) {
    return elector::ArmTimer{timer, delay};
}
inline elector::Action cancel(elector::TimerId timer) {
    return elector::CancelTimer{timer};
}
inline elector::Action persist(std::uint64_t term, std::optional<NodeId> vote) {
    return elector::PersistState{elector::DurableState{Term{term}, vote}};
}
inline elector::Action notify(elector::Role role, std::uint64_t term, std::optional<NodeId> leader,
                              elector::Reason reason, Millis at = kNow) {
    const std::uint64_t token = leader ? term : 0;
    return elector::NotifyLeadership{
        elector::LeadershipSnapshot{role, Term{term}, leader, token, reason, at, std::nullopt}};
}
inline elector::Action alarm(NodeId peer, std::uint64_t term) {
    return elector::RaiseAlarm{elector::AlarmKind::TwoLeadersInTerm, peer, Term{term}};
}
inline elector::ElectionResponse grant(std::uint64_t term) {
    return elector::ElectionResponse{true, elector::Refusal::None, Term{term}};
}
inline elector::ElectionResponse refuse(elector::Refusal why, std::uint64_t voter_term) {
    return elector::ElectionResponse{false, why, Term{voter_term}};
}
inline elector::LeaderHeartbeat heartbeat(std::uint64_t term, std::uint64_t counter = 0,
                                          std::uint64_t round = 0) {
    return elector::LeaderHeartbeat{Lsn{Term{term}, counter}, 0, round};
}
inline elector::LeadershipCession cession(std::optional<NodeId> successor = std::nullopt) {
    return elector::LeadershipCession{successor};
}

// ---- Observed state ----------------------------------------------------------------------------

/// What a cell test asserts about the node after the input, compared as a whole.
struct View {
    elector::Role role = elector::Role::Stopped;
    std::uint64_t term = 0;
    std::optional<NodeId> voted_for;
    std::optional<NodeId> leader;
    std::optional<NodeId> tentative;
    elector::Reason reason = elector::Reason::Stopped;  // of the last leadership snapshot
    std::vector<elector::TimerId> armed;  // timers the core believes armed, in TimerId order
    bool operator==(const View&) const = default;
};

inline View view(const elector::Elector& e) {
    View v{e.state().role,
           e.state().term.value,
           e.state().voted_for,
           e.state().leader,
           e.state().tentative_leader,
           e.snapshot().reason,
           {}};
    for (std::size_t i = 0; i < elector::kTimerCount; ++i) {
        if (e.state().timer_armed(static_cast<elector::TimerId>(i))) {
            v.armed.push_back(static_cast<elector::TimerId>(i));
        }
    }
    return v;
}

inline std::string render(const std::optional<NodeId>& n) {
    return n ? to_string(*n) : "none";
}

inline std::string render(const elector::Action& a) {
    std::string s = to_string(a);
    if (const auto* n = std::get_if<elector::NotifyLeadership>(&a)) {
        s += " at=" + std::to_string(n->snapshot.changed_at.count()) + "ms";
    }
    return s;
}

// ---- The node under test -----------------------------------------------------------------------

/// One elector driven through its public inputs at a test-controlled `now`.
struct Node {
    elector::Elector e;
    Millis now{0};

    explicit Node(elector::Config config = fast3(),
                  elector::DurableState restored = elector::DurableState{})
        : e(config, restored, [] { return kRandomValue; }) {}

    elector::Actions start() { return e.start(now); }
    elector::Actions stop() { return e.stop(now); }
    elector::Actions recv(NodeId from, std::uint64_t term, elector::MessageBody body) {
        return e.receive(now, elector::Message{from, Term{term}, std::move(body)});
    }
    elector::Actions fire(elector::TimerId timer) { return e.timer_fired(now, timer); }
    elector::Actions up(NodeId peer) { return e.peer_up(now, peer); }
    elector::Actions down(NodeId peer, LinkLoss loss = LinkLoss::PeerClosed) {
        return e.peer_down(now, peer, loss);
    }
    elector::Actions transfer(NodeId target) { return e.transfer_leadership(now, target); }
    View view() const { return test::view(e); }
};

// ---- State builders ----------------------------------------------------------------------------
// Each reaches its state through public inputs only; builders_test.cpp checks every step.

/// Stopped: constructed with durable term 5, never started.
inline Node stopped_node(elector::Config config = fast3()) {
    Node n(config, elector::DurableState{Term{5}, std::nullopt});
    n.now = kNow;
    return n;
}

/// Follower, no leader, term 5, InitialWait armed, peers B and C connected.
inline Node follower_no_leader(elector::Config config = fast3()) {
    Node n(config, elector::DurableState{Term{5}, std::nullopt});
    n.start();
    n.up(B);
    n.up(C);
    n.now = kNow;
    return n;
}

/// Follower following B in term 5 (learnt from B's heartbeat at 900 ms, so that its promise to B
/// holds until 1200 ms), HeartbeatCheck armed.
inline Node follower_with_leader(elector::Config config = fast3()) {
    Node n = follower_no_leader(config);
    n.now = Millis{900};
    n.recv(B, 5, heartbeat(5, 3));
    n.now = kNow;
    return n;
}

/// Follower with no leader after losing B (RandomWait armed), term 5.
inline Node follower_leader_lost(elector::Config config = fast3()) {
    Node n = follower_with_leader(config);
    n.now = Millis{950};
    n.down(B);
    n.up(B);
    n.now = kNow;
    return n;
}

/// Follower that voted for B in term 6 and has not heard B's heartbeat yet (tentative leader B).
inline Node follower_tentative(elector::Config config = fast3()) {
    Node n = follower_no_leader(config);
    n.now = Millis{500};
    n.recv(B, 6, elector::ElectionProposal{});
    n.now = kNow;
    return n;
}

/// Follower in scouting round 1 for term 6 (own term 5), ScoutingResult armed.
inline Node follower_scouting(elector::Config config = fast3()) {
    Node n = follower_no_leader(config);
    n.now = Millis{300};
    n.fire(elector::TimerId::InitialWait);
    n.now = kNow;
    return n;
}

/// Candidate in term 6 (B said yes to scouting round 1), ElectionResult armed, supporters {A}.
inline Node candidate(elector::Config config = fast3()) {
    Node n = follower_scouting(config);
    n.now = Millis{400};
    n.recv(B, 6, elector::ScoutingResponse{1, true});
    n.now = kNow;
    return n;
}

/// Leader in term 6 elected with B's vote (supporters {A, B}); HeartbeatBroadcast and CheckQuorum
/// armed; LSN 6.0.
inline Node leader(elector::Config config = fast3()) {
    Node n = candidate(config);
    n.now = Millis{450};
    n.recv(B, 6, grant(6));
    n.now = kNow;
    return n;
}

/// The states of the transition table, by the names README.md uses.
struct NamedState {
    const char* name;
    Node (*build)(elector::Config);
};
inline const std::vector<NamedState>& started_states() {
    static const std::vector<NamedState> states = {
        {"F-none", follower_no_leader},
        {"F-leader", follower_with_leader},
        {"F-tentative", follower_tentative},
        {"F-scouting", follower_scouting},
        {"Candidate", candidate},
        {"Leader", leader},
    };
    return states;
}

/// Asserts that `input` emits nothing and changes neither the protocol state nor the snapshot.
template <class Input>
void check_ignored(Node& n, Input&& input) {
    const elector::ElectorState before = n.e.state();
    const elector::LeadershipSnapshot snapshot = n.e.snapshot();
    CHECK(input(n) == elector::Actions{});
    CHECK(n.e.state() == before);
    CHECK(n.e.snapshot() == snapshot);
}

/// Asserts that `input` emits exactly `expected` and changes neither the state nor the snapshot.
template <class Input>
void check_reply_only(Node& n, Input&& input, const elector::Actions& expected) {
    const elector::ElectorState before = n.e.state();
    const elector::LeadershipSnapshot snapshot = n.e.snapshot();
    CHECK(input(n) == expected);
    CHECK(n.e.state() == before);
    CHECK(n.e.snapshot() == snapshot);
}

}  // namespace conclave::test

// Readable failure messages: one action per line.
namespace Catch {
template <>
struct StringMaker<conclave::elector::Actions> {
    static std::string convert(const conclave::elector::Actions& actions) {
        std::string s = "[";
        for (const auto& a : actions) {
            s += "\n    " + conclave::test::render(a);
        }
        return s + (actions.empty() ? "]" : "\n]");
    }
};
template <>
struct StringMaker<conclave::test::View> {
    static std::string convert(const conclave::test::View& v) {
        std::string s = "{" + std::string(conclave::elector::to_string(v.role)) +
                        " term=" + std::to_string(v.term) +
                        " voted_for=" + conclave::test::render(v.voted_for) +
                        " leader=" + conclave::test::render(v.leader) +
                        " tentative=" + conclave::test::render(v.tentative) +
                        " reason=" + std::string(conclave::elector::to_string(v.reason)) +
                        " armed=[";
        for (auto t : v.armed) {
            s += " " + std::string(conclave::elector::to_string(t));
        }
        return s + " ]}";
    }
};
}  // namespace Catch
