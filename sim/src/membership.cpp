// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/membership.hpp"
#include "conclave/core/quorum.hpp"

#include <algorithm>
#include <vector>

#include "conclave/codec/membership_codec.hpp"

namespace conclave::sim {
namespace {

constexpr Millis kTick{10};
constexpr Millis kSyncDelay{30};  // a new leader's sync, before it is ACTIVE

NodeId nth(std::size_t i) {
    return NodeId{static_cast<std::uint16_t>(i)};
}

std::size_t majority_of(NodeSet s) {
    return conclave::majority(s.size());
}

// The log model of membership.hpp, driving one Simulator.
class MembershipModel {
  public:
    MembershipModel(Simulator& sim, const MembershipRunOptions& o) : sim_(sim), o_(o) {
        const std::size_t n = sim.size();
        Rng& rng = sim.rng();
        const auto learner = static_cast<std::size_t>(rng.below(n));
        NodeSet all;
        for (std::size_t i = 0; i < n; ++i) {
            all.insert(nth(i));
        }
        NodeSet c = all;
        c.erase(nth(learner));
        configs_ = {NodeSet{}, c};  // index = version; version 0 is the default, unused
        for (std::uint32_t k = 0; k < o.changes; ++k) {
            if (c == all) {  // remove a random voter
                c.erase(nth(static_cast<std::size_t>(rng.below(n))));
            } else {  // promote the non-voter
                c = all;
            }
            configs_.push_back(c);
        }
        active_since_.assign(n, std::nullopt);
        laggard_ = nth(static_cast<std::size_t>(rng.below(n)));
    }

    /// Every node starts with C1 (the bootstrap configuration in its log).
    void bootstrap() {
        for (std::size_t i = 0; i < sim_.size(); ++i) {
            give(nth(i), 1);
        }
        committed_ = 1;
    }

    void tick() {
        const std::size_t n = sim_.size();
        Rng& rng = sim_.rng();
        for (std::size_t i = 0; i < n && !sim_.violation(); ++i) {
            const NodeId l = nth(i);
            const elector::ElectorState* s = sim_.state(l);
            if (!s || s->role != elector::Role::Leader || sim_.paused(l)) {
                active_since_[i].reset();
                continue;
            }
            // ACTIVE: led its term for a sync delay with a quorum of its voters following it.
            if (!active_since_[i] || active_since_[i]->first != s->term) {
                active_since_[i] = std::make_pair(s->term, sim_.now());
            }
            const bool synced =
                sim_.now() - active_since_[i]->second >= kSyncDelay &&
                followers(l, s->term, s->voters).size() + 1 >= majority_of(s->voters);
            if (!synced) {
                continue;
            }
            if (version(l) < committed_) {
                give(l, committed_);  // its sync commits everything committed before its term
                continue;
            }
            // Followers learn the leader's configuration at random moments.
            for (NodeId f : followers(l, s->term, NodeSet{~std::uint64_t{0}})) {
                if (version(f) < version(l) && rng.chance(chance(f))) {
                    give(f, version(l));
                }
            }
            step_change(l, *sim_.state(l));
        }
    }

    std::uint64_t committed() const { return committed_; }
    std::uint64_t calls() const { return calls_; }

  private:
    std::uint64_t version(NodeId n) const {
        const auto c = sim_.voters_of(n);
        return c ? c->second : 0;
    }

    std::uint32_t chance(NodeId f) const {
        return f == laggard_ ? o_.laggard_catch_up_ppm : o_.catch_up_ppm;
    }

    void give(NodeId n, std::uint64_t v) {
        ++calls_;
        sim_.set_voters(n, configs_[v], v);
    }

    /// Live, unpaused nodes among `among` that follow `l` in `term` over a working connection.
    std::vector<NodeId> followers(NodeId l, Term term, NodeSet among) const {
        std::vector<NodeId> out;
        for (std::size_t j = 0; j < sim_.size(); ++j) {
            const NodeId f = nth(j);
            const elector::ElectorState* fs = sim_.state(f);
            if (f != l && among.contains(f) && fs && !sim_.paused(f) && fs->leader == l &&
                fs->term == term && sim_.connected(l, f)) {
                out.push_back(f);
            }
        }
        return out;
    }

    // The pending change: appended by an ACTIVE leader at its committed version (R2, R3),
    // received by its followers (lemma L), committed by a quorum of the previous configuration.
    void step_change(NodeId l, const elector::ElectorState& s) {
        const std::uint64_t v = version(l);
        if (v + 1 >= configs_.size()) {
            return;  // every change done
        }
        if (sim_.now() < next_change_) {
            return;  // the operator's next request has not come yet
        }
        if (!pending_ && sim_.now() >= o_.fault_window) {
            return;  // the operator asks for nothing after the faults: the tail is calm
        }
        if (!pending_ || pending_->leader != l || pending_->term != s.term) {
            pending_ = Pending{l, s.term, NodeSet{}};
            pending_->holders.insert(l);
        }
        for (NodeId f : followers(l, s.term, NodeSet{~std::uint64_t{0}})) {
            if (!pending_->holders.contains(f) && sim_.rng().chance(chance(f))) {
                pending_->holders.insert(f);
                if (version(f) < v) {
                    give(f, v);  // the Append carrying C(v+1) carries a commit point past C(v)
                }
            }
        }
        const NodeSet previous = configs_[v];
        if (NodeSet{pending_->holders.bits & previous.bits}.size() >= majority_of(previous)) {
            committed_ = v + 1;
            pending_.reset();
            next_change_ =
                sim_.now() + Millis{sim_.rng().between(o_.gap_min.count(), o_.gap_max.count())};
            give(l, v + 1);  // a removed leader steps down here
        }
    }

    struct Pending {
        NodeId leader;
        Term term;
        NodeSet holders;
    };

    Simulator& sim_;
    const MembershipRunOptions& o_;
    std::vector<NodeSet> configs_;
    std::uint64_t committed_ = 0;
    std::optional<Pending> pending_;
    std::vector<std::optional<std::pair<Term, Millis>>> active_since_;
    std::uint64_t calls_ = 0;
    NodeId laggard_{};
    Millis next_change_{0};
};

// Random fault episodes in [settle, window), all over by the window's end.
void schedule_faults(Simulator& sim, const MembershipRunOptions& o) {
    Rng& rng = sim.rng();
    const std::size_t n = sim.size();
    for (std::size_t e = 0; e < o.episodes; ++e) {
        const Millis start{rng.between(o.settle.count(), o.fault_window.count() - 200)};
        const Millis end = std::min(o.fault_window, start + Millis{rng.between(100, 1500)});
        const NodeId a = nth(static_cast<std::size_t>(rng.below(n)));
        NodeId b = nth(static_cast<std::size_t>(rng.below(n - 1)));
        if (b >= a) {
            b.value = static_cast<std::uint16_t>(b.value + 1);
        }
        switch (rng.below(5)) {
            case 0: {  // two against two (the split that two leaders of one term need)
                const std::uint64_t mask =
                    (std::uint64_t{1} << a.value) | (std::uint64_t{1} << b.value);
                sim.schedule(start, FaultAction{FaultKind::Partition, {}, {}, mask, 0});
                sim.schedule(end, FaultAction{FaultKind::Unpartition, {}, {}, mask, 0});
                break;
            }
            case 4: {
                const std::uint64_t mask = 1 + rng.below((std::uint64_t{1} << n) - 2);
                sim.schedule(start, FaultAction{FaultKind::Partition, {}, {}, mask, 0});
                sim.schedule(end, FaultAction{FaultKind::Unpartition, {}, {}, mask, 0});
                break;
            }
            case 1:
                sim.schedule(start, FaultAction{FaultKind::Crash, a, {}, 0, 0});
                sim.schedule(end, FaultAction{FaultKind::Restart, a, {}, 0, 0});
                break;
            case 2:
                sim.schedule(start, FaultAction{FaultKind::Pause,
                                                a,
                                                {},
                                                0,
                                                static_cast<std::uint32_t>((end - start).count())});
                break;
            default:
                sim.schedule(start, FaultAction{FaultKind::Cut, a, b, 0, 0});
                sim.schedule(end, FaultAction{FaultKind::Heal, a, b, 0, 0});
                break;
        }
    }
}

// Counts the StaleConfig and NotAVoter answers the cores send (the fence at work).
void count_refusals(Simulator& sim, MembershipRunResult& result) {
    sim.on_step = [&result](const Simulator&, const StepRecord& step) {
        for (const elector::Action& a : *step.actions) {
            const auto* send = std::get_if<elector::SendTo>(&a);
            if (!send) {
                continue;
            }
            elector::Refusal r = elector::Refusal::None;
            if (const auto* e = std::get_if<elector::ElectionResponse>(&send->message.body)) {
                r = e->refusal;
            } else if (const auto* sr =
                           std::get_if<elector::ScoutingResponse>(&send->message.body)) {
                r = sr->refusal;
            }
            result.stale_config_refusals += r == elector::Refusal::StaleConfig ? 1 : 0;
            result.not_a_voter_refusals += r == elector::Refusal::NotAVoter ? 1 : 0;
        }
    };
}

// Every node at the end: role, term, leader, configuration version and voters (diagnosis).
std::string end_state(const Simulator& sim) {
    std::string out;
    for (std::uint16_t i = 0; i < sim.size(); ++i) {
        const NodeId n{i};
        const elector::ElectorState* s = sim.state(n);
        out += "n" + std::to_string(i) + ":";
        if (!s) {
            out += "down ";
            continue;
        }
        out += std::string(to_string(s->role)) + " t" + std::to_string(s->term.value) + " L" +
               (s->leader ? std::to_string(s->leader->value) : "-") + " v" +
               std::to_string(s->config_version) + " V" + std::to_string(s->voters.bits) +
               (sim.paused(n) ? " paused" : "") + " ";
    }
    return out;
}

SimOptions sim_options(const MembershipRunOptions& o, std::size_t nodes) {
    SimOptions so;
    so.nodes = nodes;
    so.seed = o.seed;
    so.elector = elector::Config::fast(nodes, NodeId{0});
    so.elector.planted_bug = o.planted_bug;
    so.trace = o.trace;
    return so;
}

// Starts the cluster and runs it to the end of the tail, `driver` (the model or the operator)
// ticking every 10 ms.
template <class Driver>
void run_to_end(Simulator& sim, const MembershipRunOptions& o, Driver& driver) {
    sim.start_all();
    const Millis end = o.fault_window + o.tail;
    while (sim.now() < end && !sim.violation()) {
        if (!sim.run_until(sim.now() + kTick)) {
            break;
        }
        driver.tick();
    }
}

}  // namespace

MembershipRunResult run_membership_seed(const MembershipRunOptions& o) {
    Simulator sim(sim_options(o, 4));
    MembershipRunResult result;
    result.seed = o.seed;
    count_refusals(sim, result);
    MembershipModel model(sim, o);
    schedule_faults(sim, o);
    model.bootstrap();
    run_to_end(sim, o, model);
    result.violation = sim.violation();
    result.violation_at = sim.now();
    result.leader_at_end = majority_leader(sim);
    result.end_state = end_state(sim);
    result.committed_version = model.committed();
    result.set_voters_calls = model.calls();
    result.stats = sim.stats();
    return result;
}

// ---- Membership through the log ----------------------------------------------------------------

namespace {

constexpr Millis kFreshBound{3000};  // the fresh entry at the end commits within this

replication::Member member(std::size_t i) {
    const std::string id = std::to_string(i);
    return replication::Member{id, "10.0.0." + id + ":7000", "10.0.0." + id + ":8080"};
}

// The operator: on the ACTIVE leader, the next single change (propose_config), one at a time.
class LogOperator {
  public:
    LogOperator(Simulator& sim, const MembershipRunOptions& o) : sim_(sim), o_(o) {}

    void tick() {
        // The highest active (committed) configuration of any live log.
        const replication::ActiveConfig* highest = nullptr;
        for (const replication::ReplicatedLog* log : sim_.logs()) {
            if (log && log->active_config().from_entry &&
                (!highest || log->active_config().version > highest->version)) {
                highest = &log->active_config();
            }
        }
        if (o_.joiner) {
            join(highest);
        }
        if (highest && (!bootstrapped_ || highest->version > committed_)) {
            bootstrapped_ = true;
            committed_ = highest->version;
            if (o_.joiner) {
                const bool voter = highest->is_voter(joiner());
                joiner_promotions_ += voter && !joiner_voter_ ? 1U : 0U;
                joiner_voter_ = voter;
            }
            next_change_ =
                sim_.now() + Millis{sim_.rng().between(o_.gap_min.count(), o_.gap_max.count())};
        }
        if (sim_.now() < next_change_ || sim_.now() >= o_.fault_window ||
            (bootstrapped_ && committed_ >= o_.changes)) {
            return;  // the operator's next request has not come yet, or no more changes
        }
        for (std::uint16_t i = 0; i < sim_.size(); ++i) {
            const replication::ReplicatedLog* log = sim_.log(NodeId{i});
            if (!log || log->role() == replication::LogRole::Follower || sim_.paused(NodeId{i})) {
                continue;
            }
            // The ACTIVE leader (and, with the planted SkipOwnTermCommit, a PASSIVE one whose
            // sync point is appended: check_config_change says which).
            const replication::Configuration next = next_config(log->active_config());
            if (log->check_config_change(next)) {
                if (log->can_propose()) {
                    return;  // a change is pending (R2): wait for it
                }
                continue;
            }
            if (sim_.propose_config_now(NodeId{i}, codec::encode_configuration(next))) {
                ++proposals_;
            }
            return;
        }
    }

    std::uint64_t committed() const { return committed_; }
    std::uint64_t proposals() const { return proposals_; }
    std::optional<Millis> joined_at() const { return joined_at_; }
    std::uint64_t joiner_promotions() const { return joiner_promotions_; }

  private:
    NodeId joiner() const { return nth(sim_.size() - 1); }

    // §8: once a configuration whose table names the new node is active on some live log (it
    // committed), the node is started as `conclaved --join` would start it, at that
    // configuration (the join answer's).
    void join(const replication::ActiveConfig* highest) {
        if (joined_at_ || !highest || highest->table.size() < sim_.size()) {
            return;
        }
        if (!sim_.join(joiner(), highest->table.size(), highest->voters, highest->version)) {
            return;
        }
        joined_at_ = sim_.now();
        // In a quarter of the runs its process dies soon after it started (its log may hold no
        // configuration yet: it restarts from the stored one, R9).
        if (sim_.rng().below(4) == 0) {
            const Millis crash = sim_.now() + Millis{sim_.rng().between(0, 30)};
            const Millis restart = crash + Millis{sim_.rng().between(50, 500)};
            sim_.schedule(crash, FaultAction{FaultKind::Crash, joiner(), {}, 0, 0});
            sim_.schedule(restart, FaultAction{FaultKind::Restart, joiner(), {}, 0, 0});
        }
    }

    // Bootstrap (C0, every node of the initial table a voter); with a joiner, then add it as a
    // learner (the table grows); then: remove a random voter, add it back as a learner, promote
    // it. With a joiner, every configuration after C0 carries the whole table (§8: once one
    // with a table is active, one without is refused).
    replication::Configuration next_config(const replication::ActiveConfig& active) {
        replication::Configuration c;
        const std::size_t n = o_.joiner && active.table.empty() ? sim_.size() - 1 : sim_.size();
        if (!active.from_entry) {
            for (std::size_t i = 0; i < n; ++i) {
                c.voters.push_back(member(i));
            }
            return c;
        }
        c.version = active.version + 1;
        NodeSet voters = active.voters;
        NodeSet learners = active.learners;
        if (o_.joiner) {
            for (std::size_t i = 0; i < sim_.size(); ++i) {
                c.table.push_back(member(i).id);
            }
        }
        if (o_.joiner && active.table.empty()) {
            learners.insert(joiner());  // the new node, as a learner
        } else if (!learners.empty()) {
            voters.bits |= learners.bits;  // promote the learner
            learners = NodeSet{};
        } else if (voters.size() == n) {
            std::vector<NodeId> v;
            for (std::size_t i = 0; i < n; ++i) {
                if (voters.contains(nth(i))) {
                    v.push_back(nth(i));
                }
            }
            voters.erase(v[static_cast<std::size_t>(sim_.rng().below(v.size()))]);
        } else {
            learners.bits = NodeSet::first(n).bits & ~voters.bits;  // add it back as a learner
        }
        for (std::size_t i = 0; i < sim_.size(); ++i) {
            if (voters.contains(nth(i))) {
                c.voters.push_back(member(i));
            } else if (learners.contains(nth(i))) {
                c.learners.push_back(member(i));
            }
        }
        return c;
    }

    Simulator& sim_;
    const MembershipRunOptions& o_;
    bool bootstrapped_ = false;  // C0 committed somewhere
    std::uint64_t committed_ = 0;
    Millis next_change_{0};
    std::uint64_t proposals_ = 0;
    std::optional<Millis> joined_at_;
    bool joiner_voter_ = false;  // in the highest configuration seen
    std::uint64_t joiner_promotions_ = 0;
};

// A leader followed by a majority of its own voters (itself included when it is one).
std::optional<NodeId> voters_majority_leader(const Simulator& sim) {
    for (std::uint16_t i = 0; i < sim.size(); ++i) {
        const elector::ElectorState* s = sim.state(NodeId{i});
        if (!s || s->role != elector::Role::Leader || sim.paused(NodeId{i})) {
            continue;
        }
        std::size_t followers = s->voters.contains(NodeId{i}) ? 1 : 0;
        for (std::uint16_t j = 0; j < sim.size(); ++j) {
            const elector::ElectorState* f = sim.state(NodeId{j});
            if (j != i && f && s->voters.contains(NodeId{j}) && f->leader == NodeId{i} &&
                f->term == s->term) {
                ++followers;
            }
        }
        if (conclave::is_majority(followers, s->voters.size())) {
            return NodeId{i};
        }
    }
    return std::nullopt;
}

}  // namespace

MembershipRunOptions log_membership_options(std::uint64_t seed) {
    MembershipRunOptions o;
    o.seed = seed;
    o.changes = 18;
    o.gap_min = Millis{20};
    o.gap_max = Millis{200};
    o.joiner = true;
    return o;
}

MembershipRunResult run_log_membership_seed(const MembershipRunOptions& o) {
    SimOptions so = sim_options(o, o.nodes);
    so.log = true;
    so.initial_table = o.joiner ? o.nodes - 1 : 0;
    so.skip_elector_growth = o.skip_elector_growth;
    so.log_options.config.decode_configuration = &codec::decode_configuration;
    so.log_options.config.planted_bug = o.log_bug;
    so.log_options.defer_meta = o.defer_meta;
    Simulator sim(so);
    MembershipRunResult result;
    result.seed = o.seed;
    count_refusals(sim, result);
    LogOperator op(sim, o);
    schedule_faults(sim, o);
    run_to_end(sim, o, op);
    result.leader_at_end = voters_majority_leader(sim);
    // Liveness of the log: a fresh entry, at that leader once its log is ACTIVE, commits.
    const Millis start = sim.now();
    std::optional<Lsn> fresh;
    sim.set_workload(false);
    while (!sim.violation() && result.leader_at_end && sim.now() < start + kFreshBound &&
           !(fresh && sim.log_history().acknowledged(*fresh))) {
        if (const auto leader = voters_majority_leader(sim); !fresh && leader) {
            fresh = sim.propose_now(*leader);
        }
        if (!sim.run_until(sim.now() + Millis{5})) {
            break;
        }
    }
    result.fresh_committed = fresh && sim.log_history().acknowledged(*fresh);
    result.fresh_committed_after = sim.now() - start;
    result.violation = sim.violation();
    result.violation_at = sim.now();
    result.end_state = end_state(sim);
    result.committed_version = op.committed();
    result.config_proposals = op.proposals();
    result.joined_at = op.joined_at();
    result.joiner_promotions = op.joiner_promotions();
    result.set_voters_calls = sim.stats().config_notices;
    result.stats = sim.stats();
    return result;
}

}  // namespace conclave::sim
