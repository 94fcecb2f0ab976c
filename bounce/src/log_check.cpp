// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/log_check.hpp"

#include <fmt/core.h>
#include <charconv>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "conclave/bounce/observation.hpp"

namespace conclave::bounce {

namespace {

/// Violations listed in the verdict (all are counted).
constexpr std::size_t kMaxListedViolations = 8;

std::string describe(const LogEntry& e) {
    return fmt::format("{} {}={}", to_string(e.lsn), e.key, e.value.dump());
}

std::uint64_t parse_u64(std::string_view text, const std::string& field) {
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        throw std::runtime_error(field + ": expected TERM.COUNTER");
    }
    return v;
}

struct Checker {
    LogVerdict v;
    void violation(std::string text) {
        v.violation_count += 1;
        if (v.violations.size() < kMaxListedViolations) {
            v.violations.push_back(std::move(text));
        }
    }
};

}  // namespace

std::string to_string(const LogLsn& lsn) {
    return std::to_string(lsn.term) + "." + std::to_string(lsn.counter);
}

std::string proposal_key(std::uint64_t seq) {
    return "bounce/" + std::to_string(seq);
}

nlohmann::json proposal_value(std::uint64_t seq) {
    return nlohmann::json{{"seq", seq}};
}

LogLsn parse_lsn(const nlohmann::json& j, const std::string& field) {
    if (!j.is_object() || !j.contains("term") || !j["term"].is_number_unsigned() ||
        !j.contains("counter") || !j["counter"].is_number_unsigned()) {
        throw std::runtime_error(field +
                                 ": expected {\"term\": unsigned, \"counter\": unsigned}, got " +
                                 j.dump().substr(0, 80));
    }
    return LogLsn{j["term"].get<std::uint64_t>(), j["counter"].get<std::uint64_t>()};
}

MetadataPageBody parse_metadata_page(const std::string& body) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        throw std::runtime_error("GET /metadata: body is not a JSON object");
    }
    if (!j.contains("entries") || !j["entries"].is_array()) {
        throw std::runtime_error("GET /metadata: field 'entries' missing or not an array");
    }
    MetadataPageBody page;
    std::size_t i = 0;
    for (const auto& e : j["entries"]) {
        const std::string field = "entries[" + std::to_string(i++) + "]";
        if (!e.is_object() || !e.contains("key") || !e["key"].is_string() || !e.contains("value") ||
            !e.contains("lsn")) {
            throw std::runtime_error("GET /metadata: " + field +
                                     ": expected {\"lsn\", \"key\", \"value\"}");
        }
        page.entries.push_back(
            LogEntry{parse_lsn(e["lsn"], field + ".lsn"), e["key"].get<std::string>(), e["value"]});
    }
    if (!j.contains("commit_lsn")) {
        throw std::runtime_error("GET /metadata: field 'commit_lsn' missing");
    }
    page.commit_lsn = parse_lsn(j["commit_lsn"], "commit_lsn");
    if (!j.contains("next_from") || !j["next_from"].is_string()) {
        throw std::runtime_error("GET /metadata: field 'next_from' missing or not a string");
    }
    const std::string next = j["next_from"].get<std::string>();
    const std::size_t dot = next.find('.');
    if (dot == std::string::npos) {
        throw std::runtime_error("GET /metadata: next_from: expected TERM.COUNTER, got " + next);
    }
    page.next_from = LogLsn{parse_u64(std::string_view(next).substr(0, dot), "next_from"),
                            parse_u64(std::string_view(next).substr(dot + 1), "next_from")};
    return page;
}

namespace {

using ByKey = std::unordered_map<std::string, const ProposalRecord*>;
using AtLsn = std::vector<std::map<LogLsn, const LogEntry*>>;

/// Per node: LSN order, each key at most once, refused keys never. Fills `at_lsn` and the keys
/// committed somewhere.
void check_each_log(Checker& c, const std::vector<const NodeLog*>& read, const ByKey& by_key,
                    AtLsn& at_lsn, std::unordered_map<std::string, bool>& committed_somewhere) {
    for (std::size_t n = 0; n < read.size(); ++n) {
        const NodeLog& log = *read[n];
        const std::string who = node_name(log.node);
        std::unordered_map<std::string, LogLsn> seen;
        for (std::size_t i = 0; i < log.entries.size(); ++i) {
            const LogEntry& e = log.entries[i];
            if (i > 0 && !(log.entries[i - 1].lsn < e.lsn)) {
                c.violation(
                    fmt::format("{}: committed log out of LSN order at position {} ({} "
                                "after {})",
                                who, i, to_string(e.lsn), to_string(log.entries[i - 1].lsn)));
            }
            at_lsn[n].emplace(e.lsn, &e);
            const auto [it, fresh] = seen.emplace(e.key, e.lsn);
            const auto mine = by_key.find(e.key);
            if (mine == by_key.end()) {
                continue;  // not ours (no other writer is expected, but it is not an error)
            }
            if (!fresh) {
                c.violation(fmt::format("{}: {} committed twice, at {} and {} (proposed once)", who,
                                        e.key, to_string(it->second), to_string(e.lsn)));
            }
            committed_somewhere[e.key] = true;
            if (mine->second->outcome == ProposalOutcome::Refused) {
                c.violation(
                    fmt::format("{}: {} committed at {} although the proposal was refused "
                                "({})",
                                who, e.key, to_string(e.lsn), mine->second->detail));
            }
        }
    }
}

/// One acknowledged entry on every node whose committed log reaches its LSN.
void check_acknowledged(Checker& c, const ProposalRecord& p,
                        const std::vector<const NodeLog*>& read, const AtLsn& at_lsn,
                        std::vector<bool>& lag_reported) {
    const std::string key = proposal_key(p.seq);
    if (!p.lsn) {
        c.violation(key + ": acknowledged without an LSN");
        return;
    }
    const LogLsn lsn = *p.lsn;
    bool covered = false;
    for (std::size_t n = 0; n < read.size(); ++n) {
        const NodeLog& log = *read[n];
        if (log.end < lsn) {
            if (!lag_reported[n]) {
                lag_reported[n] = true;
                c.v.warnings.push_back(
                    fmt::format("{}: committed log ends at {}, before acknowledged entries "
                                "(e.g. {} at {}): "
                                "not caught up when read",
                                node_name(log.node), to_string(log.end), key, to_string(lsn)));
            }
            continue;
        }
        covered = true;
        const auto it = at_lsn[n].find(lsn);
        if (it == at_lsn[n].end()) {
            c.violation(
                fmt::format("{}: acknowledged {} at {} is missing (committed log "
                            "reaches {})",
                            node_name(log.node), key, to_string(lsn), to_string(log.end)));
        } else if (it->second->key != key || it->second->value != proposal_value(p.seq)) {
            c.violation(fmt::format("{}: acknowledged {} at {} but the log holds {}",
                                    node_name(log.node), key, to_string(lsn),
                                    describe(*it->second)));
        }
    }
    if (!covered) {
        c.violation(fmt::format("acknowledged {} at {} is beyond every node's committed log", key,
                                to_string(lsn)));
    }
}

/// The committed logs are prefixes of one another.
void check_prefixes(Checker& c, const std::vector<const NodeLog*>& read) {
    for (std::size_t a = 0; a < read.size(); ++a) {
        for (std::size_t b = a + 1; b < read.size(); ++b) {
            const auto& x = read[a]->entries;
            const auto& y = read[b]->entries;
            const std::size_t common = std::min(x.size(), y.size());
            for (std::size_t i = 0; i < common; ++i) {
                if (x[i].lsn != y[i].lsn || x[i].key != y[i].key || x[i].value != y[i].value) {
                    c.violation(
                        fmt::format("committed logs of {} and {} diverge at position {}: {} vs {}",
                                    node_name(read[a]->node), node_name(read[b]->node), i,
                                    describe(x[i]), describe(y[i])));
                    break;
                }
            }
        }
    }
}

/// Counts the outcomes and indexes the proposals by key.
ByKey count_outcomes(Checker& c, const std::vector<ProposalRecord>& proposals) {
    ByKey by_key;
    for (const ProposalRecord& p : proposals) {
        by_key.emplace(proposal_key(p.seq), &p);
        switch (p.outcome) {
            case ProposalOutcome::Acknowledged:
                c.v.acknowledged += 1;
                break;
            case ProposalOutcome::Unknown:
                c.v.unknown += 1;
                break;
            case ProposalOutcome::Refused:
                c.v.refused += 1;
                break;
        }
    }
    return by_key;
}

}  // namespace

LogVerdict check_log(const std::vector<ProposalRecord>& proposals,
                     const std::vector<NodeLog>& logs) {
    Checker c;
    const ByKey by_key = count_outcomes(c, proposals);
    std::vector<const NodeLog*> read;
    for (const NodeLog& log : logs) {
        if (log.read) {
            read.push_back(&log);
        } else {
            c.v.warnings.push_back(node_name(log.node) + ": committed log not read: " + log.error);
        }
    }
    c.v.nodes_read = read.size();
    if (read.empty()) {
        if (c.v.acknowledged > 0) {
            c.violation(
                "no node's committed log could be read, so no acknowledged entry can "
                "be found");
        }
        return c.v;
    }
    AtLsn at_lsn(read.size());
    std::unordered_map<std::string, bool> committed_somewhere;
    check_each_log(c, read, by_key, at_lsn, committed_somewhere);
    for (const ProposalRecord& p : proposals) {
        if (p.outcome == ProposalOutcome::Unknown &&
            committed_somewhere.count(proposal_key(p.seq))) {
            c.v.unknown_committed += 1;
        }
    }
    std::vector<bool> lag_reported(read.size(), false);
    for (const ProposalRecord& p : proposals) {
        if (p.outcome == ProposalOutcome::Acknowledged) {
            check_acknowledged(c, p, read, at_lsn, lag_reported);
        }
    }
    check_prefixes(c, read);
    return c.v;
}

}  // namespace conclave::bounce
