// SPDX-License-Identifier: Apache-2.0
// Snapshot streaming of the log core (InstallSnapshot chunks, SnapshotAck): a bounded window of
// chunks in flight, resumption from the receiver's acknowledged offset after a lost chunk, a
// reconnection or a restart, refusal of bad chunks. Cores only, driven by hand with simulated
// time: the test holds every message in flight and decides what arrives. Helpers are prefixed
// Ss so that the unity build does not clash.
#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "conclave/replication/log.hpp"
#include "log_actions.hpp"

using namespace conclave;
using namespace conclave::replication;

namespace {

constexpr Millis SsT0{0};
constexpr std::size_t SsWindow = 4;
constexpr std::size_t SsChunkEntries = 10;
constexpr std::size_t SsSnapshotEntries = 200;  // 20 chunks

Lsn SsL(std::uint64_t term, std::uint64_t counter) {
    return Lsn{Term{term}, counter};
}

LogConfig SsConfig(std::uint16_t self, PlantedLogBug bug = PlantedLogBug::None) {
    LogConfig c;
    c.cluster_size = 3;  // node 2 never answers: nodes 0 and 1 are a quorum
    c.self = NodeId{self};
    c.max_batch_entries = SsChunkEntries;
    c.max_inflight_batches = SsWindow;
    c.planted_bug = bug;
    return c;
}

/// The committed state of a history of 250 entries: 200 keys, 100-byte values.
Snapshot SsSnapshot() {
    Snapshot s{SsL(1, 250), 250, {}};
    for (std::uint64_t i = 1; i <= SsSnapshotEntries; ++i) {
        s.entries.push_back(Entry{SsL(1, i), "k" + std::to_string(i), std::string(100, 'v')});
    }
    return s;
}

elector::LeadershipSnapshot SsLeads(std::uint16_t n, std::uint64_t term) {
    return elector::LeadershipSnapshot{elector::Role::Leader,        Term{term}, NodeId{n},   term,
                                       elector::Reason::ElectionWon, SsT0,       std::nullopt};
}

/// Nodes 0 and 1 and what is in flight between them (in order). Storage is instant: a
/// PersistEntries is reported durable right after its batch.
struct SsNet {
    std::array<std::unique_ptr<ReplicatedLog>, 2> node;
    std::deque<std::pair<std::size_t, LogMessage>> wire;  // (to, message)
    std::vector<InstallSnapshot> chunks;                  // every chunk sent, in order
    std::size_t max_chunks_in_flight = 0;

    void Take(std::size_t from, const LogActions& actions) {
        std::vector<Lsn> persisted;
        for (const LogAction& a : actions) {
            if (const auto* s = std::get_if<SendLog>(&a)) {
                Post(s->to.value, s->message);
            } else if (const auto* b = std::get_if<BroadcastLog>(&a)) {
                Post(1 - from, b->message);
            } else if (const auto* p = std::get_if<PersistEntries>(&a)) {
                persisted.push_back(p->entries.back().lsn);
            }
        }
        for (Lsn lsn : persisted) {
            Take(from, node[from]->persisted(SsT0, lsn));
        }
    }
    void Post(std::size_t to, const LogMessage& m) {
        if (to > 1) {
            return;  // node 2 is down
        }
        if (const auto* c = std::get_if<InstallSnapshot>(&m.body)) {
            chunks.push_back(*c);
        }
        wire.emplace_back(to, m);
        std::size_t in_flight = 0;
        for (const auto& [dest, msg] : wire) {
            in_flight += std::holds_alternative<InstallSnapshot>(msg.body) ? 1U : 0U;
        }
        max_chunks_in_flight = std::max(max_chunks_in_flight, in_flight);
    }
    /// Delivers the oldest message (or loses it when `lose` says so).
    void DeliverOne(const std::function<bool(const LogMessage&)>& lose = {}) {
        auto [to, m] = std::move(wire.front());
        wire.pop_front();
        if (!lose || !lose(m)) {
            Take(to, node[to]->receive(SsT0, m));
        }
    }
    void DeliverAll(const std::function<bool(const LogMessage&)>& lose = {}) {
        for (int guard = 0; !wire.empty() && guard < 100000; ++guard) {
            DeliverOne(lose);
        }
    }
    void Heartbeat() { Take(0, node[0]->timer_fired(SsT0, LogTimer::Heartbeat)); }
    /// Heartbeats (and deliveries) until the follower holds the leader's snapshot, at most `n`.
    bool CatchUp(int n = 200) {
        for (int i = 0; i < n && !Installed(); ++i) {
            DeliverAll();
            if (!Installed()) {
                Heartbeat();
            }
        }
        DeliverAll();
        return Installed();
    }
    bool Installed() const { return node[1]->snapshot().lsn == SsL(1, 250); }
    /// Offsets of the chunks sent from the `from`-th on.
    std::size_t Starts() const {  // chunks of offset 0 sent (a transfer from its start)
        return static_cast<std::size_t>(std::count_if(
            chunks.begin(), chunks.end(), [](const InstallSnapshot& c) { return c.offset == 0; }));
    }
    std::vector<std::uint64_t> OffsetsSince(std::size_t from) const {
        std::vector<std::uint64_t> out;
        for (std::size_t i = from; i < chunks.size(); ++i) {
            out.push_back(chunks[i].offset);
        }
        return out;
    }
};

/// Node 0 holds the snapshot (term 1) and leads term 2; node 1 is empty. After the sync round,
/// the leader streams the snapshot to node 1 (its first window is in flight on return).
std::unique_ptr<SsNet> SsStart(PlantedLogBug bug = PlantedLogBug::None) {
    auto net = std::make_unique<SsNet>();
    net->node[0] = std::make_unique<ReplicatedLog>(
        SsConfig(0, bug), RecoveredLog{{}, LogMeta{Term{1}, SsL(1, 250)}, SsSnapshot()});
    net->node[1] = std::make_unique<ReplicatedLog>(SsConfig(1, bug), RecoveredLog{});
    net->Take(0, net->node[0]->start(SsT0));
    net->Take(1, net->node[1]->start(SsT0));
    net->Take(0, net->node[0]->on_leadership(SsT0, SsLeads(0, 2)));
    net->DeliverOne();  // SyncRequest to node 1
    net->DeliverOne();  // its SyncResponse: sync done, the snapshot starts
    return net;
}

bool SsIsChunk(const LogMessage& m) {
    return std::holds_alternative<InstallSnapshot>(m.body);
}

/// The follower has the leader's state and takes a new entry by append.
void SsCheckCaughtUp(SsNet& net) {
    CHECK(net.node[1]->snapshot() == net.node[0]->snapshot());
    net.DeliverAll();
    REQUIRE(net.node[0]->role() == LogRole::LeaderActive);
    net.Take(0, net.node[0]->propose(SsT0, SsL(2, 1), "after", "snapshot"));
    net.DeliverAll();
    net.Heartbeat();  // the follower learns the commit point
    net.DeliverAll();
    CHECK(net.node[0]->commit_lsn() == SsL(2, 1));
    CHECK(net.node[1]->commit_lsn() == SsL(2, 1));
    CHECK(net.node[1]->last_lsn() == SsL(2, 1));
    CHECK(net.node[0]->check_invariants().empty());
    CHECK(net.node[1]->check_invariants().empty());
}

}  // namespace

TEST_CASE("snapshot stream: never more than the window of chunks in flight", "[snapshot-stream]") {
    auto net = SsStart();
    REQUIRE(net->chunks.size() == SsWindow);  // the first window, no more
    net->DeliverAll();
    CHECK(net->Installed());
    CHECK(net->max_chunks_in_flight <= SsWindow);
    CHECK(net->chunks.size() == SsSnapshotEntries / SsChunkEntries);  // each chunk sent once
    CHECK(net->Starts() == 1);
    CHECK(net->node[1]->counters().snapshots_installed == 1);
    CHECK(net->node[1]->counters().protocol_violation_alarms == 0);
    SsCheckCaughtUp(*net);
}

TEST_CASE("snapshot stream: the planted IgnoreSnapshotWindow is caught", "[snapshot-stream]") {
    // The canary of the window check above: the whole snapshot at once, as before streaming.
    auto net = SsStart(PlantedLogBug::IgnoreSnapshotWindow);
    net->DeliverAll();
    CHECK(net->Installed());  // it still arrives here (the test's wire has no bound)...
    CHECK(net->max_chunks_in_flight > SsWindow);  // ...but the window is exceeded
}

TEST_CASE("snapshot stream: a lost chunk is sent again from the follower's offset",
          "[snapshot-stream]") {
    SECTION("a chunk in the middle: the gap asks for it") {
        auto net = SsStart();
        bool lost = false;
        net->DeliverAll([&](const LogMessage& m) {
            if (!lost && SsIsChunk(m) && std::get<InstallSnapshot>(m.body).offset == 50) {
                lost = true;
                return true;
            }
            return false;
        });
        REQUIRE(lost);
        CHECK(net->Installed());  // no heartbeat needed: the gap was reported at once
        CHECK(net->max_chunks_in_flight <= SsWindow);
        // Resumed, not restarted: after the first chunk of offset 50, nothing before it again.
        std::size_t first = 0;
        while (net->chunks[first].offset != 50) {
            ++first;
        }
        for (std::uint64_t offset : net->OffsetsSince(first)) {
            CHECK(offset >= 50);
        }
        CHECK(net->chunks.size() < 2 * SsSnapshotEntries / SsChunkEntries);
        SsCheckCaughtUp(*net);
    }
    SECTION("the last chunk: the heartbeat notices the stall") {
        auto net = SsStart();
        bool lost = false;
        net->DeliverAll([&](const LogMessage& m) {
            if (!lost && SsIsChunk(m) && std::get<InstallSnapshot>(m.body).done) {
                lost = true;
                return true;
            }
            return false;
        });
        REQUIRE(lost);
        CHECK_FALSE(net->Installed());
        net->Heartbeat();  // progress since the last one (none before)
        net->DeliverAll();
        const std::size_t before = net->chunks.size();
        const auto retransmissions = net->node[0]->counters().retransmissions;
        net->Heartbeat();  // a whole period without progress: send again from the acked offset
        CHECK(net->node[0]->counters().retransmissions > retransmissions);
        CHECK(net->OffsetsSince(before) == std::vector<std::uint64_t>{190});
        net->DeliverAll();
        CHECK(net->Installed());
        SsCheckCaughtUp(*net);
    }
    SECTION("every message lost half of the time: it still arrives, resumed") {
        auto net = SsStart();
        std::uint64_t n = 0;
        const auto lossy = [&](const LogMessage&) { return (++n * 2654435761U) % 7 < 3; };
        for (int i = 0; i < 400 && !net->Installed(); ++i) {
            net->DeliverAll(lossy);
            net->Heartbeat();
        }
        net->DeliverAll();
        CHECK(net->Installed());
        CHECK(net->max_chunks_in_flight <= SsWindow);
    }
}

TEST_CASE("snapshot stream: a reconnection resumes at the acknowledged offset",
          "[snapshot-stream]") {
    auto net = SsStart();
    for (int i = 0; i < 30; ++i) {  // part of the snapshot arrives and is acknowledged
        net->DeliverOne();
    }
    REQUIRE_FALSE(net->Installed());
    // The connection drops: what was in flight is gone.
    net->wire.clear();
    net->Take(0, net->node[0]->peer_down(SsT0, NodeId{1}));
    const std::size_t before = net->chunks.size();
    std::size_t held = 0;
    for (const auto& c : net->chunks) {
        held = std::max<std::size_t>(held, c.offset);  // upper bound of what node 1 holds
    }
    net->Take(0, net->node[0]->peer_up(SsT0, NodeId{1}));
    REQUIRE(net->chunks.size() > before);
    CHECK(net->chunks[before].offset > 0);  // not from the start
    CHECK(net->chunks[before].offset <= held);
    CHECK(net->CatchUp());
    CHECK(net->Starts() == 1);
    CHECK(net->max_chunks_in_flight <= SsWindow);
    SsCheckCaughtUp(*net);
}

TEST_CASE("snapshot stream: a restarted follower is sent the snapshot from its start",
          "[snapshot-stream]") {
    auto net = SsStart();
    for (int i = 0; i < 30; ++i) {
        net->DeliverOne();
    }
    REQUIRE_FALSE(net->Installed());
    net->wire.clear();
    net->Take(0, net->node[0]->peer_down(SsT0, NodeId{1}));
    // Node 1 restarts: what it collected was in memory only.
    net->node[1] =
        std::make_unique<ReplicatedLog>(SsConfig(1), RecoveredLog{{}, LogMeta{Term{2}, kNoLsn}});
    net->Take(1, net->node[1]->start(SsT0));
    net->Take(0, net->node[0]->peer_up(SsT0, NodeId{1}));
    const std::size_t before = net->chunks.size();
    net->DeliverAll();  // the chunk at the acked offset: a gap for node 1, which asks from 0
    bool from_start = false;
    for (std::uint64_t offset : net->OffsetsSince(before)) {
        from_start = from_start || offset == 0;
    }
    CHECK(from_start);
    CHECK(net->CatchUp());
    CHECK(net->max_chunks_in_flight <= SsWindow);
    SsCheckCaughtUp(*net);
}

TEST_CASE("snapshot stream: bad chunks are refused, counted, never installed",
          "[snapshot-stream]") {
    const auto violations = [](const SsNet& net, LogViolationKind k) {
        return net.node[1]->counters().violations_by_kind[static_cast<std::size_t>(k)];
    };
    SECTION("an entry changed in flight: the checksum refuses the snapshot") {
        auto net = SsStart();
        bool changed = false;
        for (int guard = 0; !net->wire.empty() && guard < 10000; ++guard) {
            auto& [to, m] = net->wire.front();
            if (auto* c = std::get_if<InstallSnapshot>(&m.body); c && c->offset == 70 && !changed) {
                c->entries[3].value = "forged";
                changed = true;
            }
            net->DeliverOne();
        }
        REQUIRE(changed);
        CHECK_FALSE(net->Installed());
        CHECK(violations(*net, LogViolationKind::SnapshotChecksum) == 1);
        CHECK(net->node[1]->snapshot().len == 0);
        // The leader's honest copy arrives after its stall is noticed (from the start: the
        // follower dropped what it had collected).
        CHECK(net->CatchUp());
        SsCheckCaughtUp(*net);
    }
    SECTION("hand-made chunks: wrong count, disorder, a gap, an absurd length") {
        ReplicatedLog f(SsConfig(1), RecoveredLog{{}, LogMeta{Term{2}, kNoLsn}});
        f.start(SsT0);
        const Snapshot s = SsSnapshot();
        const auto send = [&](InstallSnapshot c) {
            return f.receive(SsT0, LogMessage{NodeId{0}, Term{2}, std::move(c)});
        };
        InstallSnapshot first = testing::SnapshotChunk(s.lsn, s.len, s.entries, 0, 10);
        auto a = send(first);
        auto acks = testing::SentBodies<SnapshotAck>(a, NodeId{0});
        REQUIRE(acks.size() == 1);
        CHECK(acks[0] == SnapshotAck{s.lsn, s.len, 10, false, false});
        // A gap: dropped, one resend asked from 10, and no more for the same gap.
        InstallSnapshot gap = testing::SnapshotChunk(s.lsn, s.len, s.entries, 30, 10);
        acks = testing::SentBodies<SnapshotAck>(send(gap), NodeId{0});
        CHECK(acks == std::vector<SnapshotAck>{SnapshotAck{s.lsn, s.len, 10, false, true}});
        CHECK(testing::SentBodies<SnapshotAck>(send(gap), NodeId{0}).empty());
        CHECK(f.counters().dropped_by_reason[static_cast<std::size_t>(
                  LogDropReason::SnapshotChunkOutOfOrder)] == 2);
        // A duplicate: says where it is.
        acks = testing::SentBodies<SnapshotAck>(send(first), NodeId{0});
        CHECK(acks == std::vector<SnapshotAck>{SnapshotAck{s.lsn, s.len, 10, false, false}});
        // Entries out of order: refused, the partial snapshot dropped.
        InstallSnapshot disorder = testing::SnapshotChunk(s.lsn, s.len, s.entries, 10, 10);
        std::swap(disorder.entries[0], disorder.entries[1]);
        send(disorder);
        CHECK(f.counters().violations_by_kind[static_cast<std::size_t>(
                  LogViolationKind::SnapshotNotOrdered)] == 1);
        // A last chunk that ends before the announced count.
        send(first);
        InstallSnapshot early = testing::SnapshotChunk(s.lsn, s.len, s.entries, 10, 10);
        early.done = true;
        send(early);
        CHECK(f.last_violation().kind == LogViolationKind::SnapshotChunkInconsistent);
        // More entries than the history's length; an absurd length.
        InstallSnapshot many = first;
        many.count = s.len + 1;
        send(many);
        CHECK(f.last_violation().kind == LogViolationKind::SnapshotTooManyEntries);
        InstallSnapshot absurd = first;
        absurd.len = std::uint64_t{1} << 50;
        send(absurd);
        CHECK(f.last_violation().kind == LogViolationKind::SnapshotAbsurdLength);
        CHECK(f.snapshot().len == 0);
        CHECK(f.counters().snapshots_installed == 0);
        CHECK(f.check_invariants().empty());
    }
    SECTION("an acknowledgement beyond the snapshot is dropped") {
        auto net = SsStart();
        const auto dropped = net->node[0]->counters().dropped_by_reason[static_cast<std::size_t>(
            LogDropReason::SnapshotAckOutOfRange)];
        const Snapshot s = SsSnapshot();
        net->Take(0, net->node[0]->receive(
                         SsT0, LogMessage{NodeId{1}, Term{2},
                                          SnapshotAck{s.lsn, s.len, s.len, false, false}}));
        CHECK(net->node[0]->counters().dropped_by_reason[static_cast<std::size_t>(
                  LogDropReason::SnapshotAckOutOfRange)] == dropped + 1);
        CHECK(net->CatchUp());
    }
}

TEST_CASE("snapshot stream: a new leader fetches a source's snapshot in a window",
          "[snapshot-stream]") {
    // Node 1 holds the snapshot and leads nothing; node 0, empty, leads term 2 and fetches.
    SsNet net;
    net.node[0] = std::make_unique<ReplicatedLog>(SsConfig(0), RecoveredLog{});
    net.node[1] = std::make_unique<ReplicatedLog>(
        SsConfig(1), RecoveredLog{{}, LogMeta{Term{1}, SsL(1, 250)}, SsSnapshot()});
    net.Take(0, net.node[0]->start(SsT0));
    net.Take(1, net.node[1]->start(SsT0));
    net.Take(0, net.node[0]->on_leadership(SsT0, SsLeads(0, 2)));
    bool lost = false;
    net.DeliverAll([&](const LogMessage& m) {
        if (!lost && SsIsChunk(m) && std::get<InstallSnapshot>(m.body).offset == 100) {
            lost = true;
            return true;
        }
        return false;
    });
    REQUIRE(lost);
    CHECK(net.max_chunks_in_flight <= SsWindow);
    for (const auto& c : net.chunks) {
        CHECK(c.fetch);
    }
    CHECK(net.node[0]->snapshot() == net.node[1]->snapshot());
    CHECK(net.node[0]->role() == LogRole::LeaderActive);
    CHECK(net.Starts() == 1);
    CHECK(net.node[0]->check_invariants().empty());
}

TEST_CASE("snapshot stream: a fetch whose last chunk is lost asks again at the sync retry",
          "[snapshot-stream]") {
    SsNet net;
    net.node[0] = std::make_unique<ReplicatedLog>(SsConfig(0), RecoveredLog{});
    net.node[1] = std::make_unique<ReplicatedLog>(
        SsConfig(1), RecoveredLog{{}, LogMeta{Term{1}, SsL(1, 250)}, SsSnapshot()});
    net.Take(0, net.node[0]->start(SsT0));
    net.Take(1, net.node[1]->start(SsT0));
    net.Take(0, net.node[0]->on_leadership(SsT0, SsLeads(0, 2)));
    bool lost = false;
    net.DeliverAll([&](const LogMessage& m) {
        if (!lost && SsIsChunk(m) && std::get<InstallSnapshot>(m.body).done) {
            lost = true;
            return true;
        }
        return false;
    });
    REQUIRE(lost);
    REQUIRE(net.node[0]->role() == LogRole::LeaderPassive);
    const auto retry = [&] { net.Take(0, net.node[0]->timer_fired(SsT0, LogTimer::SyncRetry)); };
    retry();  // progress since the last retry: nothing asked
    const std::size_t before = net.chunks.size();
    CHECK(net.wire.empty());
    retry();  // a whole period without progress: a resend from the held offset
    REQUIRE(net.wire.size() == 1);
    CHECK(std::get<SnapshotAck>(net.wire.front().second.body) ==
          SnapshotAck{SsL(1, 250), 250, 190, true, true});
    net.DeliverAll();
    CHECK(net.OffsetsSince(before) == std::vector<std::uint64_t>{190});
    CHECK(net.node[0]->snapshot() == net.node[1]->snapshot());
    CHECK(net.node[0]->role() == LogRole::LeaderActive);
    CHECK(net.Starts() == 1);
}
