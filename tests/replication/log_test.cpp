// SPDX-License-Identifier: Apache-2.0
// Unit tests of the log core's transitions, one input at a time, asserting the actions produced.
#include <catch2/catch.hpp>

#include "conclave/replication/log.hpp"
#include "log_actions.hpp"

using namespace conclave;
using namespace conclave::replication;

namespace {

constexpr NodeId N0{0};
constexpr NodeId N1{1};
constexpr NodeId N2{2};
constexpr Millis T0{0};

Lsn L(std::uint64_t term, std::uint64_t counter) {
    return Lsn{Term{term}, counter};
}

Entry E(std::uint64_t term, std::uint64_t counter) {
    if (counter == 0) {
        return Entry{L(term, 0), {}, {}};
    }
    return Entry{L(term, counter), "k" + std::to_string(term) + "." + std::to_string(counter), "v"};
}

LogConfig Config3(NodeId self) {
    LogConfig c;
    c.cluster_size = 3;
    c.self = self;
    c.max_batch_entries = 2;
    c.max_inflight_batches = 2;
    c.propose_timeout_ticks = 3;
    return c;
}

ReplicatedLog Make(LogConfig config, std::vector<Entry> entries = {}, LogMeta meta = {}) {
    ReplicatedLog log(config, RecoveredLog{std::move(entries), meta});
    log.start(T0);
    return log;
}

elector::LeadershipSnapshot Leads(NodeId n, std::uint64_t term) {
    return elector::LeadershipSnapshot{elector::Role::Leader,        Term{term}, n,           term,
                                       elector::Reason::ElectionWon, T0,         std::nullopt};
}
elector::LeadershipSnapshot Follows(NodeId leader, std::uint64_t term) {
    return elector::LeadershipSnapshot{
        elector::Role::Follower,           Term{term}, leader,      term,
        elector::Reason::LeaderDiscovered, T0,         std::nullopt};
}

LogMessage Msg(NodeId from, std::uint64_t term, LogMessageBody body) {
    return LogMessage{from, Term{term}, std::move(body)};
}

template <class T>
std::vector<T> All(const LogActions& actions) {
    return testing::ActionsOf<T>(actions);
}

// Bodies of type B sent (SendLog) to `to`.
template <class B>
std::vector<B> Sent(const LogActions& actions, NodeId to) {
    return testing::SentBodies<B>(actions, to);
}

std::vector<Lsn> Lsns(const std::vector<Entry>& entries) {
    std::vector<Lsn> out;
    for (const auto& e : entries) {
        out.push_back(e.lsn);
    }
    return out;
}

// Drives node 0 to ACTIVE leader of `term` in a 3-node cluster whose followers have its log.
void MakeActive(ReplicatedLog& leader, std::uint64_t term) {
    leader.on_leadership(T0, Leads(N0, term));
    leader.receive(T0, Msg(N1, term, SyncResponse{leader.last_lsn(), leader.commit_lsn()}));
    leader.persisted(T0, L(term, 0));
    leader.receive(T0, Msg(N1, term, AppendAck{true, {}, L(term, 0), {}}));
    REQUIRE(leader.role() == LogRole::LeaderActive);
}

}  // namespace

TEST_CASE("config validation names the field") {
    LogConfig c = Config3(N0);
    c.max_batch_entries = 0;
    REQUIRE(c.validate().value().find("max_batch_entries") != std::string::npos);
    c = Config3(N0);
    c.quorum = 1;
    REQUIRE(c.validate().value().find("quorum") != std::string::npos);
    c = Config3(NodeId{3});
    REQUIRE(c.validate().value().find("self") != std::string::npos);
    REQUIRE_THROWS_WITH(ReplicatedLog(c, RecoveredLog{}), Catch::Contains("self"));
    REQUIRE_THROWS_WITH(ReplicatedLog(Config3(N0), RecoveredLog{{E(1, 1), E(1, 1)}, {}}),
                        Catch::Contains("strictly increasing"));
}

TEST_CASE("single node: sync point, ACTIVE, propose, commit on durability") {
    LogConfig c;
    ReplicatedLog log = Make(c);
    auto a = log.on_leadership(T0, Leads(N0, 1));
    // Promise durable first; alone is a quorum, so the sync point is appended at once.
    REQUIRE(a.size() >= 3);
    CHECK(std::get<PersistMeta>(a[0]).meta == LogMeta{Term{1}, kNoLsn});
    CHECK(std::get<NotifyLogRole>(a[1]).role == LogRole::LeaderPassive);
    CHECK(All<PersistEntries>(a).at(0).entries == std::vector<Entry>{E(1, 0)});
    CHECK(log.role() == LogRole::LeaderPassive);

    a = log.persisted(T0, L(1, 0));
    CHECK(All<ApplyCommitted>(a).at(0).entries == std::vector<Entry>{E(1, 0)});
    CHECK(All<NotifyLogRole>(a).at(0).role == LogRole::LeaderActive);

    a = log.propose(Millis{7}, L(1, 1), "k1.1", "v");
    CHECK(a == LogActions{PersistEntries{{E(1, 1)}}});
    a = log.persisted(Millis{9}, L(1, 1));
    // The commit point is durable before the writer hears "committed".
    CHECK(a == LogActions{ApplyCommitted{{E(1, 1)}}, PersistMeta{LogMeta{Term{1}, L(1, 1)}, true},
                          ProposeResult{L(1, 1), ProposeError::None, Millis{7}}});
    CHECK(log.check_invariants().empty());
}

TEST_CASE("proposals are refused with a clear reason") {
    ReplicatedLog follower = Make(Config3(N1));
    auto a = follower.propose(T0, L(1, 1), "k", "v");
    CHECK(a == LogActions{ProposeResult{L(1, 1), ProposeError::NotLeader, T0}});

    ReplicatedLog leader = Make(Config3(N0));
    leader.on_leadership(T0, Leads(N0, 1));
    CHECK(All<ProposeResult>(leader.propose(T0, L(1, 1), "k", "v")).at(0).error ==
          ProposeError::NotActive);
    MakeActive(leader, 1);
    CHECK(All<ProposeResult>(leader.propose(T0, L(2, 1), "k", "v")).at(0).error ==
          ProposeError::NotLeader);
    CHECK(All<ProposeResult>(leader.propose(T0, L(1, 1), "", "v")).at(0).error ==
          ProposeError::InvalidEntry);
    CHECK(
        All<ProposeResult>(leader.propose(T0, L(1, 1), std::string(2000, 'k'), "v")).at(0).error ==
        ProposeError::InvalidEntry);
    CHECK(All<ProposeResult>(leader.propose(T0, L(1, 0), "k", "v")).at(0).error ==
          ProposeError::InvalidEntry);
    CHECK(All<ProposeResult>(leader.propose(T0, L(1, 5), "k", "v")).empty());  // accepted
    CHECK(All<ProposeResult>(leader.propose(T0, L(1, 4), "k", "v")).at(0).error ==
          ProposeError::InvalidEntry);  // not above the last LSN
}

TEST_CASE("a follower answers a sync request only after its promise is durable") {
    ReplicatedLog f = Make(Config3(N1), {E(1, 0), E(1, 1)}, LogMeta{Term{1}, L(1, 0)});
    auto a = f.receive(T0, Msg(N0, 2, SyncRequest{}));
    REQUIRE(a.size() == 2);
    CHECK(std::get<PersistMeta>(a[0]).meta == LogMeta{Term{2}, L(1, 0)});
    CHECK(std::get<SendLog>(a[1]) == SendLog{N0, Msg(N1, 2, SyncResponse{L(1, 1), L(1, 0)})});
    // A request of an older term is refused in the newer one (it deposes a stale leader).
    a = f.receive(T0, Msg(N2, 1, Append{L(1, 1), {E(1, 2)}, L(1, 1)}));
    CHECK(a == LogActions{SendLog{N2, Msg(N1, 2, AppendAck{false, L(1, 1), L(1, 1), L(1, 0)})}});
    CHECK(f.entries().size() == 2);
}

TEST_CASE("a new leader adopts the most advanced log of its quorum, then commits a sync point") {
    // Node 0 was a follower that missed (1,2) and (1,3); node 1 has them (uncommitted or not: the
    // leader cannot know, so it keeps them).
    ReplicatedLog leader = Make(Config3(N0), {E(1, 0), E(1, 1)}, LogMeta{Term{1}, L(1, 0)});
    leader.on_leadership(T0, Leads(N0, 2));
    auto a = leader.receive(T0, Msg(N1, 2, SyncResponse{L(1, 3), L(1, 1)}));
    // Fetch what it lacks, from after its own commit point, in batches.
    CHECK(Sent<FetchRequest>(a, N1) ==
          std::vector<FetchRequest>{FetchRequest{L(1, 0), L(1, 3), 2}});
    a = leader.receive(T0, Msg(N1, 2, FetchResponse{L(1, 0), {E(1, 1), E(1, 2)}, L(1, 3)}));
    CHECK(All<PersistEntries>(a).at(0).entries == std::vector<Entry>{E(1, 2)});  // (1,1) held
    CHECK(Sent<FetchRequest>(a, N1).at(0).after_lsn == L(1, 2));
    a = leader.receive(T0, Msg(N1, 2, FetchResponse{L(1, 2), {E(1, 3)}, L(1, 3)}));
    CHECK(Lsns(leader.entries()) == std::vector<Lsn>{L(1, 0), L(1, 1), L(1, 2), L(1, 3), L(2, 0)});
    CHECK(leader.sync().done);
    CHECK(leader.role() == LogRole::LeaderPassive);
    // Node 1 reported (1,3): it is sent the sync point right after it. Node 2 did not answer: it
    // is probed with the sync point alone.
    CHECK(Sent<Append>(a, N1) == std::vector<Append>{Append{L(1, 3), {E(2, 0)}, L(1, 0)}});
    CHECK(Sent<Append>(a, N2) == std::vector<Append>{Append{L(1, 3), {E(2, 0)}, L(1, 0)}});
    CHECK(leader.counters().entries_fetched == 3);

    // Committed = durable on a quorum in this term: self + node 1.
    leader.persisted(T0, L(2, 0));
    CHECK(leader.commit_lsn() == L(1, 0));
    a = leader.receive(T0, Msg(N1, 2, AppendAck{true, {}, L(2, 0), L(1, 1)}));
    CHECK(leader.commit_lsn() == L(2, 0));
    CHECK(leader.role() == LogRole::LeaderActive);
    CHECK(All<ApplyCommitted>(a).at(0).entries.size() == 4);
    CHECK(leader.check_invariants().empty());
}

TEST_CASE("a syncing leader truncates its own conflicting uncommitted suffix") {
    // Node 0 led term 2 and appended (2,0),(2,1) that never committed; term 3's leader (node 1)
    // committed (3,0). Now node 0 leads term 4 and hears from node 1.
    ReplicatedLog leader =
        Make(Config3(N0), {E(1, 0), E(2, 0), E(2, 1)}, LogMeta{Term{3}, L(1, 0)});
    leader.on_leadership(T0, Leads(N0, 4));
    leader.receive(T0, Msg(N1, 4, SyncResponse{L(3, 0), L(3, 0)}));
    auto a = leader.receive(T0, Msg(N1, 4, FetchResponse{L(1, 0), {E(3, 0)}, L(3, 0)}));
    REQUIRE(a.size() >= 2);
    CHECK(std::get<TruncateEntries>(a[0]).after_lsn == L(1, 0));
    CHECK(std::get<PersistEntries>(a[1]).entries == std::vector<Entry>{E(3, 0)});
    CHECK(Lsns(leader.entries()) == std::vector<Lsn>{L(1, 0), L(3, 0), L(4, 0)});
    CHECK(leader.counters().entries_truncated == 2);
}

TEST_CASE("a sync source that lost what it reported is dropped and asked again") {
    ReplicatedLog leader = Make(Config3(N0), {E(1, 0)}, LogMeta{Term{1}, L(1, 0)});
    leader.on_leadership(T0, Leads(N0, 2));
    leader.receive(T0, Msg(N1, 2, SyncResponse{L(1, 5), L(1, 0)}));
    auto a = leader.receive(T0, Msg(N1, 2, FetchResponse{L(1, 0), {}, L(1, 0)}));
    CHECK(Sent<SyncRequest>(a, N1).size() == 1);
    CHECK_FALSE(leader.sync().responded.contains(N1));
    // Node 2 answers: with self, a quorum again; node 2 is not ahead, so sync completes.
    a = leader.receive(T0, Msg(N2, 2, SyncResponse{L(1, 0), L(1, 0)}));
    CHECK(leader.sync().done);
}

TEST_CASE("a follower appends, truncates a conflicting suffix, and acks only durable entries") {
    ReplicatedLog f = Make(Config3(N1), {E(1, 0), E(1, 1), E(1, 2)}, LogMeta{Term{1}, L(1, 0)});
    f.on_leadership(T0, Follows(N0, 2));
    // Missing prev: refused with hints.
    auto a = f.receive(T0, Msg(N0, 2, Append{L(2, 3), {E(2, 4)}, L(2, 0)}));
    CHECK(a == LogActions{PersistMeta{LogMeta{Term{2}, L(1, 0)}},
                          SendLog{N0, Msg(N1, 2, AppendAck{false, L(2, 3), L(1, 2), L(1, 0)})}});
    // Conflict after (1,1): (1,2) was never committed; (2,0) replaces it. The leader says (2,0)
    // is committed and it now matches: it is applied (durable on a quorum, if not yet here).
    // Only the durable matching prefix, (1,1), is acknowledged.
    a = f.receive(T0, Msg(N0, 2, Append{L(1, 1), {E(2, 0), E(2, 1)}, L(2, 0)}));
    CHECK(a == LogActions{TruncateEntries{L(1, 1)}, PersistEntries{{E(2, 0), E(2, 1)}},
                          ApplyCommitted{{E(1, 1), E(2, 0)}},
                          SendLog{N0, Msg(N1, 2, AppendAck{true, {}, L(1, 1), L(2, 0)})}});
    CHECK(Lsns(f.entries()) == std::vector<Lsn>{L(1, 0), L(1, 1), L(2, 0), L(2, 1)});
    CHECK(f.commit_lsn() == L(2, 0));
    // Durable: acknowledged.
    a = f.persisted(T0, L(2, 1));
    CHECK(a == LogActions{SendLog{N0, Msg(N1, 2, AppendAck{true, {}, L(2, 1), L(2, 0)})}});
    a = f.receive(T0, Msg(N0, 2, Append{L(2, 1), {}, L(2, 1)}));  // heartbeat
    CHECK(f.commit_lsn() == L(2, 1));
    CHECK(All<ApplyCommitted>(a).at(0).entries == std::vector<Entry>{E(2, 1)});
    CHECK(f.check_invariants().empty());
}

TEST_CASE("a follower answers a re-sent batch it has already acknowledged") {
    // Found by the simulator (conclave-sim --log, seed 43): the follower's ack of a batch was lost
    // (or the leader forgot it on peer_up); the leader re-sends the batch on every heartbeat. The
    // follower holds it durably and had acknowledged it, so it used to stay silent: the leader
    // never heard, re-sent forever and the follower never caught up in that term.
    ReplicatedLog f = Make(Config3(N1));
    f.on_leadership(T0, Follows(N0, 1));
    const Append batch{kNoLsn, {E(1, 0), E(1, 1)}, kNoLsn};
    f.receive(T0, Msg(N0, 1, batch));
    auto a = f.persisted(T0, L(1, 1));
    CHECK(a == LogActions{SendLog{N0, Msg(N1, 1, AppendAck{true, {}, L(1, 1), kNoLsn})}});
    // The ack is lost; the same batch comes again: it must be answered.
    a = f.receive(T0, Msg(N0, 1, batch));
    CHECK(a == LogActions{SendLog{N0, Msg(N1, 1, AppendAck{true, {}, L(1, 1), kNoLsn})}});
    // A re-sent batch whose entries are not all durable yet is answered once they are.
    f.receive(T0, Msg(N0, 1, Append{L(1, 1), {E(1, 2)}, kNoLsn}));
    a = f.receive(T0, Msg(N0, 1, Append{L(1, 1), {E(1, 2)}, kNoLsn}));
    CHECK(Sent<AppendAck>(a, N0).empty());
    a = f.persisted(T0, L(1, 2));
    CHECK(a == LogActions{SendLog{N0, Msg(N1, 1, AppendAck{true, {}, L(1, 2), kNoLsn})}});
}

TEST_CASE("a follower does not commit beyond what matches the leader") {
    ReplicatedLog f = Make(Config3(N1), {E(1, 0), E(1, 1), E(1, 2)}, LogMeta{Term{1}, L(1, 0)});
    f.persisted(T0, L(1, 2));
    // The leader of term 2 adopted only up to (1,1); its heartbeat says commit (2,0).
    f.receive(T0, Msg(N0, 2, Append{L(1, 1), {}, L(2, 0)}));
    CHECK(f.commit_lsn() == L(1, 1));  // not (1,2): that one is not known to match
}

TEST_CASE("a leader that hears of a higher term steps down; pending proposals lose leadership") {
    ReplicatedLog leader = Make(Config3(N0));
    MakeActive(leader, 1);
    leader.propose(Millis{3}, L(1, 1), "k", "v");
    auto a = leader.receive(T0, Msg(N2, 5, AppendAck{false, L(1, 0), kNoLsn, kNoLsn}));
    CHECK(leader.role() == LogRole::Follower);
    CHECK(leader.state().term == Term{5});
    CHECK(All<ProposeResult>(a) == std::vector<ProposeResult>{ProposeResult{
                                       L(1, 1), ProposeError::LeadershipLost, Millis{3}}});
    CHECK(All<CancelLogTimer>(a).size() == 1);
    CHECK(All<PersistMeta>(a).at(0).meta.term == Term{5});
    // The elector's (stale) snapshot naming it leader of term 1 again changes nothing.
    a = leader.on_leadership(T0, Leads(N0, 1));
    CHECK(leader.role() == LogRole::Follower);
}

TEST_CASE("the elector's snapshot moving away from this node fails pending proposals") {
    ReplicatedLog leader = Make(Config3(N0));
    MakeActive(leader, 1);
    leader.propose(T0, L(1, 1), "k", "v");
    auto a = leader.on_leadership(T0, Follows(N1, 2));
    CHECK(All<ProposeResult>(a).at(0).error == ProposeError::LeadershipLost);
    CHECK(leader.role() == LogRole::Follower);
}

TEST_CASE("flow control: bounded batches, bounded in-flight batches, probing after a refusal") {
    ReplicatedLog leader = Make(Config3(N0));
    MakeActive(leader, 1);  // node 1 acked (1,0); node 2 never answered
    LogActions a;
    for (std::uint64_t c = 1; c <= 9; ++c) {
        auto more = leader.propose(T0, L(1, c), "k", "v");
        a.insert(a.end(), more.begin(), more.end());
    }
    // Node 1 (pipelined after its ok ack): each proposal leaves at once until 2 batches are in
    // flight; then entries wait and leave together, at most 2 per batch.
    auto to1 = Sent<Append>(a, N1);
    REQUIRE(to1.size() == 2);
    CHECK(Lsns(to1[0].entries) == std::vector<Lsn>{L(1, 1)});
    CHECK(Lsns(to1[1].entries) == std::vector<Lsn>{L(1, 2)});
    // An ack of the first batch opens the window for one more.
    a = leader.receive(T0, Msg(N1, 1, AppendAck{true, {}, L(1, 1), L(1, 0)}));
    to1 = Sent<Append>(a, N1);
    REQUIRE(to1.size() == 1);
    CHECK(to1[0].prev_lsn == L(1, 2));
    CHECK(Lsns(to1[0].entries) == std::vector<Lsn>{L(1, 3), L(1, 4)});
    CHECK(leader.commit_lsn() == L(1, 0));  // the leader's own entries are not durable yet
    leader.persisted(T0, L(1, 9));
    CHECK(leader.commit_lsn() == L(1, 1));
}

TEST_CASE("a refused probe resumes after the follower's last entry; stale refusals are ignored") {
    ReplicatedLog leader =
        Make(Config3(N0), {E(1, 0), E(1, 1), E(1, 2)}, LogMeta{Term{1}, L(1, 2)});
    MakeActive(leader, 2);  // node 2 never answered: probed with the sync point after (1,2)
    CHECK(leader.progress()[2].probe_prev == L(1, 2));
    // Node 2 has only (1,0): resume right after it, one batch at a time.
    auto a = leader.receive(T0, Msg(N2, 2, AppendAck{false, L(1, 2), L(1, 0), L(1, 0)}));
    auto to2 = Sent<Append>(a, N2);
    REQUIRE(to2.size() == 1);
    CHECK(to2[0].prev_lsn == L(1, 0));
    CHECK(Lsns(to2[0].entries) == std::vector<Lsn>{L(1, 1), L(1, 2)});
    // A duplicate of the first refusal is stale now (the probe moved on): ignored.
    a = leader.receive(T0, Msg(N2, 2, AppendAck{false, L(1, 2), L(1, 0), L(1, 0)}));
    CHECK(Sent<Append>(a, N2).empty());
    // Node 2 accepts: pipelined from here on, the sync point follows.
    a = leader.receive(T0, Msg(N2, 2, AppendAck{true, {}, L(1, 2), L(1, 0)}));
    CHECK(Sent<Append>(a, N2) == std::vector<Append>{Append{L(1, 2), {E(2, 0)}, L(2, 0)}});
    CHECK_FALSE(leader.progress()[2].probing);
}

TEST_CASE("heartbeat: retransmit without progress, commit point to idle followers, timeouts") {
    ReplicatedLog leader = Make(Config3(N0));
    MakeActive(leader, 1);
    leader.propose(Millis{1}, L(1, 1), "k", "v");
    leader.persisted(T0, L(1, 1));
    // First tick: node 2 never answered its probe in a whole period: re-sent. Node 1 acked
    // (1,0) since the last tick: it only gets an empty append.
    auto a = leader.timer_fired(T0, LogTimer::Heartbeat);
    CHECK(leader.counters().retransmissions == 1);
    CHECK(Sent<Append>(a, N2).at(0).entries.at(0).lsn == L(1, 0));
    CHECK(Sent<Append>(a, N1) == std::vector<Append>{Append{L(1, 0), {}, L(1, 0)}});
    CHECK(All<ArmLogTimer>(a).at(0).timer == LogTimer::Heartbeat);
    // Second tick: node 1 made no progress either: (1,1) is re-sent.
    a = leader.timer_fired(T0, LogTimer::Heartbeat);
    CHECK(leader.counters().retransmissions == 3);
    CHECK(Sent<Append>(a, N1).at(0).entries.at(0).lsn == L(1, 1));
    a = leader.timer_fired(T0, LogTimer::Heartbeat);
    CHECK(All<ProposeResult>(a) ==
          std::vector<ProposeResult>{ProposeResult{L(1, 1), ProposeError::TimedOut, Millis{1}}});
    // Unarmed timers are ignored.
    CHECK(leader.timer_fired(T0, LogTimer::SyncRetry).empty());
    // Once everything is acknowledged, heartbeats are empty appends carrying the commit point.
    leader.receive(T0, Msg(N1, 1, AppendAck{true, {}, L(1, 1), L(1, 0)}));
    a = leader.timer_fired(T0, LogTimer::Heartbeat);
    CHECK(Sent<Append>(a, N1) == std::vector<Append>{Append{L(1, 1), {}, L(1, 1)}});
}

TEST_CASE("catch-up is served in bounded batches") {
    std::vector<Entry> log{E(1, 0)};
    for (std::uint64_t c = 1; c <= 7; ++c) {
        log.push_back(E(1, c));
    }
    ReplicatedLog f = Make(Config3(N1), log, LogMeta{Term{1}, L(1, 7)});
    auto a = f.receive(T0, Msg(N0, 2, FetchRequest{L(1, 2), L(1, 7), 100}));
    auto r = Sent<FetchResponse>(a, N0).at(0);
    CHECK(Lsns(r.entries) == std::vector<Lsn>{L(1, 3), L(1, 4)});  // max_batch_entries = 2
    a = f.receive(T0, Msg(N0, 2, FetchRequest{L(9, 9), L(1, 7), 100}));
    CHECK(Sent<FetchResponse>(a, N0).at(0).entries.empty());  // does not hold after_lsn
}

TEST_CASE("restart: the recovered committed prefix is applied at start, clamped to the log") {
    ReplicatedLog log(Config3(N1), RecoveredLog{{E(1, 0), E(1, 1)}, LogMeta{Term{2}, L(1, 5)}});
    auto a = log.start(T0);
    CHECK(All<ApplyCommitted>(a).at(0).entries == std::vector<Entry>{E(1, 0), E(1, 1)});
    CHECK(log.commit_lsn() == L(1, 1));
    CHECK(log.state().term == Term{2});
    CHECK(log.committed_after(L(1, 0), 10) == std::vector<Entry>{E(1, 1)});
    CHECK(log.committed_after(kNoLsn, 1) == std::vector<Entry>{E(1, 0)});
}

TEST_CASE("malformed input is dropped, not obeyed") {
    ReplicatedLog f = Make(Config3(N1));
    // Unknown sender.
    CHECK(f.receive(T0, Msg(NodeId{7}, 1, SyncRequest{})).empty());
    // Entries out of order.
    f.receive(T0, Msg(N0, 1, Append{kNoLsn, {E(1, 2), E(1, 1)}, kNoLsn}));
    CHECK(f.entries().empty());
    // An entry of a term above the sender's.
    f.receive(T0, Msg(N0, 1, Append{kNoLsn, {E(3, 1)}, kNoLsn}));
    CHECK(f.entries().empty());
    // A second leader claiming the same term.
    f.receive(T0, Msg(N2, 1, Append{kNoLsn, {E(1, 0)}, kNoLsn}));
    CHECK(f.entries().empty());
    CHECK(f.counters().two_leader_alarms == 1);
    CHECK(f.counters().messages_dropped >= 3);
    // By reason (conclave_core_messages_dropped_total{core="metadata",reason}).
    const auto& by = f.counters().dropped_by_reason;
    CHECK(by[static_cast<std::size_t>(LogDropReason::NotAPeer)] == 1);
    CHECK(by[static_cast<std::size_t>(LogDropReason::InvalidBatch)] == 2);
    f.receive(T0, Msg(N0, kTermLimit, SyncRequest{}));
    CHECK(by[static_cast<std::size_t>(LogDropReason::TermOutOfRange)] == 1);
    std::uint64_t sum = 0;
    for (const std::uint64_t n : by) {
        sum += n;
    }
    CHECK(sum == f.counters().messages_dropped);
}

TEST_CASE("a message that contradicts the log is dropped with an alarm, never aborts") {
    // Committed through (1,1); (1,2) held but not committed.
    ReplicatedLog f = Make(Config3(N1), {E(1, 0), E(1, 1), E(1, 2)}, LogMeta{Term{1}, L(1, 1)});
    f.persisted(T0, L(1, 2));
    f.on_leadership(T0, Follows(N0, 2));
    Entry forged = E(1, 1);
    forged.value = "forged";
    // One LSN, two entries, on a committed entry: dropped, alarmed, nothing changed; the answer
    // tells the sender what this node holds committed (a rollback, rollback_test.cpp).
    auto a = f.receive(T0, Msg(N0, 2, Append{L(1, 0), {forged}, L(1, 1)}));
    CHECK(All<PersistEntries>(a).empty());
    CHECK(Sent<AppendAck>(a, N0) ==
          std::vector<AppendAck>{AppendAck{false, L(1, 0), L(1, 2), L(1, 1)}});
    CHECK(f.counters().protocol_violation_alarms == 1);
    CHECK(f.last_violation().from == N0);
    CHECK(std::string(f.last_violation().reason) ==
          "contradicts a committed entry (one LSN, two entries)");
    // Truncating a committed entry: (1,1) is committed, (2,0) would replace it.
    a = f.receive(T0, Msg(N0, 2, Append{L(1, 0), {E(2, 0)}, L(1, 0)}));
    CHECK(All<TruncateEntries>(a).empty());
    CHECK(f.counters().protocol_violation_alarms == 2);
    // One LSN, two entries, on an uncommitted entry.
    Entry forged2 = E(1, 2);
    forged2.value = "forged";
    f.receive(T0, Msg(N0, 2, Append{L(1, 1), {forged2}, L(1, 1)}));
    CHECK(f.counters().protocol_violation_alarms == 3);
    // A commit point between two entries of the matched prefix: (1,1) < (1,1)+ < (1,2).
    f.receive(T0, Msg(N0, 2, Append{L(1, 2), {}, Lsn{Term{1}, 1} /*ok*/}));
    CHECK(f.counters().protocol_violation_alarms == 3);
    a = f.receive(T0, Msg(N0, 2, Append{L(1, 2), {}, L(2, 0)}));  // min((2,0), (1,2)) = (1,2)
    CHECK(f.commit_lsn() == L(1, 2));
    ReplicatedLog g = Make(Config3(N1), {E(1, 0), E(1, 1), E(1, 5)}, LogMeta{Term{1}, L(1, 0)});
    g.receive(T0, Msg(N0, 2, Append{L(1, 5), {}, L(1, 3)}));
    CHECK(g.counters().protocol_violation_alarms == 1);
    CHECK(g.commit_lsn() == L(1, 0));
    CHECK(f.entries() == std::vector<Entry>{E(1, 0), E(1, 1), E(1, 2)});
    CHECK(f.check_invariants().empty());
    CHECK(g.check_invariants().empty());
    // Counted by kind for /metrics (conclave_metadata_protocol_violations_total{kind}).
    using K = LogViolationKind;
    const auto by = [](const ReplicatedLog& log, K k) {
        return log.counters().violations_by_kind[static_cast<std::size_t>(k)];
    };
    CHECK(by(f, K::ContradictsCommitted) == 1);
    CHECK(by(f, K::TruncatesCommitted) == 1);
    CHECK(by(f, K::OneLsnTwoEntries) == 1);
    CHECK(by(f, K::CommitBetweenEntries) == 0);
    CHECK(by(g, K::CommitBetweenEntries) == 1);
    CHECK(g.last_violation().kind == K::CommitBetweenEntries);
    CHECK(to_string(K::ContradictsCommitted) == "contradicts_committed");
}

TEST_CASE("a sync response naming entries of the syncing leader's term is dropped with an alarm") {
    ReplicatedLog l = Make(Config3(N0), {E(1, 0)}, LogMeta{Term{1}, L(1, 0)});
    l.on_leadership(T0, Leads(N0, 2));
    // (2,5) cannot exist: term 2's sync point does not exist yet. Obeying it would fetch an entry
    // above the sync point and fail the "no entry of a term above the leader's" check.
    auto a = l.receive(T0, Msg(N1, 2, SyncResponse{L(2, 5), L(1, 0)}));
    CHECK(Sent<FetchRequest>(a, N1).empty());
    CHECK(l.counters().protocol_violation_alarms == 1);
    CHECK(l.sync().source == std::nullopt);
    // An honest answer still completes the sync.
    a = l.receive(T0, Msg(N2, 2, SyncResponse{L(1, 0), L(1, 0)}));
    CHECK(All<PersistEntries>(a).at(0).entries == std::vector<Entry>{E(2, 0)});
}

TEST_CASE("terms at or above 2^63 are dropped by the core") {
    ReplicatedLog f = Make(Config3(N1));
    CHECK(f.receive(T0, Msg(N0, kTermLimit, AppendAck{true, {}, kNoLsn, kNoLsn})).empty());
    CHECK(f.receive(T0, Msg(N0, ~std::uint64_t{0}, SyncRequest{})).empty());
    CHECK(f.state().term == Term{0});
    CHECK(f.counters().messages_dropped == 2);
}
