// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/faults.hpp"
#include "conclave/core/enum_names.hpp"

#include <algorithm>
#include <map>

#include "conclave/bounce/observation.hpp"
#include "conclave/core/check.hpp"

namespace conclave::bounce {

std::string_view to_string(ObservedRole r) {
    return enum_name(r);
}

std::optional<ObservedRole> role_from_string(std::string_view s) {
    for (ObservedRole r : {ObservedRole::Stopped, ObservedRole::Follower, ObservedRole::Candidate,
                           ObservedRole::Leader}) {
        if (to_string(r) == s) {
            return r;
        }
    }
    return std::nullopt;
}

std::string node_name(NodeIndex i) {
    return "n" + std::to_string(i + 1);
}

std::optional<NodeIndex> node_index(std::string_view name, std::size_t node_count) {
    for (NodeIndex i = 0; i < node_count; ++i) {
        if (node_name(i) == name) {
            return i;
        }
    }
    return std::nullopt;
}

FaultState::FaultState(std::size_t node_count_)
    : node_count(node_count_),
      modes(node_count_ * node_count_, LinkMode{Pass{}}),
      processes(node_count_, ProcessState::Running) {}

void FaultState::apply(const FaultEvent& e) {
    switch (e.kind) {
        case FaultKind::SetLink:
            CONCLAVE_CHECK(e.link.from < node_count && e.link.to < node_count,
                           "a fault names a link between the nodes");
            modes[e.link.from * node_count + e.link.to] = e.mode;
            return;
        case FaultKind::Kill:
        case FaultKind::Stop:
            processes.at(e.node) = ProcessState::Down;
            return;
        case FaultKind::Start:
        case FaultKind::Resume:
            processes.at(e.node) = ProcessState::Running;
            return;
        case FaultKind::Pause:
            processes.at(e.node) = ProcessState::Paused;
            return;
        case FaultKind::DiskFull:
            return;  // still running (until it exits, reported as a Stop)
        case FaultKind::Remove:
            processes.at(e.node) = ProcessState::Removed;  // not a member: counts for no quorum
            return;
    }
}

bool FaultState::connected(NodeIndex a, NodeIndex b) const {
    return a == b || (lets_bytes_through(mode({a, b})) && lets_bytes_through(mode({b, a})));
}

std::size_t FaultState::reachable_count(NodeIndex i) const {
    if (!alive(i)) {
        return 0;
    }
    std::size_t n = 0;
    for (NodeIndex j = 0; j < node_count; ++j) {
        if (alive(j) && connected(i, j)) {
            n += 1;
        }
    }
    return n;
}

std::string FaultState::describe() const {
    std::string out;
    auto add = [&](const std::string& s) {
        if (!out.empty()) {
            out += ", ";
        }
        out += s;
    };
    for (NodeIndex a = 0; a < node_count; ++a) {
        for (NodeIndex b = a + 1; b < node_count; ++b) {
            const LinkMode& ab = mode({a, b});
            const LinkMode& ba = mode({b, a});
            if (std::holds_alternative<Pass>(ab) && std::holds_alternative<Pass>(ba)) {
                continue;
            }
            if (ab == ba) {
                add(to_string(ab) + " " + node_name(a) + "-" + node_name(b));
                continue;
            }
            if (!std::holds_alternative<Pass>(ab)) {
                add(to_string(ab) + " " + node_name(a) + ">" + node_name(b));
            }
            if (!std::holds_alternative<Pass>(ba)) {
                add(to_string(ba) + " " + node_name(b) + ">" + node_name(a));
            }
        }
    }
    for (NodeIndex i = 0; i < node_count; ++i) {
        if (processes[i] == ProcessState::Down) {
            add(node_name(i) + " down");
        } else if (processes[i] == ProcessState::Paused) {
            add(node_name(i) + " paused");
        } else if (processes[i] == ProcessState::Removed) {
            add(node_name(i) + " removed");
        }
    }
    return out;
}

FaultState fault_state_at(std::size_t node_count, const std::vector<FaultEvent>& events,
                          std::int64_t t_ms) {
    FaultState s(node_count);
    for (const FaultEvent& e : events) {
        if (e.at_ms > t_ms) {
            break;
        }
        s.apply(e);
    }
    return s;
}

bool healthy_throughout(std::size_t node_count, const std::vector<FaultEvent>& events,
                        NodeIndex node, std::int64_t from_ms, std::int64_t to_ms) {
    FaultState s(node_count);
    std::size_t k = 0;
    for (; k < events.size() && events[k].at_ms <= from_ms; ++k) {
        s.apply(events[k]);
    }
    if (!s.alive(node) || !s.has_quorum(node)) {
        return false;
    }
    for (; k < events.size() && events[k].at_ms <= to_ms; ++k) {
        s.apply(events[k]);
        // Events at one instant form one step (e.g. both directions of a cut): judge the result.
        if (k + 1 < events.size() && events[k + 1].at_ms == events[k].at_ms) {
            continue;
        }
        if (!s.alive(node) || !s.has_quorum(node)) {
            return false;
        }
    }
    return true;
}

std::vector<FaultInterval> fault_intervals(std::size_t node_count,
                                           const std::vector<FaultEvent>& events,
                                           std::int64_t end_ms) {
    // One open interval per key: an unordered node pair (link faults) or a node (process faults).
    struct Open {
        std::int64_t begin_ms;
        std::string label;
        std::vector<NodeIndex> nodes;
    };
    std::map<std::pair<NodeIndex, NodeIndex>, Open> open;  // process faults use {i, i}
    std::vector<FaultInterval> out;
    FaultState s(node_count);
    auto close = [&](std::pair<NodeIndex, NodeIndex> key, std::int64_t at) {
        auto it = open.find(key);
        if (it != open.end() && at > it->second.begin_ms) {  // skip zero-length steps
            out.push_back(
                FaultInterval{it->second.begin_ms, at, it->second.label, it->second.nodes});
        }
        if (it != open.end()) {
            open.erase(it);
        }
    };
    for (const FaultEvent& e : events) {
        s.apply(e);
        if (e.kind == FaultKind::SetLink) {
            const NodeIndex a = std::min(e.link.from, e.link.to);
            const NodeIndex b = std::max(e.link.from, e.link.to);
            close({a, b}, e.at_ms);
            std::string label;
            const LinkMode& ab = s.mode({a, b});
            const LinkMode& ba = s.mode({b, a});
            if (std::holds_alternative<Pass>(ab) && std::holds_alternative<Pass>(ba)) {
                continue;
            }
            if (ab == ba) {
                label = to_string(ab) + " " + node_name(a) + "-" + node_name(b);
            } else if (std::holds_alternative<Pass>(ba)) {
                label = to_string(ab) + " " + node_name(a) + ">" + node_name(b);
            } else if (std::holds_alternative<Pass>(ab)) {
                label = to_string(ba) + " " + node_name(b) + ">" + node_name(a);
            } else {
                label =
                    to_string(ab) + "/" + to_string(ba) + " " + node_name(a) + "-" + node_name(b);
            }
            open[{a, b}] = Open{e.at_ms, label, {a, b}};
            continue;
        }
        close({e.node, e.node}, e.at_ms);
        if (e.kind == FaultKind::Kill || e.kind == FaultKind::Stop) {
            open[{e.node, e.node}] =
                Open{e.at_ms,
                     node_name(e.node) + (e.kind == FaultKind::Kill ? " killed" : " stopped"),
                     {e.node}};
        } else if (e.kind == FaultKind::Pause) {
            open[{e.node, e.node}] = Open{e.at_ms, node_name(e.node) + " paused", {e.node}};
        } else if (e.kind == FaultKind::DiskFull) {
            open[{e.node, e.node}] = Open{e.at_ms, node_name(e.node) + " disk full", {e.node}};
        } else if (e.kind == FaultKind::Remove) {
            open[{e.node, e.node}] = Open{e.at_ms, node_name(e.node) + " removed", {e.node}};
        }
    }
    while (!open.empty()) {
        close(open.begin()->first, end_ms);
    }
    std::sort(out.begin(), out.end(), [](const FaultInterval& x, const FaultInterval& y) {
        return x.begin_ms < y.begin_ms;
    });
    return out;
}

}  // namespace conclave::bounce
