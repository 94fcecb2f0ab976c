// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/report.hpp"

#include <fmt/core.h>
#include <algorithm>
#include <array>

namespace conclave::bounce {

namespace {

std::string run_title(const RunResult& r) {
    return fmt::format("{}, scouting {}", to_string(r.scenario), r.scouting ? "on" : "off");
}

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '&':
                out += "&amp;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

struct Row {
    std::string name;
    std::vector<std::string> cells;
};

std::string safety_cell(const Summary& s) {
    std::string safety = s.safe() ? "ok" : "VIOLATED";
    for (const SafetyViolation& v : s.violations) {
        std::string who;
        for (NodeIndex n : v.leaders) {
            who += (who.empty() ? "" : "+") + node_name(n);
        }
        safety += fmt::format(" (term {}: {})", v.term, who);
    }
    return safety;
}

/// The overlap, or without one the closest approach of two leases, +- the polling error.
std::string lease_overlap_cell(const LeaseSummary& l) {
    const auto seconds = [](std::int64_t ms) { return static_cast<double>(ms) / 1000.0; };
    if (const auto& o = l.longest_overlap) {
        return fmt::format("{} ms +-{}, {}+{} at {:.2f}s", o->length_ms, o->error_ms,
                           node_name(o->a), node_name(o->b), seconds(o->begin_ms));
    }
    if (const auto& c = l.closest) {
        return fmt::format("0 ms ({}'s ended {} ms +-{} before {}'s began, {:.2f}s)",
                           node_name(c->a), c->length_ms, c->error_ms, node_name(c->b),
                           seconds(c->begin_ms));
    }
    return "0 ms";
}

/// The lease rows (from the /status lease fields): "-" for a daemon without the lease.
void lease_rows(const std::vector<RunResult>& runs, std::vector<Row>& rows) {
    Row overlap{"lease overlap (longest)", {}};
    Row without{"longest without a valid lease", {}};
    for (const RunResult& r : runs) {
        const LeaseSummary& l = r.lease;
        if (!l.reported) {
            overlap.cells.push_back("-");
            without.cells.push_back("-");
            continue;
        }
        overlap.cells.push_back(lease_overlap_cell(l));
        without.cells.push_back(
            l.longest_without_ms == 0
                ? std::string("0 ms")
                : fmt::format("{} ms +-{} (from {:.2f}s)", l.longest_without_ms,
                              l.longest_without_error_ms,
                              static_cast<double>(l.longest_without_from_ms) / 1000.0));
    }
    rows.push_back(overlap);
    rows.push_back(without);
}

/// The metadata log's rows (when any run had the proposer).
void metadata_rows(const std::vector<RunResult>& runs, std::vector<Row>& rows) {
    Row acknowledged{"entries acknowledged", {}};
    Row unknown{"outcome unknown", {}};
    Row refused{"refused", {}};
    Row lost{"no acknowledged entry lost", {}};
    for (const RunResult& r : runs) {
        if (!r.metadata) {
            for (Row* row : {&acknowledged, &unknown, &refused}) {
                row->cells.push_back("-");
            }
            lost.cells.push_back(r.metadata_off.empty() ? "-" : r.metadata_off);
            continue;
        }
        const MetadataRun& m = *r.metadata;
        const LogVerdict& v = m.verdict;
        acknowledged.cells.push_back(m.first_fault_ms < 0
                                         ? std::to_string(v.acknowledged)
                                         : fmt::format("{} ({} before the faults, {} after)",
                                                       v.acknowledged, m.acknowledged_before_faults,
                                                       m.acknowledged_after_faults));
        unknown.cells.push_back(fmt::format("{} ({} committed)", v.unknown, v.unknown_committed));
        refused.cells.push_back(std::to_string(v.refused));
        if (v.ok()) {
            lost.cells.push_back(fmt::format("ok ({} logs checked)", v.nodes_read));
        } else {
            std::string cell = "VIOLATED (" + v.violations.at(0);
            if (v.violation_count > 1) {
                cell += fmt::format("; {} more", v.violation_count - 1);
            }
            lost.cells.push_back(cell + ")");
        }
    }
    rows.push_back(acknowledged);
    rows.push_back(unknown);
    rows.push_back(refused);
    rows.push_back(lost);
}

/// Runs that SIGKILLed a node: how many, of the leader, and the leaderless time while a quorum
/// of the nodes ran (the rest of the leaderless time had too few nodes to elect one).
void kill_rows(const std::vector<RunResult>& runs, std::vector<Row>& rows) {
    if (std::none_of(runs.begin(), runs.end(),
                     [](const RunResult& r) { return r.summary.kills > 0; })) {
        return;
    }
    Row kills{"SIGKILLs (of the leader)", {}};
    Row quorum{"leaderless while a quorum runs", {}};
    for (const RunResult& r : runs) {
        const Summary& s = r.summary;
        kills.cells.push_back(fmt::format("{} ({})", s.kills, s.leader_kills));
        const QuorumLeaderless& q = s.quorum_leaderless;
        quorum.cells.push_back(q.gaps == 0
                                   ? std::string("0 ms")
                                   : fmt::format("{} ms in {} gaps, longest {} ms (from {:.2f}s)",
                                                 q.total_ms, q.gaps, q.longest_ms,
                                                 static_cast<double>(q.longest_from_ms) / 1000.0));
    }
    rows.push_back(kills);
    rows.push_back(quorum);
}

/// rolling-replace's and leader-crash's rows.
void scenario_rows(const std::vector<RunResult>& runs, std::vector<Row>& rows) {
    if (std::any_of(runs.begin(), runs.end(),
                    [](const RunResult& r) { return !r.replacements.empty(); })) {
        Row row{"nodes replaced", {}};
        for (const RunResult& r : runs) {
            const auto done = std::count_if(r.replacements.begin(), r.replacements.end(),
                                            [](const Replacement& x) { return x.complete(); });
            row.cells.push_back(fmt::format("{} of {}{}", done, r.replacements_planned,
                                            r.replacements_complete() ? "" : " (FAILED)"));
        }
        rows.push_back(row);
    }
    if (std::any_of(runs.begin(), runs.end(),
                    [](const RunResult& r) { return r.new_leader_after_crash.has_value(); })) {
        Row row{"new leader after the crash", {}};
        for (const RunResult& r : runs) {
            row.cells.push_back(
                r.new_leader_after_crash ? (*r.new_leader_after_crash ? "yes" : "NO") : "-");
        }
        rows.push_back(row);
    }
}

std::string spread_cell(const std::vector<std::int64_t>& values) {
    const auto s = spread(values);
    return s ? fmt::format("{}/{}/{} ms", s->min, s->median, s->max) : std::string("-");
}

/// preferred's rows: the failovers after the kills, the hand-backs after the restarts, and in
/// how many rounds leadership came back (exactly once).
void preferred_rows(const std::vector<RunResult>& runs, std::vector<Row>& rows) {
    if (std::none_of(runs.begin(), runs.end(),
                     [](const RunResult& r) { return r.preferred.has_value(); })) {
        return;
    }
    Row node{"preferred leader", {}};
    Row failover{"failover after the kill min/median/max", {}};
    Row handback{"hand-back after the restart min/median/max", {}};
    Row returned{"leadership came back", {}};
    Row single{"exactly one leader change per restart", {}};
    for (const RunResult& r : runs) {
        if (!r.preferred) {
            for (Row* row : {&node, &failover, &handback, &returned, &single}) {
                row->cells.push_back("-");
            }
            continue;
        }
        const PreferredSummary& p = *r.preferred;
        node.cells.push_back(fmt::format("{} (priority {}, others 1; stability {} ms)",
                                         node_name(p.preferred), p.priority, p.stability_ms));
        failover.cells.push_back(spread_cell(p.failovers_ms()));
        handback.cells.push_back(spread_cell(p.handbacks_ms()));
        returned.cells.push_back(
            fmt::format("{} of {} rounds", p.rounds_returned(), p.rounds_planned));
        single.cells.push_back(
            fmt::format("{} of {} rounds", p.rounds_single_handback(), p.rounds_planned));
    }
    for (Row* row : {&node, &failover, &handback, &returned, &single}) {
        rows.push_back(*row);
    }
}

std::vector<Row> summary_rows(const std::vector<RunResult>& runs) {
    std::vector<Row> rows{{"", {}},
                          {"leader changes", {}},
                          {"needless leader changes", {}},
                          {"highest term", {}},
                          {"leaderless time", {}},
                          {"failover min/median/max", {}},
                          {"safety: one leader per term", {}}};
    for (const RunResult& r : runs) {
        const Summary& s = r.summary;
        rows[0].cells.push_back(fmt::format("scouting {}", r.scouting ? "on" : "off"));
        rows[1].cells.push_back(std::to_string(s.leader_changes));
        rows[2].cells.push_back(std::to_string(s.needless_leader_changes));
        rows[3].cells.push_back(std::to_string(s.highest_term));
        rows[4].cells.push_back(fmt::format("{} ms", s.leaderless_ms));
        rows[5].cells.push_back(s.failover_ms.empty()
                                    ? std::string("-")
                                    : fmt::format("{}/{}/{} ms", *s.failover_min_ms(),
                                                  *s.failover_median_ms(), *s.failover_max_ms()));
        rows[6].cells.push_back(safety_cell(s));
    }
    kill_rows(runs, rows);
    lease_rows(runs, rows);
    if (std::any_of(runs.begin(), runs.end(),
                    [](const RunResult& r) { return r.metadata.has_value(); })) {
        metadata_rows(runs, rows);
    }
    scenario_rows(runs, rows);
    preferred_rows(runs, rows);
    return rows;
}

}  // namespace

std::string describe(const Replacement& x) {
    const auto seconds = [](std::int64_t from, std::int64_t to) {
        return fmt::format("{:.2f} s", static_cast<double>(to - from) / 1000.0);
    };
    std::string out =
        fmt::format("replace {}{} by {} (joined through {}): ", node_name(x.old_node),
                    x.old_was_leader ? " (leader)" : "", node_name(x.new_node), node_name(x.seed));
    if (x.promoted_ms < 0) {
        return out + "NOT PROMOTED: " + x.failure;
    }
    out += fmt::format("join -> promoted {} ({} attempts)", seconds(x.join_ms, x.promoted_ms),
                       x.promote_attempts);
    if (x.removed_ms < 0) {
        return out + ", NOT REMOVED: " + x.failure;
    }
    out += fmt::format(", promoted -> removed {} ({} attempts), total {}",
                       seconds(x.promoted_ms, x.removed_ms), x.remove_attempts,
                       seconds(x.join_ms, x.removed_ms));
    if (x.stopped_ms >= 0) {
        out += fmt::format("; stopped {} later", seconds(x.removed_ms, x.stopped_ms));
    }
    return out;
}

std::string describe_round(const PreferredSummary& p, std::size_t i) {
    const PreferredRound& round = p.rounds.at(i);
    const PreferredRoundFigures& f = p.figures.at(i);
    const auto seconds = [](std::int64_t ms) { return static_cast<double>(ms) / 1000.0; };
    std::string out = fmt::format("round {}: SIGKILL {} at {:.2f}s, ", i + 1,
                                  node_name(p.preferred), seconds(round.killed_ms));
    out += f.failover_ms
               ? fmt::format("{} leads after {} ms", node_name(*f.interim_leader), *f.failover_ms)
               : std::string("NO other leader");
    if (round.restarted_ms < 0) {
        return out;
    }
    out += fmt::format("; restarted at {:.2f}s, ", seconds(round.restarted_ms));
    out += f.handback_ms
               ? fmt::format("{} leads again after {} ms", node_name(p.preferred), *f.handback_ms)
               : fmt::format("{} NOT leading again", node_name(p.preferred));
    return out + fmt::format("; {} leader change(s), {} to {}, in the {:.1f}s after the restart",
                             f.changes_after_restart, f.handbacks, node_name(p.preferred),
                             seconds(p.window_ms));
}

std::string summary_table(const std::vector<RunResult>& runs) {
    const std::vector<Row> rows = summary_rows(runs);
    std::size_t name_width = 0;
    std::vector<std::size_t> widths(runs.size(), 0);
    for (const Row& row : rows) {
        name_width = std::max(name_width, row.name.size());
        for (std::size_t i = 0; i < row.cells.size(); ++i) {
            widths[i] = std::max(widths[i], row.cells[i].size());
        }
    }
    std::string out;
    if (!runs.empty()) {
        out += fmt::format("\nSummary: {} ({} nodes, {:.1f} s, seed {})\n",
                           to_string(runs[0].scenario), runs[0].node_count,
                           static_cast<double>(runs[0].end_ms) / 1000.0, runs[0].seed);
    }
    for (const Row& row : rows) {
        out += fmt::format("  {:<{}}", row.name, name_width);
        for (std::size_t i = 0; i < row.cells.size(); ++i) {
            out += fmt::format("  | {:<{}}", row.cells[i], widths[i]);
        }
        out += "\n";
    }
    constexpr std::size_t kMaxListed = 3;  // the picture and --json have them all
    for (const RunResult& r : runs) {
        std::size_t listed = 0;
        for (const LeaderChange& c : r.summary.changes) {
            if (c.needless && ++listed > kMaxListed) {
                out += fmt::format("  [{}] ... and {} more needless changes\n", run_title(r),
                                   r.summary.needless_leader_changes - kMaxListed);
                break;
            }
            if (c.needless) {
                out += fmt::format(
                    "  [{}] needless change at {:.2f}s: {} (term {}) -> {} (term "
                    "{}) while {} was alive with a quorum\n",
                    run_title(r), static_cast<double>(c.at_ms) / 1000.0, node_name(c.from),
                    c.from_term, node_name(c.to), c.to_term, node_name(c.from));
            }
        }
        for (const Replacement& x : r.replacements) {
            out += fmt::format("  [{}] {}\n", run_title(r), describe(x));
        }
        for (std::size_t i = 0; r.preferred && i < r.preferred->figures.size(); ++i) {
            out += fmt::format("  [{}] {}\n", run_title(r), describe_round(*r.preferred, i));
        }
        for (const std::string& w : r.warnings) {
            out += fmt::format("  [{}] warning: {}\n", run_title(r), w);
        }
        if (r.metadata) {
            for (const std::string& w : r.metadata->verdict.warnings) {
                out += fmt::format("  [{}] metadata log: {}\n", run_title(r), w);
            }
            for (const std::string& v : r.metadata->verdict.violations) {
                out += fmt::format("  [{}] LOST OR CHANGED: {}\n", run_title(r), v);
            }
            if (r.metadata->verdict.violation_count > r.metadata->verdict.violations.size()) {
                out += fmt::format("  [{}] ... {} violations in all\n", run_title(r),
                                   r.metadata->verdict.violation_count);
            }
        }
    }
    return out;
}

namespace {

/// Proposal outcomes per second of the run: [acknowledged, unknown, refused] per second.
std::vector<std::array<std::size_t, 3>> per_second(const RunResult& r) {
    std::vector<std::array<std::size_t, 3>> out(
        static_cast<std::size_t>(std::max<std::int64_t>(r.end_ms, 0) / 1000 + 1));
    if (!r.metadata) {
        return out;
    }
    for (const ProposalRecord& p : r.metadata->proposals) {
        const auto second = static_cast<std::size_t>(std::max<std::int64_t>(p.at_ms, 0) / 1000);
        if (second < out.size()) {
            out[second][static_cast<std::size_t>(p.outcome)] += 1;
        }
    }
    return out;
}

nlohmann::json metadata_json(const RunResult& r) {
    if (!r.metadata) {
        return nlohmann::json{{"enabled", false}, {"reason", r.metadata_off}};
    }
    const MetadataRun& m = *r.metadata;
    const LogVerdict& v = m.verdict;
    // How many unknown and refused outcomes had each reason ("503 no_leader", "connect: ...").
    nlohmann::json unknown_reasons = nlohmann::json::object();
    nlohmann::json refused_reasons = nlohmann::json::object();
    for (const ProposalRecord& p : m.proposals) {
        if (p.outcome != ProposalOutcome::Acknowledged) {
            nlohmann::json& reasons =
                p.outcome == ProposalOutcome::Unknown ? unknown_reasons : refused_reasons;
            reasons[p.detail] = reasons.value(p.detail, 0) + 1;
        }
    }
    nlohmann::json seconds = nlohmann::json::array();
    for (const auto& s : per_second(r)) {
        seconds.push_back({s[0], s[1], s[2]});
    }
    return nlohmann::json{
        {"enabled", true},
        {"acknowledged", v.acknowledged},
        {"unknown", v.unknown},
        {"unknown_committed", v.unknown_committed},
        {"refused", v.refused},
        {"redirects_followed", m.redirects_followed},
        {"unknown_reasons", unknown_reasons},
        {"refused_reasons", refused_reasons},
        {"acknowledged_before_faults", m.acknowledged_before_faults},
        {"acknowledged_after_faults", m.acknowledged_after_faults},
        {"first_fault_ms", m.first_fault_ms},
        {"last_fault_ms", m.last_fault_ms},
        {"nodes_read", v.nodes_read},
        {"no_acknowledged_entry_lost", v.ok()},
        {"violation_count", v.violation_count},
        {"violations", v.violations},
        {"warnings", v.warnings},
        {"per_second_acknowledged_unknown_refused", seconds},
    };
}

nlohmann::json overlap_json(const std::optional<LeaseOverlap>& o) {
    if (!o) {
        return nullptr;
    }
    return {{"a", node_name(o->a)},
            {"b", node_name(o->b)},
            {"begin_ms", o->begin_ms},
            {"length_ms", o->length_ms},
            {"error_ms", o->error_ms}};
}

nlohmann::json lease_json(const LeaseSummary& l) {
    return {{"reported", l.reported},
            {"longest_overlap_ms", l.longest_overlap ? l.longest_overlap->length_ms : 0},
            {"longest_overlap", overlap_json(l.longest_overlap)},
            {"closest", overlap_json(l.closest)},
            {"longest_without_ms", l.longest_without_ms},
            {"longest_without_from_ms", l.longest_without_from_ms},
            {"longest_without_error_ms", l.longest_without_error_ms}};
}

nlohmann::json replacements_json(const RunResult& r) {
    nlohmann::json out = nlohmann::json::array();
    const auto ms = [](std::int64_t v) {
        return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v);
    };
    for (const Replacement& x : r.replacements) {
        out.push_back({{"old", node_name(x.old_node)},
                       {"new", node_name(x.new_node)},
                       {"seed", node_name(x.seed)},
                       {"old_was_leader", x.old_was_leader},
                       {"join_ms", ms(x.join_ms)},
                       {"promoted_ms", ms(x.promoted_ms)},
                       {"removed_ms", ms(x.removed_ms)},
                       {"stopped_ms", ms(x.stopped_ms)},
                       {"promote_attempts", x.promote_attempts},
                       {"remove_attempts", x.remove_attempts},
                       {"complete", x.complete()},
                       {"failure", x.failure}});
    }
    return out;
}

nlohmann::json preferred_json(const RunResult& r) {
    if (!r.preferred) {
        return nullptr;
    }
    const PreferredSummary& p = *r.preferred;
    const auto opt = [](const std::optional<std::int64_t>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    nlohmann::json rounds = nlohmann::json::array();
    for (std::size_t i = 0; i < p.figures.size(); ++i) {
        const PreferredRoundFigures& f = p.figures[i];
        rounds.push_back(
            {{"killed_ms", p.rounds[i].killed_ms},
             {"restarted_ms", p.rounds[i].restarted_ms},
             {"watch_end_ms", p.rounds[i].watch_end_ms},
             {"failover_ms", opt(f.failover_ms)},
             {"interim_leader",
              f.interim_leader ? nlohmann::json(node_name(*f.interim_leader)) : nullptr},
             {"handback_ms", opt(f.handback_ms)},
             {"changes_after_restart", f.changes_after_restart},
             {"handbacks", f.handbacks},
             {"returned", f.returned},
             {"single_handback", f.single_handback()}});
    }
    return {{"node", node_name(p.preferred)},
            {"priority", p.priority},
            {"stability_ms", p.stability_ms},
            {"window_ms", p.window_ms},
            {"rounds_planned", p.rounds_planned},
            {"rounds", rounds},
            {"rounds_returned", p.rounds_returned()},
            {"rounds_single_handback", p.rounds_single_handback()},
            {"every_round_returned", p.every_round_returned()},
            {"every_round_single_handback", p.every_round_single_handback()}};
}

}  // namespace

nlohmann::json summary_json(const RunResult& r) {
    const Summary& s = r.summary;
    auto opt = [](std::optional<std::int64_t> v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    nlohmann::json violations = nlohmann::json::array();
    for (const SafetyViolation& v : s.violations) {
        nlohmann::json leaders = nlohmann::json::array();
        for (NodeIndex n : v.leaders) {
            leaders.push_back(node_name(n));
        }
        violations.push_back({{"term", v.term}, {"leaders", leaders}, {"at_ms", v.first_seen_ms}});
    }
    nlohmann::json changes = nlohmann::json::array();
    for (const LeaderChange& c : s.changes) {
        changes.push_back({{"at_ms", c.at_ms},
                           {"from", node_name(c.from)},
                           {"from_term", c.from_term},
                           {"to", node_name(c.to)},
                           {"to_term", c.to_term},
                           {"needless", c.needless}});
    }
    return nlohmann::json{
        {"scenario", std::string(to_string(r.scenario))},
        {"scouting", r.scouting},
        {"seed", r.seed},
        {"nodes", r.node_count},
        {"duration_ms", r.end_ms},
        {"leader_changes", s.leader_changes},
        {"needless_leader_changes", s.needless_leader_changes},
        {"highest_term", s.highest_term},
        {"leaderless_ms", s.leaderless_ms},
        {"leaderless_while_quorum_runs",
         {{"total_ms", s.quorum_leaderless.total_ms},
          {"gaps", s.quorum_leaderless.gaps},
          {"longest_ms", s.quorum_leaderless.longest_ms},
          {"longest_from_ms", s.quorum_leaderless.longest_from_ms}}},
        {"kills", s.kills},
        {"leader_kills", s.leader_kills},
        {"failover_ms",
         {{"min", opt(s.failover_min_ms())},
          {"median", opt(s.failover_median_ms())},
          {"max", opt(s.failover_max_ms())},
          {"all", s.failover_ms}}},
        {"safe", s.safe()},
        {"all_safety_checks_ok", r.safe()},
        {"violations", violations},
        {"changes", changes},
        {"final_leader",
         s.final_leader ? nlohmann::json(node_name(*s.final_leader)) : nlohmann::json(nullptr)},
        {"new_leader_after_crash", r.new_leader_after_crash
                                       ? nlohmann::json(*r.new_leader_after_crash)
                                       : nlohmann::json(nullptr)},
        {"disk_full_exit",
         r.disk_full_exit ? nlohmann::json(*r.disk_full_exit) : nlohmann::json(nullptr)},
        {"warnings", r.warnings},
        {"observations", r.observations.size()},
        {"metadata", metadata_json(r)},
        {"lease", lease_json(r.lease)},
        {"replacements", replacements_json(r)},
        {"replacements_complete", r.replacements_complete()},
        {"preferred", preferred_json(r)},
    };
}

namespace {

constexpr double kLeft = 70;
constexpr double kWidth = 900;
constexpr double kLaneHeight = 22;
constexpr double kLaneGap = 6;

const char* role_colour(ObservedRole r) {
    switch (r) {
        case ObservedRole::Leader:
            return "#2e7d32";
        case ObservedRole::Follower:
            return "#90caf9";
        case ObservedRole::Candidate:
            return "#ffb300";
        case ObservedRole::Stopped:
            return "#616161";
        case ObservedRole::Unreachable:
            return "#e0e0e0";
    }
    return "#ffffff";
}

/// The proposals lane: a bar per second, its height the acknowledged entries of that second
/// relative to the busiest second; amber and grey ticks on top for unknown and refused ones.
template <typename X>
void draw_proposals(std::string& svg, const RunResult& r, double top, X x) {
    const auto seconds = per_second(r);
    std::size_t busiest = 1;
    for (const auto& s : seconds) {
        busiest = std::max(busiest, s[0]);
    }
    svg += fmt::format("<text x=\"8\" y=\"{:.1f}\" font-size=\"11\">writes</text>\n", top + 15);
    svg +=
        fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"#f5f5f5\"/>\n",
                    kLeft, top, kWidth, kLaneHeight);
    for (std::size_t i = 0; i < seconds.size(); ++i) {
        const auto begin_ms = static_cast<std::int64_t>(i) * 1000;
        const double x0 = x(begin_ms);
        const double w = std::max(0.5, x(begin_ms + 1000) - x0 - 1);
        const auto& [ok, unknown, refused] = seconds[i];
        const double h = kLaneHeight * static_cast<double>(ok) / static_cast<double>(busiest);
        svg += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
            "fill=\"#66bb6a\"><title>{}s-{}s: {} acknowledged, {} outcome unknown, {} "
            "refused</title></rect>\n",
            x0, top + kLaneHeight - h, w, h, i, i + 1, ok, unknown, refused);
        if (unknown > 0) {
            svg += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"4\" "
                "fill=\"#ff8f00\"/>\n",
                x0, top, w);
        }
        if (refused > 0) {
            svg += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"3\" "
                "fill=\"#757575\"/>\n",
                x0, top + 5, w);
        }
    }
}

/// Draws one run starting at `top`; returns the height used.
/// The picture's geometry for one run: time to x, node to lane.
struct Frame {
    double end = 1;
    double lanes_top = 0;
    double x(std::int64_t ms) const {
        return kLeft + kWidth * std::clamp(static_cast<double>(ms), 0.0, end) / end;
    }
    double lane_y(NodeIndex i) const {
        return lanes_top + static_cast<double>(i) * (kLaneHeight + kLaneGap);
    }
};

void draw_title(std::string& svg, const RunResult& r, double top) {
    const Summary& s = r.summary;
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{} — {} leader changes ({} needless), "
        "highest term {}, leaderless {} ms, safety {}{}</text>\n",
        kLeft, top + 14, escape(run_title(r)), s.leader_changes, s.needless_leader_changes,
        s.highest_term, s.leaderless_ms, s.safe() ? "ok" : "VIOLATED",
        r.metadata ? fmt::format(", writes: {} acked, lost {}", r.metadata->verdict.acknowledged,
                                 r.metadata->verdict.ok() ? "none" : "SOME")
                   : std::string());
}

/// Role segments of node i's lane.
void draw_lane(std::string& svg, const RunResult& r, NodeIndex i, const Frame& f) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", 8, f.lane_y(i) + 15, node_name(i));
    std::vector<const Observation*> mine;
    for (const Observation& o : r.observations) {
        if (o.node == i) {
            mine.push_back(&o);
        }
    }
    std::size_t k = 0;
    while (k < mine.size()) {
        std::size_t j = k + 1;
        while (j < mine.size() && mine[j]->role == mine[k]->role &&
               mine[j]->term == mine[k]->term) {
            ++j;
        }
        const std::int64_t begin = mine[k]->at_ms;
        const std::int64_t finish = j < mine.size() ? mine[j]->at_ms : r.end_ms;
        const double x0 = f.x(begin);
        const double w = std::max(0.5, f.x(finish) - x0);
        svg += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
            "<title>{} {} term {} ({:.2f}s-{:.2f}s)</title></rect>\n",
            x0, f.lane_y(i), w, kLaneHeight, role_colour(mine[k]->role), node_name(i),
            to_string(mine[k]->role), mine[k]->term, static_cast<double>(begin) / 1000.0,
            static_cast<double>(finish) / 1000.0);
        if (mine[k]->role == ObservedRole::Leader && w > 26) {
            svg += fmt::format(
                "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"white\" font-size=\"11\">t{}</text>\n",
                x0 + 3, f.lane_y(i) + 15, mine[k]->term);
        }
        k = j;
    }
}

/// Faults: shade the lanes they touch, and label them in rows below the lanes. Returns the
/// labels' height.
double draw_faults(std::string& svg, const RunResult& r, const Frame& f, double lanes_bottom) {
    std::vector<double> row_end;  // greedy rows so that labels do not overlap
    double labels_height = 0;
    for (const FaultInterval& fi : fault_intervals(r.node_count, r.faults, r.end_ms)) {
        for (NodeIndex node : fi.nodes) {
            svg += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"#d32f2f\" "
                "fill-opacity=\"0.28\" stroke=\"#b71c1c\" stroke-dasharray=\"3,2\"/>\n",
                f.x(fi.begin_ms), f.lane_y(node) - 2,
                std::max(1.0, f.x(fi.end_ms) - f.x(fi.begin_ms)), kLaneHeight + 4);
        }
        const double x0 = f.x(fi.begin_ms);
        const double label_w = 7.0 * static_cast<double>(fi.label.size()) + 8;
        std::size_t row = 0;
        while (row < row_end.size() && row_end[row] > x0) {
            ++row;
        }
        if (row == row_end.size()) {
            row_end.push_back(0);
        }
        row_end[row] = std::max(f.x(fi.end_ms), x0 + label_w);
        const double y = lanes_bottom + 4 + static_cast<double>(row) * 16;
        svg += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"12\" fill=\"#d32f2f\" "
            "fill-opacity=\"0.5\"/><text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>\n",
            x0, y, std::max(1.0, f.x(fi.end_ms) - x0), x0 + 2, y + 10, escape(fi.label));
        labels_height = std::max(labels_height, static_cast<double>(row + 1) * 16);
    }
    return labels_height;
}

/// Leader changes: a marker above the lanes, a solid red one when needless, hollow when forced.
void draw_changes(std::string& svg, const Summary& s, const Frame& f) {
    for (const LeaderChange& c : s.changes) {
        const double cx = f.x(c.at_ms);
        svg += fmt::format(
            "<path d=\"M{:.1f},{:.1f} l-5,-8 h10 z\" {}><title>{} (t{}) -> {} (t{}){}"
            "</title></path>\n",
            cx, f.lanes_top - 1,
            c.needless ? "fill=\"#d50000\"" : "fill=\"none\" stroke=\"#212121\"", node_name(c.from),
            c.from_term, node_name(c.to), c.to_term, c.needless ? ", needless" : ", forced");
    }
}

void draw_axis(std::string& svg, const RunResult& r, const Frame& f, double axis_y) {
    const std::int64_t step_ms = r.end_ms > 60000 ? 10000 : (r.end_ms > 20000 ? 5000 : 1000);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#555\"/>\n",
                       kLeft, axis_y, kLeft + kWidth, axis_y);
    for (std::int64_t t = 0; t <= r.end_ms; t += step_ms) {
        svg += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#555\"/>"
            "<text x=\"{0:.1f}\" y=\"{3:.1f}\" font-size=\"10\" text-anchor=\"middle\">{4}s"
            "</text>\n",
            f.x(t), axis_y, axis_y + 4, axis_y + 15, t / 1000);
    }
}

double draw_run(std::string& svg, const RunResult& r, double top) {
    const Frame f{static_cast<double>(std::max<std::int64_t>(r.end_ms, 1)), top + 24};
    const std::size_t n = r.node_count;
    // With the metadata proposer, one more lane below the nodes: proposals per second.
    const double lanes_bottom = f.lane_y(r.metadata ? n + 1 : n);
    draw_title(svg, r, top);
    for (NodeIndex i = 0; i < n; ++i) {
        draw_lane(svg, r, i, f);
    }
    if (r.metadata) {
        draw_proposals(svg, r, f.lane_y(n), [&f](std::int64_t ms) { return f.x(ms); });
    }
    const double labels_height = draw_faults(svg, r, f, lanes_bottom);
    draw_changes(svg, r.summary, f);
    const double axis_y = lanes_bottom + 8 + labels_height;
    draw_axis(svg, r, f, axis_y);
    return axis_y + 30 - top;
}

}  // namespace

std::string render_svg(const std::vector<RunResult>& runs) {
    std::string body;
    double top = 4;
    for (const RunResult& r : runs) {
        top += draw_run(body, r, top);
    }
    // Legend.
    double lx = kLeft;
    const std::pair<const char*, const char*> legend[] = {
        {"#2e7d32", "leader (t = term)"},
        {"#90caf9", "follower"},
        {"#ffb300", "candidate"},
        {"#e0e0e0", "no answer (down, paused, slow)"},
        {"#d32f2f", "fault"},
        {"#d50000", "needless leader change ▼"},
        {"#212121", "forced leader change ▽"},
        {"#66bb6a", "writes acknowledged per second"},
        {"#ff8f00", "outcome unknown"}};
    for (const auto& [colour, text] : legend) {
        const double item_w = 16 + 7.0 * static_cast<double>(std::string_view(text).size()) + 14;
        if (lx > kLeft && lx + item_w > kLeft + kWidth) {
            lx = kLeft;  // next legend row
            top += 18;
        }
        body += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>\n",
            lx, top, colour, lx + 16, top + 10, text);
        lx += item_w;
    }
    top += 24;
    return fmt::format(
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" "
               "height=\"100%\" fill=\"white\"/>\n",
               kLeft + kWidth + 20, top) +
           body + "</svg>\n";
}

std::string render_html(const std::vector<RunResult>& runs) {
    std::string html =
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>leader-bounce</title>\n"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}"
        ".bad{color:#d50000;font-weight:bold}</style></head><body>\n";
    if (!runs.empty()) {
        html += fmt::format("<h1>leader-bounce: {}, {} nodes</h1>\n", to_string(runs[0].scenario),
                            runs[0].node_count);
    }
    html += "<table>\n";
    for (const Row& row : summary_rows(runs)) {
        html += "<tr><th>" + escape(row.name) + "</th>";
        for (const std::string& c : row.cells) {
            const bool bad = c.find("VIOLATED") != std::string::npos || c == "NO";
            html += std::string("<td") + (bad ? " class=\"bad\"" : "") + ">" + escape(c) + "</td>";
        }
        html += "</tr>\n";
    }
    html +=
        "</table>\n<p>A change is <em>needless</em> when the previous leader was alive and "
        "had a quorum reachable through the proxy.</p>\n";
    html += render_svg(runs);
    for (const RunResult& r : runs) {
        html += "<h3>Timeline notes: " + escape(run_title(r)) + "</h3>\n<pre>";
        for (const std::string& note : r.notes) {
            html += escape(note) + "\n";
        }
        for (const std::string& w : r.warnings) {
            html += "warning: " + escape(w) + "\n";
        }
        html += "</pre>\n";
    }
    html += "</body></html>\n";
    return html;
}

}  // namespace conclave::bounce
