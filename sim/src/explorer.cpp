// SPDX-License-Identifier: Apache-2.0
#include "conclave/sim/explorer.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>

#include "conclave/elector/elector.hpp"
#include "conclave/sim/rng.hpp"
#include "conclave/sim/state_hash.hpp"

namespace conclave::sim {
namespace {

enum class LabelKind : std::uint8_t { Fire, Crash, Restart, Deliver, Drop, Duplicate };

/// One transition out of a state: which node, and which timer or in-flight message (the index in
/// the state's sorted in-flight vector, which is the same on replay).
struct Label {
    LabelKind kind{};
    std::uint8_t node = 0;
    std::uint16_t arg = 0;

    std::uint32_t encode() const {
        return static_cast<std::uint32_t>(kind) | (std::uint32_t{node} << 8) |
               (std::uint32_t{arg} << 16);
    }
    static Label decode(std::uint32_t x) {
        return Label{static_cast<LabelKind>(x & 0xFFU), static_cast<std::uint8_t>((x >> 8) & 0xFFU),
                     static_cast<std::uint16_t>(x >> 16)};
    }
};

struct InFlight {
    PackedMessage key;
    NodeId to{};
    elector::Message message;
};

struct XState {
    std::vector<std::optional<elector::Elector>> cores;  // nullopt: crashed
    std::vector<elector::DurableState> durable;
    std::vector<InFlight> in_flight;  // sorted by key: a canonical multiset
    History history;
    // The leader lease compares times: each node's clock advances by a timer's delay when the
    // timer fires (messages take no time), so a promise or a lease lasts as many firings as in
    // a run. Left out of the hash but for what the lease decides on (LeaseHash).
    std::vector<Millis> clock;
    std::vector<std::array<Millis, elector::kTimerCount>> armed_delay;
    std::uint8_t crashes = 0;
    std::uint8_t duplications = 0;
    std::uint32_t depth = 0;
    std::uint32_t path = 0;  // index into the path arena
};

/// Open-addressing set of 64-bit hashes (8 bytes per slot, at most half full).
class HashSet {
  public:
    HashSet() : slots_(std::size_t{1} << 16, 0) {}
    /// True if `h` was not in the set.
    bool insert(std::uint64_t h) {
        h = h == 0 ? 1 : h;
        if ((size_ + 1) * 2 > slots_.size()) {
            grow();
        }
        return place(slots_, h);
    }

  private:
    bool place(std::vector<std::uint64_t>& slots, std::uint64_t h) {
        const std::size_t mask = slots.size() - 1;
        for (std::size_t i = h & mask;; i = (i + 1) & mask) {
            if (slots[i] == h) {
                return false;
            }
            if (slots[i] == 0) {
                slots[i] = h;
                ++size_;
                return true;
            }
        }
    }
    void grow() {
        std::vector<std::uint64_t> bigger(slots_.size() * 2, 0);
        size_ = 0;
        for (std::uint64_t h : slots_) {
            if (h != 0) {
                place(bigger, h);
            }
        }
        slots_.swap(bigger);
    }
    std::vector<std::uint64_t> slots_;
    std::size_t size_ = 0;
};

std::uint64_t zero_random() {
    return 0;  // backoff delays do not matter: any armed timer may fire at any time
}

class Explorer {
  public:
    explicit Explorer(const ExploreOptions& o) : o_(o) {
        for (std::size_t i = 0; i < o.nodes; ++i) {
            elector::Config c = explorer_config(o);
            c.self = NodeId{static_cast<std::uint16_t>(i)};
            configs_.push_back(c);
        }
    }

    XState initial() {
        XState s{{},
                 std::vector<elector::DurableState>(o_.nodes),
                 {},
                 History(o_.nodes, o_.history),
                 std::vector<Millis>(o_.nodes, Millis{0}),
                 std::vector<std::array<Millis, elector::kTimerCount>>(o_.nodes)};
        for (std::size_t i = 0; i < o_.nodes; ++i) {
            s.cores.emplace_back(std::in_place, configs_[i], elector::DurableState{}, zero_random);
        }
        for (std::size_t i = 0; i < o_.nodes; ++i) {
            perform(s, i, StepAction::Start, s.cores[i]->start(s.clock[i]));
        }
        for (std::size_t i = 0; i < o_.nodes; ++i) {
            for (std::size_t j = 0; j < o_.nodes; ++j) {
                if (i != j) {
                    perform(s, i, StepAction::PeerUp, s.cores[i]->peer_up(s.clock[i], node(j)));
                }
            }
        }
        return s;
    }

    /// Every transition out of `s`. The depth-first search expands the last label first, so
    /// crashes and restarts (listed last) are tried early: faults find bugs sooner; the set of
    /// states explored is the same in any order.
    std::vector<Label> labels(const XState& s) const {
        std::vector<Label> out;
        for (std::size_t k = 0; k < s.in_flight.size(); ++k) {
            if (k > 0 && s.in_flight[k].key == s.in_flight[k - 1].key) {
                continue;  // same message: same successors
            }
            const auto index = static_cast<std::uint16_t>(k);
            out.push_back(Label{LabelKind::Deliver, 0, index});
            out.push_back(Label{LabelKind::Drop, 0, index});
            if (s.duplications < o_.max_duplications) {
                out.push_back(Label{LabelKind::Duplicate, 0, index});
            }
        }
        for (std::size_t i = 0; i < o_.nodes; ++i) {
            if (!s.cores[i]) {
                continue;
            }
            for (std::uint16_t t = 0; t < elector::kTimerCount; ++t) {
                if (s.cores[i]->state().timer_armed(static_cast<elector::TimerId>(t))) {
                    out.push_back(Label{LabelKind::Fire, static_cast<std::uint8_t>(i), t});
                }
            }
        }
        for (std::size_t i = 0; i < o_.nodes; ++i) {
            const auto n = static_cast<std::uint8_t>(i);
            if (!s.cores[i]) {
                out.push_back(Label{LabelKind::Restart, n, 0});
            } else if (s.crashes < o_.max_crashes) {
                out.push_back(Label{LabelKind::Crash, n, 0});
            }
        }
        return out;
    }

    /// Applies `label` to `s`; a violation it causes is left in violation_.
    void apply(XState& s, Label label) {
        const std::size_t n = label.node;
        switch (label.kind) {
            case LabelKind::Fire: {
                const auto timer = static_cast<elector::TimerId>(label.arg);
                s.clock[n] += s.armed_delay[n][static_cast<std::size_t>(timer)];
                perform(s, n, action_for(timer), s.cores[n]->timer_fired(s.clock[n], timer));
                break;
            }
            case LabelKind::Crash: {
                ++s.crashes;
                s.cores[n].reset();
                std::erase_if(s.in_flight, [&](const InFlight& f) {
                    return f.to.value == n || f.message.from.value == n;
                });
                perform(s, n, StepAction::Crash, elector::Actions{});
                for (std::size_t j = 0; j < o_.nodes; ++j) {
                    if (s.cores[j]) {
                        perform(s, j, StepAction::PeerDown,
                                s.cores[j]->peer_down(s.clock[j], node(n)));
                    }
                }
                break;
            }
            case LabelKind::Restart: {
                if (o_.lose_durable_state) {
                    s.durable[n] = elector::DurableState{};
                }
                s.cores[n].emplace(configs_[n], s.durable[n], zero_random);
                perform(s, n, StepAction::Restart, s.cores[n]->start(s.clock[n]));
                for (std::size_t j = 0; j < o_.nodes; ++j) {
                    if (j != n && s.cores[j]) {
                        perform(s, n, StepAction::PeerUp, s.cores[n]->peer_up(s.clock[n], node(j)));
                        perform(s, j, StepAction::PeerUp, s.cores[j]->peer_up(s.clock[j], node(n)));
                    }
                }
                break;
            }
            case LabelKind::Deliver: {
                const InFlight f = s.in_flight[label.arg];
                s.in_flight.erase(s.in_flight.begin() + label.arg);
                const std::size_t to = f.to.value;
                assert(s.cores[to]);
                perform(s, to, action_for(f.message.body),
                        s.cores[to]->receive(s.clock[to], f.message));
                break;
            }
            case LabelKind::Drop:
                s.in_flight.erase(s.in_flight.begin() + label.arg);
                break;
            case LabelKind::Duplicate: {
                ++s.duplications;
                const InFlight f = s.in_flight[label.arg];
                insert(s, f.to, f.message);
                break;
            }
        }
    }

    std::string describe(const XState& s, Label label) const {
        const std::string n = "n" + std::to_string(label.node);
        switch (label.kind) {
            case LabelKind::Fire:
                return n + ": " + std::string(to_string(static_cast<elector::TimerId>(label.arg))) +
                       " fires";
            case LabelKind::Crash:
                return n + " crashes";
            case LabelKind::Restart:
                return n + " restarts";
            case LabelKind::Deliver:
            case LabelKind::Drop:
            case LabelKind::Duplicate: {
                const InFlight& f = s.in_flight[label.arg];
                const char* verb = label.kind == LabelKind::Deliver ? " receives "
                                   : label.kind == LabelKind::Drop  ? ": network drops "
                                                                    : ": network duplicates ";
                return "n" + std::to_string(f.to.value) + verb + to_string(f.message);
            }
        }
        return "?";
    }

    bool within_bounds(const XState& s) const {
        if (s.in_flight.size() > o_.max_in_flight) {
            return false;
        }
        for (std::size_t i = 0; i < o_.nodes; ++i) {
            const Term t = s.cores[i] ? s.cores[i]->state().term : s.durable[i].term;
            if (t.value > o_.max_term) {
                return false;
            }
            if (s.cores[i] && s.cores[i]->state().last_round_id > o_.max_rounds) {
                return false;
            }
        }
        return true;
    }

    /// What the leader lease decides on at `now`: how long the follower's promise and the
    /// leader's lease have left (0 when over or none).
    static std::uint64_t LeaseHash(const elector::Elector& e, Millis now) {
        const elector::LeaseTimes& l = e.lease();
        const auto left = [&](std::optional<Millis> until) -> std::uint64_t {
            return until && *until > now ? static_cast<std::uint64_t>((*until - now).count()) : 0;
        };
        const std::optional<Millis> promise =
            l.heard_leader_at
                ? std::optional<Millis>(*l.heard_leader_at + e.config().promise_duration())
                : std::nullopt;
        return left(promise) | (left(l.lease_end) << 32);
    }

    static std::uint64_t hash(const XState& s) {
        std::uint64_t h = hash_mix(0x4558, s.crashes | (std::uint64_t{s.duplications} << 8));
        for (std::size_t i = 0; i < s.cores.size(); ++i) {
            if (s.cores[i]) {
                h = hash_mix(h, hash_state(s.cores[i]->state()));
                h = hash_mix(h, LeaseHash(*s.cores[i], s.clock[i]));
            } else {
                h = hash_mix(h, 0xDEAD0000ULL ^ (s.durable[i].term.value << 20) ^
                                    optional_node_code(s.durable[i].voted_for));
            }
        }
        for (const InFlight& f : s.in_flight) {
            h = hash_mix(hash_mix(h, f.key.head), f.key.body);
        }
        return hash_mix(h, s.history.hash());
    }

    /// The world of `s` as explorer_walk shows it.
    static void view(const XState& s, WalkStep& out) {
        out.states.clear();
        for (const auto& core : s.cores) {
            out.states.push_back(core ? std::optional<elector::ElectorState>(core->state())
                                      : std::nullopt);
        }
        out.durable = s.durable;
        out.in_flight.clear();
        for (const InFlight& f : s.in_flight) {
            out.in_flight.emplace_back(f.to, f.message);
        }
    }

    std::optional<Violation> violation_;

  private:
    static NodeId node(std::size_t i) { return NodeId{static_cast<std::uint16_t>(i)}; }

    static void insert(XState& s, NodeId to, const elector::Message& m) {
        InFlight f{pack(to, m), to, m};
        auto at = std::upper_bound(
            s.in_flight.begin(), s.in_flight.end(), f.key,
            [](const PackedMessage& key, const InFlight& other) { return key < other.key; });
        s.in_flight.insert(at, std::move(f));
    }

    void perform(XState& s, std::size_t n, StepAction action, const elector::Actions& actions) {
        for (const elector::Action& a : actions) {
            if (const auto* to = std::get_if<elector::SendTo>(&a)) {
                if (s.cores[to->to.value]) {
                    insert(s, to->to, to->message);
                }
            } else if (const auto* all = std::get_if<elector::Broadcast>(&a)) {
                for (std::size_t j = 0; j < o_.nodes; ++j) {
                    if (j != n && s.cores[j]) {
                        insert(s, node(j), all->message);
                    }
                }
            } else if (const auto* persist = std::get_if<elector::PersistState>(&a)) {
                s.durable[n] = persist->state;
            } else if (const auto* arm = std::get_if<elector::ArmTimer>(&a)) {
                s.armed_delay[n][static_cast<std::size_t>(arm->timer)] = arm->delay;
            }
        }
        if (violation_) {
            return;
        }
        elector::ElectorState remains;
        if (!s.cores[n]) {
            remains.term = s.durable[n].term;
            remains.voted_for = s.durable[n].voted_for;
        }
        const elector::ElectorState& state = s.cores[n] ? s.cores[n]->state() : remains;
        violation_ = s.history.after_step(node(n), action, state, actions);
    }

    ExploreOptions o_;
    std::vector<elector::Config> configs_;
};

}  // namespace

void explorer_walk(const ExploreOptions& options, std::uint64_t seed, std::size_t steps,
                   const std::function<void(const WalkStep&)>& observe) {
    Explorer x(options);
    Rng rng(seed);
    XState s = x.initial();
    WalkStep step;
    Explorer::view(s, step);
    observe(step);
    for (std::size_t k = 0; k < steps && !x.violation_; ++k) {
        const std::vector<Label> labels = x.labels(s);
        if (labels.empty()) {
            break;
        }
        const Label label = labels[static_cast<std::size_t>(rng.below(labels.size()))];
        step = WalkStep{};
        step.node = NodeId{label.node};
        switch (label.kind) {
            case LabelKind::Fire:
                step.kind = WalkStep::Kind::Fire;
                step.timer = static_cast<elector::TimerId>(label.arg);
                break;
            case LabelKind::Crash:
                step.kind = WalkStep::Kind::Crash;
                break;
            case LabelKind::Restart:
                step.kind = WalkStep::Kind::Restart;
                break;
            case LabelKind::Deliver:
            case LabelKind::Drop:
            case LabelKind::Duplicate:
                step.kind = label.kind == LabelKind::Deliver ? WalkStep::Kind::Deliver
                            : label.kind == LabelKind::Drop  ? WalkStep::Kind::Drop
                                                             : WalkStep::Kind::Duplicate;
                step.node = s.in_flight[label.arg].to;
                step.message = s.in_flight[label.arg].message;
                break;
        }
        x.apply(s, label);
        Explorer::view(s, step);
        observe(step);
    }
}

elector::Config explorer_config(const ExploreOptions& options) {
    elector::Config c = elector::Config::fast(options.nodes, NodeId{0});
    c.heartbeat_check_period = c.inactivity_interval();  // one missed check = leader gone
    c.scouting = options.scouting;
    c.check_quorum = options.check_quorum;
    c.planted_bug = options.planted_bug;
    return c;
}

namespace {

/// A state's place in the search tree: its parent's index and the label that led to it.
struct PathNode {
    std::uint32_t parent;
    std::uint32_t label;
};

/// Replays the path to the failing state (`failure`: the state's path and the last label) and
/// describes each step.
std::vector<std::string> counterexample(const ExploreOptions& options,
                                        const std::vector<PathNode>& arena,
                                        const std::pair<std::uint32_t, Label>& failure,
                                        bool initial_violates) {
    std::vector<Label> path;
    for (std::uint32_t p = failure.first; p != 0; p = arena[p].parent) {
        path.push_back(Label::decode(arena[p].label));
    }
    std::reverse(path.begin(), path.end());
    path.push_back(failure.second);
    std::vector<std::string> out;
    Explorer replay(options);
    XState s = replay.initial();
    std::size_t step = 0;
    for (const Label& label : path) {
        if (initial_violates && path.size() == 1) {
            break;  // the initial state itself violates
        }
        out.push_back(std::to_string(++step) + ". " + replay.describe(s, label));
        replay.apply(s, label);
    }
    return out;
}

}  // namespace

ExploreResult explore(const ExploreOptions& options) {
    if (options.nodes < 1 || options.nodes > 5) {
        throw std::invalid_argument("explore nodes: must be between 1 and 5, got " +
                                    std::to_string(options.nodes));
    }
    const auto started = std::chrono::steady_clock::now();
    Explorer x(options);
    ExploreResult result;
    std::vector<PathNode> arena{{0, 0}};
    HashSet visited;
    std::vector<XState> stack;
    stack.push_back(x.initial());
    visited.insert(Explorer::hash(stack.back()));
    result.states = 1;

    std::optional<std::pair<std::uint32_t, Label>> failure;  // (path of the state, last label)
    if (x.violation_) {
        failure = std::pair{0U, Label{}};
    }
    while (!stack.empty() && !failure) {
        XState s = std::move(stack.back());
        stack.pop_back();
        result.max_depth = std::max<std::uint64_t>(result.max_depth, s.depth);
        for (const Label& label : x.labels(s)) {
            ++result.transitions;
            XState next = s;
            next.depth = s.depth + 1;
            x.apply(next, label);
            if (x.violation_) {
                failure = std::pair{s.path, label};
                result.max_depth = std::max<std::uint64_t>(result.max_depth, next.depth);
                break;
            }
            if (!x.within_bounds(next) || !visited.insert(Explorer::hash(next))) {
                continue;
            }
            ++result.states;
            next.path = static_cast<std::uint32_t>(arena.size());
            arena.push_back(PathNode{s.path, label.encode()});
            stack.push_back(std::move(next));
        }
        if (options.max_states != 0 && result.states >= options.max_states) {
            result.complete = !stack.empty() ? false : result.complete;
            break;
        }
    }
    if (failure) {
        result.violation = x.violation_;
        const bool initial_violates = failure->first == 0 && result.transitions == 0;
        result.counterexample = counterexample(options, arena, *failure, initial_violates);
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return result;
}

}  // namespace conclave::sim
