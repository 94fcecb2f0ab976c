// SPDX-License-Identifier: Apache-2.0
// The broker example on the metadata log: 3 brokers (3 Nodes on one io_context, loopback, fast
// profile). The leader's broker writes partition -> primary assignments with fenced, conditional
// writes; every broker serves a partition only while the assignment it applied names it under
// its leader's token and that leader's lease is valid. Under leader crashes (the Node destroyed
// without a word, then restarted from its data directory) and depositions (leadership
// transfers), the check after every event of the io_context: no partition ever has two serving
// primaries; at the end every acknowledged assignment is in every node's committed log.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "broker.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "support/loopback.hpp"

namespace {

using conclave::examples::Broker;
using conclave::examples::BrokerOptions;
using conclave::node::ClusterConfig;
using conclave::node::Node;

constexpr int kPartitions = 8;
constexpr std::chrono::seconds kBound{20};

struct Brokers {
    boost::asio::io_context io;
    std::filesystem::path root = conclave::test::fresh_temp_dir("conclave-broker-test");
    std::string text;
    std::shared_ptr<spdlog::logger> quiet = conclave::test::quiet_logger("broker-test");
    std::vector<std::unique_ptr<Node>> nodes{3};
    std::vector<std::unique_ptr<Broker>> brokers{3};
    std::vector<Broker::Acknowledged> acknowledged;  // of brokers crashed since
    int overlaps = 0;                                // (partition, moment) with two serving
    std::set<int> served;                            // partitions served at some moment
    bool planted = false;                            // BrokerOptions::planted_stale_serving

    Brokers() {
        text = conclave::test::loopback_cluster_config("brokers", "b", 3,
                                                       conclave::test::free_ports(io, 6), root);
    }
    ~Brokers() {
        brokers.clear();
        nodes.clear();
        std::filesystem::remove_all(root);
    }

    void start(std::size_t i) {
        auto parsed = conclave::node::parse_cluster_config(text, "b" + std::to_string(i));
        REQUIRE(std::holds_alternative<ClusterConfig>(parsed));
        conclave::node::NodeOptions options;
        options.admin_http = false;
        options.seed = i + 1;
        options.logger = quiet;
        nodes[i] = std::make_unique<Node>(io, std::get<ClusterConfig>(parsed), options);
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

    /// The check, after every event: how many brokers serve each partition.
    void check() {
        for (int p = 0; p < kPartitions; ++p) {
            int serving = 0;
            for (const auto& b : brokers) {
                serving += (b && b->serving(p)) ? 1 : 0;
            }
            overlaps += serving > 1 ? 1 : 0;
            if (serving > 0) {
                served.insert(p);
            }
        }
    }

    bool run_checked(const std::function<bool()>& done) {
        return conclave::test::run_until(
            io,
            [&] {
                check();
                return done();
            },
            kBound);
    }

    bool all_served_now() {
        for (int p = 0; p < kPartitions; ++p) {
            bool any = false;
            for (const auto& b : brokers) {
                any = any || (b && b->serving(p));
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

    std::optional<std::size_t> leader() {
        for (std::size_t i = 0; i < 3; ++i) {
            if (nodes[i] && nodes[i]->current().is_leader()) {
                return i;
            }
        }
        return std::nullopt;
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
            std::optional<conclave::node::MetadataProposeResult> late;
            const std::size_t now = *c.leader();
            c.nodes[now]->propose(
                conclave::examples::partition_key(0),
                conclave::examples::assignment_value("b0", old_token),
                conclave::node::MetadataCondition{std::nullopt, old_token},
                [&](const conclave::node::MetadataProposeResult& r) { late = r; });
            REQUIRE(c.run_checked([&] { return late.has_value(); }));
            CHECK(late->status == conclave::node::MetadataProposeStatus::ConditionFailed);
        }
    }
    REQUIRE(c.run_checked([&] { return c.all_served_now(); }));
    CHECK(c.overlaps == 0);
    CHECK(c.served.size() == kPartitions);

    // Every acknowledged assignment is in every node's committed log.
    for (const auto& b : c.brokers) {
        for (const auto& a : b->acknowledged()) {
            c.acknowledged.push_back(a);
        }
    }
    REQUIRE(c.acknowledged.size() >= kPartitions);
    conclave::Lsn highest{};
    for (const auto& a : c.acknowledged) {
        highest = std::max(highest, a.lsn);
    }
    REQUIRE(c.run_checked([&] {
        for (const auto& n : c.nodes) {
            if (n->commit_lsn() < highest) {
                return false;
            }
        }
        return true;
    }));
    for (const auto& n : c.nodes) {
        const auto log = n->committed_after(conclave::replication::kNoLsn, 1'000'000);
        for (const auto& a : c.acknowledged) {
            INFO(conclave::to_string(a.lsn));
            const auto it =
                std::find_if(log.begin(), log.end(), [&](const auto& e) { return e.lsn == a.lsn; });
            CHECK((it != log.end() && it->key == conclave::examples::partition_key(a.partition) &&
                   it->value == a.value));
        }
    }
    int stopped = 0;
    for (auto& n : c.nodes) {
        n->stop([&] { ++stopped; });
    }
    CHECK(c.run_checked([&] { return stopped == 3; }));
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
    for (int round = 0; round < 4 && c.overlaps == 0; ++round) {
        REQUIRE(c.run_checked([&] { return c.all_served_now(); }));
        const std::size_t old = *c.leader();
        c.crash(old);
        REQUIRE(c.run_checked([&] {
            const auto now = c.leader();
            return now && c.brokers[*now]->assigning() && c.all_served_now() &&
                   c.nodes[*now]->log_driver()->log().commit_lsn() ==
                       c.nodes[*now]->log_driver()->log().last_lsn();
        }));
        REQUIRE(c.run_checked([&] { return c.overlaps > 0 || c.settled(); }));
        c.start(old);
    }
    CHECK(c.overlaps > 0);
    int stopped = 0;
    for (auto& n : c.nodes) {
        n->stop([&] { ++stopped; });
    }
    CHECK(c.run_checked([&] { return stopped == 3; }));
}
