// SPDX-License-Identifier: Apache-2.0
// Membership in the log core (docs/membership.md §3 and §6 "Log core"): configuration
// entries, the active configuration (latest in the committed prefix), R1-R4, R6, R8, one input
// at a time with simulated time.
#include <catch2/catch.hpp>

#include "conclave/codec/membership_codec.hpp"
#include "conclave/replication/log.hpp"
#include "log_actions.hpp"

using namespace conclave;
using namespace conclave::replication;

namespace {

constexpr NodeId M0{0};
constexpr NodeId M1{1};
constexpr NodeId M2{2};
constexpr NodeId M3{3};
constexpr Millis MT0{0};

Lsn ML(std::uint64_t term, std::uint64_t counter) {
    return Lsn{Term{term}, counter};
}

Member Mem(const std::string& id) {
    return Member{id, "127.0.0.1:700" + id, "127.0.0.1:800" + id};
}

Configuration Cfg(std::uint64_t version, std::vector<std::string> voters,
                  std::vector<std::string> learners = {}) {
    Configuration c;
    c.version = version;
    for (const auto& v : voters) {
        c.voters.push_back(Mem(v));
    }
    for (const auto& l : learners) {
        c.learners.push_back(Mem(l));
    }
    return c;
}

Entry CfgEntry(Lsn lsn, const Configuration& c) {
    return Entry{lsn, std::string(kMembersKey), codec::encode_configuration(c)};
}

NodeSet Set(std::initializer_list<std::uint16_t> ids) {
    NodeSet s;
    for (auto i : ids) {
        s.insert(NodeId{i});
    }
    return s;
}

// A 4-slot id table ("0".."3"), membership on.
LogConfig Cfg4(NodeId self) {
    LogConfig c;
    c.cluster_size = 4;
    c.self = self;
    c.decode_configuration = &codec::decode_configuration;
    return c;
}

// The log every test starts from: term 1's sync point and C1 = voters {0,1,2}, learner 3,
// committed.
std::vector<Entry> BaseLog() {
    return {Entry{ML(1, 0), {}, {}}, CfgEntry(ML(1, 1), Cfg(1, {"0", "1", "2"}, {"3"}))};
}

ReplicatedLog MakeM(NodeId self, std::vector<Entry> entries = BaseLog(),
                    LogMeta meta = LogMeta{Term{1}, ML(1, 1)}) {
    ReplicatedLog log(Cfg4(self), RecoveredLog{std::move(entries), meta});
    log.start(MT0);
    return log;
}

elector::LeadershipSnapshot MLeads(NodeId n, std::uint64_t term) {
    return elector::LeadershipSnapshot{elector::Role::Leader,        Term{term}, n,           term,
                                       elector::Reason::ElectionWon, MT0,        std::nullopt};
}

LogMessage MMsg(NodeId from, std::uint64_t term, LogMessageBody body) {
    return LogMessage{from, Term{term}, std::move(body)};
}

template <class T>
std::vector<T> MAll(const LogActions& actions) {
    return testing::ActionsOf<T>(actions);
}

template <class B>
std::vector<B> MSent(const LogActions& actions, NodeId to) {
    return testing::SentBodies<B>(actions, to);
}

// Node 0 becomes the ACTIVE leader of `term` with n1's help (a quorum of {0, 1, 2}).
void MActive(ReplicatedLog& leader, std::uint64_t term) {
    leader.on_leadership(MT0, MLeads(M0, term));
    leader.receive(MT0, MMsg(M1, term, SyncResponse{leader.last_lsn(), leader.commit_lsn()}));
    leader.persisted(MT0, ML(term, 0));
    leader.receive(MT0, MMsg(M1, term, AppendAck{true, {}, ML(term, 0), {}}));
    REQUIRE(leader.role() == LogRole::LeaderActive);
}

}  // namespace

TEST_CASE("membership codec: round trip and refusals") {
    const Configuration c = Cfg(3, {"0", "1"}, {"2"});
    REQUIRE(codec::decode_configuration(codec::encode_configuration(c)) == c);
    CHECK_FALSE(codec::decode_configuration("not json"));
    CHECK_FALSE(codec::decode_configuration(R"({"version":1,"voters":[]})"));
    CHECK_FALSE(codec::decode_configuration(R"({"version":-1,"voters":[],"learners":[]})"));
    CHECK_FALSE(codec::decode_configuration(
        R"({"version":1,"voters":[{"id":"","peer":"","http":""}],"learners":[]})"));
    CHECK_FALSE(codec::decode_configuration(
        R"({"version":9223372036854775808,"voters":[],"learners":[]})"));
    CHECK_FALSE(codec::decode_configuration(R"({"version":1,"voters":[1],"learners":[],"x":0})"));
    // §8: the optional node table.
    Configuration t = c;
    t.table = {"0", "1", "2"};
    REQUIRE(codec::decode_configuration(codec::encode_configuration(t)) == t);
    CHECK_FALSE(
        codec::decode_configuration(R"({"version":1,"voters":[],"learners":[],"table":[]})"));
    CHECK_FALSE(
        codec::decode_configuration(R"({"version":1,"voters":[],"learners":[],"table":[""]})"));
    CHECK_FALSE(
        codec::decode_configuration(R"({"version":1,"voters":[],"learners":[],"table":[1]})"));
}

TEST_CASE("membership: no configuration entry means every node votes at version 0") {
    LogConfig c = Cfg4(M0);
    ReplicatedLog log(c, RecoveredLog{});
    const auto a = log.start(MT0);
    CHECK(MAll<NotifyMembership>(a).empty());
    CHECK(log.active_config().version == 0);
    CHECK(log.active_config().voters == Set({0, 1, 2, 3}));
    CHECK_FALSE(log.active_config().from_entry);
}

TEST_CASE("membership: restart restores the active configuration (latest committed)") {
    // An appended but uncommitted C2 (n3 promoted) after the committed C1.
    auto entries = BaseLog();
    entries.push_back(CfgEntry(ML(1, 2), Cfg(2, {"0", "1", "2", "3"})));
    ReplicatedLog log(Cfg4(M1), RecoveredLog{entries, LogMeta{Term{1}, ML(1, 1)}});
    const auto a = log.start(MT0);
    REQUIRE(MAll<NotifyMembership>(a).size() == 1);
    const NotifyMembership expected{
        1, Set({0, 1, 2}), Set({3}), {}, {Mem("0"), Mem("1"), Mem("2"), Mem("3")}};
    CHECK(MAll<NotifyMembership>(a)[0] == expected);
    CHECK(log.active_config().version == 1);  // C2 is not committed: not active
    CHECK(log.active_config().learners == Set({3}));
}

TEST_CASE("membership: the reserved key space is refused to ordinary proposals") {
    auto leader = MakeM(M0);
    MActive(leader, 2);
    for (const char* key : {"_conclave/members", "_conclave/other"}) {
        const auto a = leader.propose(MT0, ML(2, 1), key, "{}");
        REQUIRE(MAll<ProposeResult>(a).size() == 1);
        CHECK(MAll<ProposeResult>(a)[0].error == ProposeError::InvalidEntry);
        CHECK(MAll<PersistEntries>(a).empty());
    }
    // An ordinary key still goes through.
    CHECK(MAll<PersistEntries>(leader.propose(MT0, ML(2, 1), "app/x", "1")).size() == 1);
}

TEST_CASE("membership R1/R7: a learner's acks never count towards a commit") {
    auto leader = MakeM(M0);
    leader.on_leadership(MT0, MLeads(M0, 2));
    // R6: the learner's sync answer is no quorum of {0, 1, 2} with ours.
    leader.receive(MT0, MMsg(M3, 2, SyncResponse{ML(1, 1), ML(1, 1)}));
    CHECK_FALSE(leader.sync().done);
    leader.receive(MT0, MMsg(M1, 2, SyncResponse{ML(1, 1), ML(1, 1)}));
    REQUIRE(leader.sync().done);
    leader.persisted(MT0, ML(2, 0));
    leader.receive(MT0, MMsg(M3, 2, AppendAck{true, {}, ML(2, 0), {}}));
    CHECK(leader.role() == LogRole::LeaderPassive);  // self + the learner: no commit
    CHECK(leader.commit_lsn() == ML(1, 1));
    leader.receive(MT0, MMsg(M2, 2, AppendAck{true, {}, ML(2, 0), {}}));
    CHECK(leader.role() == LogRole::LeaderActive);
}

TEST_CASE("membership R2/R3: one change at a time, adjacent, version + 1, only when ACTIVE") {
    auto leader = MakeM(M0);
    leader.on_leadership(MT0, MLeads(M0, 2));
    // PASSIVE (R3): refused.
    auto a = leader.propose_config(MT0, ML(2, 1),
                                   codec::encode_configuration(Cfg(2, {"0", "1", "2", "3"})));
    CHECK(MAll<ProposeResult>(a).at(0).error == ProposeError::NotActive);
    leader.receive(MT0, MMsg(M1, 2, SyncResponse{ML(1, 1), ML(1, 1)}));
    leader.persisted(MT0, ML(2, 0));
    leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, 0), {}}));
    REQUIRE(leader.role() == LogRole::LeaderActive);

    const auto refused = [&](const Configuration& c) {
        REQUIRE(leader.check_config_change(c).has_value());
        const auto r = leader.propose_config(MT0, ML(2, 1), codec::encode_configuration(c));
        return MAll<ProposeResult>(r).size() == 1 &&
               MAll<ProposeResult>(r)[0].error == ProposeError::InvalidEntry &&
               MAll<PersistEntries>(r).empty();
    };
    CHECK(refused(Cfg(3, {"0", "1", "2", "3"})));         // version not active + 1
    CHECK(refused(Cfg(2, {"0", "1"})));                   // two changes (remove 2, drop learner 3)
    CHECK(refused(Cfg(2, {"0", "1", "2", "3"}, {"3"})));  // a member twice
    CHECK(refused(Cfg(2, {"0", "1", "2"}, {"3", "9"})));  // 9 is not in the id table
    CHECK(refused(Cfg(2, {"0", "1"}, {"2", "3"})));       // a voter demoted: not a single change
    CHECK(leader.counters().config_proposals_refused == 5);
    CHECK(MAll<ProposeResult>(leader.propose_config(MT0, ML(2, 1), "{oops")).at(0).error ==
          ProposeError::InvalidEntry);

    // A learner promoted: accepted; while it is pending, nothing else is.
    a = leader.propose_config(MT0, ML(2, 1),
                              codec::encode_configuration(Cfg(2, {"0", "1", "2", "3"})));
    REQUIRE(MAll<PersistEntries>(a).size() == 1);
    CHECK(MAll<ProposeResult>(a).empty());
    CHECK(leader.check_config_change(Cfg(3, {"0", "1", "3"})).value().find("pending") !=
          std::string::npos);
    CHECK(refused(Cfg(2, {"0", "1", "2"})));
}

TEST_CASE("membership R1: a promotion is counted over the configuration it replaces") {
    auto leader = MakeM(M0);
    MActive(leader, 2);
    leader.propose_config(MT0, ML(2, 1), codec::encode_configuration(Cfg(2, {"0", "1", "2", "3"})));
    leader.persisted(MT0, ML(2, 1));
    // n3 holds it, but it is not a voter of C1: self + n3 is no quorum of {0, 1, 2}.
    auto a = leader.receive(MT0, MMsg(M3, 2, AppendAck{true, {}, ML(2, 1), {}}));
    CHECK(leader.active_config().version == 1);
    CHECK(MAll<ProposeResult>(a).empty());
    a = leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, 1), {}}));
    REQUIRE(MAll<ProposeResult>(a).at(0).error == ProposeError::None);
    REQUIRE(MAll<NotifyMembership>(a).size() == 1);
    CHECK(MAll<NotifyMembership>(a)[0].version == 2);
    CHECK(MAll<NotifyMembership>(a)[0].voters == Set({0, 1, 2, 3}));
    CHECK(MAll<NotifyMembership>(a)[0].learners.empty());
    CHECK(MAll<NotifyMembership>(a)[0].table.empty());  // no table: the node's own
    CHECK(MAll<NotifyMembership>(a)[0].members.size() == 4);
    CHECK(leader.active_config().quorum() == 3);
    // Now 3 of 4: self + n1 is not enough, self + n1 + n3 is.
    leader.propose(MT0, ML(2, 2), "k", "v");
    leader.persisted(MT0, ML(2, 2));
    a = leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, 2), {}}));
    CHECK(MAll<ProposeResult>(a).empty());
    a = leader.receive(MT0, MMsg(M3, 2, AppendAck{true, {}, ML(2, 2), {}}));
    CHECK(MAll<ProposeResult>(a).at(0).error == ProposeError::None);
    CHECK(leader.check_invariants().empty());
}

TEST_CASE("membership: removing the leader, it steps down once the removal commits") {
    auto leader = MakeM(M0);
    MActive(leader, 2);
    auto a = leader.propose_config(MT0, ML(2, 1),
                                   codec::encode_configuration(Cfg(2, {"1", "2"}, {"3"})));
    REQUIRE(MAll<PersistEntries>(a).size() == 1);
    leader.persisted(MT0, ML(2, 1));
    CHECK(leader.role() == LogRole::LeaderActive);  // counted over C1 = {0, 1, 2}: not yet
    a = leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, 1), {}}));
    // The removal is committed (acknowledged) and then the leader steps down.
    REQUIRE(MAll<ProposeResult>(a).at(0).error == ProposeError::None);
    CHECK(MAll<NotifyMembership>(a).at(0).voters == Set({1, 2}));
    CHECK(MAll<NotifyLogRole>(a).back().role == LogRole::Follower);
    CHECK(leader.role() == LogRole::Follower);
    // A removed node does not lead again (R8), whatever the elector says.
    leader.on_leadership(MT0, MLeads(M0, 3));
    CHECK(leader.role() == LogRole::Follower);
    CHECK(leader.state().term == Term{3});
    CHECK(leader.check_invariants().empty());
}

TEST_CASE("membership R4: the commit point is durable before the ack that follows a config") {
    // Follower n1 holds C2 (uncommitted); the leader's heartbeat commits it.
    auto entries = BaseLog();
    entries.push_back(Entry{ML(2, 0), {}, {}});
    entries.push_back(CfgEntry(ML(2, 1), Cfg(2, {"0", "1", "2", "3"})));
    auto f = MakeM(M1, entries, LogMeta{Term{2}, ML(1, 1)});
    f.receive(MT0, MMsg(M0, 2, Append{ML(2, 1), {}, ML(1, 1)}));  // matched, no commit move
    const auto a = f.receive(MT0, MMsg(M0, 2, Append{ML(2, 1), {}, ML(2, 1)}));
    std::optional<std::size_t> meta_at, ack_at;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (const auto* p = std::get_if<PersistMeta>(&a[i]); p && p->meta.commit_lsn == ML(2, 1)) {
            meta_at = meta_at.value_or(i);
        }
        if (const auto* s = std::get_if<SendLog>(&a[i]);
            s && std::holds_alternative<AppendAck>(s->message.body)) {
            ack_at = ack_at.value_or(i);
        }
    }
    REQUIRE(meta_at);
    REQUIRE(ack_at);
    CHECK(*meta_at < *ack_at);
    CHECK(f.active_config().version == 2);
    CHECK(f.check_invariants().empty());
    // Restarted from what it persisted, it keeps version 2.
    ReplicatedLog again(Cfg4(M1), RecoveredLog{entries, LogMeta{Term{2}, ML(2, 1)}});
    CHECK(again.active_config().version == 2);
}

TEST_CASE("membership R6: a leader that is not a voter of its configuration does not lead") {
    auto learner = MakeM(M3);
    const auto a = learner.on_leadership(MT0, MLeads(M3, 2));
    CHECK(learner.role() == LogRole::Follower);
    CHECK(MAll<SendLog>(a).empty());
    CHECK(MAll<BroadcastLog>(a).empty());
    CHECK(learner.state().term == Term{2});
}

TEST_CASE("membership R8: replication goes to the members of the active and appended configs") {
    // C1' = voters {0, 1, 2}, no learner: node 3 is nobody.
    std::vector<Entry> entries{Entry{ML(1, 0), {}, {}},
                               CfgEntry(ML(1, 1), Cfg(1, {"0", "1", "2"}))};
    auto leader = MakeM(M0, entries);
    MActive(leader, 2);
    CHECK(leader.replication_targets() == Set({1, 2}));
    auto a = leader.timer_fired(MT0, LogTimer::Heartbeat);
    CHECK(MSent<Append>(a, M3).empty());
    CHECK(MSent<Append>(a, M2).size() == 1);
    // Adding n3 as a learner: it is a target from the moment the entry is appended.
    a = leader.propose_config(MT0, ML(2, 1),
                              codec::encode_configuration(Cfg(2, {"0", "1", "2"}, {"3"})));
    CHECK(leader.replication_targets() == Set({1, 2, 3}));
    CHECK(MSent<Append>(a, M3).size() == 1);
    a = leader.timer_fired(MT0, LogTimer::Heartbeat);
    CHECK(MSent<Append>(a, M3).size() == 1);
}

TEST_CASE("membership R8: a removed member that never acknowledges is a target for 10 heartbeats") {
    auto leader = MakeM(M0);
    MActive(leader, 2);
    // Remove voter n2 (C2 = voters {0, 1}, learner 3), committed by self + n1.
    leader.propose_config(MT0, ML(2, 1), codec::encode_configuration(Cfg(2, {"0", "1"}, {"3"})));
    leader.persisted(MT0, ML(2, 1));
    auto a = leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, 1), {}}));
    REQUIRE(MAll<NotifyMembership>(a).size() == 1);
    // Still a target: its heartbeats carry the commit point that makes its removal active there.
    CHECK(leader.replication_targets() == Set({1, 2, 3}));
    a = leader.timer_fired(MT0, LogTimer::Heartbeat);
    REQUIRE(MSent<Append>(a, M2).size() == 1);
    CHECK(MSent<Append>(a, M2)[0].commit_lsn == ML(2, 1));
    // ... for a bounded number of heartbeats only.
    for (int i = 0; i < 20; ++i) {
        a = leader.timer_fired(MT0, LogTimer::Heartbeat);
    }
    CHECK(MSent<Append>(a, M2).empty());
    CHECK(leader.replication_targets() == Set({1, 3}));
    CHECK(leader.check_invariants().empty());
}

TEST_CASE("membership: a snapshot carries the configuration") {
    // Installed from the leader on an empty node 2.
    auto f = MakeM(M2, {}, LogMeta{});
    CHECK_FALSE(f.active_config().from_entry);
    const Entry cfg = CfgEntry(ML(1, 1), Cfg(1, {"0", "1", "2"}, {"3"}));
    auto a = f.receive(MT0, MMsg(M0, 2, testing::SnapshotChunk(ML(2, 3), 5, {cfg}, 0, 1)));
    CHECK(f.snapshot().len == 5);
    REQUIRE(MAll<NotifyMembership>(a).size() == 1);
    CHECK(f.active_config().version == 1);
    CHECK(f.active_config().learners == Set({3}));
    // Recovered from a stored snapshot: restored too.
    ReplicatedLog r(Cfg4(M2),
                    RecoveredLog{{}, LogMeta{Term{2}, ML(2, 3)}, Snapshot{ML(2, 3), 5, {cfg}}});
    CHECK(r.active_config().version == 1);
    // Compaction keeps the latest configuration as its key's value.
    LogConfig c = Cfg4(M0);
    c.compact_threshold = 2;
    ReplicatedLog leader(c, RecoveredLog{BaseLog(), LogMeta{Term{1}, ML(1, 1)}});
    leader.start(MT0);
    MActive(leader, 2);
    for (std::uint64_t i = 1; i <= 4; ++i) {
        leader.propose(MT0, ML(2, i), "k", "v");
        leader.persisted(MT0, ML(2, i));
        leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, i), {}}));
    }
    REQUIRE(leader.counters().compactions > 0);
    const auto& se = leader.snapshot().entries;
    CHECK(std::find(se.begin(), se.end(), cfg) != se.end());
    CHECK(leader.active_config().version == 1);
    CHECK(leader.check_invariants().empty());
}

TEST_CASE("membership: a malformed configuration entry from the network is dropped and counted") {
    auto f = MakeM(M1);
    for (const std::string& value :
         {std::string("not json"), codec::encode_configuration(Cfg(2, {"0", "1", "9"}))}) {
        const auto before = f.counters().protocol_violation_alarms;
        const auto a = f.receive(
            MT0,
            MMsg(M0, 2,
                 Append{ML(1, 1),
                        {Entry{ML(2, 0), {}, {}}, Entry{ML(2, 1), std::string(kMembersKey), value}},
                        ML(1, 1)}));
        CHECK(MAll<PersistEntries>(a).empty());
        CHECK(f.counters().protocol_violation_alarms == before + 1);
        CHECK(f.last_violation().kind == LogViolationKind::MalformedConfiguration);
    }
    CHECK(f.counters().violations_by_kind[static_cast<std::size_t>(
              LogViolationKind::MalformedConfiguration)] == 2);
    CHECK(f.end_len() == 2);
    // Membership off (no decoder): a configuration entry is malformed too, never an abort.
    LogConfig off = Cfg4(M1);
    off.decode_configuration = nullptr;
    ReplicatedLog g(off, RecoveredLog{});
    g.start(MT0);
    g.receive(MT0, MMsg(M0, 1, Append{{}, {BaseLog()}, {}}));
    CHECK(g.end_len() == 0);
    CHECK(g.counters().violations_by_kind[static_cast<std::size_t>(
              LogViolationKind::MalformedConfiguration)] == 1);
}

TEST_CASE("membership §8: configurations carry the node table; it grows when one commits") {
    // A 3-node table ("0".."2"); C1 = every node a voter, written without a table.
    LogConfig three = Cfg4(M0);
    three.cluster_size = 3;
    const std::vector<Entry> base{Entry{ML(1, 0), {}, {}},
                                  CfgEntry(ML(1, 1), Cfg(1, {"0", "1", "2"}))};
    ReplicatedLog leader(three, RecoveredLog{base, LogMeta{Term{1}, ML(1, 1)}});
    leader.start(MT0);
    MActive(leader, 2);
    Configuration add = Cfg(2, {"0", "1", "2"}, {"3"});
    add.table = {"0", "1", "2", "3"};
    auto a = leader.propose_config(MT0, ML(2, 1), codec::encode_configuration(add));
    REQUIRE(MAll<PersistEntries>(a).size() == 1);
    // Node 3 is not in this node's table until the configuration commits: not a target yet.
    CHECK(leader.replication_targets() == Set({1, 2}));
    leader.persisted(MT0, ML(2, 1));
    a = leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, 1), {}}));
    const auto notices = MAll<NotifyMembership>(a);
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].table == add.table);
    CHECK(notices[0].learners == Set({3}));
    REQUIRE(notices[0].members.size() == 4);
    CHECK(notices[0].members[3] == Mem("3"));
    CHECK(leader.config().cluster_size == 4);
    CHECK(leader.counters().table_growths == 1);
    CHECK(leader.replication_targets() == Set({1, 2, 3}));
    a = leader.timer_fired(MT0, LogTimer::Heartbeat);
    CHECK(MSent<Append>(a, M3).size() == 1);
    CHECK(leader.check_invariants().empty());

    // The table never shrinks, nor takes another history.
    Configuration shorter = Cfg(3, {"0", "1", "2", "3"});
    CHECK(leader.check_config_change(shorter));  // no table once the active one has one
    shorter.table = {"0", "1", "2"};
    CHECK(leader.check_config_change(shorter));
    Configuration other = Cfg(3, {"0", "1", "2", "3"});
    other.table = {"0", "1", "x", "3"};
    CHECK_FALSE(leader.resolve(other));
    Configuration promote = Cfg(3, {"0", "1", "2", "3"});
    promote.table = {"0", "1", "2", "3"};
    CHECK_FALSE(leader.check_config_change(promote));

    // R9: a restart with the config file's 3-node table uses the stored, longer one.
    auto stored = base;
    stored.push_back(Entry{ML(2, 0), {}, {}});
    stored.push_back(CfgEntry(ML(2, 1), add));
    ReplicatedLog again(three, RecoveredLog{stored, LogMeta{Term{2}, ML(2, 1)}});
    CHECK(again.config().cluster_size == 4);
    CHECK(again.config().node_ids == add.table);
    CHECK(again.active_config().learners == Set({3}));
}

TEST_CASE("membership R8: a removed node is replicated to until it knows its removal committed") {
    auto leader = MakeM(M0);  // C1: voters {0, 1, 2}, learner 3
    MActive(leader, 2);
    leader.propose_config(MT0, ML(2, 1), codec::encode_configuration(Cfg(2, {"0", "1", "2"})));
    leader.persisted(MT0, ML(2, 1));
    leader.receive(MT0, MMsg(M1, 2, AppendAck{true, {}, ML(2, 1), {}}));
    REQUIRE(leader.active_config().version == 2);
    CHECK_FALSE(leader.active_config().is_member(M3));
    // Committed, but n3 does not hold it yet: it stays a target, so it learns it was removed.
    CHECK(leader.replication_targets() == Set({1, 2, 3}));
    auto a = leader.timer_fired(MT0, LogTimer::Heartbeat);
    CHECK(MSent<Append>(a, M3).size() == 1);
    // Holding the entry is not enough: it must know that it committed.
    leader.receive(MT0, MMsg(M3, 2, AppendAck{true, {}, ML(2, 1), ML(1, 1)}));
    CHECK(leader.replication_targets() == Set({1, 2, 3}));
    leader.receive(MT0, MMsg(M3, 2, AppendAck{true, {}, ML(2, 1), ML(2, 1)}));
    CHECK(leader.replication_targets() == Set({1, 2}));
    a = leader.timer_fired(MT0, LogTimer::Heartbeat);
    CHECK(MSent<Append>(a, M3).empty());
    CHECK(leader.check_invariants().empty());

    // On n3 the configuration that removes it becomes active: it is no member of it.
    auto entries = BaseLog();
    entries.push_back(Entry{ML(2, 0), {}, {}});
    entries.push_back(CfgEntry(ML(2, 1), Cfg(2, {"0", "1", "2"})));
    ReplicatedLog removed(Cfg4(M3), RecoveredLog{entries, LogMeta{Term{2}, ML(2, 1)}});
    CHECK_FALSE(removed.active_config().is_member(M3));
}
