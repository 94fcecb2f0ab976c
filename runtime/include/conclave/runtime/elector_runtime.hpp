// SPDX-License-Identifier: Apache-2.0
// ElectorRuntime<Env>: the one place where the elector core's Actions are interpreted.
//
// Production (drivers/src/driver.cpp: Asio timers, the TCP mesh, the state file) and the simulator
// (sim/src/simulator.cpp: simulated time, network and storage) both run the elector through this
// class, so the simulator's seeds exercise the very rules the daemon ships with:
//   - fan-out: a Broadcast goes to every other node of the cluster (the runtime picks the
//     recipients, the environment encodes and sends once per batch of recipients);
//   - timers: at most one live instance per TimerId, each arming gets a new generation; a firing
//     whose generation is not the current one (replaced, cancelled, consumed) never reaches the
//     core;
//   - persist before send: actions run in order, and PersistState must return durable before the
//     next action of the batch runs; the runtime checks it (CONCLAVE_CHECK, check_durable below):
//     a message leaves only when what it says of this node's durable state is durable (its term;
//     a vote it grants), so a batch that would send one before the PersistState making it true
//     stops the node instead;
//   - failed persist: if PersistState fails, nothing later in the batch takes effect, every timer
//     is cancelled, the environment is told (Env::failed), and the runtime ignores every further
//     input: the node is out of service until restarted.
//
// The environment is a template parameter (no virtual calls on the simulator's hot path). It must
// provide:
//   Millis now();
//   void send(std::span<const NodeId> to, const Message& m);   // best effort, in order
//   void arm(TimerId t, Millis delay, TimerGeneration g);      // later: runtime.timer_fired(t, g)
//   void cancel(TimerId t);                                    // may be a no-op
//   bool persist(const DurableState& s);                       // true once durable
//   void notify(const LeadershipSnapshot& s);
//   void alarm(const RaiseAlarm& a);
//   void failed(const DurableState& s);                        // persist of `s` failed
//   static constexpr bool kPlantedBugs;   // true only in test/simulation environments
// and optionally `void before_actions(const Actions&)` (tracing; runs before any action) and
// `void before_step(const StepInput&, const Actions&)` (the same moment, told what the input was:
// the daemon's trace mode, drivers/elector_trace.hpp).
//
// Planted bugs (RuntimeBug) take effect only when Env::kPlantedBugs is true; the production
// environment sets it to false, so `conclaved` cannot enable them. An environment that proves
// its own check catches the planted SendBeforePersist (the simulator's history: not-durable)
// declares `static constexpr bool kOwnPersistOrderCheck = true;`: the runtime's check then
// leaves that planted bug to it (and only that one).
#pragma once

#include <array>
#include <boost/describe/enum.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "conclave/core/check.hpp"
#include "conclave/elector/elector.hpp"

namespace conclave::runtime {

using TimerGeneration = std::uint64_t;

/// Bugs planted in the runtime to prove that the simulator exercises it (see tests/sim).
BOOST_DEFINE_FIXED_ENUM_CLASS(
    RuntimeBug, std::uint8_t,
    None,               // the correct behaviour
    SendBeforePersist,  // perform a batch's PersistState after the batch's sends
    AckBeforeFsync,     // LogRuntime: tell the log core persisted() before the storage flush
    AnswerBeforeMeta    // LogRuntime: deliver a held ProposeResult before a written commit point
                        // covers it (deferred commit point)
)

/// What an input given to the core was (Env::before_step): its kind and its argument.
enum class InputKind : std::uint8_t {
    Start,
    Stop,
    Receive,
    PeerUp,
    PeerDown,
    TimerFired,
    TransferLeadership,
    SetPriority,
    SetVoters
};
struct StepInput {
    InputKind kind = InputKind::Start;
    const elector::Message* message = nullptr;  // Receive
    std::optional<NodeId> peer = std::nullopt;  // PeerUp, PeerDown, TransferLeadership, SetPriority
    std::optional<elector::TimerId> timer = std::nullopt;  // TimerFired
    LinkLoss loss = LinkLoss::PeerClosed;                  // PeerDown
};

/// Every node of an n-node table but `self`, in index order: whom a broadcast goes to.
inline std::vector<NodeId> others_of(std::size_t n, NodeId self) {
    std::vector<NodeId> others;
    others.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const NodeId node{static_cast<std::uint16_t>(i)};
        if (node != self) {
            others.push_back(node);
        }
    }
    return others;
}

template <class Env>
class ElectorRuntime {
  public:
    /// `config` must validate (Elector throws std::invalid_argument otherwise).
    ElectorRuntime(Env& env, elector::Config config, elector::DurableState restored,
                   elector::RandomSource random, RuntimeBug bug = RuntimeBug::None)
        : env_(env),
          elector_(std::move(config), restored, std::move(random)),
          bug_(bug),
          durable_(restored) {
        others_ = others_of(elector_.config().cluster_size, elector_.config().self);
        CONCLAVE_CHECK(others_.size() + 1 == elector_.config().cluster_size,
                       "a broadcast reaches every other node of the table");
    }
    ElectorRuntime(const ElectorRuntime&) = delete;
    ElectorRuntime& operator=(const ElectorRuntime&) = delete;

    // ---- Inputs: each gives the core one input and performs what it returns. They return the
    // core's actions (empty when the runtime is out of service or the input was filtered out).
    const elector::Actions& start() {
        return run({.kind = InputKind::Start}, [&] { return elector_.start(env_.now()); });
    }
    const elector::Actions& stop() {
        return run({.kind = InputKind::Stop}, [&] { return elector_.stop(env_.now()); });
    }
    const elector::Actions& receive(const elector::Message& m) {
        return run({.kind = InputKind::Receive, .message = &m},
                   [&] { return elector_.receive(env_.now(), m); });
    }
    const elector::Actions& peer_up(NodeId peer) {
        return run({.kind = InputKind::PeerUp, .peer = peer},
                   [&] { return elector_.peer_up(env_.now(), peer); });
    }
    const elector::Actions& peer_down(NodeId peer, LinkLoss loss = LinkLoss::PeerClosed) {
        return run({.kind = InputKind::PeerDown, .peer = peer, .loss = loss},
                   [&] { return elector_.peer_down(env_.now(), peer, loss); });
    }
    /// True when a firing of (timer, generation) would reach the core now.
    bool timer_current(elector::TimerId timer, TimerGeneration generation) const {
        return !failed_ && generations_[index(timer)] == generation;
    }
    /// A timer armed with `generation` fired. Stale firings are counted and dropped; a current
    /// one consumes the instance and is given to the core.
    const elector::Actions& timer_fired(elector::TimerId timer, TimerGeneration generation) {
        if (generations_[index(timer)] != generation) {
            ++stale_timer_firings_;
            return nothing();
        }
        ++generations_[index(timer)];  // this instance is consumed
        if (failed_) {
            return nothing();
        }
        ++timer_firings_;
        return run({.kind = InputKind::TimerFired, .timer = timer},
                   [&] { return elector_.timer_fired(env_.now(), timer); });
    }
    /// Leader only: hand over to `target`. Returns the reason when refused.
    std::optional<std::string> transfer_leadership(NodeId target) {
        if (failed_) {
            return "the elector runtime failed (state write error); restart the node";
        }
        if (auto error = elector_.transfer_error(target)) {
            return error;
        }
        run({.kind = InputKind::TransferLeadership, .peer = target},
            [&] { return elector_.transfer_leadership(env_.now(), target); });
        return std::nullopt;
    }
    /// The preferred leader's hand-back (docs/design.md, "Priorities"): when the core names a
    /// node to hand leadership to (Elector::handback_target), gives it the transfer as the input
    /// transfer_leadership and returns the node. Environments call it after every heartbeat
    /// broadcast firing (a leader's periodic input).
    std::optional<NodeId> hand_back() {
        if (failed_) {
            return std::nullopt;
        }
        const std::optional<NodeId> target = elector_.handback_target();
        if (target && !transfer_leadership(*target)) {
            ++hand_backs_;
            return target;
        }
        return std::nullopt;
    }
    /// Priorities (docs/design.md): an operator changed `node`'s priority on this node. Returns
    /// the reason when refused.
    std::optional<std::string> set_priority(NodeId node, std::uint32_t priority) {
        if (failed_) {
            return "the elector runtime failed (state write error); restart the node";
        }
        if (auto error = elector_.priority_error(node, priority)) {
            return error;
        }
        run({.kind = InputKind::SetPriority, .peer = node},
            [&] { return elector_.set_priority(env_.now(), node, priority); });
        return std::nullopt;
    }
    /// Membership (docs/membership.md): the active configuration changed (a configuration entry
    /// committed, or the one in the log at start). Given to the core like any input (a refused one
    /// is counted there); returns the reason when refused.
    std::optional<std::string> set_voters(NodeSet voters, std::uint64_t version) {
        if (failed_) {
            return "the elector runtime failed (state write error); restart the node";
        }
        auto error = elector_.voters_error(voters, version);
        run({.kind = InputKind::SetVoters},
            [&] { return elector_.set_voters(env_.now(), voters, version); });
        return error;
    }
    /// Membership (docs/membership.md §8): the node table grew (Elector::grow_table); broadcasts
    /// reach the new nodes from now on. Returns the reason when refused.
    std::optional<std::string> grow_table(std::size_t cluster_size) {
        auto error = elector_.grow_table(cluster_size);
        if (!error) {
            others_ = others_of(cluster_size, elector_.config().self);
        }
        CONCLAVE_CHECK(others_.size() + 1 == elector_.config().cluster_size,
                       "a broadcast reaches every other node of the table");
        return error;
    }
    /// The environment's peer round-trip estimate (sets the ranked backoff's slot; no actions).
    void observe_round_trip(std::chrono::microseconds round_trip) {
        if (!failed_) {
            elector_.observe_round_trip(round_trip);
        }
    }
    /// Leader only: the next LSN; nullopt when not the leader or out of service.
    std::optional<Lsn> issue_lsn() {
        if (failed_) {
            return std::nullopt;
        }
        const std::optional<Lsn> lsn = elector_.issue_lsn();
        CONCLAVE_CHECK(!lsn || lsn->term == elector_.state().term,
                       "a leader issues LSNs of its own term");
        return lsn;
    }

    // ---- Observation ---------------------------------------------------------------------------
    const elector::Elector& elector() const { return elector_; }
    /// The actions of the last input (empty when it was refused or the runtime is out of service).
    const elector::Actions& last_actions() const { return last_; }
    /// True after a failed persist: the node takes no further part.
    bool failed() const { return failed_; }
    TimerGeneration generation(elector::TimerId timer) const { return generations_[index(timer)]; }
    std::uint64_t timer_firings() const { return timer_firings_; }
    std::uint64_t stale_timer_firings() const { return stale_timer_firings_; }
    /// Hand-backs given to the core (hand_back).
    std::uint64_t hand_backs() const { return hand_backs_; }
    std::span<const NodeId> others() const { return others_; }

  private:
    static std::size_t index(elector::TimerId t) { return static_cast<std::size_t>(t); }
    const elector::Actions& nothing() {
        last_.clear();
        return last_;
    }

    template <class Input>
    const elector::Actions& run(const StepInput& what, Input&& input) {
        if (failed_) {
            return nothing();
        }
        // A local list: an environment callback may give this runtime another input (a
        // subscriber reacting to a leadership change), which must not overwrite it mid-batch.
        elector::Actions actions = input();
        if constexpr (requires(Env & e, const elector::Actions& a) { e.before_actions(a); }) {
            env_.before_actions(actions);
        }
        if constexpr (requires(Env & e, const StepInput& w, const elector::Actions& a) {
                          e.before_step(w, a);
                      }) {
            env_.before_step(what, actions);
        }
        execute(actions);
        last_ = std::move(actions);
        return last_;
    }

    bool planted(RuntimeBug bug) const {
        if constexpr (Env::kPlantedBugs) {
            return bug_ == bug;
        } else {
            return false;
        }
    }

    void execute(const elector::Actions& actions) {
        const elector::PersistState* deferred = nullptr;  // RuntimeBug::SendBeforePersist only
        for (const elector::Action& action : actions) {
            if (failed_) {
                return;  // nothing after a failed PersistState may take effect
            }
            if (const auto* p = std::get_if<elector::PersistState>(&action);
                p && planted(RuntimeBug::SendBeforePersist)) {
                deferred = p;
                continue;
            }
            perform(action);
        }
        if (deferred && !failed_) {
            perform(elector::Action{*deferred});
        }
    }

    void perform(const elector::Action& action) {
        std::visit(
            [&](const auto& a) {
                using T = std::decay_t<decltype(a)>;
                if constexpr (std::is_same_v<T, elector::SendTo>) {
                    CONCLAVE_CHECK(a.to != elector_.config().self, "a node sends to others");
                    check_durable(a.message, a.to);
                    env_.send(std::span<const NodeId>(&a.to, 1), a.message);
                } else if constexpr (std::is_same_v<T, elector::Broadcast>) {
                    check_durable(a.message, std::nullopt);
                    env_.send(std::span<const NodeId>(others_), a.message);
                } else if constexpr (std::is_same_v<T, elector::ArmTimer>) {
                    const TimerGeneration g = ++generations_[index(a.timer)];
                    env_.arm(a.timer, a.delay, g);
                } else if constexpr (std::is_same_v<T, elector::CancelTimer>) {
                    cancel(a.timer);
                } else if constexpr (std::is_same_v<T, elector::PersistState>) {
                    check_persist_order(a.state);
                    if (env_.persist(a.state)) {
                        durable_ = a.state;
                    } else {
                        failed_ = true;
                        for (std::size_t i = 0; i < elector::kTimerCount; ++i) {
                            cancel(static_cast<elector::TimerId>(i));
                        }
                        env_.failed(a.state);
                    }
                } else if constexpr (std::is_same_v<T, elector::NotifyLeadership>) {
                    check_told_durable(a.snapshot);
                    env_.notify(a.snapshot);
                } else {
                    static_assert(std::is_same_v<T, elector::RaiseAlarm>);
                    env_.alarm(a);
                }
            },
            action);
    }

    void cancel(elector::TimerId timer) {
        ++generations_[index(timer)];
        env_.cancel(timer);
    }

    /// The durable state only moves forward: a term never goes back, and within a term a vote,
    /// once durable, is never replaced (one vote per term, Elector.tla's votedFor).
    void check_persist_order(const elector::DurableState& next) const {
        CONCLAVE_CHECK(next.term >= durable_.term, "the durable term never goes back");
        // (The planted DoubleVote replaces a vote on purpose: the simulator must catch it.)
        const bool same_term_vote =
            next.term == durable_.term && durable_.voted_for &&
            elector_.config().planted_bug != elector::PlantedBug::DoubleVote;
        CONCLAVE_CHECK(!same_term_vote || next.voted_for == durable_.voted_for,
                       "a durable vote is never replaced within its term");
    }

    /// Persist before telling: the application hears of a term (a fencing token) only once it
    /// is durable. Environments that catch the planted SendBeforePersist themselves
    /// (kOwnPersistOrderCheck) leave it to their own check, as check_durable does.
    void check_told_durable(const elector::LeadershipSnapshot& told) const {
        if constexpr (requires { Env::kOwnPersistOrderCheck; }) {
            if (Env::kOwnPersistOrderCheck && planted(RuntimeBug::SendBeforePersist)) {
                return;
            }
        }
        CONCLAVE_CHECK(told.term <= durable_.term,
                       "persist before telling: the application is told a term once it is durable");
    }

    /// Persist before send, checked: `m` may leave only if the term it claims for this node is
    /// durable (the envelope term; a vote response's voter_term, its envelope echoes the
    /// proposal's; not a PreVote message's, which is the proposed term), and so is the vote it
    /// grants (a granted ElectionResponse to the node the state votes for in that term; one to
    /// another node is the support a follower sends the leader it discovered, not a vote).
    void check_durable(const elector::Message& m, std::optional<NodeId> to) const {
        if constexpr (requires { Env::kOwnPersistOrderCheck; }) {
            if (Env::kOwnPersistOrderCheck && planted(RuntimeBug::SendBeforePersist)) {
                return;
            }
        }
        const auto* response = std::get_if<elector::ElectionResponse>(&m.body);
        const bool prevote = std::holds_alternative<elector::ScoutingRequest>(m.body) ||
                             std::holds_alternative<elector::ScoutingResponse>(m.body);
        const Term claimed = response ? response->voter_term : prevote ? Term{} : m.term;
        CONCLAVE_CHECK(
            claimed <= durable_.term,
            "persist before send: the term a message claims is durable before it leaves");
        if (response == nullptr || !response->granted) {
            return;
        }
        const elector::ElectorState& state = elector_.state();
        const bool vote = to && state.term == m.term && state.voted_for == to;
        CONCLAVE_CHECK(!vote || (durable_.term == m.term && durable_.voted_for == to),
                       "persist before send: a vote is durable before it is granted");
    }

    Env& env_;
    elector::Elector elector_;
    RuntimeBug bug_;
    elector::DurableState
        durable_;  // what the last PersistState made durable (the restored state before)
    std::vector<NodeId> others_;
    std::array<TimerGeneration, elector::kTimerCount> generations_{};
    elector::Actions last_;
    bool failed_ = false;
    std::uint64_t timer_firings_ = 0;
    std::uint64_t stale_timer_firings_ = 0;
    std::uint64_t hand_backs_ = 0;
};

}  // namespace conclave::runtime
