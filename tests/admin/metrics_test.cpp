// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "conclave/admin/metrics.hpp"
#include "conclave/admin/prometheus_text.hpp"

using namespace conclave::admin;

namespace {

PrometheusExposition ParseOk(const std::string& text) {
    auto result = parse_prometheus_text(text);
    if (auto* error = std::get_if<PrometheusParseError>(&result)) {
        FAIL("line " << error->line << ": " << error->message << "\n" << text);
    }
    return std::get<PrometheusExposition>(result);
}

std::string ParseError(const std::string& text) {
    auto result = parse_prometheus_text(text);
    REQUIRE(std::holds_alternative<PrometheusParseError>(result));
    const auto& error = std::get<PrometheusParseError>(result);
    return std::to_string(error.line) + ": " + error.message;
}

}  // namespace

TEST_CASE("counters, gauges and histograms render as Prometheus text", "[metrics]") {
    MetricsRegistry registry;
    Counter& elections = registry.counter("conclave_elections_started_total", "Elections started.");
    elections.inc();
    elections.inc(2);
    registry
        .counter("conclave_votes_refused_total", "Votes refused, by reason.",
                 {{"reason", "already_voted"}})
        .inc(4);
    registry.counter("conclave_votes_refused_total", "Votes refused, by reason.",
                     {{"reason", "stale_term"}});
    registry.gauge("conclave_term", "Current term.").set(7);
    registry.gauge("conclave_leaderless_seconds", "Time without a leader.").set(0.25);
    Histogram& h = registry.histogram("conclave_election_duration_seconds", "Election duration.",
                                      {0.1, 0.5, 1});
    h.observe(0.05);
    h.observe(0.1);  // on the bound: in the 0.1 bucket
    h.observe(0.7);
    h.observe(30);

    const std::string text = registry.render();
    CHECK(text ==
          "# HELP conclave_election_duration_seconds Election duration.\n"
          "# TYPE conclave_election_duration_seconds histogram\n"
          "conclave_election_duration_seconds_bucket{le=\"0.1\"} 2\n"
          "conclave_election_duration_seconds_bucket{le=\"0.5\"} 2\n"
          "conclave_election_duration_seconds_bucket{le=\"1\"} 3\n"
          "conclave_election_duration_seconds_bucket{le=\"+Inf\"} 4\n"
          "conclave_election_duration_seconds_sum 30.85\n"
          "conclave_election_duration_seconds_count 4\n"
          "# HELP conclave_elections_started_total Elections started.\n"
          "# TYPE conclave_elections_started_total counter\n"
          "conclave_elections_started_total 3\n"
          "# HELP conclave_leaderless_seconds Time without a leader.\n"
          "# TYPE conclave_leaderless_seconds gauge\n"
          "conclave_leaderless_seconds 0.25\n"
          "# HELP conclave_term Current term.\n"
          "# TYPE conclave_term gauge\n"
          "conclave_term 7\n"
          "# HELP conclave_votes_refused_total Votes refused, by reason.\n"
          "# TYPE conclave_votes_refused_total counter\n"
          "conclave_votes_refused_total{reason=\"already_voted\"} 4\n"
          "conclave_votes_refused_total{reason=\"stale_term\"} 0\n");

    const PrometheusExposition parsed = ParseOk(text);
    CHECK(parsed.types.at("conclave_election_duration_seconds") == "histogram");
    CHECK(parsed.helps.at("conclave_term") == "Current term.");
    CHECK(parsed.value("conclave_elections_started_total") == 3);
    CHECK(parsed.value("conclave_votes_refused_total", {{"reason", "already_voted"}}) == 4);
    CHECK(parsed.value("conclave_election_duration_seconds_bucket", {{"le", "+Inf"}}) == 4);
}

TEST_CASE("process metrics and the build info", "[metrics]") {
    MetricsRegistry registry;
    register_process_metrics(registry, "1.2.3");
    const std::string text = registry.render();
    const auto parsed = parse_prometheus_text(text);
    REQUIRE(std::holds_alternative<PrometheusExposition>(parsed));
    const auto& exposition = std::get<PrometheusExposition>(parsed);
    CHECK(exposition.value("conclave_build_info", {{"version", "1.2.3"}}) == 1.0);
    CHECK(exposition.types.at("process_cpu_seconds_total") == "counter");
    CHECK(exposition.value("process_cpu_seconds_total").value_or(-1) >= 0);
    CHECK(exposition.value("process_resident_memory_bytes").value_or(0) > 0);
    CHECK(exposition.value("process_virtual_memory_bytes").value_or(0) > 0);
    CHECK(exposition.value("process_open_fds").value_or(0) >= 3);  // stdin, stdout, stderr
    CHECK(exposition.value("process_max_fds").value_or(0) > 0);
    CHECK(exposition.value("process_start_time_seconds").value_or(0) > 1.7e9);
}

TEST_CASE("help text and label values are escaped", "[metrics]") {
    MetricsRegistry registry;
    registry.counter("m_total", "back\\slash and\nnewline", {{"peer", "a\"b\\c\nd"}}).inc();
    const std::string text = registry.render();
    CHECK(text.find("# HELP m_total back\\\\slash and\\nnewline\n") != std::string::npos);
    CHECK(text.find("m_total{peer=\"a\\\"b\\\\c\\nd\"} 1\n") != std::string::npos);
    const auto parsed = ParseOk(text);
    CHECK(parsed.helps.at("m_total") == "back\\slash and\nnewline");
    CHECK(parsed.value("m_total", {{"peer", "a\"b\\c\nd"}}) == 1);
}

TEST_CASE("special values and labelled histograms", "[metrics]") {
    MetricsRegistry registry;
    registry.gauge("g", "nan").set(std::numeric_limits<double>::quiet_NaN());
    registry.gauge("h", "inf", {{"sign", "plus"}}).set(std::numeric_limits<double>::infinity());
    registry.gauge("h", "inf", {{"sign", "minus"}}).set(-std::numeric_limits<double>::infinity());
    registry.histogram("d", "by peer", {1, 2}, {{"peer", "n2"}}).observe(1.5);
    registry.histogram("d", "by peer", {1, 2}, {{"peer", "n3"}});
    const std::string text = registry.render();
    CHECK(text.find("g NaN\n") != std::string::npos);
    CHECK(text.find("h{sign=\"plus\"} +Inf\n") != std::string::npos);
    CHECK(text.find("h{sign=\"minus\"} -Inf\n") != std::string::npos);
    CHECK(text.find("d_bucket{peer=\"n2\",le=\"2\"} 1\n") != std::string::npos);
    const auto parsed = ParseOk(text);
    CHECK(std::isnan(*parsed.value("g")));
    CHECK(parsed.value("d_count", {{"peer", "n3"}}) == 0);
}

TEST_CASE("collectors refresh gauges before rendering", "[metrics]") {
    MetricsRegistry registry;
    Gauge& peers = registry.gauge("conclave_peers_up", "Peers connected.");
    int calls = 0;
    registry.on_collect([&] { peers.set(++calls); });
    CHECK(registry.render().find("conclave_peers_up 1\n") != std::string::npos);
    CHECK(registry.render().find("conclave_peers_up 2\n") != std::string::npos);
}

TEST_CASE("registration mistakes are programming errors", "[metrics]") {
    MetricsRegistry registry;
    registry.counter("a_total", "help");
    CHECK(&registry.counter("a_total", "help") == &registry.counter("a_total", "help"));
    CHECK_THROWS_AS(registry.gauge("a_total", "help"), std::invalid_argument);
    CHECK_THROWS_AS(registry.counter("a_total", "other help"), std::invalid_argument);
    CHECK_THROWS_AS(registry.counter("a_total", "help", {{"x", "1"}}), std::invalid_argument);
    CHECK_THROWS_AS(registry.counter("9bad", "help"), std::invalid_argument);
    CHECK_THROWS_AS(registry.counter("b", "help", {{"bad-name", "1"}}), std::invalid_argument);
    CHECK_THROWS_AS(registry.counter("c", "help", {{"__reserved", "1"}}), std::invalid_argument);
    CHECK_THROWS_AS(registry.counter("c", "help", {{"x", "1"}, {"x", "2"}}), std::invalid_argument);
    CHECK_THROWS_AS(registry.histogram("h", "help", {1, 1}), std::invalid_argument);
    CHECK_THROWS_AS(registry.histogram("h", "help", {1}, {{"le", "1"}}), std::invalid_argument);
    registry.histogram("h2", "help", {1, 2});
    CHECK_THROWS_AS(registry.histogram("h2", "help", {1, 3}), std::invalid_argument);
}

TEST_CASE("the parser refuses malformed expositions", "[metrics]") {
    CHECK(ParseError("m 1") == "1: the exposition must end with a newline");
    CHECK(ParseError("m{a=\"1\" 1\n") == "1: expected , or } in labels");
    CHECK(ParseError("m{a=1} 1\n") == "1: expected =\" after label a");
    CHECK(ParseError("m one\n") == "1: invalid value \"one\"");
    CHECK(ParseError("m 1 x\n") == "1: invalid timestamp \"x\"");
    CHECK(ParseError("# TYPE m counter\n# TYPE m counter\n") == "2: second TYPE for m");
    CHECK(ParseError("# TYPE m rate\n") == "1: unknown type \"rate\"");
    CHECK(ParseError("m 1\n# TYPE m counter\n") == "2: TYPE for m after its samples");
    CHECK(ParseError("a 1\nb 1\na{x=\"1\"} 2\n") == "3: samples of a are not contiguous");
    CHECK(ParseError("a 1\na 2\n") == "2: duplicate series a");
    CHECK(ParseError("m{a=\"\\q\"} 1\n") == "1: invalid escape \\q");
    CHECK(ParseError("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                     "h_sum 1\nh_count 1\n") == "5: histogram h: buckets not cumulative");
    CHECK(ParseError("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n") ==
          "4: histogram h has no +Inf bucket");
    CHECK(ParseError("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n") ==
          "4: histogram h: _count missing or not the +Inf bucket");
    // Accepted: comments, blank lines, timestamps, untyped samples.
    const auto parsed = ParseOk("# a comment\n\nup 1 1700000000000\nx{a=\"b\",} 2.5e3\n");
    CHECK(parsed.value("up") == 1);
    CHECK(parsed.value("x", {{"a", "b"}}) == 2500);
}
