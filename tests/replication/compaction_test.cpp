// SPDX-License-Identifier: Apache-2.0
// Compaction, snapshot install and the quota (NOSPACE) of the log core, and the snapshot file of
// FileStorage. Helpers are prefixed Cx so that the unity build does not clash.
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>

#include "conclave/core/check.hpp"
#include "conclave/replication/key_state.hpp"
#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/runtime/log_runtime.hpp"
#include "log_actions.hpp"

using namespace conclave;
using namespace conclave::replication;

namespace {

constexpr NodeId CxN0{0};
constexpr NodeId CxN1{1};
constexpr Millis CxT0{0};

Lsn CxL(std::uint64_t term, std::uint64_t counter) {
    return Lsn{Term{term}, counter};
}

elector::LeadershipSnapshot CxLeads(NodeId n, std::uint64_t term) {
    return elector::LeadershipSnapshot{elector::Role::Leader,        Term{term}, n,           term,
                                       elector::Reason::ElectionWon, CxT0,       std::nullopt};
}

template <class T>
std::vector<T> CxAll(const LogActions& actions) {
    return testing::ActionsOf<T>(actions);
}

template <class B>
std::vector<B> CxSent(const LogActions& actions, NodeId to) {
    return testing::SentBodies<B>(actions, to);
}

// A 2-node cluster (quorum 2): node 0 leads term 1; node 1 follows until `cut` is set, after
// which node 1 hears nothing. Each node's core runs inside the shared runtime
// (runtime/log_runtime.hpp, the one interpreter of its actions); storage performs everything at
// once: the group commit a batch asks for runs before that batch's messages are delivered, and
// each message is handled completely (its own flush and messages) before the next one.
struct CxPair;

struct CxEnv {
    static constexpr bool kPlantedBugs = false;
    CxPair* pair = nullptr;
    std::size_t node = 0;
    Millis now() const { return CxT0; }
    LogStorage& storage();
    void send(std::span<const NodeId> to, const LogMessage& m);
    void arm(LogTimer, Millis, runtime::TimerGeneration) {}  // the test fires timers itself
    void cancel(LogTimer) {}
    void schedule_flush();
    void apply(const std::vector<Entry>& committed);
    void propose_result(const ProposeResult&) {}
    void role(const NotifyLogRole&) {}
    void failed(const std::string& what) { FAIL("MemoryStorage never fails: " << what); }
    void after_batch();
};

struct CxPair {
    using Rt = runtime::LogRuntime<CxEnv>;
    LogConfig config(NodeId self) const {
        LogConfig c;
        c.cluster_size = 2;
        c.self = self;
        c.max_batch_entries = 4;
        c.compact_threshold = 8;
        c.compact_retain = 2;
        return c;
    }
    CxPair() {
        Restart(0);
        Restart(1);
        Input(0, [](ReplicatedLog& l) { return l.on_leadership(CxT0, CxLeads(CxN0, 1)); });
        REQUIRE(leader().role() == LogRole::LeaderActive);
    }
    CxPair(const CxPair&) = delete;  // the environments point at this pair
    CxPair& operator=(const CxPair&) = delete;

    /// A new process on what node's storage holds, started.
    void Restart(std::size_t node) {
        env[node] = CxEnv{this, node};
        rt[node] = std::make_unique<Rt>(env[node], config(NodeId{static_cast<std::uint16_t>(node)}),
                                        storage(node).recover().log);
        Input(node, [](ReplicatedLog& l) { return l.start(CxT0); });
    }
    /// Gives `node` one input through its runtime, then delivers everything that follows.
    template <class F>
    void Input(std::size_t node, F&& input) {
        rt[node]->run(std::forward<F>(input));
        Pump();
    }
    void Propose(std::uint64_t counter, std::string key, std::string value) {
        Input(0, [&](ReplicatedLog& l) {
            return l.propose(CxT0, CxL(1, counter), std::move(key), std::move(value));
        });
    }
    // The follower learns the last commit point with the next append or heartbeat.
    void Heartbeat() {
        rt[0]->timer_fired(LogTimer::Heartbeat, rt[0]->generation(LogTimer::Heartbeat));
        Pump();
    }

    ReplicatedLog& leader() { return rt[0]->log(); }
    ReplicatedLog& follower() { return rt[1]->log(); }
    MemoryStorage& storage(std::size_t node) { return node == 0 ? s0 : s1; }

    // What the environments queue: a batch's group commit first, then its messages in order
    // (a stack, so that each is handled completely before the next).
    struct Work {
        std::size_t node = 0;  // where it happens
        bool flush = false;
        LogMessage message;
    };
    void Pump() {
        while (!work.empty()) {
            Work w = std::move(work.back());
            work.pop_back();
            if (w.flush) {
                rt[w.node]->flush();
            } else if (!cut) {
                rt[w.node]->run([&](ReplicatedLog& l) { return l.receive(CxT0, w.message); });
            }
        }
    }

    MemoryStorage s0, s1;
    std::array<CxEnv, 2> env;
    std::array<std::unique_ptr<Rt>, 2> rt;
    std::array<std::vector<LogMessage>, 2> outbox;
    std::array<bool, 2> flush_due{};
    std::vector<Work> work;
    std::map<std::string, std::string> applied0, applied1;
    bool cut = false;
};

LogStorage& CxEnv::storage() {
    return pair->storage(node);
}
void CxEnv::send(std::span<const NodeId> to, const LogMessage& m) {
    for (std::size_t i = 0; i < to.size(); ++i) {
        pair->outbox[node].push_back(m);
    }
}
void CxEnv::schedule_flush() {
    pair->flush_due[node] = true;
}
void CxEnv::apply(const std::vector<Entry>& committed) {
    auto& applied = node == 0 ? pair->applied0 : pair->applied1;
    for (const Entry& e : committed) {
        if (!is_sync_point(e)) {
            applied[e.key] = e.value;
        }
    }
}
void CxEnv::after_batch() {
    const std::size_t n = node;
    std::vector<LogMessage> sent = std::move(pair->outbox[n]);
    pair->outbox[n].clear();
    for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
        pair->work.push_back(CxPair::Work{1 - node, false, std::move(*it)});
    }
    if (pair->flush_due[n]) {
        pair->flush_due[n] = false;
        pair->work.push_back(CxPair::Work{node, true, LogMessage{}});
    }
}

std::filesystem::path CxTempDir(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() /
               ("conclave-compaction-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    return dir;
}

}  // namespace

TEST_CASE("key state: the last write of each key, prefixes, a snapshot's entries in LSN order",
          "[compaction]") {
    KeyState s;
    s.apply(Entry{Lsn{Term{1}, 0}, "", ""});  // a sync point: no key
    s.apply(Entry{Lsn{Term{1}, 1}, "b/1", "x"});
    s.apply(Entry{Lsn{Term{1}, 2}, "a/1", "y"});
    s.apply(Entry{Lsn{Term{2}, 1}, "b/1", "z"});
    s.apply(Entry{Lsn{Term{1}, 1}, "b/1", "x"});  // older than the held write: ignored
    CHECK(s.size() == 2);
    REQUIRE(s.find("b/1") != nullptr);
    CHECK(s.find("b/1")->value == "z");
    CHECK(s.find("b/1")->lsn == Lsn{Term{2}, 1});
    CHECK(s.find("c") == nullptr);
    std::vector<std::string> under_b;
    s.for_prefix("b/", [&](const Entry& e) {
        under_b.push_back(e.key);
        return true;
    });
    CHECK(under_b == std::vector<std::string>{"b/1"});
    const std::vector<Entry> taken = s.take_in_lsn_order();
    REQUIRE(taken.size() == 2);
    CHECK(taken[0].key == "a/1");
    CHECK(taken[1].key == "b/1");
    CHECK(s.size() == 0);
}

TEST_CASE("compaction: committed entries fold into a snapshot of the last value of each key",
          "[compaction]") {
    CxPair p;
    for (std::uint64_t i = 1; i <= 30; ++i) {
        p.Propose(i, "k" + std::to_string(i % 3), "v" + std::to_string(i));
    }
    REQUIRE(p.leader().commit_lsn() == CxL(1, 30));
    p.Heartbeat();
    CHECK(p.leader().counters().compactions > 0);
    CHECK(p.follower().counters().compactions > 0);
    // Bounded: at most threshold + 1 entries after the snapshot; the snapshot holds 3 keys.
    CHECK(p.leader().entries().size() <= 9);
    CHECK(p.leader().snapshot().entries.size() == 3);
    CHECK(p.leader().used_entries() <= 12);
    CHECK(p.s0.snapshot() == p.leader().snapshot());
    CHECK(p.s0.entries() == p.leader().entries());
    CHECK(p.leader().check_invariants().empty());
    CHECK(p.follower().check_invariants().empty());
    // Reads see the same map as the full history would give.
    std::map<std::string, std::string> read;
    for (const Entry& e : p.leader().committed_after(kNoLsn, 1000)) {
        if (!is_sync_point(e)) {
            read[e.key] = e.value;
        }
    }
    CHECK(read == std::map<std::string, std::string>{{"k0", "v30"}, {"k1", "v28"}, {"k2", "v29"}});
    CHECK(p.applied0 == read);
    CHECK(p.applied1 == read);
    // A restart recovers snapshot + tail and applies the snapshot's state at once (the tail
    // commits again once the leader says so: the stored commit point is a lower bound).
    ReplicatedLog again(p.config(CxN0), p.s0.recover().log);
    auto a = again.start(CxT0);
    REQUIRE_FALSE(CxAll<ApplyCommitted>(a).empty());
    CHECK(CxAll<ApplyCommitted>(a).at(0).snapshot_lsn == p.leader().snapshot().lsn);
    CHECK(CxAll<ApplyCommitted>(a).at(0).entries == p.leader().snapshot().entries);
    CHECK(again.entries() == p.leader().entries());
}

TEST_CASE("compaction: a follower far behind gets the snapshot, in chunks", "[compaction]") {
    CxPair p;
    for (std::uint64_t i = 1; i <= 40; ++i) {
        p.Propose(i, "k" + std::to_string(i), "v");
    }
    REQUIRE(p.leader().snapshot().len > 0);
    // A fresh follower (empty disk) must be brought up to date from the snapshot.
    p.s1 = MemoryStorage{};
    p.applied1.clear();
    p.Restart(1);
    p.Input(0, [](ReplicatedLog& l) { return l.peer_up(CxT0, CxN1); });
    for (std::uint64_t i = 41; i <= 44; ++i) {
        p.Propose(i, "k" + std::to_string(i), "v");
    }
    p.Heartbeat();
    CHECK(p.leader().counters().snapshots_sent > 0);
    CHECK(p.follower().counters().snapshots_installed == 1);
    CHECK(p.follower().commit_lsn() == p.leader().commit_lsn());
    CHECK(p.applied1 == p.applied0);
    CHECK(p.follower().check_invariants().empty());
    CHECK(p.s1.snapshot().lsn == p.follower().snapshot().lsn);
}

// Hostile or oversized InstallSnapshot: what a follower collects of an incoming
// snapshot is bounded in bytes (max_snapshot_bytes, derived from quota_bytes); beyond, the
// snapshot is dropped and alarmed, the rest of its chunks are dropped, nothing is installed.
TEST_CASE("compaction: an incoming snapshot beyond max_snapshot_bytes is dropped with an alarm",
          "[compaction]") {
    const auto chunk = [](std::uint64_t offset, std::size_t n, bool done) {
        // A snapshot of 12 entries (or of as many as a last chunk ends at); 118-119 bytes each.
        std::vector<Entry> all;
        for (std::size_t i = 0; i < (done ? offset + n : 12U); ++i) {
            all.push_back(Entry{CxL(1, i + 1), "k" + std::to_string(i), std::string(100, 'v')});
        }
        InstallSnapshot s = testing::SnapshotChunk(CxL(1, 100), 100, all, offset, n);
        CHECK(s.done == done);
        return LogMessage{CxN0, Term{1}, s};
    };
    const auto make = [](std::size_t max_snapshot_bytes, std::size_t quota_bytes) {
        LogConfig c;
        c.cluster_size = 2;
        c.self = CxN1;
        c.max_snapshot_bytes = max_snapshot_bytes;
        c.max_key_bytes = 10;
        c.max_value_bytes = 200;
        c.quota_bytes = quota_bytes;
        ReplicatedLog log(c, RecoveredLog{});
        log.start(CxT0);
        return log;
    };
    const auto too_large = [](const ReplicatedLog& log) {
        return log.counters()
            .violations_by_kind[static_cast<std::size_t>(LogViolationKind::SnapshotTooLarge)];
    };
    SECTION("max_snapshot_bytes") {
        ReplicatedLog f = make(1000, 0);
        f.receive(CxT0, chunk(0, 4, false));
        f.receive(CxT0, chunk(4, 4, false));  // 8 entries, ~950 bytes: within the bound
        CHECK(f.counters().protocol_violation_alarms == 0);
        f.receive(CxT0, chunk(8, 4, true));  // 12 entries: beyond
        CHECK(too_large(f) == 1);
        CHECK(f.counters().protocol_violation_alarms == 1);
        CHECK(f.last_violation().kind == LogViolationKind::SnapshotTooLarge);
        CHECK(to_string(LogViolationKind::SnapshotTooLarge) == "snapshot_too_large");
        // The rest of that snapshot is not collected: out of order now, dropped.
        const auto dropped = f.counters().messages_dropped;
        f.receive(CxT0, chunk(12, 4, true));
        CHECK(f.counters().messages_dropped == dropped + 1);
        CHECK(f.snapshot().len == 0);
        CHECK(f.counters().snapshots_installed == 0);
        CHECK(f.check_invariants().empty());
    }
    SECTION("derived from quota_bytes") {
        ReplicatedLog f = make(0, 16 + 10 + 200);
        CHECK(f.counters().protocol_violation_alarms == 0);
        f.receive(CxT0, chunk(0, 2, true));  // ~240 bytes > the quota of 226
        CHECK(too_large(f) == 1);
        CHECK(f.snapshot().len == 0);
    }
    SECTION("the same snapshot within the bound is installed") {
        ReplicatedLog f = make(0, 0);  // 1 GiB
        f.receive(CxT0, chunk(0, 4, false));
        f.receive(CxT0, chunk(4, 4, false));
        f.receive(CxT0, chunk(8, 4, true));
        CHECK(too_large(f) == 0);
        CHECK(f.counters().snapshots_installed == 1);
        CHECK(f.snapshot().lsn == CxL(1, 100));
        CHECK(f.snapshot().entries.size() == 12);
    }
}

TEST_CASE("quota: NOSPACE refuses proposals until a compaction frees space", "[compaction]") {
    LogConfig c;
    c.max_value_bytes = 100;
    c.max_key_bytes = 10;
    c.quota_entries = 6;
    ReplicatedLog log(c, RecoveredLog{});
    log.start(CxT0);
    log.on_leadership(CxT0, CxLeads(CxN0, 1));
    log.persisted(CxT0, CxL(1, 0));
    REQUIRE(log.role() == LogRole::LeaderActive);
    // Distinct keys: compaction cannot free anything; the sync point does not count once folded.
    std::uint64_t n = 0;
    ProposeError last = ProposeError::None;
    while (last == ProposeError::None && n < 20) {
        ++n;
        auto a = log.propose(CxT0, CxL(1, n), "k" + std::to_string(n), "v");
        if (!CxAll<PersistEntries>(a).empty()) {
            log.persisted(CxT0, CxL(1, n));
            continue;
        }
        last = CxAll<ProposeResult>(a).at(0).error;
    }
    CHECK(last == ProposeError::NoSpace);
    CHECK(log.nospace_alarm());
    CHECK(log.used_entries() == 6);
    CHECK(log.counters().nospace_refusals == 1);
    // Sticky: even a small proposal is refused while the alarm is on.
    auto a = log.propose(CxT0, CxL(1, n + 1), "k1", "v");
    CHECK(CxAll<ProposeResult>(a).at(0).error == ProposeError::NoSpace);
    // Leadership moves: the alarm is the leader's, evaluated anew by the next one.
    log.on_leadership(
        CxT0, elector::LeadershipSnapshot{elector::Role::Follower, Term{1}, std::nullopt, 1,
                                          elector::Reason::LeaderDiscovered, CxT0, std::nullopt});
    CHECK_FALSE(log.nospace_alarm());

    // Overwritten keys: the forced compaction folds them and the proposal fits.
    ReplicatedLog again(c, RecoveredLog{});
    again.start(CxT0);
    again.on_leadership(CxT0, CxLeads(CxN0, 1));
    again.persisted(CxT0, CxL(1, 0));
    for (std::uint64_t i = 1; i <= 20; ++i) {
        auto b = again.propose(CxT0, CxL(1, i), "same", "v" + std::to_string(i));
        REQUIRE(CxAll<PersistEntries>(b).size() == 1);
        again.persisted(CxT0, CxL(1, i));
    }
    CHECK_FALSE(again.nospace_alarm());
    CHECK(again.used_entries() <= 6);
    CHECK(again.counters().compactions > 0);

    c.quota_bytes = 50;  // below one entry of the largest size
    CHECK(c.validate().value().find("quota_bytes") != std::string::npos);
    c.quota_bytes = 0;
    c.compact_threshold = 4;
    c.compact_retain = 4;
    CHECK(c.validate().value().find("compact_retain") != std::string::npos);
}

struct CxCheckFailed {
    std::string what;
};
[[noreturn]] void CxThrowCheck(const char* what) {
    throw CxCheckFailed{what};
}

TEST_CASE("planted bug: compacting past the commit point is caught by the core's check",
          "[compaction][planted]") {
    ScopedInvariantHandler handler(&CxThrowCheck);
    LogConfig c;
    c.cluster_size = 2;
    c.compact_threshold = 2;
    c.planted_bug = PlantedLogBug::CompactUncommitted;
    ReplicatedLog log(c, RecoveredLog{});
    log.start(CxT0);
    log.on_leadership(CxT0, CxLeads(CxN0, 1));
    log.receive(CxT0, LogMessage{CxN1, Term{1}, SyncResponse{}});
    log.persisted(CxT0, CxL(1, 0));
    log.receive(CxT0, LogMessage{CxN1, Term{1}, AppendAck{true, {}, CxL(1, 0), {}}});
    REQUIRE(log.role() == LogRole::LeaderActive);
    // Durable here, never acknowledged: not committed. The bug folds them into the snapshot; the
    // core's own checks refuse the state (a commit point inside the snapshot).
    bool caught = false;
    try {
        for (std::uint64_t i = 1; i <= 4; ++i) {
            log.propose(CxT0, CxL(1, i), "k" + std::to_string(i), "v");
            log.persisted(CxT0, CxL(1, i));
            if (!log.check_invariants().empty()) {
                caught = true;
                CHECK(log.check_invariants().find("uncommitted") != std::string::npos);
                break;
            }
        }
    } catch (const CxCheckFailed& e) {
        caught = true;
        INFO(e.what);
    }
    CHECK(caught);
}

TEST_CASE("FileStorage: snapshot file, tail rewrite, recovery and corruption refusal",
          "[compaction][storage]") {
    const auto dir = CxTempDir("file");
    Snapshot snap;
    {
        FileStorage s(dir, FsyncPolicy::Batched);
        s.recover();
        std::vector<Entry> entries;
        for (std::uint64_t i = 1; i <= 10; ++i) {
            entries.push_back(Entry{CxL(1, i), "k" + std::to_string(i % 4), std::to_string(i)});
        }
        s.append(entries);
        s.flush();
        const auto before = s.log_bytes();
        snap = Snapshot{CxL(1, 6), 6, {}};
        for (std::uint64_t i = 3; i <= 6; ++i) {
            snap.entries.push_back(entries[i - 1]);
        }
        s.persist_snapshot(snap);
        CHECK(s.log_bytes() < before);
        CHECK(s.durable_lsn() == CxL(1, 10));
        s.append({Entry{CxL(1, 11), "k3", "11"}});
        s.flush();
    }
    {
        FileStorage s(dir, FsyncPolicy::Batched);
        const Recovery r = s.recover();
        CHECK(r.log.snapshot == snap);
        REQUIRE(r.log.entries.size() == 5);
        CHECK(r.log.entries.front().lsn == CxL(1, 7));
        CHECK(r.log.entries.back().lsn == CxL(1, 11));
        // Installing a snapshot whose LSN is not stored drops every stored entry.
        Snapshot installed{CxL(2, 3), 20, {Entry{CxL(2, 1), "x", "y"}}};
        s.persist_snapshot(installed);
    }
    {
        FileStorage s(dir, FsyncPolicy::Batched);
        const Recovery r = s.recover();
        CHECK(r.log.snapshot.lsn == CxL(2, 3));
        CHECK(r.log.entries.empty());
    }
    // One flipped bit anywhere in the snapshot file: refused at start, file unchanged.
    const auto path = dir / "log.snap";
    const auto size = std::filesystem::file_size(path);
    std::size_t refused = 0;
    for (std::uintmax_t at = 0; at < size; ++at) {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(at));
        char byte = 0;
        f.get(byte);
        f.seekp(static_cast<std::streamoff>(at));
        f.put(static_cast<char>(byte ^ 0x10));
        f.close();
        FileStorage s(dir, FsyncPolicy::Batched);
        try {
            s.recover();
        } catch (const CorruptLogError& e) {
            ++refused;
            CHECK(std::string(e.what()).find("log.snap") != std::string::npos);
        }
        std::fstream g(path, std::ios::in | std::ios::out | std::ios::binary);
        g.seekp(static_cast<std::streamoff>(at));
        g.put(byte);
    }
    CHECK(refused == size);
    std::filesystem::remove_all(dir);
}
