// SPDX-License-Identifier: Apache-2.0
// Hostile-peer fuzzer ("no input wedges or crashes a node"): well-formed messages with
// arbitrary field values, from any node id, handed to Elector::receive and ReplicatedLog::receive
// inside the simulator, next to the honest traffic of a running cluster with a client workload.
//
// What is asserted, for a fixed budget of seeds:
// - always: no abort (a failed CONCLAVE_CHECK or Term::next() wrap kills the test binary), no
//   exception, no sanitizer report (under ASan/UBSan), and no local log check or driver check
//   failing (LogCoreCheck, LogDriver): a node's own invariants hold whatever it is sent;
// - when the forged messages carry a non-member sender id: no violation at all (the cluster's
//   safety invariants hold) and the cluster still elects a leader.
// A forged message from a member id is a member that lies: the safety invariants (one leader per
// term, committed prefixes agree, no acknowledged entry lost) cannot hold against it (SECURITY.md:
// peers are authenticated; a peer holding valid credentials is trusted), so only the first group
// of properties is asserted there.
#include <catch2/catch.hpp>

#include <map>

#include "conclave/codec/json.hpp"
#include "conclave/codec/log_codec.hpp"
#include "conclave/sim/invariants.hpp"
#include "conclave/sim/simulator.hpp"

using namespace conclave;
using namespace conclave::sim;
using namespace conclave::replication;

namespace {

#ifdef SIM_TEST_LIGHT
constexpr std::uint64_t kSeeds = 6;
#else
constexpr std::uint64_t kSeeds = 24;
#endif
// The member fuzzer runs its 24 seeds in every build (each run now uses its whole budget: a
// violation is recorded, not the end of the run).
constexpr std::uint64_t kMemberSeeds = 24;
constexpr std::int64_t kRunMs = 3000;
constexpr std::int64_t kInjectEveryMs = 3;

struct Fuzzer {
    Simulator& sim;
    Rng& rng;
    bool members;  // forge member ids (a lying peer) or non-member ids (an unauthenticated one)
    std::uint64_t codec_rejected = 0;
    std::uint64_t injected = 0;
    std::uint64_t snapshot_chunks = 0;  // InstallSnapshot frames that reached a log core

    std::uint64_t Pick(std::initializer_list<std::uint64_t> choices) {
        const auto i = static_cast<std::size_t>(rng.below(choices.size()));
        return *(choices.begin() + static_cast<std::ptrdiff_t>(i));
    }

    NodeId From() {
        const auto n = sim.size();
        if (members) {
            return NodeId{static_cast<std::uint16_t>(rng.below(n))};
        }
        // Ids the mesh could carry (below kMaxClusterSize) but that name no member.
        return NodeId{static_cast<std::uint16_t>(n + rng.below(kMaxClusterSize - n))};
    }

    // A term near what the cluster holds, or anywhere (including values the codec refuses).
    Term AnyTerm(NodeId to) {
        const std::uint64_t base = sim.state(to) ? sim.state(to)->term.value : 0;
        switch (rng.below(6)) {
            case 0:
                return Term{0};
            case 1:
                return Term{base};
            case 2:
                return Term{base + 1 + rng.below(3)};
            case 3:
                return Term{base > 0 ? base - 1 : 0};
            case 4:
                return Term{Pick({kTermLimit - 1, kTermLimit, ~std::uint64_t{0}, 1U << 31})};
            default:
                return Term{rng.next()};
        }
    }

    // An LSN the target holds (exactly, or one counter off), or anything.
    Lsn AnyLsn(NodeId to, Term term) {
        const ReplicatedLog* log = sim.log(to);
        if (log && !log->entries().empty() && rng.below(3) != 0) {
            const auto& e = log->entries();
            Lsn l = e[static_cast<std::size_t>(rng.below(e.size()))].lsn;
            if (rng.below(3) == 0) {
                l.counter += rng.below(3);
                l.counter -= rng.below(2) <= l.counter ? rng.below(2) : 0;
            }
            return l;
        }
        switch (rng.below(4)) {
            case 0:
                return Lsn{};
            case 1:
                return Lsn{term, rng.below(5)};
            case 2:
                return Lsn{Term{term.value > 0 ? term.value - 1 : 0}, rng.below(50)};
            default:
                return Lsn{Term{rng.next()}, rng.next()};
        }
    }

    std::vector<Entry> AnyEntries(NodeId to, Term term) {
        std::vector<Entry> out;
        const ReplicatedLog* log = sim.log(to);
        const auto count = rng.below(4);
        std::size_t start = 0;
        if (log && !log->entries().empty()) {
            start = static_cast<std::size_t>(rng.below(log->entries().size()));
        }
        for (std::uint64_t i = 0; i < count; ++i) {
            Entry e;
            if (log && start + i < log->entries().size() && rng.below(2) == 0) {
                e = log->entries()[start + i];  // an entry it holds, maybe altered
                if (rng.below(2) == 0) {
                    e.value += "forged";
                }
            } else {
                e.lsn = AnyLsn(to, term);
                if (!is_sync_point(e.lsn) || rng.below(4) == 0) {
                    e.key = "k" + std::to_string(rng.below(10));
                    e.value = std::string(static_cast<std::size_t>(rng.below(8)), 'x');
                }
            }
            out.push_back(std::move(e));
        }
        return out;
    }

    elector::Message ElectorMessage(NodeId to) {
        elector::Message m;
        m.from = From();
        m.term = AnyTerm(to);
        switch (rng.below(8)) {
            case 0:
                m.body = elector::ScoutingRequest{rng.below(4) == 0 ? rng.next() : rng.below(20)};
                break;
            case 1:
                m.body = elector::ScoutingResponse{rng.below(20), rng.below(2) == 0};
                break;
            case 2:
                m.body = elector::ElectionProposal{rng.below(2) == 0};
                break;
            case 3: {
                const auto refusal = static_cast<elector::Refusal>(rng.below(5));
                m.body = elector::ElectionResponse{rng.below(2) == 0, refusal, AnyTerm(to)};
                break;
            }
            case 4:
                m.body = elector::LeaderHeartbeat{AnyLsn(to, m.term)};
                break;
            case 5:
                m.body = elector::HeartbeatAck{};
                break;
            case 6:
                m.body = elector::HeartbeatResponse{};
                break;
            default: {
                std::optional<NodeId> successor;
                if (rng.below(2) == 0) {
                    successor = NodeId{static_cast<std::uint16_t>(rng.below(kMaxClusterSize))};
                }
                m.body = elector::LeadershipCession{successor};
                break;
            }
        }
        return m;
    }

    // A forged InstallSnapshot chunk: chunks out of order, wrong or huge offsets and
    // declared lengths, entries that do not fit or are not ordered, a snapshot at an LSN at or
    // below the target's commit point, the fetch flag either way (the envelope's term and sender
    // already cover stale terms and non-leaders).
    InstallSnapshot AnySnapshotChunk(NodeId to, Term t) {
        const ReplicatedLog* log = sim.log(to);
        InstallSnapshot s;
        std::uint64_t held = 0;  // length of the target's log
        if (log) {
            held = log->snapshot().len + log->entries().size();
        }
        switch (rng.below(4)) {
            case 0:  // at the target's commit point or below, with its length or one off
                s.lsn = log ? log->commit_lsn() : Lsn{};
                s.len = held > 0 ? held - rng.below(2) : rng.below(3);
                break;
            case 1:  // huge declared length
                s.lsn = AnyLsn(to, t);
                s.len = Pick({std::uint64_t{1} << 40, (std::uint64_t{1} << 48) + 1,
                              ~std::uint64_t{0}, rng.next()});
                break;
            default:  // ahead of the target
                s.lsn = AnyLsn(to, t);
                s.len = held + 1 + rng.below(20);
                break;
        }
        switch (rng.below(4)) {
            case 0:
                s.offset = 0;
                break;
            case 1:
                s.offset = rng.below(4);  // out of order, or the next chunk of one begun before
                break;
            case 2:
                s.offset = s.len > 0 ? s.len - 1 : 0;
                break;
            default:
                s.offset = rng.next();
                break;
        }
        s.entries = AnyEntries(to, t);
        if (rng.below(4) == 0) {  // an oversized chunk: many large values
            for (std::uint64_t i = 0; i < 8; ++i) {
                s.entries.push_back(Entry{Lsn{t, 1 + rng.below(100)}, "big" + std::to_string(i),
                                          std::string(60000, 'x')});
            }
        }
        // The entry count and checksum of the whole snapshot: consistent with the chunk, a few
        // more (a chunk of a longer snapshot), or anything.
        const std::uint64_t end = s.offset + s.entries.size();
        s.count = Pick({end, end + 1 + rng.below(40), rng.next()});
        s.done = s.count == end && rng.below(4) != 0;
        s.crc = rng.below(2) == 0 ? 0U : static_cast<std::uint32_t>(rng.next());
        s.fetch = rng.below(3) == 0;
        return s;
    }

    // A forged SnapshotAck: any offset (beyond the snapshot too), a resend or not, for a
    // snapshot the target may be sending or not.
    SnapshotAck AnySnapshotAck(NodeId to, Term t) {
        const ReplicatedLog* log = sim.log(to);
        SnapshotAck a;
        const bool its_own = log && log->snapshot().len > 0 && rng.below(2) == 0;
        a.lsn = its_own ? log->snapshot().lsn : AnyLsn(to, t);
        a.len = its_own ? log->snapshot().len : rng.below(100);
        a.offset = Pick({std::uint64_t{0}, rng.below(a.len + 1), a.len, a.len + 1, rng.next()});
        a.fetch = rng.below(2) == 0;
        a.resend = rng.below(2) == 0;
        return a;
    }

    LogMessage LogMsg(NodeId to) {
        LogMessage m;
        m.from = From();
        m.term = AnyTerm(to);
        const Term t = m.term;
        switch (rng.below(9)) {
            case 0:
                m.body = SyncRequest{};
                break;
            case 1:
                m.body = SyncResponse{AnyLsn(to, t), AnyLsn(to, t)};
                break;
            case 2: {
                Append a{AnyLsn(to, t), AnyEntries(to, t), AnyLsn(to, t)};
                m.body = std::move(a);
                break;
            }
            case 3:
                m.body = AppendAck{rng.below(2) == 0, AnyLsn(to, t), AnyLsn(to, t), AnyLsn(to, t)};
                break;
            case 4:
                m.body = FetchRequest{
                    AnyLsn(to, t), AnyLsn(to, t),
                    static_cast<std::uint32_t>(rng.below(4) == 0 ? rng.next() : rng.below(8))};
                break;
            case 5:
                m.body = FetchResponse{AnyLsn(to, t), AnyEntries(to, t), AnyLsn(to, t)};
                break;
            case 6:
                m.body = AnySnapshotAck(to, t);
                break;
            default:
                m.body = AnySnapshotChunk(to, t);
                break;
        }
        return m;
    }

    // Mostly what the decoder lets through (a forged frame off the wire); sometimes the raw
    // value, to prove that the cores refuse out-of-range terms on their own.
    void InjectOne() {
        const NodeId to{static_cast<std::uint16_t>(rng.below(sim.size()))};
        const bool raw = rng.below(8) == 0;
        if (rng.below(2) == 0) {
            elector::Message m = ElectorMessage(to);
            try {
                m = codec::decode_cbor(codec::encode_cbor(m));
            } catch (const codec::DecodeError&) {
                ++codec_rejected;
                if (!raw) {
                    return;
                }
            }
            if (sim.inject(to, m)) {
                ++injected;
            }
        } else {
            LogMessage m = LogMsg(to);
            const bool chunk = std::holds_alternative<InstallSnapshot>(m.body);
            try {
                std::vector<std::uint8_t> bytes = codec::encode_log_cbor(m);
                if (chunk && !bytes.empty() && rng.below(4) == 0) {
                    // A damaged frame (what a bad checksum would catch): one byte flipped.
                    bytes[static_cast<std::size_t>(rng.below(bytes.size()))] ^=
                        static_cast<std::uint8_t>(1U << rng.below(8));
                }
                m = codec::decode_log_cbor(bytes);
            } catch (const codec::DecodeError&) {
                ++codec_rejected;
                if (!raw) {
                    return;
                }
            }
            if (sim.inject_log(to, m)) {
                ++injected;
                snapshot_chunks += std::holds_alternative<InstallSnapshot>(m.body) ? 1U : 0U;
            }
        }
    }
};

struct Outcome {
    std::optional<Violation> violation;  // non-members: the one that stopped the run
    // Members (SimOptions::keep_running_after_violations): every violation, by kind, the first
    // one and when it happened (where the run used to stop), and how far the run went.
    std::map<ViolationKind, std::uint64_t> violation_counts;
    std::optional<Violation> first_violation;
    std::int64_t first_violation_ms = -1;
    std::int64_t reached_ms = 0;
    std::uint64_t events = 0;
    bool had_leader = false;
    std::uint64_t injected = 0;
    std::uint64_t snapshot_chunks = 0;
    std::uint64_t codec_rejected = 0;
    std::uint64_t alarms = 0;  // protocol violations the log cores detected and dropped
};

Outcome Run(std::uint64_t seed, bool members) {
    SimOptions o;
    o.seed = seed;
    o.log = true;
    o.keep_running_after_violations = members;
    // Half the runs compact: forged InstallSnapshot chunks then meet logs that hold
    // snapshots and leaders that send them.
    if (seed % 2 == 1) {
        o.log_options.config.compact_threshold = 16;
        o.log_options.config.compact_retain = 4;
        o.log_options.config.max_snapshot_bytes = 256 << 10;  // forged big chunks go beyond
    }
    Simulator sim(o);
    Fuzzer fuzz{sim, sim.rng(), members};
    sim.start_all();
    Outcome out;
    for (std::int64_t t = kInjectEveryMs; t <= kRunMs; t += kInjectEveryMs) {
        if (!sim.run_until(Millis{t})) {
            break;
        }
        out.reached_ms = t;
        if (out.first_violation_ms < 0 && !sim.recorded_violations().empty()) {
            out.first_violation_ms = t;
        }
        fuzz.InjectOne();
        for (std::size_t n = 0; n < sim.size(); ++n) {
            const elector::ElectorState* s = sim.state(NodeId{static_cast<std::uint16_t>(n)});
            out.had_leader = out.had_leader || (s && s->role == elector::Role::Leader);
        }
    }
    if (members) {
        sim.run_until(Millis{kRunMs});  // records a violation the last injection caused
    }
    out.violation = sim.violation();
    out.violation_counts = sim.violation_counts();
    if (!sim.recorded_violations().empty()) {
        out.first_violation = sim.recorded_violations().front();
    }
    out.events = sim.stats().events;
    out.injected = fuzz.injected;
    out.snapshot_chunks = fuzz.snapshot_chunks;
    out.codec_rejected = fuzz.codec_rejected;
    for (const ReplicatedLog* log : sim.logs()) {
        out.alarms += log ? log->counters().protocol_violation_alarms : 0;
    }
    return out;
}

}  // namespace

TEST_CASE("hostile input from non-members: no crash, every invariant holds, a leader is elected",
          "[.][hostile]") {
    std::uint64_t injected = 0;
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
        const Outcome r = Run(seed, /*members=*/false);
        INFO("seed " << seed << ": "
                     << (r.violation ? std::string(to_string(r.violation->kind)) + ": " +
                                           r.violation->detail
                                     : std::string("no violation")));
        CHECK_FALSE(r.violation.has_value());
        CHECK(r.had_leader);
        CHECK(r.alarms == 0);  // a non-member never gets as far as the protocol checks
        injected += r.injected;
    }
    CHECK(injected > kSeeds * 100);
}

// Root cause of the std::bad_alloc the member fuzzer hit: the simulator's History kept votes and
// leaders in vectors indexed by term, so a node adopting a forged term near 2^63 (a value the
// protocol allows) made it resize a vector to ~term * nodes bytes. The history is now sparse; this
// pins that it records and checks at such terms (each check still bites there) in bounded memory.
TEST_CASE("History records votes, leaders and LSNs at terms near 2^63 without allocating by term",
          "[history]") {
    const Term high{kTermLimit - 2};
    History h(3);
    elector::ElectorState follower;
    follower.role = elector::Role::Follower;
    follower.term = high;
    auto vote = [&](NodeId voter, NodeId candidate) {
        return h.after_step(
            voter, StepAction::HandleElectionProposal, follower,
            elector::Actions{elector::PersistState{elector::DurableState{high, candidate}}});
    };
    CHECK_FALSE(vote(NodeId{0}, NodeId{0}).has_value());
    // A second, different vote in the same huge term is still a double vote.
    const auto double_vote = vote(NodeId{0}, NodeId{1});
    REQUIRE(double_vote.has_value());
    CHECK(double_vote->kind == ViolationKind::DoubleVote);

    elector::ElectorState leader;
    leader.role = elector::Role::Leader;
    leader.term = high;
    // One vote of three: leading that term is a leader without quorum.
    const auto no_quorum = h.after_step(NodeId{0}, StepAction::ElectionResultFired, leader, {});
    REQUIRE(no_quorum.has_value());
    CHECK(no_quorum->kind == ViolationKind::LeaderWithoutQuorum);
    CHECK(h.leader_of(high) == NodeId{0});
    CHECK_FALSE(h.leader_of(Term{high.value - 1}).has_value());
    const auto two_leaders = h.after_step(NodeId{1}, StepAction::ElectionResultFired, leader, {});
    REQUIRE(two_leaders.has_value());
    CHECK(two_leaders->kind == ViolationKind::TwoLeadersInTerm);

    CHECK_FALSE(h.after_issue(NodeId{0}, Lsn{high, 7}, leader).has_value());
    const auto lsn = h.after_issue(NodeId{0}, Lsn{high, 7}, leader);
    REQUIRE(lsn.has_value());
    CHECK(lsn->kind == ViolationKind::LsnNotIncreasing);
    CHECK(h.hash() != History(3).hash());
}

// A run against a lying member does not stop at its first violation: it records every one
// (SimOptions::keep_running_after_violations) and goes on to the end of its budget, so the whole
// budget feeds the cores hostile input (stopping at the first covered about a third of it). The
// violations are safety violations of the cluster (expected against a liar, only counted) and
// LogAlarms (a log core detected and dropped a message no correct peer sends: its peers are
// supposed to be honest). Never a local check failing (LogCoreCheck: a failed CONCLAVE_CHECK or
// check_invariants(); LogDriver), never a crash, an abort or an exception.
TEST_CASE("hostile input from members: no crash, no local check fails, violations are alarmed",
          "[.][hostile-members]") {
    std::uint64_t injected = 0;
    std::uint64_t snapshot_chunks = 0;
    std::uint64_t rejected = 0;
    std::uint64_t alarms = 0;
    std::uint64_t alarmed_runs = 0;
    std::uint64_t events = 0;
    std::int64_t covered_ms = 0;
    std::int64_t covered_before_first_violation_ms = 0;
    std::map<ViolationKind, std::uint64_t> totals;
    for (std::uint64_t seed = 1; seed <= kMemberSeeds; ++seed) {
        const Outcome r = Run(seed, /*members=*/true);
        INFO("seed " << seed << ": first violation "
                     << (r.first_violation ? std::string(to_string(r.first_violation->kind)) +
                                                 ": " + r.first_violation->detail
                                           : std::string("none")));
        CHECK_FALSE(r.violation.has_value());  // absorbed: the run never stopped on one
        CHECK(r.reached_ms == kRunMs);         // ... and used its whole budget
        const auto count = [&](ViolationKind k) {
            const auto it = r.violation_counts.find(k);
            return it == r.violation_counts.end() ? std::uint64_t{0} : it->second;
        };
        CHECK(count(ViolationKind::LogCoreCheck) == 0);
        CHECK(count(ViolationKind::LogDriver) == 0);
        // Every alarm a log core raised (and counted) was seen by the run, and no other way.
        CHECK(count(ViolationKind::LogAlarm) == r.alarms);
        alarmed_runs += r.alarms > 0 ? 1 : 0;
        for (const auto& [kind, n] : r.violation_counts) {
            totals[kind] += n;
        }
        injected += r.injected;
        snapshot_chunks += r.snapshot_chunks;
        rejected += r.codec_rejected;
        alarms += r.alarms;
        events += r.events;
        covered_ms += r.reached_ms;
        covered_before_first_violation_ms +=
            r.first_violation_ms < 0 ? r.reached_ms : r.first_violation_ms;
    }
    // The fuzzer reaches the cores and the checks it targets: the decoder refuses out-of-range
    // values, and the log cores detect (and drop) contradictions of their logs.
    CHECK(injected > kMemberSeeds * 500);
    CHECK(snapshot_chunks > kMemberSeeds * 10);  // forged InstallSnapshot reached the cores
    CHECK(rejected > 0);
    CHECK(alarms > 0);
    CHECK(alarmed_runs > 0);
    std::string kinds;
    for (const auto& [kind, n] : totals) {
        kinds += " " + std::string(to_string(kind)) + "=" + std::to_string(n);
    }
    WARN("members: " << kMemberSeeds << " runs, " << covered_ms << " simulated ms of "
                     << kMemberSeeds * kRunMs << " covered (" << covered_before_first_violation_ms
                     << " before each run's first violation, where runs used to stop), " << events
                     << " events, " << injected << " injected (" << snapshot_chunks
                     << " InstallSnapshot), " << rejected << " refused by the codec, " << alarms
                     << " protocol-violation alarms in " << alarmed_runs
                     << " runs; violations:" << kinds);
}
