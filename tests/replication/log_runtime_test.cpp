// SPDX-License-Identifier: Apache-2.0
// The runtime's asynchronous group commit (LogRuntime::begin_sync / sync_done, what the daemon's
// storage thread drives) and the storage side of it (LogStorage::begin_sync / sync / end_sync):
// nothing is acknowledged before the sync covering it completed, appends made while a sync runs
// wait for the next one, a truncation during a sync is never reported durable, a failed sync
// stops the log.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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
