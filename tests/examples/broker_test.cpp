// SPDX-License-Identifier: Apache-2.0
// The broker example on the metadata log: 3 brokers (3 Nodes, each on its own io_context, all
// polled by the test's thread; loopback, fast profile; every peer link through a forwarder of
// tests/support/link_cutter.hpp). The leader's broker writes partition -> primary assignments
// with fenced, conditional writes; every broker serves a partition only while the assignment it
// applied names it under its leader's token and that leader's lease is valid. Faults: leader
// crashes (the Node destroyed without a word, then restarted from its data directory),
// depositions (leadership transfers), a pause of the leader (its io_context not run, like
// SIGSTOP, for longer than it takes the others to elect and reassign; then resumed) and a
// partition of the leader from its peers (its links reset and refused, then healed). The check,
// after every event: each broker's serving claim on a partition is an interval of check rounds
// (a paused broker's claim stays open across its pause: it may answer the moment it resumes); no
// two brokers' claims on one partition overlap. At the end every acknowledged assignment is in
// every node's committed log. Canaries: a planted bug (serve on the applied assignment alone)
// that the check must catch after a crash, a pause and a partition.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "broker.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "support/link_cutter.hpp"
#include "support/loopback.hpp"

namespace {

using conclave::examples::Broker;
using conclave::examples::BrokerOptions;
using conclave::node::ClusterConfig;
using conclave::node::Node;

constexpr int kPartitions = 8;
constexpr std::chrono::seconds kBound{20};

enum class Fault { Pause, Partition };

/// A broker's claim to serve a partition, from its first to its last check round.
struct Claim {
    std::size_t broker = 0;
    long begin = 0;
    long end = 0;
};

struct Brokers {
    boost::asio::io_context net;  // the link forwarders
    std::vector<std::unique_ptr<boost::asio::io_context>> ios;
    std::filesystem::path root = conclave::test::fresh_temp_dir("conclave-broker-test");
    std::vector<std::string> texts;  // node i's config (its peers through the forwarders)
    std::unique_ptr<conclave::test::LinkCutter> cutter;
    std::shared_ptr<spdlog::logger> quiet = conclave::test::quiet_logger("broker-test");
    std::vector<std::unique_ptr<Node>> nodes{3};
    std::vector<std::unique_ptr<Broker>> brokers{3};
    std::vector<Broker::Acknowledged> acknowledged;  // of brokers crashed since
    std::vector<bool> paused = std::vector<bool>(3, false);
    std::optional<std::size_t> faulty;  // paused or isolated: not counted as serving or leading
    long round = 0;                     // check rounds so far
    std::map<int, std::vector<Claim>> claims;                  // closed, per partition
    std::map<std::pair<std::size_t, int>, Claim> open_claims;  // (broker, partition)
    std::set<int> served;                                      // partitions served at some moment
    bool planted = false;  // BrokerOptions::planted_stale_serving

    Brokers() {
        for (int i = 0; i < 3; ++i) {
            ios.push_back(std::make_unique<boost::asio::io_context>());
        }
        const auto ports = conclave::test::free_ports(net, 6);
        const std::vector<std::uint16_t> real(ports.begin(), ports.begin() + 3);
        // The forwarders' ports are the kernel's choice: never one of the nodes' chosen ports.
        for (int attempt = 0; attempt < 10 && !cutter; ++attempt) {
            cutter = std::make_unique<conclave::test::LinkCutter>(net, real);
            // (A forwarder may even get node i's own port, released by free_ports: compare
            // every forwarder, by position, not by value.)
            for (std::size_t i = 0; i < 3 && cutter; ++i) {
                const auto seen = cutter->ports_seen_by(i);
                for (std::size_t j = 0; j < seen.size(); ++j) {
                    if (j != i && std::count(ports.begin(), ports.end(), seen[j]) > 0) {
                        cutter.reset();
                        break;
                    }
                }
            }
        }
        REQUIRE(cutter);
        for (std::size_t i = 0; i < 3; ++i) {
            auto seen = cutter->ports_seen_by(i);
            seen.insert(seen.end(), ports.begin() + 3, ports.end());
            texts.push_back(conclave::test::loopback_cluster_config("brokers", "b", 3, seen, root));
        }
    }
    ~Brokers() {
        brokers.clear();
        nodes.clear();
        cutter.reset();
        std::filesystem::remove_all(root);
    }

    void start(std::size_t i) {
        auto parsed = conclave::node::parse_cluster_config(texts[i], "b" + std::to_string(i));
        if (const auto* error = std::get_if<conclave::node::ConfigError>(&parsed)) {
            FAIL("configuration refused: " << error->message);
        }
        conclave::node::NodeOptions options;
        options.admin_http = false;
        options.seed = i + 1;
        options.logger = quiet;
        nodes[i] = std::make_unique<Node>(*ios[i], std::get<ClusterConfig>(parsed), options);
        BrokerOptions broker;
        broker.partition_count = kPartitions;
        broker.period = std::chrono::milliseconds(20);
        broker.planted_stale_serving = planted;
        brokers[i] = std::make_unique<Broker>(*nodes[i], broker);
        REQUIRE_FALSE(nodes[i]->start());
    }

    /// A crash: the broker and its node disappear without a word.
    void crash(std::size_t i) {
        for (const auto& a : brokers[i]->acknowledged()) {
            acknowledged.push_back(a);
        }
        brokers[i].reset();
        nodes[i].reset();
    }

    /// The fault starts: the node's io_context is no longer run, or its links are cut.
    void inject(Fault fault, std::size_t i) {
        faulty = i;
        if (fault == Fault::Pause) {
            paused[i] = true;
        } else {
            cutter->isolate(i);
        }
    }
    void repair() {
        std::fill(paused.begin(), paused.end(), false);
        cutter->heal();
        faulty.reset();
    }

    /// One check round: extends or closes every running broker's claims. A paused broker is
    /// not looked at (its claims stay open); a crashed one's claims close.
    void check() {
        ++round;
        for (std::size_t i = 0; i < 3; ++i) {
            if (paused[i]) {
                continue;
            }
            for (int p = 0; p < kPartitions; ++p) {
                const bool serving = brokers[i] && brokers[i]->serving(p);
                const auto key = std::make_pair(i, p);
                const auto it = open_claims.find(key);
                if (serving) {
                    served.insert(p);
                    if (it == open_claims.end()) {
                        open_claims[key] = Claim{i, round, round};
                    } else {
                        it->second.end = round;
                    }
                } else if (it != open_claims.end()) {
                    claims[p].push_back(it->second);
                    open_claims.erase(it);
                }
            }
        }
    }

    /// Pairs of claims of two brokers on one partition whose intervals overlap.
    int overlaps() const {
        std::map<int, std::vector<Claim>> all = claims;
        for (const auto& [key, claim] : open_claims) {
            all[key.second].push_back(claim);
        }
        int found = 0;
        for (const auto& [p, list] : all) {
            for (std::size_t a = 0; a < list.size(); ++a) {
                for (std::size_t b = a + 1; b < list.size(); ++b) {
                    found += list[a].broker != list[b].broker && list[a].begin <= list[b].end &&
                                     list[b].begin <= list[a].end
                                 ? 1
                                 : 0;
                }
            }
        }
        return found;
    }

    /// Runs the forwarders and every node not paused, one event at a time, checking after each.
    bool run_checked(const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + kBound;
        while (std::chrono::steady_clock::now() < deadline) {
            std::size_t events = net.poll_one();
            for (std::size_t i = 0; i < 3; ++i) {
                if (!paused[i]) {
                    ios[i]->restart();
                    events += ios[i]->poll_one();
                    check();
                }
            }
            if (done()) {
                return true;
            }
            if (events == 0) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        UNSCOPED_INFO("not reached in " << kBound.count() << " s; then: " << describe());
        return false;
    }

    /// Each node's view, for a failure's message.
    std::string describe() {
        std::ostringstream out;
        for (std::size_t i = 0; i < 3; ++i) {
            out << "\n  b" << i << ": ";
            if (!nodes[i]) {
                out << "down";
                continue;
            }
            const conclave::node::Leadership l = nodes[i]->current();
            out << conclave::elector::to_string(l.role) << " term " << l.term << " leader "
                << l.leader.value_or("-") << " token " << l.fencing_token << " lease "
                << (l.valid_now() ? "valid" : "-") << " commit "
                << conclave::to_string(nodes[i]->commit_lsn()) << (paused[i] ? " paused" : "")
                << (brokers[i]->assigning() ? " assigning" : "") << "; assignments";
            for (const auto& [p, a] : brokers[i]->assignments()) {
                out << ' ' << p << '=' << a.primary << '@' << a.token;
            }
            out << "; serving";
            for (int p = 0; p < kPartitions; ++p) {
                out << (brokers[i]->serving(p) ? " " + std::to_string(p) : "");
            }
            const conclave::admin::StatusReport status = nodes[i]->status();
            out << "; log " << (status.log ? status.log->leader_status : "-") << "; peers";
            for (const auto& peer : status.peers) {
                out << ' ' << peer.id << (peer.up ? " up " : " down ")
                    << (peer.last_contact_ms ? std::to_string(*peer.last_contact_ms) + " ms" : "-");
            }
        }
        return out.str();
    }

    bool all_served_now() {
        for (int p = 0; p < kPartitions; ++p) {
            bool any = false;
            for (std::size_t i = 0; i < 3; ++i) {
                any = any || (faulty != i && brokers[i] && brokers[i]->serving(p));
            }
            if (!any) {
                return false;
            }
        }
        return true;
    }

    /// Every running broker applied the same assignments.
    bool settled() {
        const std::map<int, conclave::examples::Assignment>* first = nullptr;
        for (const auto& b : brokers) {
            if (!b) {
                continue;
            }
            if (first == nullptr) {
                first = &b->assignments();
            } else if (b->assignments().size() != first->size() ||
                       !std::equal(first->begin(), first->end(), b->assignments().begin(),
                                   [](const auto& x, const auto& y) {
                                       return x.first == y.first && x.second.lsn == y.second.lsn;
                                   })) {
                return false;
            }
        }
        return true;
    }

    /// The leader of the nodes outside the fault.
    std::optional<std::size_t> leader() {
        for (std::size_t i = 0; i < 3; ++i) {
            if (faulty != i && nodes[i] && nodes[i]->current().is_leader()) {
                return i;
            }
        }
        return std::nullopt;
    }

    /// Rounds of: the leader paused (or isolated) until the others elected a leader that
    /// reassigned its partitions, then resumed (healed) until every broker applied the same
    /// assignments. Stops early once an overlap is seen (the canaries).
    void fault_rounds(Fault fault, int rounds) {
        for (int r = 0; r < rounds && overlaps() == 0; ++r) {
            INFO("round " << r);
            REQUIRE(run_checked([&] { return all_served_now(); }));
            const std::size_t old = *leader();
            const std::uint64_t old_token = nodes[old]->current().fencing_token;
            inject(fault, old);
            REQUIRE(run_checked([&] {
                const auto now = leader();
                return now && nodes[*now]->current().fencing_token > old_token &&
                       brokers[*now]->assigning() && all_served_now();
            }));
            repair();
            // Settled under a leadership newer than the faulted one (the resumed or healed node
            // may win a later election itself: that is a new leadership too).
            REQUIRE(run_checked([&] {
                return overlaps() > 0 ||
                       (followed_by_all(old_token) && settled() && all_served_now());
            }));
        }
    }

    /// One node leads under a token above `token`; every other node follows it and has
    /// committed what it has.
    bool followed_by_all(std::uint64_t token) {
        const auto now = leader();
        if (!now || nodes[*now]->current().fencing_token <= token) {
            return false;
        }
        const auto id = nodes[*now]->config().self_entry().id;
        for (std::size_t i = 0; i < 3; ++i) {
            if (i != *now && (nodes[i]->current().is_leader() || nodes[i]->current().leader != id ||
                              nodes[i]->commit_lsn() < nodes[*now]->commit_lsn())) {
                return false;
            }
        }
        return true;
    }

    /// Every acknowledged assignment is in every node's committed log.
    void check_acknowledged_kept() {
        for (const auto& b : brokers) {
            for (const auto& a : b->acknowledged()) {
                acknowledged.push_back(a);
            }
        }
        REQUIRE(acknowledged.size() >= kPartitions);
        conclave::Lsn highest{};
        for (const auto& a : acknowledged) {
            highest = std::max(highest, a.lsn);
        }
        REQUIRE(run_checked([&] {
            for (const auto& n : nodes) {
                if (n->commit_lsn() < highest) {
                    return false;
                }
            }
            return true;
        }));
        for (const auto& n : nodes) {
            const auto log = n->committed_after(conclave::replication::kNoLsn, 1'000'000);
            for (const auto& a : acknowledged) {
                INFO(conclave::to_string(a.lsn));
                const auto it = std::find_if(log.begin(), log.end(),
                                             [&](const auto& e) { return e.lsn == a.lsn; });
                CHECK((it != log.end() &&
                       it->key == conclave::examples::partition_key(a.partition) &&
                       it->value == a.value));
            }
        }
    }

    void stop_all() {
        int stopped = 0;
        for (auto& n : nodes) {
            n->stop([&] { ++stopped; });
        }
        CHECK(run_checked([&] { return stopped == 3; }));
    }
};

}  // namespace

TEST_CASE("brokers on the log: one serving primary per partition under leader crashes",
          "[examples][broker]") {
    Brokers c;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    for (int round = 0; round < 4; ++round) {
        INFO("round " << round);
        REQUIRE(c.run_checked([&] { return c.all_served_now(); }));
        const std::size_t old = *c.leader();
        const std::uint64_t old_token = c.nodes[old]->current().fencing_token;
        if (round % 2 == 0) {
            c.crash(old);
            REQUIRE(c.run_checked([&] {
                const auto now = c.leader();
                return now && c.brokers[*now]->assigning() && c.all_served_now();
            }));
            c.start(old);
        } else {
            // To a broker that can take it now (a restarted one may still be catching up).
            REQUIRE(c.run_checked([&] {
                for (std::size_t k = 1; k < 3; ++k) {
                    if (!c.nodes[old]->transfer_leadership("b" + std::to_string((old + k) % 3))) {
                        return true;
                    }
                }
                return false;
            }));
            REQUIRE(c.run_checked([&] {
                const auto now = c.leader();
                return now && c.nodes[*now]->current().fencing_token > old_token &&
                       c.brokers[*now]->assigning() && c.all_served_now();
            }));
            // A late write decided under the old leadership, forwarded to the new leader (as
            // a 307 would), is refused by its fence: nothing appended.
            std::optional<conclave::admin::MetadataProposeResult> late;
            const std::size_t now = *c.leader();
            c.nodes[now]->propose(
                conclave::examples::partition_key(0),
                conclave::examples::assignment_value("b0", old_token),
                conclave::admin::MetadataCondition{std::nullopt, old_token},
                [&](const conclave::admin::MetadataProposeResult& r) { late = r; });
            REQUIRE(c.run_checked([&] { return late.has_value(); }));
            CHECK(late->status == conclave::admin::MetadataProposeStatus::ConditionFailed);
        }
    }
    REQUIRE(c.run_checked([&] { return c.all_served_now(); }));
    CHECK(c.overlaps() == 0);
    CHECK(c.served.size() == kPartitions);
    c.check_acknowledged_kept();
    c.stop_all();
}

TEST_CASE("brokers on the log: one serving primary per partition across leader pauses",
          "[examples][broker]") {
    Brokers c;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    c.fault_rounds(Fault::Pause, 2);
    REQUIRE(c.run_checked([&] { return c.all_served_now(); }));
    CHECK(c.overlaps() == 0);
    CHECK(c.served.size() == kPartitions);
    c.check_acknowledged_kept();
    c.stop_all();
}

TEST_CASE("brokers on the log: one serving primary per partition across leader partitions",
          "[examples][broker]") {
    Brokers c;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    c.fault_rounds(Fault::Partition, 2);
    REQUIRE(c.run_checked([&] { return c.all_served_now(); }));
    CHECK(c.overlaps() == 0);
    CHECK(c.served.size() == kPartitions);
    c.check_acknowledged_kept();
    c.stop_all();
}

TEST_CASE("brokers on the log: the check sees two serving primaries (canary)",
          "[examples][broker]") {
    // Planted: brokers serve on the assignment they applied alone, without their leader's token
    // and lease. After a leader crash the new leader moves partitions between the survivors; the
    // one that applies first serves while the other still does: the check must count it.
    Brokers c;
    c.planted = true;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    for (int round = 0; round < 4 && c.overlaps() == 0; ++round) {
        REQUIRE(c.run_checked([&] { return c.all_served_now(); }));
        const std::size_t old = *c.leader();
        c.crash(old);
        REQUIRE(c.run_checked([&] {
            const auto now = c.leader();
            return now && c.brokers[*now]->assigning() && c.all_served_now() &&
                   c.nodes[*now]->log_driver()->log().commit_lsn() ==
                       c.nodes[*now]->log_driver()->log().last_lsn();
        }));
        REQUIRE(c.run_checked([&] { return c.overlaps() > 0 || c.settled(); }));
        c.start(old);
    }
    CHECK(c.overlaps() > 0);
    c.stop_all();
}

TEST_CASE("brokers on the log: the check sees a paused leader's stale claim (canary)",
          "[examples][broker]") {
    // Planted as above. The paused leader's partitions move to the others; the moment it resumes
    // it serves them again on the assignment it applied before its pause: its claim spans the
    // pause and overlaps its successors'.
    Brokers c;
    c.planted = true;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    c.fault_rounds(Fault::Pause, 2);
    CHECK(c.overlaps() > 0);
    c.stop_all();
}

TEST_CASE("brokers on the log: the check sees an isolated leader's stale claim (canary)",
          "[examples][broker]") {
    // Planted as above. The isolated leader keeps serving its partitions while the majority
    // moves them to its two brokers.
    Brokers c;
    c.planted = true;
    for (std::size_t i = 0; i < 3; ++i) {
        c.start(i);
    }
    c.fault_rounds(Fault::Partition, 2);
    CHECK(c.overlaps() > 0);
    c.stop_all();
}
