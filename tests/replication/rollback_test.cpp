// SPDX-License-Identifier: Apache-2.0
// Rollbacks (a node's state restored from an older copy, or lost): the log core refuses to discard
// committed entries, makes its commit point durable before a writer hears "committed", and a
// leader stops taking writes when a follower holds committed entries it lacks, or stops counting
// a follower whose log went back below what it acknowledged.
#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "conclave/replication/log.hpp"
#include "log_actions.hpp"

using namespace conclave;
using namespace conclave::replication;

namespace {

constexpr NodeId kR0{0};
constexpr NodeId kR1{1};
constexpr Millis kRT0{0};

Lsn RL(std::uint64_t term, std::uint64_t counter) {
    return Lsn{Term{term}, counter};
}

Entry RE(std::uint64_t term, std::uint64_t counter) {
    if (counter == 0) {
        return Entry{RL(term, 0), {}, {}};
    }
    return Entry{RL(term, counter), "k" + std::to_string(term) + "." + std::to_string(counter),
                 "v"};
}

LogConfig RConfig3(NodeId self, PlantedLogBug bug = PlantedLogBug::None) {
    LogConfig c;
    c.cluster_size = 3;
    c.self = self;
    c.node_ids = {"n1", "n2", "n3"};
    c.planted_bug = bug;
    return c;
}

ReplicatedLog RMake(LogConfig config, std::vector<Entry> entries = {}, LogMeta meta = {}) {
    ReplicatedLog log(config, RecoveredLog{std::move(entries), meta});
    log.start(kRT0);
    return log;
}

elector::LeadershipSnapshot RLeads(NodeId n, std::uint64_t term) {
    return elector::LeadershipSnapshot{elector::Role::Leader,        Term{term}, n,           term,
                                       elector::Reason::ElectionWon, kRT0,       std::nullopt};
}

elector::LeadershipSnapshot RFollows(NodeId leader, std::uint64_t term) {
    return elector::LeadershipSnapshot{
        elector::Role::Follower,           Term{term}, leader,      term,
        elector::Reason::LeaderDiscovered, kRT0,       std::nullopt};
}

LogMessage RMsg(NodeId from, std::uint64_t term, LogMessageBody body) {
    return LogMessage{from, Term{term}, std::move(body)};
}

// Node 0 leads `term`; node 1 answers the sync and acknowledges the sync point: ACTIVE.
void RActive(ReplicatedLog& leader, std::uint64_t term) {
    leader.on_leadership(kRT0, RLeads(kR0, term));
    leader.receive(kRT0, RMsg(kR1, term, SyncResponse{leader.last_lsn(), leader.commit_lsn()}));
    leader.persisted(kRT0, RL(term, 0));
    leader.receive(kRT0, RMsg(kR1, term, AppendAck{true, {}, RL(term, 0), {}}));
    REQUIRE(leader.role() == LogRole::LeaderActive);
}

// Proposes (term, counter) on an ACTIVE leader, node 1 acknowledges it: the actions of the ack.
LogActions RCommit(ReplicatedLog& leader, std::uint64_t term, std::uint64_t counter) {
    const Entry e = RE(term, counter);
    leader.propose(kRT0, e.lsn, e.key, e.value);
    leader.persisted(kRT0, e.lsn);
    return leader.receive(kRT0, RMsg(kR1, term, AppendAck{true, {}, e.lsn, leader.commit_lsn()}));
}

std::optional<LogMeta> LastMeta(const LogActions& actions) {
    std::optional<LogMeta> meta;
    for (const auto& m : testing::ActionsOf<PersistMeta>(actions)) {
        meta = m.meta;
    }
    return meta;
}

}  // namespace

TEST_CASE(
    "a follower refuses to discard committed entries: an alarm names them, its answer "
    "tells the leader") {
    ReplicatedLog f =
        RMake(RConfig3(kR1), {RE(1, 0), RE(1, 1), RE(1, 2), RE(1, 3)}, LogMeta{Term{1}, RL(1, 3)});
    f.on_leadership(kRT0, RFollows(kR0, 2));
    // The leader of term 2 lacks (1,2) and (1,3), committed here: it would replace them.
    const auto a = f.receive(kRT0, RMsg(kR0, 2, Append{RL(1, 1), {RE(2, 0)}, RL(2, 0)}));
    CHECK(testing::ActionsOf<TruncateEntries>(a).empty());
    CHECK(testing::ActionsOf<PersistEntries>(a).empty());
    CHECK(testing::SentBodies<AppendAck>(a, kR0) ==
          std::vector<AppendAck>{AppendAck{false, RL(1, 1), RL(1, 3), RL(1, 3)}});
    REQUIRE(f.rollback_alarm().has_value());
    CHECK(*f.rollback_alarm() ==
          RollbackAlarm{RollbackKind::RefusedTruncation, kR0, Term{2}, RL(1, 1), RL(1, 3)});
    const std::string text = describe(*f.rollback_alarm(), f.config().node_ids);
    CHECK(text.find("after 1.1 up to 1.3") != std::string::npos);
    CHECK(text.find("n1") != std::string::npos);
    CHECK(f.entries().size() == 4);
    CHECK(
        f.counters().rollbacks_by_kind[static_cast<std::size_t>(RollbackKind::RefusedTruncation)] ==
        1);
    CHECK(to_string(RollbackKind::LeaderLacksCommitted) == "leader_lacks_committed");
    CHECK(f.check_invariants().empty());
}

TEST_CASE(
    "a leader's commit point is durable before a writer hears committed; restarted, the "
    "node refuses to discard what it acknowledged (canary: ForgetCommitPoint)") {
    const bool forget = GENERATE(false, true);
    const PlantedLogBug bug = forget ? PlantedLogBug::ForgetCommitPoint : PlantedLogBug::None;
    ReplicatedLog leader = RMake(RConfig3(kR0, bug));
    RActive(leader, 1);
    const auto a = RCommit(leader, 1, 1);
    const auto results = testing::ActionsOf<ProposeResult>(a);
    REQUIRE(results.size() == 1);
    CHECK(results[0].error == ProposeError::None);
    std::optional<LogMeta> meta = LastMeta(a);
    if (!forget) {
        // Before the result in the same batch: storage actions complete before later actions.
        REQUIRE(meta.has_value());
        CHECK(meta->commit_lsn == RL(1, 1));
        const auto persist = std::find_if(a.begin(), a.end(), [](const LogAction& x) {
            return std::holds_alternative<PersistMeta>(x);
        });
        const auto result = std::find_if(a.begin(), a.end(), [](const LogAction& x) {
            return std::holds_alternative<ProposeResult>(x);
        });
        CHECK(persist < result);
    } else {
        CHECK_FALSE(meta.has_value());
        meta = LogMeta{Term{1}, kNoLsn};  // the commit point last written: none
    }
    // Restarted from what storage holds; a leader of term 2 that lacks (1,1) asks to replace it.
    ReplicatedLog back = RMake(RConfig3(kR0, bug), {RE(1, 0), RE(1, 1)}, *meta);
    back.on_leadership(kRT0, RFollows(kR1, 2));
    const auto b = back.receive(kRT0, RMsg(kR1, 2, Append{kNoLsn, {RE(2, 0)}, RL(2, 0)}));
    if (!forget) {
        CHECK(testing::ActionsOf<TruncateEntries>(b).empty());
        REQUIRE(back.rollback_alarm().has_value());
        CHECK(back.rollback_alarm()->kind == RollbackKind::RefusedTruncation);
        CHECK(back.entries() == std::vector<Entry>{RE(1, 0), RE(1, 1)});
    } else {
        // The planted bug: the acknowledged (1,1) is discarded without a word.
        CHECK(testing::ActionsOf<TruncateEntries>(b).size() == 1);
        CHECK_FALSE(back.rollback_alarm().has_value());
        CHECK(back.entries() == std::vector<Entry>{RE(2, 0)});
    }
}

TEST_CASE("a leader that lacks a follower's committed entries takes no more writes") {
    ReplicatedLog leader = RMake(RConfig3(kR0), {RE(1, 0)}, LogMeta{Term{1}, RL(1, 0)});
    RActive(leader, 2);
    const Entry pending = RE(2, 1);
    leader.propose(kRT0, pending.lsn, pending.key, pending.value);
    // Node 1 refuses an append and reports (1,4) committed: this leader never held it.
    const auto a =
        leader.receive(kRT0, RMsg(kR1, 2, AppendAck{false, RL(2, 0), RL(1, 4), RL(1, 4)}));
    REQUIRE(leader.rollback_alarm().has_value());
    CHECK(*leader.rollback_alarm() ==
          RollbackAlarm{RollbackKind::LeaderLacksCommitted, kR1, Term{2}, RL(2, 0), RL(1, 4)});
    // The pending proposal's outcome is unknown; no new one is taken.
    CHECK(
        testing::ActionsOf<ProposeResult>(a) ==
        std::vector<ProposeResult>{ProposeResult{pending.lsn, ProposeError::LeadershipLost, kRT0}});
    CHECK_FALSE(leader.can_propose());
    const auto b = leader.propose(kRT0, RL(2, 2), "k", "v");
    CHECK(testing::ActionsOf<ProposeResult>(b).at(0).error == ProposeError::NotActive);
    CHECK(leader.check_invariants().empty());
}

TEST_CASE("a follower whose log goes back below what it acknowledged counts for nothing") {
    ReplicatedLog leader = RMake(RConfig3(kR0));
    RActive(leader, 1);
    RCommit(leader, 1, 1);
    RCommit(leader, 1, 2);
    // Node 1 reconnects; its refusal says its log ends at (1,0): below the (1,2) it acknowledged.
    leader.peer_down(kRT0, kR1);
    leader.peer_up(kRT0, kR1);
    leader.receive(kRT0, RMsg(kR1, 1, AppendAck{false, RL(1, 2), RL(1, 0), RL(1, 0)}));
    REQUIRE(leader.rollback_alarm().has_value());
    CHECK(*leader.rollback_alarm() ==
          RollbackAlarm{RollbackKind::FollowerRegressed, kR1, Term{1}, RL(1, 0), RL(1, 2)});
    // Its acknowledgements no longer commit anything in this term (node 2 is away): writes stop.
    const auto a = RCommit(leader, 1, 3);
    CHECK(testing::ActionsOf<ProposeResult>(a).empty());
    CHECK(leader.commit_lsn() == RL(1, 2));
    // A follower that restarted without losing anything is not taken for one.
    ReplicatedLog other = RMake(RConfig3(kR0));
    RActive(other, 1);
    RCommit(other, 1, 1);
    other.peer_down(kRT0, kR1);
    other.peer_up(kRT0, kR1);
    other.receive(kRT0, RMsg(kR1, 1, AppendAck{false, RL(1, 1), RL(1, 1), RL(1, 1)}));
    other.receive(kRT0, RMsg(kR1, 1, AppendAck{true, {}, kNoLsn, RL(1, 1)}));
    CHECK_FALSE(other.rollback_alarm().has_value());
    CHECK(leader.check_invariants().empty());
}
