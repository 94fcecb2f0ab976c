// SPDX-License-Identifier: Apache-2.0
// The runtime's asynchronous group commit (LogRuntime::begin_sync / sync_done, what the daemon's
// storage thread drives) and the storage side of it (LogStorage::begin_sync / sync / end_sync):
// nothing is acknowledged before the sync covering it completed, appends made while a sync runs
// wait for the next one, a truncation during a sync is never reported durable, a failed sync
// stops the log.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "conclave/core/check.hpp"
#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"
#include "conclave/runtime/log_runtime.hpp"

using namespace conclave;
using namespace conclave::replication;

namespace {

constexpr NodeId kLeader{0};
constexpr NodeId kSelf{1};

Lsn RtL(std::uint64_t term, std::uint64_t counter) {
    return Lsn{Term{term}, counter};
}

Entry RtE(std::uint64_t term, std::uint64_t counter) {
    if (counter == 0) {
        return Entry{RtL(term, 0), {}, {}};
    }
    return Entry{RtL(term, counter), "k" + std::to_string(counter), "v"};
}

/// A recording environment: sends are kept, flushes are only counted (the test plays the storage
/// thread by calling begin_sync / sync / sync_done itself).
struct RecordingEnv {
    static constexpr bool kPlantedBugs = false;
    MemoryStorage store;
    std::vector<AppendAck> acks;
    int flushes_scheduled = 0;
    std::optional<std::string> failure;

    Millis now() const { return Millis{0}; }
    LogStorage& storage() { return store; }
    void send(std::span<const NodeId> /*to*/, const LogMessage& m) {
        if (const auto* ack = std::get_if<AppendAck>(&m.body)) {
            acks.push_back(*ack);
        }
    }
    void arm(LogTimer, Millis, runtime::TimerGeneration) {}
    void cancel(LogTimer) {}
    void schedule_flush() { ++flushes_scheduled; }
    void apply(const std::vector<Entry>&) {}
    void propose_result(const ProposeResult&) {}
    void role(const NotifyLogRole&) {}
    void failed(const std::string& what) { failure = what; }
    void after_batch() {}
};

LogConfig FollowerConfig() {
    LogConfig c;
    c.cluster_size = 3;
    c.self = kSelf;
    return c;
}

LogMessage FromLeader(std::uint64_t term, LogMessageBody body) {
    return LogMessage{kLeader, Term{term}, std::move(body)};
}

/// The largest LSN acknowledged ok so far.
Lsn LastAcked(const RecordingEnv& env) {
    Lsn last{};
    for (const AppendAck& a : env.acks) {
        if (a.ok && a.last_lsn > last) {
            last = a.last_lsn;
        }
    }
    return last;
}

struct Follower {
    RecordingEnv env;
    runtime::LogRuntime<RecordingEnv> rt{env, FollowerConfig(), env.store.recover().log};

    Follower() {
        rt.run([](ReplicatedLog& log) { return log.start(Millis{0}); });
        rt.run([](ReplicatedLog& log) {
            return log.on_leadership(
                Millis{0}, elector::LeadershipSnapshot{elector::Role::Follower, Term{2}, kLeader, 2,
                                                       elector::Reason::LeaderDiscovered, Millis{0},
                                                       std::nullopt});
        });
    }
    void receive(const LogMessage& m) {
        rt.run([&](ReplicatedLog& log) { return log.receive(Millis{0}, m); });
    }
};

}  // namespace

TEST_CASE("runtime: an append is acknowledged only when its asynchronous sync completed") {
    Follower f;
    f.receive(FromLeader(2, Append{Lsn{}, {RtE(2, 0), RtE(2, 1)}, Lsn{}}));
    REQUIRE(f.env.flushes_scheduled == 1);
    CHECK(LastAcked(f.env) < RtL(2, 0));

    const std::optional<SyncTicket> first = f.rt.begin_sync();
    REQUIRE(first);
    CHECK(f.rt.sync_in_flight());
    // Appended while the first sync runs: no second sync is scheduled, and it is not covered.
    f.receive(FromLeader(2, Append{RtL(2, 1), {RtE(2, 2)}, Lsn{}}));
    CHECK(f.env.flushes_scheduled == 1);
    CHECK_FALSE(f.rt.begin_sync());  // one sync at a time
    CHECK(LastAcked(f.env) < RtL(2, 0));

    f.env.store.sync(*first);
    f.rt.sync_done(*first, std::nullopt);
    CHECK(LastAcked(f.env) == RtL(2, 1));
    CHECK(f.env.store.synced_count() == 2);
    // The next sync was scheduled by sync_done (group commit of what accumulated meanwhile).
    REQUIRE(f.env.flushes_scheduled == 2);
    const std::optional<SyncTicket> second = f.rt.begin_sync();
    REQUIRE(second);
    f.env.store.sync(*second);
    f.rt.sync_done(*second, std::nullopt);
    CHECK(LastAcked(f.env) == RtL(2, 2));
    CHECK(f.env.flushes_scheduled == 2);  // nothing left to sync
    CHECK_FALSE(f.rt.begin_sync());
    CHECK(f.rt.flushes() == 2);
}

TEST_CASE("runtime: a failed asynchronous sync stops the log and acknowledges nothing") {
    Follower f;
    f.receive(FromLeader(2, Append{Lsn{}, {RtE(2, 0), RtE(2, 1)}, Lsn{}}));
    const std::optional<SyncTicket> t = f.rt.begin_sync();
    REQUIRE(t);
    f.rt.sync_done(*t, std::string("fdatasync log.dat: No space left on device"));
    CHECK(f.rt.failed());
    REQUIRE(f.env.failure);
    CHECK(f.env.failure->find("No space left") != std::string::npos);
    CHECK(LastAcked(f.env) < RtL(2, 0));
    // Later inputs are ignored.
    f.receive(FromLeader(2, Append{RtL(2, 1), {RtE(2, 2)}, Lsn{}}));
    CHECK(f.rt.log().entries().size() == 2);
    CHECK(LastAcked(f.env) < RtL(2, 0));
}

namespace {

template <class Storage>
void CheckTruncationDuringSync(Storage& s) {
    s.recover();
    s.append({RtE(2, 0), RtE(2, 1), RtE(2, 2)});
    const SyncTicket t = s.begin_sync();
    CHECK(t.needed);
    // While the sync runs: (2,1) and (2,2) are replaced by (3,0), written after the sync began.
    s.truncate_after(RtL(2, 0));
    s.append({RtE(3, 0)});
    s.sync(t);
    CHECK(s.end_sync(t) == RtL(2, 0));  // neither the truncated entries nor (3,0)
    const SyncTicket next = s.begin_sync();
    s.sync(next);
    CHECK(s.end_sync(next) == RtL(3, 0));
    const SyncTicket idle = s.begin_sync();
    CHECK_FALSE(idle.needed);
}

}  // namespace

TEST_CASE("storage: a truncation during an asynchronous sync is never reported durable") {
    SECTION("memory") {
        MemoryStorage s;
        CheckTruncationDuringSync(s);
        s.crash();
        CHECK(s.entries().size() == 2);
    }
    SECTION("file") {
        const auto dir = std::filesystem::temp_directory_path() /
                         ("conclave-runtime-sync-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir);
        {
            FileStorage s(dir, FsyncPolicy::Batched);
            const std::uint64_t before = s.fsync_count();
            CheckTruncationDuringSync(s);
            CHECK(s.fsync_count() > before);
        }
        std::filesystem::remove_all(dir);
    }
}

namespace {

struct RtCheckFailed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void RtThrowCheck(const char* what) {
    throw RtCheckFailed(what);
}

/// RecordingEnv with planted bugs allowed and no durability check of its own.
struct PlantedEnv : RecordingEnv {
    static constexpr bool kPlantedBugs = true;
};

LogActions RtActions(std::initializer_list<LogAction> actions) {
    return LogActions(actions);
}

}  // namespace

TEST_CASE("runtime: a log message leaving before what it claims is durable is caught") {
    const ScopedInvariantHandler handler(&RtThrowCheck);
    Follower f;
    const AppendAck ack{true, {}, RtL(2, 1), Lsn{}, false};
    // The promise of term 2 made durable (the core would do it on the leader's first message).
    const LogActions promise = RtActions({PersistMeta{LogMeta{Term{2}, Lsn{}}}});
    f.rt.run([&](ReplicatedLog&) { return promise; });
    SECTION("a term sent before the PersistMeta that makes it durable") {
        const AppendAck refusal{false, RtL(3, 0), Lsn{}, Lsn{}, false};
        const LogActions wrong = RtActions({SendLog{kLeader, LogMessage{kSelf, Term{3}, refusal}},
                                            PersistMeta{LogMeta{Term{3}, Lsn{}}}});
        CHECK_THROWS_WITH(f.rt.run([&](ReplicatedLog&) { return wrong; }),
                          Catch::Contains("term a log message claims is durable"));
        CHECK(f.env.acks.empty());  // stopped before the send
        const LogActions right = RtActions({PersistMeta{LogMeta{Term{3}, Lsn{}}},
                                            SendLog{kLeader, LogMessage{kSelf, Term{3}, refusal}}});
        CHECK_NOTHROW(f.rt.run([&](ReplicatedLog&) { return right; }));
        CHECK(f.env.acks.size() == 1);
    }
    SECTION("an ok AppendAck of entries appended but not flushed") {
        const LogActions wrong = RtActions({PersistEntries{{RtE(2, 0), RtE(2, 1)}},
                                            SendLog{kLeader, LogMessage{kSelf, Term{2}, ack}}});
        CHECK_THROWS_WITH(f.rt.run([&](ReplicatedLog&) { return wrong; }),
                          Catch::Contains("AppendAck acknowledges are durable"));
        CHECK(f.env.acks.empty());
        f.rt.flush(false);  // the storage flushes (2,1)
        const LogActions after_flush =
            RtActions({SendLog{kLeader, LogMessage{kSelf, Term{2}, ack}}});
        CHECK_NOTHROW(f.rt.run([&](ReplicatedLog&) { return after_flush; }));
        CHECK(f.env.acks.size() == 1);
    }
    SECTION("a refusal carries no durability claim") {
        const AppendAck refusal{false, RtL(2, 5), RtL(2, 9), Lsn{}, false};
        const LogActions refuse =
            RtActions({SendLog{kLeader, LogMessage{kSelf, Term{2}, refusal}}});
        CHECK_NOTHROW(f.rt.run([&](ReplicatedLog&) { return refuse; }));
    }
}

TEST_CASE("runtime: the planted AckBeforeFsync is caught by the runtime's own check") {
    const ScopedInvariantHandler handler(&RtThrowCheck);
    PlantedEnv env;
    runtime::LogRuntime<PlantedEnv> rt{env, FollowerConfig(), env.store.recover().log,
                                       runtime::RuntimeBug::AckBeforeFsync};
    rt.run([](ReplicatedLog& log) { return log.start(Millis{0}); });
    rt.run([](ReplicatedLog& log) {
        return log.on_leadership(
            Millis{0}, elector::LeadershipSnapshot{elector::Role::Follower, Term{2}, kLeader, 2,
                                                   elector::Reason::LeaderDiscovered, Millis{0},
                                                   std::nullopt});
    });
    rt.run([](ReplicatedLog& log) {
        return log.receive(Millis{0}, FromLeader(2, Append{Lsn{}, {RtE(2, 0), RtE(2, 1)}, Lsn{}}));
    });
    REQUIRE(env.acks.empty());
    // The bug tells the core (2,1) is durable without flushing: its AppendAck must not leave.
    CHECK_THROWS_WITH(rt.flush(), Catch::Contains("AppendAck acknowledges are durable"));
    CHECK(LastAcked(env) < RtL(2, 0));
}

namespace {

/// An environment that defers the leader's commit point (Env::schedule_meta, as the daemon's
/// does) and records, for every answer to a writer, the commit point durable at that moment.
struct DeferringEnv {
    static constexpr bool kPlantedBugs = false;
    MemoryStorage store;
    int metas_scheduled = 0;
    std::vector<ProposeResult> results;
    std::vector<Lsn> durable_commit_at_result;  // the stored meta's commit point at each answer
    std::optional<std::string> failure;

    Millis now() const { return Millis{0}; }
    LogStorage& storage() { return store; }
    void send(std::span<const NodeId>, const LogMessage&) {}
    void arm(LogTimer, Millis, runtime::TimerGeneration) {}
    void cancel(LogTimer) {}
    void schedule_flush() {}
    void schedule_meta() { ++metas_scheduled; }
    void apply(const std::vector<Entry>&) {}
    void propose_result(const ProposeResult& r) {
        results.push_back(r);
        durable_commit_at_result.push_back(store.meta().commit_lsn);
    }
    void role(const NotifyLogRole&) {}
    void failed(const std::string& what) { failure = what; }
    void after_batch() {}
};

/// A DeferringEnv that says at run time it does not defer (Env::defers_meta, the simulator's
/// LogSimOptions::defer_meta = false).
struct NotDeferringEnv : DeferringEnv {
    bool defers_meta() const { return false; }
};

elector::LeadershipSnapshot RtLeads(std::uint64_t term) {
    return elector::LeadershipSnapshot{elector::Role::Leader,        Term{term}, NodeId{0},   term,
                                       elector::Reason::ElectionWon, Millis{0},  std::nullopt};
}

/// Every writer heard "committed" only once the stored commit point covered its entry.
bool AnsweredAfterDurable(const DeferringEnv& env) {
    for (std::size_t i = 0; i < env.results.size(); ++i) {
        if (env.results[i].error == ProposeError::None &&
            env.durable_commit_at_result[i] < env.results[i].lsn) {
            return false;
        }
    }
    return true;
}

}  // namespace

TEST_CASE("runtime: a deferred commit point is written once for several commits, answers after") {
    DeferringEnv env;
    runtime::LogRuntime<DeferringEnv> rt{env, LogConfig{}, env.store.recover().log};
    rt.run([](ReplicatedLog& log) { return log.start(Millis{0}); });
    rt.run([](ReplicatedLog& log) { return log.on_leadership(Millis{0}, RtLeads(1)); });
    rt.flush();  // the sync point commits: no writer waits, nothing is deferred
    REQUIRE(rt.log().can_propose());
    CHECK(env.metas_scheduled == 0);

    auto propose = [&](std::uint64_t counter) {
        rt.run([&](ReplicatedLog& log) {
            return log.propose(Millis{0}, RtL(1, counter), "k" + std::to_string(counter), "v");
        });
    };
    propose(1);
    propose(2);
    rt.flush();  // (1,1) and (1,2) commit: the commit point is deferred, the writers wait
    CHECK(rt.meta_deferred());
    CHECK(env.metas_scheduled == 1);
    CHECK(env.results.empty());
    CHECK(env.store.meta().commit_lsn < RtL(1, 1));
    propose(3);
    rt.flush();  // (1,3) commits before the scheduled write: the same write covers it
    CHECK(env.metas_scheduled == 1);
    CHECK(env.results.empty());

    rt.write_deferred_meta();
    CHECK(rt.deferred_meta_writes() == 1);
    CHECK_FALSE(rt.meta_deferred());
    CHECK(env.store.meta().commit_lsn == RtL(1, 3));
    REQUIRE(env.results.size() == 3);
    CHECK(env.results[0].lsn == RtL(1, 1));  // in order
    CHECK(env.results[2].lsn == RtL(1, 3));
    CHECK(AnsweredAfterDurable(env));
    rt.write_deferred_meta();  // nothing deferred: no write
    CHECK(rt.deferred_meta_writes() == 1);

    SECTION("commits made while a write runs wait for the next write; the first one's go") {
        propose(4);
        rt.flush();
        REQUIRE(env.metas_scheduled == 2);
        const std::optional<LogMeta> first = rt.begin_meta_write();  // the storage thread's
        REQUIRE(first);
        CHECK(first->commit_lsn == RtL(1, 4));
        propose(5);
        rt.flush();  // committed while the first write runs: no second write yet
        CHECK(env.metas_scheduled == 2);
        CHECK_FALSE(rt.begin_meta_write());  // one write at a time
        env.store.write_meta(*first);
        rt.meta_written(*first, std::nullopt);
        REQUIRE(env.results.size() == 4);  // (1,4) goes, (1,5) waits for the next write
        CHECK(env.results[3].lsn == RtL(1, 4));
        CHECK(rt.held_results() == 1);
        CHECK(env.metas_scheduled == 3);  // scheduled as the first one came back
        rt.write_deferred_meta();
        REQUIRE(env.results.size() == 5);
        CHECK(env.results[4].lsn == RtL(1, 5));
        CHECK(AnsweredAfterDurable(env));
    }

    SECTION("a failed write stops the log and answers nobody") {
        propose(4);
        rt.flush();
        const std::optional<LogMeta> meta = rt.begin_meta_write();
        REQUIRE(meta);
        rt.meta_written(*meta, std::string("fsync log.meta: EIO"));
        CHECK(rt.failed());
        CHECK(env.failure);
        CHECK(env.results.size() == 3);
        return;
    }

    SECTION("a meta written at once (a new term) covers the deferred one") {
        propose(4);
        rt.flush();
        REQUIRE(rt.meta_deferred());
        rt.run([](ReplicatedLog& log) { return log.on_leadership(Millis{0}, RtLeads(2)); });
        CHECK_FALSE(rt.meta_deferred());
        REQUIRE(env.results.size() == 4);
        CHECK(env.results[3].lsn == RtL(1, 4));
        CHECK(env.store.meta().term == Term{2});
        CHECK(AnsweredAfterDurable(env));
        rt.write_deferred_meta();  // the scheduled write finds nothing left to write
        CHECK(rt.deferred_meta_writes() == 1);
        CHECK(env.store.meta().term == Term{2});
    }
    CHECK_FALSE(env.failure);
}

TEST_CASE("runtime: an environment that says it does not defer gets the commit point at once") {
    NotDeferringEnv env;
    runtime::LogRuntime<NotDeferringEnv> rt{env, LogConfig{}, env.store.recover().log};
    rt.run([](ReplicatedLog& log) { return log.start(Millis{0}); });
    rt.run([](ReplicatedLog& log) { return log.on_leadership(Millis{0}, RtLeads(1)); });
    rt.flush();
    REQUIRE(rt.log().can_propose());
    rt.run([](ReplicatedLog& log) { return log.propose(Millis{0}, RtL(1, 1), "k", "v"); });
    rt.flush();  // (1,1) commits: the commit point is written in the batch, the writer answered
    CHECK(env.metas_scheduled == 0);
    CHECK_FALSE(rt.meta_deferred());
    CHECK(env.store.meta().commit_lsn == RtL(1, 1));
    REQUIRE(env.results.size() == 1);
    CHECK(env.results[0].error == ProposeError::None);
    CHECK(AnsweredAfterDurable(env));
}
