// SPDX-License-Identifier: Apache-2.0
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
// Restart: the durable state a driver persisted (PersistState actions) is reloaded into a new
// Elector. The node never votes twice in a term, never goes back in term, and a PersistState always
// precedes the send that depends on it (departure 1).
#include "harness.hpp"

#include <map>
#include <memory>
#include <random>
#include <span>

#include "conclave/runtime/elector_runtime.hpp"

using namespace conclave;
using namespace conclave::elector;
using namespace conclave::test;

namespace {

/// What a driver does with PersistState: keep the last one (it is durable before later sends).
std::optional<DurableState> last_persisted(const Actions& actions) {
    std::optional<DurableState> last;
    for (const auto& a : actions) {
        if (const auto* p = std::get_if<PersistState>(&a)) {
            last = p->state;
        }
    }
    return last;
}

/// A node brought back from `disk` after a crash, started at 5000 ms, its peers connected again.
/// With `past_start_promise`, the clock then moves on by E (300 ms in fast3, more than P), past the
/// promise a restarted node keeps from its start.
Node restarted(const DurableState& disk, bool past_start_promise = true, Config config = fast3()) {
    Node n(config, disk);
    n.now = Millis{5000};
    CHECK(n.start() ==
          Actions{arm(TimerId::InitialWait, Millis{300}),
                  notify(Role::Follower, disk.term.value, kNone, Reason::Started, Millis{5000})});
    n.up(B);
    n.up(C);
    CHECK(n.e.state().durable() == disk);
    if (past_start_promise) {
        n.now = Millis{5300};
    }
    return n;
}

}  // namespace

TEST_CASE("restart after voting: no second vote in the term, no going back in term", "[restart]") {
    Node n = follower_no_leader();
    const Actions voted = n.recv(B, 6, ElectionProposal{});
    // The vote is persisted before the grant leaves.
    REQUIRE(voted.front() == persist(6, B));
    REQUIRE(voted.back() == send(B, 6, grant(6)));
    const DurableState disk = *last_persisted(voted);

    Node r = restarted(disk);
    CHECK(r.view() ==
          View{Role::Follower, 6, B, kNone, kNone, Reason::Started, {TimerId::InitialWait}});
    // Another candidate of term 6: refused; the same candidate's duplicate: granted again.
    CHECK(r.recv(C, 6, ElectionProposal{}) ==
          Actions{send(C, 6, refuse(Refusal::AlreadyVoted, 6))});
    CHECK(r.recv(B, 6, ElectionProposal{}) == Actions{send(B, 6, grant(6))});
    // Older terms stay older.
    CHECK(r.recv(C, 5, heartbeat(5)) == Actions{send(C, 6, HeartbeatResponse{})});
    CHECK(r.recv(C, 6, ScoutingRequest{4}) == Actions{send(C, 6, ScoutingResponse{4, false})});
    // Its own scouting asks about term 7.
    CHECK(r.fire(TimerId::InitialWait) ==
          Actions{bcast(7, ScoutingRequest{1}), arm(TimerId::ScoutingResult, Millis{200})});
}

TEST_CASE("restart after standing for election: the self-vote holds, next election is higher",
          "[restart]") {
    Node n = candidate();
    REQUIRE(n.e.state().durable() == DurableState{Term{6}, A});
    Node r = restarted(n.e.state().durable());
    CHECK(r.recv(B, 6, ElectionProposal{}) ==
          Actions{send(B, 6, refuse(Refusal::AlreadyVoted, 6))});
    r.fire(TimerId::InitialWait);
    CHECK(r.recv(B, 7, ScoutingResponse{1, true}) ==
          Actions{cancel(TimerId::ScoutingResult), persist(7, A),
                  notify(Role::Candidate, 7, kNone, Reason::ElectionStarted, Millis{5300}),
                  bcast(7, ElectionProposal{false}), arm(TimerId::ElectionResult, Millis{200})});
}

TEST_CASE("restart: for P from its start a node keeps the promise it may have forgotten",
          "[restart][lease]") {
    // It may have heard a leader just before the crash and promised it P: until start + P it
    // neither votes for, nor supports, nor stands against anyone.
    Node r = restarted(DurableState{Term{6}, kNone}, /*past_start_promise=*/false);
    CHECK(r.recv(C, 7, ElectionProposal{}) == Actions{send(C, 7, refuse(Refusal::HasLeader, 6))});
    CHECK(r.recv(C, 7, ScoutingRequest{1}) == Actions{send(C, 7, ScoutingResponse{1, false})});
    r.now = Millis{5200};
    CHECK(r.fire(TimerId::InitialWait) == Actions{arm(TimerId::RandomWait, Millis{50})});
    r.now = Millis{5250};  // start + P: the promise is over
    CHECK(r.recv(C, 7, ElectionProposal{}) == Actions{persist(7, C), cancel(TimerId::RandomWait),
                                                      arm(TimerId::HeartbeatCheck, Millis{50}),
                                                      send(C, 7, grant(7))});
}

TEST_CASE("restart: a node that never left term 0 promised nobody", "[restart][lease]") {
    Node r = restarted(DurableState{}, /*past_start_promise=*/false);
    CHECK(r.recv(C, 1, ElectionProposal{}) == Actions{persist(1, C), cancel(TimerId::InitialWait),
                                                      arm(TimerId::HeartbeatCheck, Millis{50}),
                                                      send(C, 1, grant(1))});
}

TEST_CASE("restart after a term adopted from a heartbeat: term kept, no vote", "[restart]") {
    Node n = follower_no_leader();
    const Actions adopted = n.recv(B, 8, heartbeat(8));
    REQUIRE(adopted.front() == persist(8, kNone));
    Node r = restarted(*last_persisted(adopted));
    // Voted for nobody in term 8, but a proposal of term 8 is still refused: only higher terms win
    // a vote from a node that has seen term 8's leader.
    CHECK(r.recv(C, 8, ElectionProposal{}) == Actions{send(C, 8, refuse(Refusal::StaleTerm, 8))});
    CHECK(r.recv(C, 7, heartbeat(7)) == Actions{send(C, 8, HeartbeatResponse{})});
}

// A long deterministic run of random inputs against one node inside the shared runtime
// (runtime/elector_runtime.hpp, the one interpreter of the core's actions), crashing it and
// restoring it from what the runtime persisted. The environment checks every write and every
// send as the runtime performs them: persisted terms never decrease; a term never holds two
// different votes; every message carrying the node's own term leaves only once that term is
// durable, a proposal only once the self-vote is, and a vote only once it is. After every input:
// the in-memory durable state equals the persisted one.
namespace {

struct RestartEnv {
    static constexpr bool kPlantedBugs = false;
    Millis clock{0};
    DurableState disk{};
    std::map<std::uint64_t, NodeId> vote_in_term;
    std::uint64_t votes = 0;
    std::optional<NodeId> proposer;  // set while the input is a proposal
    int step = 0;

    Millis now() const { return clock; }
    bool persist(const DurableState& state) {
        REQUIRE(state.term >= disk.term);
        if (state.term == disk.term && disk.voted_for) {
            REQUIRE(state.voted_for == disk.voted_for);  // a vote is never changed
        }
        disk = state;
        if (disk.voted_for) {
            auto [it, fresh] = vote_in_term.emplace(disk.term.value, *disk.voted_for);
            REQUIRE(it->second == *disk.voted_for);  // one vote per term, across crashes
            votes += fresh ? 1 : 0;
        }
        return true;
    }
    void send(std::span<const NodeId> to, const Message& message) {
        // One addressee: a SendTo; several: a Broadcast (no single addressee).
        const bool to_proposer = proposer && to.size() == 1 && to[0] == *proposer;
        const Message* m = &message;
        CAPTURE(step, message_name(m->body), m->term.value);
        const auto* response = std::get_if<ElectionResponse>(&m->body);
        if (std::holds_alternative<ElectionProposal>(m->body)) {
            REQUIRE(disk == DurableState{m->term, A});
        } else if (response && response->granted && to_proposer) {
            REQUIRE(disk == DurableState{m->term, proposer});  // a vote
        } else if (std::holds_alternative<LeaderHeartbeat>(m->body) ||
                   std::holds_alternative<HeartbeatAck>(m->body) ||
                   std::holds_alternative<HeartbeatResponse>(m->body) ||
                   (response && response->granted)) {
            REQUIRE(m->term == disk.term);
        } else if (std::holds_alternative<LeadershipCession>(m->body)) {
            REQUIRE(m->term <= disk.term);
        }
    }
    void arm(TimerId, Millis, runtime::TimerGeneration) {}  // the test fires timers at random
    void cancel(TimerId) {}
    void notify(const LeadershipSnapshot&) {}
    void alarm(const RaiseAlarm&) {}
    void failed(const DurableState&) { FAIL("the test's disk never fails"); }
};

}  // namespace

TEST_CASE("random inputs with crashes: durable state is always persisted before it is used",
          "[restart]") {
    const Config config = Config::fast(5, A);
    std::mt19937_64 rng(20240601);
    auto pick = [&](std::uint64_t n) { return rng() % n; };
    RestartEnv env;
    std::uint64_t crashes = 0;
    using Rt = runtime::ElectorRuntime<RestartEnv>;
    const auto restore = [&] {
        auto rt = std::make_unique<Rt>(env, config, env.disk, [] { return kRandomValue; });
        rt->start();
        for (std::uint16_t p = 1; p < 5; ++p) {
            rt->peer_up(NodeId{p});
        }
        return rt;
    };
    std::unique_ptr<Rt> node = restore();

    for (int step = 0; step < 20000; ++step) {
        Rt& n = *node;
        env.step = step;
        env.clock += Millis{1 + static_cast<Millis::rep>(pick(20))};
        const NodeId peer{static_cast<std::uint16_t>(1 + pick(4))};
        const ElectorState& state = n.elector().state();
        const std::uint64_t t = state.term.value;
        const std::uint64_t term = t == 0 ? pick(3) : t - 1 + pick(4);
        const auto deliver = [&](std::uint64_t message_term, MessageBody body) {
            n.receive(Message{peer, Term{message_term}, std::move(body)});
        };
        env.proposer.reset();  // set when the input is a proposal
        switch (pick(14)) {
            case 0:
                deliver(term, ScoutingRequest{pick(3)});
                break;
            case 1:
                deliver(state.round.term.value, ScoutingResponse{state.round.id, pick(3) != 0});
                break;
            case 2:
            case 3:
                env.proposer = peer;
                deliver(term, ElectionProposal{pick(8) == 0});
                break;
            case 4:
                deliver(term,
                        ElectionResponse{pick(3) != 0, Refusal::StaleTerm, Term{term + pick(2)}});
                break;
            case 5:
                deliver(term, heartbeat(term, pick(5)));
                break;
            case 6:
                deliver(term, HeartbeatAck{});
                break;
            case 7:
                deliver(term, HeartbeatResponse{});
                break;
            case 8:
                deliver(term, cession(pick(3) == 0 ? std::optional{A} : std::nullopt));
                break;
            case 9:
            case 10: {
                const auto timer = static_cast<TimerId>(pick(kTimerCount));
                n.timer_fired(timer, n.generation(timer));  // any timer, armed or not
                break;
            }
            case 11:
                pick(2) ? n.peer_down(peer) : n.peer_up(peer);
                break;
            case 12:
                n.transfer_leadership(peer);
                break;
            default: {
                // Crash: everything not persisted is lost; the runtime is restored from disk.
                ++crashes;
                env.proposer.reset();
                node = restore();  // `n` is gone
                CHECK(node->elector().state().durable() == env.disk);
                continue;
            }
        }
        REQUIRE(n.elector().state().durable() == env.disk);
    }
    CHECK(crashes > 100);
    CHECK(env.votes > 100);
}
