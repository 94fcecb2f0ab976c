// SPDX-License-Identifier: Apache-2.0
// `conclaved --repair`: FileStorage::repair() and the repaired marker on disk, and the
// log core's non-voting rules while the marker is set (no sync answer, non-voting acks the leader
// does not count, a repaired leader that does not count itself) and when it is removed.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "conclave/replication/log.hpp"
#include "conclave/replication/storage.hpp"

using namespace conclave;
using namespace conclave::replication;
namespace fs = std::filesystem;

namespace {

struct RepairDir {
    RepairDir() {
        static int counter = 0;
        std::error_code ec;
        const fs::path base =
            fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
        path = base / ("conclave-repair-test-" + std::to_string(::getpid()) + "-" +
                       std::to_string(counter++));
        fs::remove_all(path);
    }
    ~RepairDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
    fs::path path;
};

Lsn Rl(std::uint64_t term, std::uint64_t counter) {
    return Lsn{Term{term}, counter};
}

Entry Re(std::uint64_t term, std::uint64_t counter) {
    if (counter == 0) {
        return Entry{Rl(term, 0), {}, {}};
    }
    return Entry{Rl(term, counter), "key/" + std::to_string(counter), "value"};
}

std::string Slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spill(const fs::path& p, const std::string& data) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << data;
}

// A 3-node log whose five records are durable, meta term 2, commit (2, 1).
void WriteFiveRecords(const fs::path& dir) {
    FileStorage s(dir, FsyncPolicy::Batched);
    (void)s.recover();
    s.append({Re(1, 0), Re(1, 1), Re(1, 2), Re(2, 0), Re(2, 1)});
    s.flush();
    s.write_meta(LogMeta{Term{2}, Rl(2, 1)});
}

LogConfig RepairConfig(NodeId self) {
    LogConfig c;
    c.cluster_size = 3;
    c.self = self;
    return c;
}

template <class B>
std::vector<B> SentBodies(const LogActions& actions, NodeId to) {
    std::vector<B> out;
    for (const auto& a : actions) {
        if (const auto* s = std::get_if<SendLog>(&a);
            s && s->to == to && std::holds_alternative<B>(s->message.body)) {
            out.push_back(std::get<B>(s->message.body));
        }
    }
    return out;
}

std::vector<LogMeta> MetasWritten(const LogActions& actions) {
    std::vector<LogMeta> out;
    for (const auto& a : actions) {
        if (const auto* m = std::get_if<PersistMeta>(&a)) {
            out.push_back(m->meta);
        }
    }
    return out;
}

LogMessage From(NodeId from, std::uint64_t term, LogMessageBody body) {
    return LogMessage{from, Term{term}, std::move(body)};
}

elector::LeadershipSnapshot Leading(NodeId n, std::uint64_t term) {
    return elector::LeadershipSnapshot{elector::Role::Leader,        Term{term}, n,           term,
                                       elector::Reason::ElectionWon, Millis{0},  std::nullopt};
}

}  // namespace

TEST_CASE("repair: a bad record mid-log is cut with what follows; the marker is durable") {
    RepairDir dir;
    WriteFiveRecords(dir.path);
    const fs::path log = dir.path / "log.dat";
    std::string data = Slurp(log);
    const std::size_t size = data.size();
    // Flip a bit inside the third record (1, 2): after the magic, (1, 0) (28 bytes: header 8,
    // fixed payload 20) and (1, 1) (38: plus a 5-byte key and value).
    const std::size_t third = 8 + 28 + 38;
    data[third + 12] = static_cast<char>(data[third + 12] ^ 0x10);
    Spill(log, data);
    {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        REQUIRE_THROWS_AS(s.recover(), CorruptLogError);
    }
    const RepairReport r = FileStorage::repair(dir.path, RepairOptions{Term{4}, std::nullopt, {}});
    CHECK(r.kept_records == 2);
    CHECK(r.kept_bytes == third);
    CHECK(r.file_bytes == size);
    CHECK(r.problem == TailProblem::BadCrc);
    CHECK(r.problem_offset == third);
    CHECK(r.dropped_valid == 2);  // (2, 0) and (2, 1) were intact, and are dropped too
    CHECK(r.meta_readable);
    CHECK(r.marker == Term{4});  // the elector's term is above the meta's
    CHECK(r.last_kept == Rl(1, 1));
    CHECK(r.commit_lsn == Rl(1, 1));  // (2, 1) is gone: the commit point stays inside
    CHECK(Slurp(r.saved) == data.substr(third));
    CHECK(fs::file_size(log) == third);

    FileStorage s(dir.path, FsyncPolicy::Batched);
    const Recovery rec = s.recover();
    CHECK(rec.log.entries == std::vector<Entry>{Re(1, 0), Re(1, 1)});
    CHECK(rec.log.meta == LogMeta{Term{4}, Rl(1, 1), Term{4}});
    CHECK(FileStorage::read_repaired_marker(dir.path) == Term{4});
    // The core's meta without the marker removes it, durably.
    s.write_meta(LogMeta{Term{5}, Rl(5, 0)});
    CHECK_FALSE(fs::exists(dir.path / "log.repaired"));
    FileStorage again(dir.path, FsyncPolicy::Batched);
    CHECK_FALSE(again.recover().log.meta.repaired);
}

TEST_CASE("repair: R needs a readable term; a damaged marker is refused at start") {
    RepairDir dir;
    WriteFiveRecords(dir.path);
    Spill(dir.path / "log.meta", "garbage");
    const std::string before = Slurp(dir.path / "log.dat");
    REQUIRE_THROWS_AS(FileStorage::repair(dir.path, RepairOptions{}), RepairNeedsMinTerm);
    CHECK(Slurp(dir.path / "log.dat") == before);  // nothing changed
    CHECK_FALSE(fs::exists(dir.path / "log.repaired"));
    // --min-term: R is the largest of it and the kept log's terms; an intact log is marked too.
    const RepairReport r = FileStorage::repair(dir.path, RepairOptions{std::nullopt, Term{1}, {}});
    CHECK_FALSE(r.meta_readable);
    CHECK(r.problem == TailProblem::None);
    CHECK(r.kept_records == 5);
    CHECK(r.marker == Term{2});
    CHECK(r.commit_lsn == kNoLsn);  // the commit point was in the lost meta
    CHECK(r.saved.empty());
    std::string marker = Slurp(dir.path / "log.repaired");
    marker[9] = static_cast<char>(marker[9] ^ 1);
    Spill(dir.path / "log.repaired", marker);
    FileStorage s(dir.path, FsyncPolicy::Batched);
    REQUIRE_THROWS_WITH(s.recover(), Catch::Contains("corrupt repaired marker"));
}

TEST_CASE("repaired follower: no sync answer, non-voting acks, cleared by a newer leader") {
    ReplicatedLog f(RepairConfig(NodeId{1}),
                    RecoveredLog{{Re(1, 0), Re(1, 1)}, LogMeta{Term{3}, Rl(1, 0), Term{3}}});
    f.start(Millis{0});
    REQUIRE(f.repaired() == Term{3});
    // A new leader of term 4 asks for a sync promise: the promise (term) is taken, no answer.
    LogActions a = f.receive(Millis{0}, From(NodeId{0}, 4, SyncRequest{}));
    CHECK(SentBodies<SyncResponse>(a, NodeId{0}).empty());
    CHECK(f.counters().sync_requests_unanswered == 1);
    REQUIRE(MetasWritten(a).size() == 1);
    CHECK(MetasWritten(a)[0] == LogMeta{Term{4}, Rl(1, 0), Term{3}});  // the marker stays
    // The leader (synced with node 2) appends its sync point; the ack is non-voting.
    a = f.receive(Millis{0}, From(NodeId{0}, 4, Append{Rl(1, 1), {Re(4, 0)}, Rl(1, 1)}));
    a = f.persisted(Millis{0}, Rl(4, 0));
    auto acks = SentBodies<AppendAck>(a, NodeId{0});
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].ok);
    CHECK(acks[0].non_voting);
    CHECK(f.repaired());  // the leader's commit point is still before its sync point
    // The commit point reaches (4, 0), which is durable here: the marker goes, then a voting ack.
    a = f.receive(Millis{0}, From(NodeId{0}, 4, Append{Rl(4, 0), {}, Rl(4, 0)}));
    CHECK_FALSE(f.repaired());
    CHECK(f.counters().repairs_cleared == 1);
    REQUIRE(MetasWritten(a).size() == 1);
    CHECK(MetasWritten(a)[0] == LogMeta{Term{4}, Rl(4, 0)});
    acks = SentBodies<AppendAck>(a, NodeId{0});
    REQUIRE_FALSE(acks.empty());
    CHECK_FALSE(acks.back().non_voting);
    // Now an ordinary node: it answers sync again.
    a = f.receive(Millis{0}, From(NodeId{2}, 5, SyncRequest{}));
    CHECK(SentBodies<SyncResponse>(a, NodeId{2}).size() == 1);
}

TEST_CASE("repaired follower: a leader of the marker's own term does not clear it") {
    ReplicatedLog f(RepairConfig(NodeId{1}),
                    RecoveredLog{{Re(3, 0)}, LogMeta{Term{3}, kNoLsn, Term{3}}});
    f.start(Millis{0});
    f.receive(Millis{0}, From(NodeId{0}, 3, Append{Rl(3, 0), {Re(3, 1)}, Rl(3, 1)}));
    f.persisted(Millis{0}, Rl(3, 1));
    CHECK(f.state().commit_len == 2);
    CHECK(f.repaired() == Term{3});  // T = R: an in-flight ack of before the repair may still count
}

TEST_CASE("leader: a non-voting ack counts for no commit") {
    ReplicatedLog l(RepairConfig(NodeId{0}), RecoveredLog{});
    l.start(Millis{0});
    l.on_leadership(Millis{0}, Leading(NodeId{0}, 1));
    l.receive(Millis{0}, From(NodeId{2}, 1, SyncResponse{kNoLsn, kNoLsn}));
    l.persisted(Millis{0}, Rl(1, 0));
    REQUIRE(l.state().sync_index == 0);
    l.receive(Millis{0}, From(NodeId{1}, 1, AppendAck{true, {}, Rl(1, 0), kNoLsn, true}));
    CHECK(l.state().commit_len == 0);
    CHECK(l.counters().non_voting_acks == 1);
    CHECK(l.progress()[1].match_len == 1);  // flow control still uses it
    l.receive(Millis{0}, From(NodeId{2}, 1, AppendAck{true, {}, Rl(1, 0), kNoLsn}));
    CHECK(l.state().commit_len == 1);
    CHECK(l.role() == LogRole::LeaderActive);
}

// Seed 430 at 5 nodes: a follower acks, crashes and is repaired (losing what it
// acked); once the leader is told (peer_down) that ack must not complete a commit quorum.
TEST_CASE("leader: a peer's ack stops counting once its connection drops") {
    LogConfig c = RepairConfig(NodeId{0});
    c.cluster_size = 5;  // commit quorum 3
    ReplicatedLog l(c, RecoveredLog{});
    l.start(Millis{0});
    l.on_leadership(Millis{0}, Leading(NodeId{0}, 1));
    l.receive(Millis{0}, From(NodeId{1}, 1, SyncResponse{kNoLsn, kNoLsn}));
    l.receive(Millis{0}, From(NodeId{2}, 1, SyncResponse{kNoLsn, kNoLsn}));
    l.persisted(Millis{0}, Rl(1, 0));
    REQUIRE(l.sync().done);
    l.receive(Millis{0}, From(NodeId{1}, 1, AppendAck{true, {}, Rl(1, 0), kNoLsn}));
    REQUIRE(l.progress()[1].match_len == 1);
    l.peer_down(Millis{1}, NodeId{1});
    CHECK(l.progress()[1].match_len == 0);
    l.receive(Millis{1}, From(NodeId{2}, 1, AppendAck{true, {}, Rl(1, 0), kNoLsn}));
    CHECK(l.state().commit_len == 0);  // self and n2: n1's old ack no longer counts
    l.receive(Millis{1}, From(NodeId{3}, 1, AppendAck{true, {}, Rl(1, 0), kNoLsn}));
    CHECK(l.state().commit_len == 1);
}

TEST_CASE("repaired leader: its own log is no sync answer and counts for no commit") {
    // Node 0 lacks (1, 2) and (1, 3) but holds a stale leader's (2, 0), above every other log.
    ReplicatedLog l(RepairConfig(NodeId{0}), RecoveredLog{{Re(1, 0), Re(1, 1), Re(2, 0)},
                                                          LogMeta{Term{2}, Rl(1, 1), Term{2}}});
    l.start(Millis{0});
    LogActions a = l.on_leadership(Millis{0}, Leading(NodeId{0}, 3));
    REQUIRE(l.role() == LogRole::LeaderPassive);
    // One answer is not a quorum without ourselves.
    a = l.receive(Millis{0}, From(NodeId{1}, 3, SyncResponse{Rl(1, 3), Rl(1, 1)}));
    CHECK(SentBodies<FetchRequest>(a, NodeId{1}).empty());
    a = l.receive(Millis{0}, From(NodeId{2}, 3, SyncResponse{Rl(1, 2), Rl(1, 1)}));
    // It fetches node 1's log although its own last LSN (2, 1) is higher.
    const auto fetch = SentBodies<FetchRequest>(a, NodeId{1});
    REQUIRE(fetch.size() == 1);
    CHECK(fetch[0].after_lsn == Rl(1, 1));
    CHECK(fetch[0].up_to_lsn == Rl(1, 3));
    a = l.receive(Millis{0},
                  From(NodeId{1}, 3, FetchResponse{Rl(1, 1), {Re(1, 2), Re(1, 3)}, Rl(1, 3)}));
    REQUIRE(l.sync().done);
    CHECK(l.last_lsn() == Rl(3, 0));
    CHECK(l.length_through(Rl(1, 3)) == 4u);
    CHECK_FALSE(l.length_through(Rl(2, 0)));  // the stale entry was cut
    // Durable here and on node 1 (non-voting self): not a quorum; node 2 makes it one.
    l.persisted(Millis{0}, Rl(3, 0));
    l.receive(Millis{0}, From(NodeId{1}, 3, AppendAck{true, {}, Rl(3, 0), Rl(1, 1)}));
    CHECK(l.state().commit_len == 2);  // unchanged: its recovered commit point
    a = l.receive(Millis{0}, From(NodeId{2}, 3, AppendAck{true, {}, Rl(3, 0), Rl(1, 1)}));
    CHECK(l.commit_lsn() == Rl(3, 0));
    // Its commit point is its own sync point, durable here: the marker goes.
    CHECK_FALSE(l.repaired());
    CHECK(MetasWritten(a).back() == LogMeta{Term{3}, Rl(3, 0)});
}

// ---- Crash ordering of `conclaved --repair` (FileStorage::repair) ------------------------------

namespace {

struct CrashHere {};

// One way a node's files can be damaged before the operator runs --repair.
enum class Damage { MidLogBitFlip, DamagedSnapshot, IntactBackup };

// Five durable records (WriteFiveRecords), damaged as `damage` says. Returns the entries a
// finished repair keeps.
std::vector<Entry> Damaged(const fs::path& dir, Damage damage) {
    WriteFiveRecords(dir);
    switch (damage) {
        case Damage::MidLogBitFlip: {
            std::string data = Slurp(dir / "log.dat");
            const std::size_t third = 8 + 28 + 38;  // see the first test case
            data[third + 12] = static_cast<char>(data[third + 12] ^ 0x10);
            Spill(dir / "log.dat", data);
            return {Re(1, 0), Re(1, 1)};
        }
        case Damage::DamagedSnapshot:
            Spill(dir / "log.snap", "CNCLSNP1 but torn");
            return {};
        case Damage::IntactBackup:
            break;
    }
    return {Re(1, 0), Re(1, 1), Re(1, 2), Re(2, 0), Re(2, 1)};
}

// The steps a repair of `damage` takes, in order (a run without a crash).
std::vector<std::string> StepsOf(Damage damage) {
    RepairDir dir;
    (void)Damaged(dir.path, damage);
    std::vector<std::string> steps;
    RepairOptions options{Term{4}, std::nullopt, {}};
    options.after_step = [&steps](std::string_view step) { steps.emplace_back(step); };
    (void)FileStorage::repair(dir.path, options);
    return steps;
}

// What a node started on `dir` does: nullopt when it refuses to start (recover() throws
// CorruptLogError), else its recovered log.
std::optional<RecoveredLog> StartOn(const fs::path& dir) {
    FileStorage s(dir, FsyncPolicy::Batched);
    try {
        return s.recover().log;
    } catch (const CorruptLogError&) {
        return std::nullopt;
    }
}

}  // namespace

TEST_CASE("repair crash ordering: a crash after any step leaves the node refusing or repaired") {
    // A crash between two steps: every step is durable when after_step runs (fsync of the file
    // and its directory), so the files then are what a power cut leaves. A crash inside the next
    // atomic replacement adds its half-written temporary file: planted below. Expected: the node
    // either refuses to start or starts repaired (marker R, non-voting, no record from after the
    // bad one) -- never as a voter on a cut log; and running --repair again finishes the job.
    for (const Damage damage :
         {Damage::MidLogBitFlip, Damage::DamagedSnapshot, Damage::IntactBackup}) {
        const std::vector<std::string> steps = StepsOf(damage);
        REQUIRE(steps.front() == "marker");
        REQUIRE(steps.back() == "meta");
        std::size_t refused = 0;
        std::size_t started_repaired = 0;
        for (std::size_t crash_after = 0; crash_after < steps.size(); ++crash_after) {
            CAPTURE(static_cast<int>(damage), steps[crash_after]);
            RepairDir dir;
            const std::vector<Entry> kept = Damaged(dir.path, damage);
            std::size_t seen = 0;
            RepairOptions options{Term{4}, std::nullopt, {}};
            options.after_step = [&](std::string_view) {
                if (seen++ == crash_after) {
                    throw CrashHere{};
                }
            };
            REQUIRE_THROWS_AS(FileStorage::repair(dir.path, options), CrashHere);
            for (const char* tmp : {"log.repaired.tmp", "log.meta.tmp", "log.dat.tmp"}) {
                Spill(dir.path / tmp, "half-written");
            }

            const std::optional<RecoveredLog> started = StartOn(dir.path);
            if (!started) {
                ++refused;
            } else {
                ++started_repaired;
                // Started: it must be marked, and hold nothing from after the bad record.
                REQUIRE(started->meta.repaired == Term{4});
                CHECK(started->entries == kept);
                ReplicatedLog log(RepairConfig(NodeId{1}), *started);
                log.start(Millis{0});
                CHECK(log.repaired() == Term{4});
                const LogActions a = log.receive(Millis{0}, From(NodeId{0}, 5, SyncRequest{}));
                CHECK(SentBodies<SyncResponse>(a, NodeId{0}).empty());  // no sync promise
            }
            // The operator runs --repair again (the procedure after any failed start): it
            // finishes with the same result as an uninterrupted repair.
            const RepairReport again =
                FileStorage::repair(dir.path, RepairOptions{Term{4}, std::nullopt, {}});
            CHECK(again.marker == Term{4});
            const std::optional<RecoveredLog> after = StartOn(dir.path);
            REQUIRE(after);
            CHECK(after->entries == kept);
            CHECK(after->meta.repaired == Term{4});
            CHECK(after->meta.term == Term{4});
        }
        // Both outcomes occur where the damage allows (the test is not vacuous): a mid-log flip
        // or a damaged snapshot refuses to start until the cut; an intact log starts marked.
        if (damage != Damage::IntactBackup) {
            CHECK(refused > 0);
        }
        CHECK(started_repaired > 0);
    }
}
