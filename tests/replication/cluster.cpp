// SPDX-License-Identifier: Apache-2.0
#include "cluster.hpp"

#include <algorithm>
#include <utility>

namespace conclave::replication::testing {

Cluster::Cluster(std::uint64_t seed, std::size_t size, LogConfig base, runtime::RuntimeBug bug)
    : rng_(seed), base_(base), bug_(bug) {
    nodes_.resize(size);
    for (std::size_t i = 0; i < size; ++i) {
        nodes_[i].storage = std::make_unique<MemoryStorage>(FsyncPolicy::Batched);
        nodes_[i].env = std::make_unique<NodeEnv>(NodeEnv{this, i});
        Restart(i);
    }
}

void Cluster::Fail(std::string what) {
    if (failure_.empty()) {
        failure_ = "step " + std::to_string(stats_.steps) + ": " + std::move(what);
    }
}

LogStorage& NodeEnv::storage() {
    return *cluster->nodes_[node].storage;
}

void NodeEnv::send(std::span<const NodeId> to, const LogMessage& m) {
    for (const NodeId peer : to) {
        cluster->network_.push_back(InFlight{peer, m});
    }
}

void NodeEnv::arm(LogTimer timer, Millis /*delay*/, runtime::TimerGeneration generation) {
    SimNode& n = cluster->nodes_[node];
    const auto t = static_cast<std::size_t>(timer);
    if (n.armed[t]) {
        n.stale[t] = n.armed[t];  // replaced: it may still "fire" later, and must not count
    }
    n.armed[t] = generation;
}

void NodeEnv::cancel(LogTimer timer) {
    SimNode& n = cluster->nodes_[node];
    const auto t = static_cast<std::size_t>(timer);
    if (n.armed[t]) {
        n.stale[t] = n.armed[t];
    }
    n.armed[t].reset();
}

void NodeEnv::apply(const std::vector<Entry>& committed) {
    // Applied in LSN order, each once, and equal to the cluster's committed history.
    Cluster& c = *cluster;
    SimNode& n = c.nodes_[node];
    for (const Entry& e : committed) {
        const std::size_t k = n.applied++;
        if (k >= n.log().entries().size() || n.log().entries()[k] != e) {
            c.Fail("node " + std::to_string(node) + " applied an entry not at its place");
        }
        if (k < c.history_.size()) {
            if (c.history_[k] != e) {
                c.Fail("node " + std::to_string(node) + " committed " + to_string(e.lsn) +
                       " at index " + std::to_string(k) + " where " + to_string(c.history_[k].lsn) +
                       " was committed");
            }
        } else {
            c.history_.push_back(e);
        }
    }
}

void NodeEnv::propose_result(const ProposeResult& a) {
    Cluster& c = *cluster;
    if (a.error == ProposeError::None) {
        ++c.stats_.acked;
        auto len = c.nodes_[node].log().length_through(a.lsn);
        if (!len || *len > c.history_.size() || c.history_[*len - 1].lsn != a.lsn) {
            c.Fail("acknowledged " + to_string(a.lsn) + " is not committed");
        } else {
            c.acked_[a.lsn] = *len - 1;
        }
    } else if (a.error == ProposeError::TimedOut || a.error == ProposeError::LeadershipLost) {
        ++c.stats_.unknown_outcome;
    } else {
        ++c.stats_.refused;
    }
}

void NodeEnv::failed(const std::string& what) {
    cluster->Fail("node " + std::to_string(node) + ": storage failed: " + what);
}

void NodeEnv::after_batch() {
    // Every promise (term) is durable by the time anything that depends on it leaves the node.
    const SimNode& n = cluster->nodes_[node];
    if (n.storage->meta().term != n.log().state().term) {
        cluster->Fail("node " + std::to_string(node) + " term " + to_string(n.log().state().term) +
                      " is not durable");
    }
}

void Cluster::Elect(std::size_t j, bool tell_old_leader) {
    ++stats_.elections;
    term_ = term_.next();
    const NodeId id{static_cast<std::uint16_t>(j)};
    const auto old = leader_;
    leader_ = j;
    elector::LeadershipSnapshot leads{
        elector::Role::Leader,        term_,     id,          term_.value,
        elector::Reason::ElectionWon, Millis{0}, std::nullopt};
    Run(j, [&](ReplicatedLog& log) { return log.on_leadership(Millis{0}, leads); });
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (i == j || !nodes_[i].up) {
            continue;
        }
        if (old == i && !tell_old_leader) {
            continue;  // a stale leader that has not heard yet
        }
        elector::LeadershipSnapshot follows{
            elector::Role::Follower,           term_,     id,          term_.value,
            elector::Reason::LeaderDiscovered, Millis{0}, std::nullopt};
        Run(i, [&](ReplicatedLog& log) { return log.on_leadership(Millis{0}, follows); });
    }
}

void Cluster::Crash(std::size_t i) {
    ++stats_.crashes;
    nodes_[i].up = false;
    nodes_[i].storage->crash();
    if (leader_ == i) {
        leader_.reset();  // a restarted elector needs a new election (a new term) to lead
    }
    const NodeId gone{static_cast<std::uint16_t>(i)};
    for (std::size_t j = 0; j < nodes_.size(); ++j) {
        if (j != i && nodes_[j].up) {
            Run(j, [&](ReplicatedLog& log) { return log.peer_down(Millis{0}, gone); });
        }
    }
}

void Cluster::Restart(std::size_t i) {
    SimNode& node = nodes_[i];
    LogConfig config = base_;
    config.cluster_size = nodes_.size();
    config.self = NodeId{static_cast<std::uint16_t>(i)};
    node.armed = {};
    node.stale = {};
    node.rt = std::make_unique<Rt>(*node.env, config, node.storage->recover().log, bug_);
    node.up = true;
    node.applied = 0;
    Run(i, [](ReplicatedLog& log) { return log.start(Millis{0}); });
    for (std::size_t j = 0; j < nodes_.size(); ++j) {
        if (j != i && nodes_[j].up && nodes_[j].rt) {
            Run(j, [&](ReplicatedLog& log) { return log.peer_up(Millis{0}, config.self); });
        }
    }
}

bool Cluster::Propose(std::size_t i) {
    const ReplicatedLog& log = nodes_[i].log();
    const Term t = log.state().term;
    const Lsn lsn{t, ++next_counter_[t.value]};
    const bool expect_ok = log.can_propose();
    const LogActions& actions = Run(i, [&](ReplicatedLog& l) {
        return l.propose(Millis{0}, lsn, "k" + to_string(lsn), std::to_string(rng_()));
    });
    const bool refused = std::any_of(actions.begin(), actions.end(), [](const LogAction& a) {
        return std::holds_alternative<ProposeResult>(a) &&
               std::get<ProposeResult>(a).error != ProposeError::None;
    });
    if (expect_ok == refused) {
        Fail("propose on node " + std::to_string(i) + " refused=" + std::to_string(refused) +
             " but can_propose=" + std::to_string(expect_ok));
    }
    return expect_ok;
}

void Cluster::Deliver(std::size_t index) {
    InFlight m = std::move(network_[index]);
    network_.erase(network_.begin() + static_cast<std::ptrdiff_t>(index));
    if (nodes_[m.to.value].up) {
        Run(m.to.value, [&](ReplicatedLog& log) { return log.receive(Millis{0}, m.message); });
    }
}

void Cluster::Flush(std::size_t i) {
    // The group commit the runtime scheduled (a no-op when nothing was appended since the last).
    if (!nodes_[i].rt->flush().empty()) {
        ++stats_.flushes;
    }
}

void Cluster::Fire(std::size_t i, LogTimer t) {
    SimNode& node = nodes_[i];
    const auto k = static_cast<std::size_t>(t);
    if (!node.armed[k]) {
        return;
    }
    const runtime::TimerGeneration generation = *node.armed[k];
    node.armed[k].reset();
    node.stale[k] = generation;
    node.rt->timer_fired(t, generation);
}

void Cluster::FireStale(std::size_t i, LogTimer t) {
    // A timer instance that was replaced, cancelled or already fired: the runtime must keep it
    // from the core (the core would otherwise act on a timeout it no longer expects).
    SimNode& node = nodes_[i];
    const auto k = static_cast<std::size_t>(t);
    if (!node.stale[k] || node.armed[k] == node.stale[k]) {
        return;
    }
    ++stats_.stale_fired;
    if (!node.rt->timer_fired(t, *node.stale[k]).empty()) {
        Fail("node " + std::to_string(i) + ": a stale timer instance reached the core");
    }
}

void Cluster::Check() {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        const SimNode& node = nodes_[i];
        if (!node.up) {
            continue;
        }
        if (auto v = node.log().check_invariants(); !v.empty()) {
            Fail("node " + std::to_string(i) + ": " + v);
        }
        const auto& entries = node.log().entries();
        // Logs match up to the commit point: the committed prefix is the history's prefix (the
        // applied entries were compared one by one; applied == committed is a local invariant).
        if (node.applied != node.log().state().commit_len) {
            Fail("node " + std::to_string(i) + " applied differs from committed");
        }
        // Every acknowledged entry stays at its index in every committed prefix.
        for (const auto& [lsn, index] : acked_) {
            if (index < node.log().state().commit_len && entries[index].lsn != lsn) {
                Fail("node " + std::to_string(i) + " lost acknowledged " + to_string(lsn));
            }
        }
    }
    // The leader of the newest term, once ACTIVE, holds every committed entry.
    if (leader_ && nodes_[*leader_].up && nodes_[*leader_].log().role() == LogRole::LeaderActive &&
        nodes_[*leader_].log().state().term == term_) {
        const auto& entries = nodes_[*leader_].log().entries();
        if (entries.size() < history_.size() ||
            !std::equal(history_.begin(), history_.end(), entries.begin())) {
            Fail("ACTIVE leader " + std::to_string(*leader_) + " lacks committed entries");
        }
    }
    // Log Matching: the same LSN in two logs means the same prefix up to it.
    for (std::size_t a = 0; a < nodes_.size(); ++a) {
        for (std::size_t b = a + 1; b < nodes_.size(); ++b) {
            const auto& x = nodes_[a].log().entries();
            const auto& y = nodes_[b].log().entries();
            std::size_t last_common = 0;  // length of the longest prefix ending at a shared LSN
            for (std::size_t k = 0; k < std::min(x.size(), y.size()); ++k) {
                if (x[k].lsn == y[k].lsn) {
                    last_common = k + 1;
                }
            }
            for (std::size_t k = 0; k < last_common; ++k) {
                if (x[k] != y[k]) {
                    Fail("nodes " + std::to_string(a) + " and " + std::to_string(b) +
                         " share an LSN but not the prefix before it");
                    break;
                }
            }
        }
    }
}

bool Cluster::Step() {
    ++stats_.steps;
    try {
        const std::uint64_t dice = Random(1000);
        const std::size_t n = nodes_.size();
        const auto node = static_cast<std::size_t>(Random(n));
        if (dice < 400) {
            if (!network_.empty()) {
                Deliver(static_cast<std::size_t>(Random(network_.size())));
            }
        } else if (dice < 450) {
            if (!network_.empty()) {  // loss
                const auto k = static_cast<std::size_t>(Random(network_.size()));
                network_[k] = std::move(network_.back());
                network_.pop_back();
            }
        } else if (dice < 470) {
            if (!network_.empty()) {  // duplication
                network_.push_back(network_[static_cast<std::size_t>(Random(network_.size()))]);
            }
        } else if (dice < 620) {
            if (nodes_[node].up) {
                Flush(node);
            }
        } else if (dice < 720) {
            const auto t = static_cast<LogTimer>(Random(kLogTimerCount));
            if (nodes_[node].up && nodes_[node].armed[static_cast<std::size_t>(t)]) {
                Fire(node, t);
            } else if (nodes_[node].up) {
                FireStale(node, t);
            }
        } else if (dice < 920) {
            // Propose on whichever nodes believe they are ACTIVE leaders (a stale one included).
            for (std::size_t i = 0; i < n; ++i) {
                if (nodes_[i].up && nodes_[i].log().can_propose()) {
                    Propose(i);
                }
            }
        } else if (dice < 930) {
            if (nodes_[node].up) {
                Propose(node);  // mostly refused: not the leader, or not active
            }
        } else if (dice < 942) {
            if (nodes_[node].up) {
                Elect(node, Random(2) == 0);
            }
        } else if (dice < 950) {
            if (nodes_[node].up) {
                Crash(node);
            }
        } else if (dice < 980) {
            if (!nodes_[node].up) {
                Restart(node);
            }
        } else {
            if (nodes_[node].up) {  // connection flap without a crash
                const auto other = static_cast<std::size_t>(Random(n));
                if (other != node && nodes_[other].up) {
                    const NodeId peer{static_cast<std::uint16_t>(other)};
                    Run(node, [&](ReplicatedLog& log) { return log.peer_down(Millis{0}, peer); });
                    Run(node, [&](ReplicatedLog& log) { return log.peer_up(Millis{0}, peer); });
                }
            }
        }
        Check();
    } catch (const InvariantViolation& v) {
        Fail(v.what());
    }
    return failure_.empty();
}

bool Cluster::HealAndConverge() {
    try {
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
            if (!nodes_[i].up) {
                Restart(i);
            }
        }
        Elect(static_cast<std::size_t>(Random(nodes_.size())), true);
        const std::size_t leader = *leader_;
        bool proposed = false;
        std::optional<Lsn> final_lsn;
        for (int round = 0; round < 200 && failure_.empty(); ++round) {
            while (!network_.empty()) {
                Deliver(0);
                Check();
            }
            for (std::size_t i = 0; i < nodes_.size(); ++i) {
                Flush(i);
            }
            if (network_.empty()) {
                const ReplicatedLog& log = nodes_[leader].log();
                if (log.can_propose() && !proposed) {
                    proposed = Propose(leader);
                    final_lsn = log.last_lsn();
                } else if (nodes_[leader].armed[static_cast<std::size_t>(LogTimer::Heartbeat)]) {
                    Fire(leader, LogTimer::Heartbeat);
                } else if (nodes_[leader].armed[static_cast<std::size_t>(LogTimer::SyncRetry)]) {
                    Fire(leader, LogTimer::SyncRetry);
                }
            }
            Check();
        }
        if (!final_lsn || nodes_[leader].log().commit_lsn() < *final_lsn) {
            Fail("the healed cluster did not commit a new proposal");
        }
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
            const ReplicatedLog& log = nodes_[i].log();
            if (log.state().commit_len != history_.size() ||
                !std::equal(history_.begin(), history_.end(), log.entries().begin())) {
                Fail("node " + std::to_string(i) + " did not converge to the committed history (" +
                     std::to_string(log.state().commit_len) + " of " +
                     std::to_string(history_.size()) + " committed)");
            }
        }
        for (const auto& [lsn, index] : acked_) {
            if (index >= history_.size() || history_[index].lsn != lsn) {
                Fail("acknowledged " + to_string(lsn) + " missing from the final history");
            }
        }
    } catch (const InvariantViolation& v) {
        Fail(v.what());
    }
    return failure_.empty();
}

}  // namespace conclave::replication::testing
