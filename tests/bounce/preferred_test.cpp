// SPDX-License-Identifier: Apache-2.0
// The preferred scenario's per-round figures from synthetic leader changes: the failover after
// the kill, the hand-back after the restart, and a flapping or missing hand-back caught.
#include <catch2/catch.hpp>
#include <vector>

#include "conclave/bounce/preferred.hpp"

using namespace conclave::bounce;

namespace {

constexpr NodeIndex kP = 0;  // the preferred node
constexpr NodeIndex kQ = 1;
constexpr NodeIndex kR = 2;

LeaderChange change_at(std::int64_t at, NodeIndex from, std::uint64_t from_term, NodeIndex to,
                       std::uint64_t to_term) {
    LeaderChange c;
    c.at_ms = at;
    c.from = from;
    c.from_term = from_term;
    c.to = to;
    c.to_term = to_term;
    return c;
}

/// Killed at 1000, restarted at 2000, watched until 8000.
constexpr PreferredRound kRound{1000, 2000, 8000};

PreferredSummary one_round(const std::vector<LeaderChange>& changes) {
    PreferredSummary p;
    p.preferred = kP;
    p.rounds_planned = 1;
    p.rounds.push_back(kRound);
    p.figures.push_back(preferred_figures(kP, kRound, changes));
    return p;
}

}  // namespace

TEST_CASE("preferred: one failover and one hand-back make a good round") {
    const std::vector<LeaderChange> changes{change_at(1015, kP, 2, kQ, 3),
                                            change_at(4350, kQ, 3, kP, 4)};
    const PreferredSummary p = one_round(changes);
    const PreferredRoundFigures& f = p.figures.at(0);
    CHECK(f.failover_ms == 15);
    CHECK(f.interim_leader == kQ);
    CHECK(f.handback_ms == 2350);
    CHECK(f.changes_after_restart == 1);
    CHECK(f.handbacks == 1);
    CHECK(f.returned);
    CHECK(f.single_handback());
    CHECK(p.every_round_returned());
    CHECK(p.every_round_single_handback());
    CHECK(p.failovers_ms() == std::vector<std::int64_t>{15});
    CHECK(p.handbacks_ms() == std::vector<std::int64_t>{2350});
}

TEST_CASE("preferred: without a hand-back the round did not return") {
    const PreferredSummary p = one_round({change_at(1015, kP, 2, kQ, 3)});
    const PreferredRoundFigures& f = p.figures.at(0);
    CHECK(f.failover_ms == 15);
    CHECK_FALSE(f.handback_ms);
    CHECK_FALSE(f.returned);
    CHECK_FALSE(f.single_handback());
    CHECK_FALSE(p.every_round_returned());
    CHECK(p.handbacks_ms().empty());
}

TEST_CASE("preferred: a flapping hand-back returns but is not a single hand-back") {
    const std::vector<LeaderChange> changes{
        change_at(1015, kP, 2, kQ, 3), change_at(4000, kQ, 3, kP, 4), change_at(4500, kP, 4, kQ, 5),
        change_at(6500, kQ, 5, kP, 6)};
    const PreferredSummary p = one_round(changes);
    const PreferredRoundFigures& f = p.figures.at(0);
    CHECK(f.returned);
    CHECK(f.handbacks == 2);
    CHECK(f.changes_after_restart == 3);
    CHECK(f.handback_ms == 2000);  // the first one
    CHECK_FALSE(f.single_handback());
    CHECK(p.every_round_returned());
    CHECK_FALSE(p.every_round_single_handback());
}

TEST_CASE("preferred: a change to another node after the restart is counted, not a hand-back") {
    const std::vector<LeaderChange> changes{change_at(1015, kP, 2, kQ, 3),
                                            change_at(3000, kQ, 3, kR, 4),
                                            change_at(5000, kR, 4, kP, 5)};
    const PreferredRoundFigures f = preferred_figures(kP, kRound, changes);
    CHECK(f.returned);
    CHECK(f.handbacks == 1);
    CHECK(f.changes_after_restart == 2);
    CHECK(f.handback_ms == 3000);
    CHECK_FALSE(f.single_handback());
}

TEST_CASE("preferred: changes outside the round's window are not counted") {
    const std::vector<LeaderChange> changes{change_at(500, kQ, 1, kP, 2),  // before the kill
                                            change_at(1015, kP, 2, kQ, 3),
                                            change_at(9000, kQ, 3, kP, 4)};  // after the window
    const PreferredRoundFigures f = preferred_figures(kP, kRound, changes);
    CHECK(f.failover_ms == 15);
    CHECK(f.changes_after_restart == 0);
    CHECK_FALSE(f.returned);
}

TEST_CASE("preferred: fewer rounds than planned do not all return; no rounds none either") {
    PreferredSummary p = one_round({change_at(1015, kP, 2, kQ, 3), change_at(4350, kQ, 3, kP, 4)});
    p.rounds_planned = 2;
    CHECK(p.rounds_returned() == 1);
    CHECK_FALSE(p.every_round_returned());
    CHECK_FALSE(p.every_round_single_handback());
    PreferredSummary none;
    CHECK_FALSE(none.every_round_returned());
}

TEST_CASE("spread: min, upper median and max") {
    CHECK_FALSE(spread({}));
    const auto s = spread({30, 10, 20, 40});
    REQUIRE(s);
    CHECK(s->min == 10);
    CHECK(s->median == 30);
    CHECK(s->max == 40);
}
