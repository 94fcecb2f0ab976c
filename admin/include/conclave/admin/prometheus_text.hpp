// SPDX-License-Identifier: Apache-2.0
// A strict parser for Prometheus text exposition format 0.0.4, used by tests (and tools) to check
// that /metrics output is well-formed and to read values back.
//
// Checks: line syntax (comments, HELP/TYPE, samples with optional labels and timestamp), escapes
// in HELP text and label values, metric and label name grammar, at most one TYPE and HELP per
// family and TYPE before the family's samples, samples of one family contiguous, no duplicate
// series, and for histograms: cumulative non-decreasing buckets, a "+Inf" bucket equal to _count,
// and a _sum.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "conclave/admin/metrics.hpp"

namespace conclave::admin {

struct PrometheusSample {
    std::string name;  // as written (histograms: with _bucket/_sum/_count)
    Labels labels;     // in written order, unescaped
    double value = 0;
};

struct PrometheusExposition {
    std::map<std::string, std::string> types;  // family -> counter|gauge|histogram|summary|untyped
    std::map<std::string, std::string> helps;  // family -> unescaped help text
    std::vector<PrometheusSample> samples;

    /// The value of the sample with exactly this name and label set, if present.
    std::optional<double> value(std::string_view name, const Labels& labels = {}) const;
};

/// A parse failure: the 1-based line and what is wrong with it.
struct PrometheusParseError {
    std::size_t line = 0;
    std::string message;
};

std::variant<PrometheusExposition, PrometheusParseError> parse_prometheus_text(
    std::string_view text);

}  // namespace conclave::admin
