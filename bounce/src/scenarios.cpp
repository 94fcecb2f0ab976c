// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/scenarios.hpp"
#include "conclave/core/quorum.hpp"

#include <fmt/core.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "conclave/bounce/admin_client.hpp"
#include "conclave/bounce/cluster.hpp"
#include "conclave/bounce/poller.hpp"
#include "conclave/bounce/proposer.hpp"
#include "conclave/bounce/recorder.hpp"

namespace conclave::bounce {

namespace asio = boost::asio;

namespace {

/// How long the cluster may take to elect its first leader (process start-up included).
constexpr std::int64_t kStartupLeaderTimeoutMs = 15000;
/// How long a leaderless cluster may take to elect a new leader after a fault ends.
constexpr std::int64_t kRecoveryTimeoutMs = 10000;
/// Quiet time before the first fault, so the picture shows a steady state first.
constexpr std::int64_t kSettleBeforeMs = 1000;
/// Time to watch what happens after the fault ends.
constexpr std::int64_t kWatchAfterMs = 3000;
/// A graceful stop that takes longer than this ends with SIGKILL.
constexpr std::int64_t kStopTimeoutMs = 5000;
/// After the proposer stops: how long every live node may take to commit up to the last
/// acknowledged entry before the logs are checked as they are.
constexpr std::int64_t kCatchUpTimeoutMs = 10000;
/// crash-chaos: a killed node's downtime, and the time every node runs before the next SIGKILL.
constexpr std::int64_t kCrashDownMinMs = 100;
constexpr std::int64_t kCrashDownMaxMs = 1500;
constexpr std::int64_t kCrashUpMinMs = 100;
constexpr std::int64_t kCrashUpMaxMs = 1500;
/// rolling-replace: how long one step (the new node promoted, the old one removed) may take.
constexpr std::int64_t kReplaceStepTimeoutMs = 30000;
/// rolling-replace: client deadline of one GET or POST /members.
constexpr std::chrono::milliseconds kMembersRequestTimeout{2000};
/// rolling-replace: pause between two attempts of a refused promote or remove.
constexpr std::int64_t kMembersRetryMs = 100;

struct Run {
    asio::io_context& io;
    Cluster& cluster;
    Recorder& rec;
    const Options& options;
    RunResult& result;
    std::mt19937_64 random;
    std::set<NodeIndex> expecting_exit;  // nodes we asked to stop
    bool stopped = false;
    bool starting = true;                // before the first leader: a daemon exit is fatal
    std::string startup_failure;         // why the cluster could not start
    Proposer* proposer = nullptr;        // the metadata proposer (it runs only when started)
    std::optional<NodeIndex> disk_full;  // disk-full: the node whose disk filled
    /// The voters as far as the tool knows (changed by rolling-replace): a stable leader needs a
    /// majority of them.
    std::set<NodeIndex> voters = {};

    /// The initial members (the faults act on them; rolling-replace's new nodes come on top).
    std::size_t size() const { return cluster.members(); }
    std::int64_t hold_ms() const {
        const double s = options.duration_s.value_or(default_duration_s(options.scenario));
        return static_cast<std::int64_t>(s * 1000.0);
    }

    asio::awaitable<void> sleep(std::int64_t ms) {
        asio::steady_timer t(io, std::chrono::milliseconds(ms));
        co_await t.async_wait(asio::use_awaitable);
    }

    void set_link(DirectedLink l, LinkMode m) {
        if (cluster.proxy().mode(l) == m) {
            return;
        }
        cluster.proxy().set_mode(l, m);
        FaultEvent e;
        e.kind = FaultKind::SetLink;
        e.link = l;
        e.mode = m;
        rec.fault(e, /*batch=*/true);
    }
    void set_pair(NodeIndex a, NodeIndex b, LinkMode m) {
        set_link({a, b}, m);
        set_link({b, a}, m);
        rec.flush();
    }
    void set_one_way(DirectedLink l, LinkMode m) {
        set_link(l, m);
        rec.flush();
    }
    void isolate(NodeIndex b, LinkMode m) {
        for (NodeIndex other = 0; other < size(); ++other) {
            if (other != b) {
                set_link({b, other}, m);
                set_link({other, b}, m);
            }
        }
        rec.flush();
    }
    void heal_links() {
        for (NodeIndex a = 0; a < size(); ++a) {
            for (NodeIndex b = 0; b < size(); ++b) {
                if (a != b) {
                    set_link({a, b}, Pass{});
                }
            }
        }
        rec.flush();
    }
    void process_event(FaultKind kind, NodeIndex i) {
        FaultEvent e;
        e.kind = kind;
        e.node = i;
        rec.fault(e);
    }
    void kill(NodeIndex i) {
        cluster.kill(i);
        process_event(FaultKind::Kill, i);
    }
    void start(NodeIndex i) {
        cluster.start(i);
        process_event(FaultKind::Start, i);
    }
    void pause(NodeIndex i) {
        cluster.pause(i);
        process_event(FaultKind::Pause, i);
    }
    void resume(NodeIndex i) {
        cluster.resume(i);
        process_event(FaultKind::Resume, i);
    }
    void terminate(NodeIndex i) {
        expecting_exit.insert(i);
        cluster.terminate(i);
        process_event(FaultKind::Stop, i);
    }

    /// The effective leader, if a quorum (itself included) agrees on it and its term.
    std::optional<NodeIndex> stable_leader() const {
        const auto leader = rec.tracker().effective();
        if (!leader) {
            return std::nullopt;
        }
        std::size_t agree = 0;
        for (const Observation& o : rec.tracker().latest) {
            if (voters.count(o.node) == 0) {
                continue;
            }
            if (o.term == leader->term &&
                ((o.role == ObservedRole::Leader && o.node == leader->node) ||
                 (o.role == ObservedRole::Follower && o.leader == leader->node))) {
                agree += 1;
            }
        }
        if (!is_majority(agree, voters.size())) {
            return std::nullopt;
        }
        return leader->node;
    }

    asio::awaitable<std::optional<NodeIndex>> wait_for_leader(
        std::int64_t timeout_ms, std::optional<NodeIndex> other_than = std::nullopt) {
        const std::int64_t deadline = rec.now_ms() + timeout_ms;
        while (rec.now_ms() < deadline && startup_failure.empty()) {
            const auto leader = stable_leader();
            if (leader && leader != other_than) {
                co_return leader;
            }
            co_await sleep(Poller::kPeriod.count());
        }
        co_return std::nullopt;
    }

    asio::awaitable<bool> wait_exit(NodeIndex i, std::int64_t timeout_ms) {
        const std::int64_t deadline = rec.now_ms() + timeout_ms;
        while (cluster.running(i) && rec.now_ms() < deadline) {
            co_await sleep(20);
        }
        co_return !cluster.running(i);
    }

    /// Reaps processes that exited by themselves and reports them.
    asio::awaitable<void> watchdog() {
        while (!stopped) {
            for (const ProcessExit& e : cluster.reap()) {
                if (expecting_exit.erase(e.node) > 0) {
                    rec.note(node_name(e.node) + " stopped: " + e.description);
                    continue;
                }
                if (disk_full == e.node && !result.disk_full_exit) {
                    // Expected: out of service on a storage failure, exit status 1.
                    result.disk_full_exit = e.description;
                    rec.note(node_name(e.node) + " left after its disk filled: " + e.description);
                    if (e.description != "exited with status 1") {
                        result.warnings.push_back(
                            node_name(e.node) + " should exit with status 1 on a full disk, " +
                            e.description + "; log tail:\n" + cluster.log_tail(e.node, 8));
                    }
                    process_event(FaultKind::Stop, e.node);
                    continue;
                }
                const std::string text = node_name(e.node) + " exited by itself: " + e.description;
                rec.note(text);
                if (starting && startup_failure.empty()) {
                    startup_failure = text + "; log tail:\n" + cluster.log_tail(e.node, 8);
                }
                result.warnings.push_back(text + "; log tail:\n" + cluster.log_tail(e.node, 8));
                process_event(FaultKind::Stop, e.node);
            }
            co_await sleep(50);
        }
    }

    NodeIndex random_node() {
        return static_cast<NodeIndex>(
            std::uniform_int_distribution<std::size_t>(0, size() - 1)(random));
    }
    std::int64_t random_ms(std::int64_t low, std::int64_t high) {
        return std::uniform_int_distribution<std::int64_t>(low, high)(random);
    }
};

asio::awaitable<void> ping_pong(Run& r, NodeIndex a) {
    const NodeIndex b = (a + 1) % r.size();
    r.rec.note(fmt::format("ping-pong: cutting only {}-{} (leader {}) for {:.1f}s", node_name(a),
                           node_name(b), node_name(a), static_cast<double>(r.hold_ms()) / 1000));
    r.set_pair(a, b, Cut{});
    co_await r.sleep(r.hold_ms());
    r.heal_links();
    co_await r.sleep(kWatchAfterMs);
}

asio::awaitable<void> non_sticky(Run& r, NodeIndex a) {
    const NodeIndex b = (a + 1) % r.size();
    r.rec.note(fmt::format("non-sticky: isolating {} (leader {}) for {:.1f}s", node_name(b),
                           node_name(a), static_cast<double>(r.hold_ms()) / 1000));
    r.isolate(b, Cut{});
    co_await r.sleep(r.hold_ms());
    r.heal_links();
    co_await r.sleep(kWatchAfterMs);
}

asio::awaitable<void> leader_crash(Run& r, NodeIndex a) {
    r.rec.note("leader-crash: SIGKILL " + node_name(a));
    r.kill(a);
    const auto next = co_await r.wait_for_leader(kRecoveryTimeoutMs, a);
    r.result.new_leader_after_crash = next.has_value();
    if (!next) {
        r.result.warnings.push_back("no new leader within " + std::to_string(kRecoveryTimeoutMs) +
                                    " ms of the crash");
    }
    co_await r.sleep(r.hold_ms());
    r.rec.note("leader-crash: restarting " + node_name(a));
    r.start(a);
    co_await r.sleep(kWatchAfterMs);
}

asio::awaitable<void> disk_full(Run& r, NodeIndex a) {
    // The leader's disk fills while the proposer writes: its next log append fails (EFBIG), it
    // must hand over and exit 1; a new leader keeps every acknowledged entry (check_metadata).
    const std::uint64_t limit = r.cluster.fill_disk(a);
    r.disk_full = a;
    r.process_event(FaultKind::DiskFull, a);
    r.rec.note(
        fmt::format("disk-full: {}'s files may not grow past {} bytes", node_name(a), limit));
    const auto next = co_await r.wait_for_leader(kRecoveryTimeoutMs, a);
    r.result.new_leader_after_crash = next.has_value();
    if (!next) {
        r.result.warnings.push_back("no new leader within " + std::to_string(kRecoveryTimeoutMs) +
                                    " ms of the disk filling");
    }
    if (!co_await r.wait_exit(a, kStopTimeoutMs)) {
        r.result.warnings.push_back(node_name(a) + " did not exit within " +
                                    std::to_string(kStopTimeoutMs) + " ms of its disk filling");
        r.cluster.kill(a);
        r.process_event(FaultKind::Kill, a);
    }
    co_await r.sleep(r.hold_ms());
    r.rec.note("disk-full: space freed, restarting " + node_name(a));
    r.start(a);
    co_await r.sleep(kWatchAfterMs);
}

asio::awaitable<void> leader_pause(Run& r, NodeIndex a) {
    r.rec.note("leader-pause: SIGSTOP " + node_name(a));
    r.pause(a);
    co_await r.sleep(r.hold_ms());
    r.rec.note("leader-pause: SIGCONT " + node_name(a));
    r.resume(a);
    co_await r.sleep(kWatchAfterMs);
}

asio::awaitable<void> rolling_restart(Run& r, NodeIndex leader) {
    std::vector<NodeIndex> order;
    for (NodeIndex i = 0; i < r.size(); ++i) {
        if (i != leader) {
            order.push_back(i);
        }
    }
    order.push_back(leader);
    for (NodeIndex i : order) {
        r.rec.note("rolling-restart: stopping " + node_name(i));
        r.terminate(i);
        if (!co_await r.wait_exit(i, kStopTimeoutMs)) {
            r.result.warnings.push_back(node_name(i) + " did not stop within " +
                                        std::to_string(kStopTimeoutMs) + " ms of SIGTERM");
            r.expecting_exit.erase(i);
            r.cluster.kill(i);
        }
        r.start(i);
        co_await r.sleep(r.hold_ms());
        if (!co_await r.wait_for_leader(kRecoveryTimeoutMs)) {
            r.result.warnings.push_back("no leader within " + std::to_string(kRecoveryTimeoutMs) +
                                        " ms after restarting " + node_name(i));
        }
    }
    co_await r.sleep(kWatchAfterMs);
}

asio::awaitable<void> chaos(Run& r) {
    const std::int64_t end_ms = r.rec.now_ms() + r.hold_ms();
    const std::size_t max_down = (r.size() - 1) / 2;  // keep a quorum of processes alive
    auto down_count = [&] {
        std::size_t n = 0;
        for (NodeIndex i = 0; i < r.size(); ++i) {
            n += (!r.cluster.running(i) || r.cluster.node(i).paused) ? 1U : 0U;
        }
        return n;
    };
    while (r.rec.now_ms() < end_ms) {
        co_await r.sleep(r.random_ms(300, 1500));
        const std::int64_t dice = r.random_ms(0, 99);
        const NodeIndex a = r.random_node();
        NodeIndex b = r.random_node();
        if (b == a) {
            b = (a + 1) % r.size();
        }
        if (dice < 30) {
            const std::int64_t kind = r.random_ms(0, 2);
            if (kind == 0) {
                r.set_pair(a, b, Cut{});
            } else if (kind == 1) {
                r.set_one_way({a, b}, Blackhole{});
            } else {
                const auto latency = static_cast<std::uint32_t>(r.random_ms(20, 200));
                const auto jitter = static_cast<std::uint32_t>(r.random_ms(0, 50));
                r.set_pair(a, b, Delay{latency, jitter});
            }
        } else if (dice < 45) {
            r.isolate(a, Cut{});
        } else if (dice < 60) {
            if (r.cluster.running(a) && down_count() < max_down) {
                r.kill(a);
            }
        } else if (dice < 70) {
            if (r.cluster.running(a) && !r.cluster.node(a).paused && down_count() < max_down) {
                r.pause(a);
            }
        } else if (dice < 85) {
            r.heal_links();
        } else {
            for (NodeIndex i = 0; i < r.size(); ++i) {
                if (!r.cluster.running(i)) {
                    r.start(i);
                } else if (r.cluster.node(i).paused) {
                    r.resume(i);
                }
            }
        }
    }
    r.rec.note("chaos: healing everything");
    r.heal_links();
    for (NodeIndex i = 0; i < r.size(); ++i) {
        if (!r.cluster.running(i)) {
            r.start(i);
        } else if (r.cluster.node(i).paused) {
            r.resume(i);
        }
    }
    if (!co_await r.wait_for_leader(kRecoveryTimeoutMs)) {
        r.result.warnings.push_back("no leader within " + std::to_string(kRecoveryTimeoutMs) +
                                    " ms of healing the chaos");
    }
    co_await r.sleep(kWatchAfterMs);
}

/// crash-chaos: SIGKILL a random node (leader or not), restart it after a random downtime, let
/// every node run for a random time, again, until --duration has passed. The schedule (victims,
/// downtimes, uptimes) depends on --seed only. A node that exited by itself is restarted too.
asio::awaitable<void> crash_chaos(Run& r) {
    const std::int64_t end_ms = r.rec.now_ms() + r.hold_ms();
    r.rec.note(fmt::format(
        "crash-chaos: seed {}, SIGKILL a random node, down {}-{} ms, up {}-{} ms, for {:.1f}s",
        r.options.seed, kCrashDownMinMs, kCrashDownMaxMs, kCrashUpMinMs, kCrashUpMaxMs,
        static_cast<double>(r.hold_ms()) / 1000));
    while (r.rec.now_ms() < end_ms) {
        const NodeIndex victim = r.random_node();
        const std::int64_t down = r.random_ms(kCrashDownMinMs, kCrashDownMaxMs);
        const std::int64_t up = r.random_ms(kCrashUpMinMs, kCrashUpMaxMs);
        if (r.cluster.running(victim)) {
            r.kill(victim);
        }
        co_await r.sleep(down);
        for (NodeIndex i = 0; i < r.size(); ++i) {
            if (!r.cluster.running(i)) {
                r.start(i);
            }
        }
        co_await r.sleep(up);
    }
    if (!co_await r.wait_for_leader(kRecoveryTimeoutMs)) {
        r.result.warnings.push_back("no leader within " + std::to_string(kRecoveryTimeoutMs) +
                                    " ms of the last restart");
    }
    co_await r.sleep(kWatchAfterMs);
}

/// preferred: waits until the preferred node is the stable leader; false if it does not lead
/// within `timeout_ms`.
asio::awaitable<bool> wait_for_preferred(Run& r, NodeIndex preferred, std::int64_t timeout_ms) {
    const std::int64_t deadline = r.rec.now_ms() + timeout_ms;
    while (r.stable_leader() != preferred) {
        if (r.rec.now_ms() >= deadline || !r.startup_failure.empty()) {
            co_return false;
        }
        co_await r.sleep(Poller::kPeriod.count());
    }
    co_return true;
}

/// preferred: one round. SIGKILL the preferred node (it leads), wait for another leader, restart
/// it after --duration, and watch the window in which leadership should come back to it once.
asio::awaitable<void> preferred_round(Run& r, PreferredSummary& p) {
    const NodeIndex a = p.preferred;
    PreferredRound& round = p.rounds.emplace_back();
    r.rec.note(fmt::format("preferred: round {} of {}: SIGKILL {} (the preferred leader)",
                           p.rounds.size(), p.rounds_planned, node_name(a)));
    round.killed_ms = r.rec.now_ms();
    r.kill(a);
    if (!co_await r.wait_for_leader(kRecoveryTimeoutMs, a)) {
        r.result.warnings.push_back(fmt::format("round {}: no new leader within {} ms of the kill",
                                                p.rounds.size(), kRecoveryTimeoutMs));
    }
    co_await r.sleep(r.hold_ms());
    r.rec.note(fmt::format("preferred: restarting {}; watching {:.1f}s for the hand-back",
                           node_name(a), static_cast<double>(p.window_ms) / 1000));
    round.restarted_ms = r.rec.now_ms();
    r.start(a);
    co_await r.sleep(p.window_ms);
    round.watch_end_ms = r.rec.now_ms();
}

/// preferred: --rounds rounds, each once the preferred node leads (at start by the ranked
/// candidacy, later by the previous round's hand-back).
asio::awaitable<void> preferred(Run& r) {
    PreferredSummary& p = *r.result.preferred;
    const std::int64_t lead_timeout_ms = kRecoveryTimeoutMs + 2 * p.stability_ms;
    while (p.rounds.size() < p.rounds_planned) {
        if (!co_await wait_for_preferred(r, p.preferred, lead_timeout_ms)) {
            r.result.warnings.push_back(fmt::format(
                "{} did not lead within {} ms; {} of {} rounds ran", node_name(p.preferred),
                lead_timeout_ms, p.rounds.size(), p.rounds_planned));
            break;
        }
        co_await preferred_round(r, p);
    }
    co_await r.sleep(kWatchAfterMs);
}

/// rolling-replace: the node that leads as far as the polls show (the stable leader, else the
/// effective one: a poll that missed one follower's answer must not hide the leader).
std::optional<NodeIndex> current_leader(const Run& r) {
    if (const auto leader = r.stable_leader()) {
        return leader;
    }
    if (const auto leader = r.rec.tracker().effective()) {
        return leader->node;
    }
    return std::nullopt;
}

/// rolling-replace: the node to send membership requests to: the stable leader, else the
/// effective one, else a running voter (a follower answers 307, which is followed).
std::optional<NodeIndex> members_target(const Run& r) {
    if (const auto leader = current_leader(r); leader && r.cluster.running(*leader)) {
        return leader;
    }
    for (NodeIndex v : r.voters) {
        if (r.cluster.running(v)) {
            return v;
        }
    }
    return std::nullopt;
}

std::string describe_answer(const client::Outcome& h) {
    if (h.error) {
        return describe_failure(*h.error);
    }
    return fmt::format("{} {}", h.response->status, h.response->body.substr(0, 300));
}

/// POST /members {"op", "id"} to the leader, following at most 3 redirects.
asio::awaitable<client::Outcome> post_members(Run& r, const std::string& op, NodeIndex id) {
    const auto target = members_target(r);
    if (!target) {
        client::Outcome none;
        none.error.emplace(client::ErrorKind::Unreachable, client::Stage::Connect,
                           "no running voter to ask");
        co_return none;
    }
    const std::string body = nlohmann::json{{"op", op}, {"id", node_name(id)}}.dump();
    co_return co_await admin_call(r.cluster.node(*target).http, boost::beast::http::verb::post,
                                  "/members", body, kMembersRequestTimeout, /*follow=*/true);
}

/// GET /members on the leader (as members_target picks it): id -> "voter" | "learner".
asio::awaitable<std::optional<std::map<std::string, std::string>>> members_roles(Run& r) {
    const auto target = members_target(r);
    if (!target) {
        co_return std::nullopt;
    }
    const client::Outcome h =
        co_await admin_call(r.cluster.node(*target).http, boost::beast::http::verb::get, "/members",
                            "", kMembersRequestTimeout);
    if (h.error || h.response->status != 200) {
        co_return std::nullopt;
    }
    const nlohmann::json& doc = h.response->document;
    if (!doc.is_object() || !doc.contains("members") || !doc["members"].is_array()) {
        co_return std::nullopt;
    }
    std::map<std::string, std::string> roles;
    for (const auto& m : doc["members"]) {
        if (m.is_object() && m.contains("id") && m["id"].is_string() && m.contains("role") &&
            m["role"].is_string()) {
            roles[m["id"].get<std::string>()] = m["role"].get<std::string>();
        }
    }
    co_return roles;
}

/// Repeats POST /members {op, id} until it answers 200 or GET /members shows the change made
/// (an earlier attempt whose outcome was unknown may have committed it). Returns "" when done,
/// else why not (timeout, the new node exited).
asio::awaitable<std::string> change_membership(Run& r, const std::string& op, NodeIndex id,
                                               NodeIndex joining, std::size_t& attempts) {
    const std::int64_t deadline = r.rec.now_ms() + kReplaceStepTimeoutMs;
    std::string last = "no attempt";
    while (true) {
        if (!r.cluster.running(joining)) {
            co_return node_name(joining) + " is not running; log tail:\n" +
                r.cluster.log_tail(joining, 8);
        }
        if (r.rec.now_ms() > deadline) {
            co_return fmt::format("{} {} not done within {} ms; last answer: {}", op, node_name(id),
                                  kReplaceStepTimeoutMs, last);
        }
        attempts += 1;
        const client::Outcome h = co_await post_members(r, op, id);
        if (h.response && h.response->status == 200) {
            co_return "";
        }
        last = describe_answer(h);
        if (const auto roles = co_await members_roles(r)) {
            const auto it = roles->find(node_name(id));
            if (op == "promote" && it != roles->end() && it->second == "voter") {
                co_return "";
            }
            if (op == "remove" && it == roles->end()) {
                co_return "";
            }
        }
        co_await r.sleep(kMembersRetryMs);
    }
}

/// One replacement: `fresh` joins through a member, is promoted, then `old` is removed and
/// stopped. Fills `x`; x.failure says which step did not finish.
asio::awaitable<void> replace_node(Run& r, NodeIndex old, NodeIndex fresh, Replacement& x) {
    x.old_node = old;
    x.new_node = fresh;
    // The seed: a running voter other than the one leaving, a follower when there is one (its
    // answer is a redirect to the leader, which the joiner follows).
    const auto leader = current_leader(r);
    x.seed = old;
    for (NodeIndex v : r.voters) {
        if (v != old && r.cluster.running(v) && (x.seed == old || x.seed == leader)) {
            x.seed = v;
        }
    }
    r.rec.note(fmt::format("rolling-replace: {} joins through {} to replace {}", node_name(fresh),
                           node_name(x.seed), node_name(old)));
    x.join_ms = r.rec.now_ms();
    r.cluster.start_joining(fresh, r.cluster.node(x.seed).peer);
    r.process_event(FaultKind::Start, fresh);

    x.failure = co_await change_membership(r, "promote", fresh, fresh, x.promote_attempts);
    if (!x.failure.empty()) {
        co_return;
    }
    x.promoted_ms = r.rec.now_ms();
    r.voters.insert(fresh);
    r.rec.note(
        fmt::format("rolling-replace: {} promoted after {} attempt(s), {} ms after its "
                    "start",
                    node_name(fresh), x.promote_attempts, x.promoted_ms - x.join_ms));

    x.old_was_leader = current_leader(r) == old;
    x.failure = co_await change_membership(r, "remove", old, fresh, x.remove_attempts);
    if (!x.failure.empty()) {
        co_return;
    }
    x.removed_ms = r.rec.now_ms();
    r.voters.erase(old);
    r.process_event(FaultKind::Remove, old);
    r.rec.note(fmt::format("rolling-replace: {}{} removed, {} ms after the promotion",
                           node_name(old), x.old_was_leader ? " (the leader)" : "",
                           x.removed_ms - x.promoted_ms));
    if (x.old_was_leader && !co_await r.wait_for_leader(kRecoveryTimeoutMs, old)) {
        r.result.warnings.push_back(
            fmt::format("no leader other than {} within {} ms of its removal", node_name(old),
                        kRecoveryTimeoutMs));
    }
    r.terminate(old);
    if (!co_await r.wait_exit(old, kStopTimeoutMs)) {
        r.result.warnings.push_back(node_name(old) + " did not stop within " +
                                    std::to_string(kStopTimeoutMs) + " ms of SIGTERM");
        r.expecting_exit.erase(old);
        r.kill(old);
    }
    x.stopped_ms = r.rec.now_ms();
}

asio::awaitable<void> rolling_replace(Run& r) {
    std::vector<NodeIndex> remaining;
    for (NodeIndex i = 0; i < r.cluster.members(); ++i) {
        remaining.push_back(i);
    }
    NodeIndex fresh = static_cast<NodeIndex>(r.cluster.members());
    while (!remaining.empty()) {
        // Followers first: the leader (whichever node leads now) is replaced last.
        const auto leader = current_leader(r);
        auto pick = std::find_if(remaining.begin(), remaining.end(),
                                 [&](NodeIndex i) { return i != leader; });
        if (pick == remaining.end()) {
            pick = remaining.begin();
        }
        const NodeIndex old = *pick;
        remaining.erase(pick);
        Replacement& x = r.result.replacements.emplace_back();
        co_await replace_node(r, old, fresh, x);
        fresh += 1;
        if (!x.failure.empty()) {
            r.rec.note(fmt::format("rolling-replace: replacing {} by {} failed: {}",
                                   node_name(x.old_node), node_name(x.new_node), x.failure));
            co_return;
        }
        co_await r.sleep(r.hold_ms());
        if (!co_await r.wait_for_leader(kRecoveryTimeoutMs)) {
            r.result.warnings.push_back("no leader within " + std::to_string(kRecoveryTimeoutMs) +
                                        " ms after replacing " + node_name(old));
        }
    }
    co_await r.sleep(kWatchAfterMs);
}

/// Starts the proposer when the options and the daemon allow it; false if it stays off.
asio::awaitable<bool> start_proposer(Run& r, NodeIndex leader) {
    if (r.options.metadata == MetadataMode::Off) {
        r.result.metadata_off = "off (--metadata off)";
        co_return false;
    }
    std::string why;
    if (!co_await serves_metadata(r.cluster.node(leader).http, why)) {
        if (r.options.metadata == MetadataMode::On) {
            throw std::runtime_error(
                "--metadata on, but the daemon does not serve the metadata "
                "log: " +
                why);
        }
        r.result.metadata_off = "off (the daemon does not serve GET /metadata)";
        r.rec.note("metadata log not served (" + why + "): no proposals");
        co_return false;
    }
    r.rec.note(
        fmt::format("proposing metadata entries, {}/s, to the leader", r.options.rate_per_s));
    r.proposer->start();
    co_return true;
}

/// Reads the committed log of every running node, waiting (bounded) until each has committed
/// the last acknowledged entry, then checks it.
asio::awaitable<void> check_metadata(Run& r) {
    co_await r.proposer->stop();
    MetadataRun m;
    m.proposals = r.proposer->records();
    m.redirects_followed = r.proposer->redirects_followed();
    std::optional<LogLsn> last_acknowledged;
    for (const ProposalRecord& p : m.proposals) {
        if (p.lsn && (!last_acknowledged || *last_acknowledged < *p.lsn)) {
            last_acknowledged = p.lsn;
        }
    }
    const std::int64_t deadline = r.rec.now_ms() + kCatchUpTimeoutMs;
    std::vector<NodeLog> logs;
    while (true) {
        logs.clear();
        bool caught_up = true;
        for (NodeIndex i = 0; i < r.cluster.size(); ++i) {
            if (!r.cluster.running(i) || r.cluster.node(i).paused) {
                continue;
            }
            logs.push_back(co_await read_committed_log(r.cluster.node(i).http, i));
            caught_up = caught_up && logs.back().read &&
                        (!last_acknowledged || !(logs.back().end < *last_acknowledged));
        }
        if (caught_up || r.rec.now_ms() >= deadline) {
            break;
        }
        co_await r.sleep(200);
    }
    m.verdict = check_log(m.proposals, logs);
    for (const FaultEvent& f : r.rec.faults()) {
        m.first_fault_ms = m.first_fault_ms < 0 ? f.at_ms : std::min(m.first_fault_ms, f.at_ms);
        m.last_fault_ms = std::max(m.last_fault_ms, f.at_ms);
    }
    for (const ProposalRecord& p : m.proposals) {
        if (p.outcome != ProposalOutcome::Acknowledged) {
            continue;
        }
        if (m.first_fault_ms < 0 || p.at_ms < m.first_fault_ms) {
            m.acknowledged_before_faults += 1;
        }
        if (m.last_fault_ms >= 0 && p.at_ms > m.last_fault_ms) {
            m.acknowledged_after_faults += 1;
        }
    }
    r.rec.note(
        fmt::format("metadata log: {} acknowledged, {} outcome unknown, {} refused; {} "
                    "logs read; no acknowledged entry lost: {}",
                    m.verdict.acknowledged, m.verdict.unknown, m.verdict.refused,
                    m.verdict.nodes_read, m.verdict.ok() ? "ok" : "VIOLATED"));
    r.result.metadata = std::move(m);
}

asio::awaitable<void> scenario_main(Run& r) {
    for (NodeIndex i = 0; i < r.size(); ++i) {
        r.cluster.start(i);
        r.voters.insert(i);
    }
    const auto first = co_await r.wait_for_leader(kStartupLeaderTimeoutMs);
    if (!r.startup_failure.empty()) {
        throw std::runtime_error("a daemon failed during start-up: " + r.startup_failure);
    }
    r.starting = false;
    if (!first) {
        std::string logs;
        for (NodeIndex i = 0; i < r.size(); ++i) {
            logs += "  " + node_name(i) + ".log:\n" + r.cluster.log_tail(i, 5);
        }
        throw std::runtime_error("no leader within " + std::to_string(kStartupLeaderTimeoutMs) +
                                 " ms of start-up; last log lines:\n" + logs);
    }
    const bool proposing = co_await start_proposer(r, r.stable_leader().value_or(*first));
    co_await r.sleep(kSettleBeforeMs);
    const NodeIndex leader = r.stable_leader().value_or(*first);
    switch (r.options.scenario) {
        case Scenario::PingPong:
            co_await ping_pong(r, leader);
            break;
        case Scenario::NonSticky:
            co_await non_sticky(r, leader);
            break;
        case Scenario::LeaderCrash:
            co_await leader_crash(r, leader);
            break;
        case Scenario::LeaderPause:
            co_await leader_pause(r, leader);
            break;
        case Scenario::RollingRestart:
            co_await rolling_restart(r, leader);
            break;
        case Scenario::Chaos:
            co_await chaos(r);
            break;
        case Scenario::DiskFull:
            co_await disk_full(r, leader);
            break;
        case Scenario::RollingReplace:
            co_await rolling_replace(r);
            break;
        case Scenario::CrashChaos:
            co_await crash_chaos(r);
            break;
        case Scenario::Preferred:
            co_await preferred(r);
            break;
    }
    if (!r.stable_leader()) {
        r.result.warnings.push_back("no stable leader at the end of the run");
    }
    if (proposing) {
        co_await check_metadata(r);
    }
}

}  // namespace

double default_duration_s(Scenario s) {
    switch (s) {
        case Scenario::PingPong:
            return 6;
        case Scenario::NonSticky:
            return 5;
        case Scenario::LeaderCrash:
            return 2;
        case Scenario::LeaderPause:
            return 3;
        case Scenario::RollingRestart:
            return 1;
        case Scenario::Chaos:
            return 20;
        case Scenario::DiskFull:
            return 1;
        case Scenario::RollingReplace:
            return 1;
        case Scenario::CrashChaos:
            return 90;
        case Scenario::Preferred:
            return 1;
    }
    return 5;
}

namespace {

/// preferred: n1 is the preferred node, with this priority; the others have the default, 1.
constexpr NodeIndex kPreferredNode = 0;
constexpr std::uint32_t kPreferredPriority = 2;

/// preferred: the rounds to run; how long each watches after the restart: 3 stability periods
/// (the hand-back is due after about one), at least 6 s (so that a run with the hand-back off
/// watches as long as the fast profile's).
PreferredSummary plan_preferred(const Options& options) {
    PreferredSummary p;
    p.preferred = kPreferredNode;
    p.priority = kPreferredPriority;
    p.stability_ms = options.preferred_stability();
    p.window_ms = std::max<std::int64_t>(3 * p.stability_ms, 2 * kWatchAfterMs);
    p.rounds_planned = options.rounds;
    return p;
}

/// preferred: each round's figures, and warnings for rounds that did not see leadership come
/// back exactly once.
void collect_preferred(RunResult& result) {
    PreferredSummary& p = *result.preferred;
    p.figures.clear();
    for (std::size_t i = 0; i < p.rounds.size(); ++i) {
        const PreferredRoundFigures f =
            preferred_figures(p.preferred, p.rounds[i], result.summary.changes);
        p.figures.push_back(f);
        if (!f.single_handback()) {
            result.warnings.push_back(fmt::format(
                "round {}: leadership {} to {} ({} hand-backs, {} leader changes in the {:.1f}s "
                "after the restart)",
                i + 1, f.returned ? "came back" : "did NOT come back", node_name(p.preferred),
                f.handbacks, f.changes_after_restart, static_cast<double>(p.window_ms) / 1000));
        }
    }
}

/// The cluster for `options`: the preferred scenario gives n1 a higher priority and writes the
/// hand-back's stability period into the configs.
ClusterOptions cluster_options_for(const Options& options, bool scouting,
                                   const std::filesystem::path& conclaved) {
    ClusterOptions c{options.nodes(), scouting,     options.profile,
                     conclaved,       options.seed, options.keep_dir};
    c.spares = options.spares();
    c.backend = options.backend;
    c.trace_dir = options.trace_dir;
    if (options.scenario == Scenario::Preferred) {
        c.priorities.assign(options.nodes(), 1);
        c.priorities[kPreferredNode] = kPreferredPriority;
        c.preferred_stability_ms = options.preferred_stability();
    }
    return c;
}

/// What the recorder kept, and the figures computed from it.
void collect(RunResult& result, const Recorder& rec) {
    result.observations = rec.sorted_observations();
    result.faults = rec.faults();
    result.notes = rec.notes();
    result.summary = analyze(result.node_count, result.observations, result.faults, result.end_ms);
    result.lease =
        lease_summary(result.node_count, result.observations, result.faults, result.end_ms);
    const auto& overlap = result.lease.longest_overlap;
    if (overlap && overlap->length_ms > overlap->error_ms) {
        result.warnings.push_back(fmt::format(
            "{} and {} both held a valid leader lease for {} ms from {:.3f}s (polling error at "
            "most {} ms)",
            node_name(overlap->a), node_name(overlap->b), overlap->length_ms,
            static_cast<double>(overlap->begin_ms) / 1000.0, overlap->error_ms));
    }
    if (result.preferred) {
        collect_preferred(result);
    }
}

/// The run's first lines on the live output (none with --quiet).
void print_header(std::FILE* out, const Options& options, const RunResult& result,
                  const Cluster& cluster) {
    if (out == nullptr) {
        return;
    }
    fmt::print(out, "\n== {} | {} nodes | scouting {} | profile {} | seed {} | files in {}\n",
               to_string(options.scenario), result.node_count, result.scouting ? "on" : "off",
               options.profile, options.seed, cluster.dir().string());
    fmt::print(out, "   cells: L<term> leader, F follower, C candidate, -- no answer\n");
}

}  // namespace

RunResult run_scenario(const Options& options, bool scouting,
                       const std::filesystem::path& conclaved) {
    RunResult result;
    result.scenario = options.scenario;
    result.scouting = scouting;
    result.seed = options.seed;
    result.node_count = options.nodes() + options.spares();
    result.replacements_planned = options.spares();
    if (options.scenario == Scenario::Preferred) {
        result.preferred = plan_preferred(options);
    }
    std::FILE* out = options.quiet ? nullptr : stdout;

    asio::io_context io;
    Recorder rec(result.node_count, out);
    Cluster cluster(io, cluster_options_for(options, scouting, conclaved));
    if (options.keep_dir) {
        result.kept_dir = cluster.dir();
    }
    print_header(out, options, result, cluster);
    std::vector<asio::ip::tcp::endpoint> endpoints;
    for (NodeIndex i = 0; i < result.node_count; ++i) {
        endpoints.push_back(cluster.node(i).http);
    }
    Poller poller(io, endpoints, rec);
    ProposerOptions proposer_options;
    proposer_options.rate_per_s = options.rate_per_s;
    Proposer proposer(io, endpoints, rec, proposer_options);

    bool interrupted = false;
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int) {
        if (!ec) {
            interrupted = true;
            io.stop();
        }
    });

    Run run{io, cluster, rec,  options, result,    std::mt19937_64(options.seed),
            {}, false,   true, {},      &proposer, std::nullopt};
    std::exception_ptr failure;
    bool finished = false;
    poller.start();
    asio::co_spawn(io, run.watchdog(), asio::detached);
    asio::co_spawn(io, scenario_main(run), [&](std::exception_ptr e) {
        failure = e;
        finished = true;
        io.stop();
    });
    io.run();
    run.stopped = true;
    poller.stop();
    signals.cancel();
    result.end_ms = rec.now_ms();
    cluster.kill_all();
    if (interrupted) {
        throw Interrupted();
    }
    if (failure) {
        std::rethrow_exception(failure);
    }
    if (!finished) {
        throw std::runtime_error("the scenario stopped before it finished");
    }
    collect(result, rec);
    return result;
}

}  // namespace conclave::bounce
