// SPDX-License-Identifier: Apache-2.0
// The "no acknowledged entry lost" check on synthetic proposals and logs, and the decoders it
// relies on (GET /metadata pages, Location headers).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "conclave/bounce/admin_client.hpp"
#include "conclave/bounce/log_check.hpp"

using namespace conclave::bounce;

namespace {

ProposalRecord acked(std::uint64_t seq, LogLsn lsn) {
    return ProposalRecord{seq, 0, ProposalOutcome::Acknowledged, lsn, ""};
}
ProposalRecord unknown(std::uint64_t seq) {
    return ProposalRecord{seq, 0, ProposalOutcome::Unknown, std::nullopt, "504 timeout"};
}
ProposalRecord refused(std::uint64_t seq) {
    return ProposalRecord{seq, 0, ProposalOutcome::Refused, std::nullopt, "503 no_leader"};
}
LogEntry entry(std::uint64_t seq, LogLsn lsn) {
    return LogEntry{lsn, proposal_key(seq), proposal_value(seq)};
}
NodeLog log_of(NodeIndex node, std::vector<LogEntry> entries, LogLsn end) {
    NodeLog l;
    l.node = node;
    l.read = true;
    l.entries = std::move(entries);
    l.end = end;
    return l;
}

// Seq 1 and 2 acknowledged in term 1, seq 3 unknown but committed in term 2 (after a sync point
// at 2.0), seq 4 refused and seq 5 unknown, both absent.
const std::vector<ProposalRecord> kProposals{acked(1, {1, 1}), acked(2, {1, 2}), unknown(3),
                                             refused(4),       unknown(5),       acked(6, {2, 2})};
const std::vector<LogEntry> kLog{entry(1, {1, 1}), entry(2, {1, 2}), entry(3, {2, 1}),
                                 entry(6, {2, 2})};

}  // namespace

TEST_CASE("identical complete logs: ok, with the counts") {
    const LogVerdict v = check_log(
        kProposals, {log_of(0, kLog, {2, 2}), log_of(1, kLog, {2, 2}), log_of(2, kLog, {2, 2})});
    CHECK(v.ok());
    CHECK(v.acknowledged == 3);
    CHECK(v.unknown == 2);
    CHECK(v.unknown_committed == 1);
    CHECK(v.refused == 1);
    CHECK(v.nodes_read == 3);
    CHECK(v.warnings.empty());
}

TEST_CASE("a node that has not caught up is a warning, not a loss") {
    const std::vector<LogEntry> shorter(kLog.begin(), kLog.begin() + 2);
    const LogVerdict v =
        check_log(kProposals, {log_of(0, kLog, {2, 2}), log_of(1, shorter, {1, 2})});
    CHECK(v.ok());
    REQUIRE(v.warnings.size() == 1);
    CHECK(v.warnings[0].find("n2: committed log ends at 1.2") != std::string::npos);
}

TEST_CASE("an acknowledged entry missing inside a node's committed log is a loss") {
    std::vector<LogEntry> holed = kLog;
    holed.erase(holed.begin() + 1);  // seq 2 at 1.2 gone
    const LogVerdict v = check_log(kProposals, {log_of(0, kLog, {2, 2}), log_of(1, holed, {2, 2})});
    REQUIRE_FALSE(v.ok());
    CHECK(v.violations[0] ==
          "n2: acknowledged bounce/2 at 1.2 is missing (committed log reaches 2.2)");
    // ... and the two logs are no longer prefixes of one another.
    CHECK(v.violation_count == 2);
}

TEST_CASE("another entry at an acknowledged LSN is a loss") {
    std::vector<LogEntry> replaced = kLog;
    replaced[3] = entry(5, {2, 2});  // an unknown entry where seq 6 was acknowledged
    const LogVerdict v =
        check_log(kProposals, {log_of(0, replaced, {2, 2}), log_of(1, replaced, {2, 2})});
    REQUIRE_FALSE(v.ok());
    CHECK(v.violations[0].find("acknowledged bounce/6 at 2.2 but the log holds 2.2 bounce/5") !=
          std::string::npos);
}

TEST_CASE("the same key with a different value is a loss") {
    std::vector<LogEntry> changed = kLog;
    changed[0].value = nlohmann::json{{"seq", 99}};
    const LogVerdict v = check_log(kProposals, {log_of(0, changed, {2, 2})});
    REQUIRE_FALSE(v.ok());
    CHECK(v.violations[0].find("acknowledged bounce/1 at 1.1 but the log holds") !=
          std::string::npos);
}

TEST_CASE("an acknowledged LSN beyond every node's log is a loss") {
    const std::vector<LogEntry> shorter(kLog.begin(), kLog.begin() + 3);
    const LogVerdict v = check_log(kProposals, {log_of(0, shorter, {2, 1})});
    REQUIRE_FALSE(v.ok());
    CHECK(v.violations.back() ==
          "acknowledged bounce/6 at 2.2 is beyond every node's committed log");
}

TEST_CASE("divergent committed logs are reported even without acknowledged entries") {
    const std::vector<ProposalRecord> proposals{unknown(1), unknown(2)};
    const LogVerdict v = check_log(
        proposals, {log_of(0, {entry(1, {1, 1})}, {1, 1}), log_of(1, {entry(2, {1, 1})}, {1, 1})});
    REQUIRE_FALSE(v.ok());
    CHECK(v.violations[0].find("committed logs of n1 and n2 diverge at position 0") !=
          std::string::npos);
}

TEST_CASE("a key committed twice, or a refused key committed, is a violation") {
    const std::vector<ProposalRecord> proposals{unknown(1), refused(2)};
    const LogVerdict twice =
        check_log(proposals, {log_of(0, {entry(1, {1, 1}), entry(1, {2, 1})}, {2, 1})});
    REQUIRE_FALSE(twice.ok());
    CHECK(twice.violations[0] == "n1: bounce/1 committed twice, at 1.1 and 2.1 (proposed once)");
    const LogVerdict refused_committed =
        check_log(proposals, {log_of(0, {entry(2, {1, 1})}, {1, 1})});
    REQUIRE_FALSE(refused_committed.ok());
    CHECK(refused_committed.violations[0].find("although the proposal was refused") !=
          std::string::npos);
}

TEST_CASE("no readable log with acknowledged entries is a violation; unreadable nodes warn") {
    NodeLog down;
    down.node = 2;
    down.error = "connect: Connection refused";
    const LogVerdict v = check_log(kProposals, {down});
    CHECK_FALSE(v.ok());
    CHECK(v.warnings[0] == "n3: committed log not read: connect: Connection refused");
    CHECK(check_log({unknown(1)}, {down}).ok());
}

TEST_CASE("GET /metadata pages decode; malformed ones name the field") {
    const MetadataPageBody page = parse_metadata_page(
        R"({"entries":[{"lsn":{"term":2,"counter":1},"key":"bounce/3","value":{"seq":3}}],)"
        R"("commit_lsn":{"term":2,"counter":4},"next_from":"2.4"})");
    REQUIRE(page.entries.size() == 1);
    CHECK(page.entries[0].lsn == LogLsn{2, 1});
    CHECK(page.entries[0].value == proposal_value(3));
    CHECK(page.commit_lsn == LogLsn{2, 4});
    CHECK(page.next_from == LogLsn{2, 4});
    CHECK_THROWS_WITH(parse_metadata_page("[]"), Catch::Contains("not a JSON object"));
    CHECK_THROWS_WITH(parse_metadata_page(R"({"entries":[{"key":"k","value":1}]})"),
                      Catch::Contains("entries[0]"));
    CHECK_THROWS_WITH(parse_metadata_page(R"({"entries":[],"commit_lsn":{"term":-1,"counter":0}})"),
                      Catch::Contains("commit_lsn"));
    CHECK_THROWS_WITH(parse_metadata_page(
                          R"({"entries":[],"commit_lsn":{"term":1,"counter":0},"next_from":"x"})"),
                      Catch::Contains("next_from"));
}

TEST_CASE("Location headers of 307 answers") {
    const auto e = redirect_address("http://127.0.0.1:8081/metadata");
    REQUIRE(e.has_value());
    CHECK(e->port() == 8081);
    CHECK(e->address().to_string() == "127.0.0.1");
    CHECK(redirect_address("http://[::1]:8081/metadata") ==
          boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("::1"), 8081));
    CHECK_FALSE(redirect_address("ftp://127.0.0.1:8081/metadata").has_value());
    CHECK_FALSE(redirect_address("http://localhost:8081/metadata").has_value());
    CHECK_FALSE(redirect_address("http://localhost/metadata").has_value());
    CHECK_FALSE(redirect_address("http://127.0.0.1:99999/metadata").has_value());
}
