// SPDX-License-Identifier: Apache-2.0
#include "conclave/admin/metrics.hpp"
#include "conclave/core/check.hpp"
#include "conclave/core/enum_names.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <stdexcept>

namespace conclave::admin {
namespace {

std::string_view TypeName(MetricType t) {
    return enum_name(t);
}

/// Prometheus text escaping: backslash and newline always; the double quote in label values only.
std::string Escape(std::string_view text, bool quote) {
    std::string out;
    for (char c : text) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (quote && c == '"') {
            out += "\\\"";
        } else {
            out += c;
        }
    }
    return out;
}

std::string EscapeHelp(std::string_view text) {
    return Escape(text, /*quote=*/false);
}

std::string EscapeLabelValue(std::string_view text) {
    return Escape(text, /*quote=*/true);
}

/// `{a="1",b="2"}` plus an optional trailing label (the histogram's "le"); empty when no labels.
std::string RenderLabels(const Labels& labels, std::string_view extra_name = {},
                         std::string_view extra_value = {}) {
    if (labels.empty() && extra_name.empty()) {
        return {};
    }
    std::string out = "{";
    bool first = true;
    const auto add = [&](std::string_view name, std::string_view value) {
        if (!first) {
            out += ',';
        }
        first = false;
        out += name;
        out += "=\"";
        out += EscapeLabelValue(value);
        out += '"';
    };
    for (const auto& [name, value] : labels) {
        add(name, value);
    }
    if (!extra_name.empty()) {
        add(extra_name, extra_value);
    }
    out += '}';
    return out;
}

void CheckLabels(const std::string& name, const Labels& labels, MetricType type) {
    std::set<std::string_view> seen;
    for (const auto& [label, value] : labels) {
        (void)value;
        if (!valid_label_name(label) || label.rfind("__", 0) == 0) {
            throw std::invalid_argument("metric " + name + ": invalid label name \"" + label +
                                        "\"");
        }
        if (type == MetricType::Histogram && label == "le") {
            throw std::invalid_argument("metric " + name + ": \"le\" is reserved in histograms");
        }
        if (!seen.insert(label).second) {
            throw std::invalid_argument("metric " + name + ": duplicate label \"" + label + "\"");
        }
    }
}

}  // namespace

bool valid_metric_name(std::string_view name) {
    if (name.empty()) {
        return false;
    }
    const auto first = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    };
    const auto rest = [&](char c) { return first(c) || (c >= '0' && c <= '9'); };
    return first(name.front()) && std::all_of(name.begin() + 1, name.end(), rest);
}

bool valid_label_name(std::string_view name) {
    if (name.empty()) {
        return false;
    }
    const auto first = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    const auto rest = [&](char c) { return first(c) || (c >= '0' && c <= '9'); };
    return first(name.front()) && std::all_of(name.begin() + 1, name.end(), rest);
}

std::string format_metric_value(double v) {
    if (std::isnan(v)) {
        return "NaN";
    }
    if (std::isinf(v)) {
        return v > 0 ? "+Inf" : "-Inf";
    }
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
    CONCLAVE_CHECK(result.ec == std::errc{}, "a double fits 64 characters");
    return std::string(buffer, result.ptr);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {
    for (std::size_t i = 0; i < upper_bounds_.size(); ++i) {
        if (!std::isfinite(upper_bounds_[i]) ||
            (i > 0 && upper_bounds_[i] <= upper_bounds_[i - 1])) {
            throw std::invalid_argument("histogram buckets must be finite and strictly increasing");
        }
    }
}

void Histogram::observe(double v) {
    // First bucket whose upper bound is >= v; NaN lands in +Inf.
    const auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), v);
    const auto index = static_cast<std::size_t>(it - upper_bounds_.begin());
    counts_[std::isnan(v) ? upper_bounds_.size() : index] += 1;
    count_ += 1;
    sum_ += v;
}

MetricsRegistry::Series& MetricsRegistry::Find(const std::string& name, const std::string& help,
                                               MetricType type, const Labels& labels,
                                               const std::vector<double>& upper_bounds) {
    if (!valid_metric_name(name)) {
        throw std::invalid_argument("invalid metric name \"" + name + "\"");
    }
    CheckLabels(name, labels, type);
    auto [it, inserted] = families_.try_emplace(name);
    Family& family = it->second;
    if (inserted) {
        family.help = help;
        family.type = type;
        family.upper_bounds = upper_bounds;
    } else if (family.type != type || family.help != help || family.upper_bounds != upper_bounds) {
        throw std::invalid_argument("metric " + name +
                                    " is already registered with another type, help or buckets");
    }
    for (Series& series : family.series) {
        if (series.labels == labels) {
            return series;
        }
    }
    if (!family.series.empty()) {
        // Every series of a family has the same label names, in the same order.
        const Labels& first = family.series.front().labels;
        const bool same_names =
            first.size() == labels.size() &&
            std::equal(first.begin(), first.end(), labels.begin(),
                       [](const auto& a, const auto& b) { return a.first == b.first; });
        if (!same_names) {
            throw std::invalid_argument("metric " + name +
                                        ": every series must use the same label names");
        }
    }
    Series& series = family.series.emplace_back();
    series.labels = labels;
    switch (type) {
        case MetricType::Counter:
            series.counter = std::make_unique<Counter>();
            break;
        case MetricType::Gauge:
            series.gauge = std::make_unique<Gauge>();
            break;
        case MetricType::Histogram:
            series.histogram = std::make_unique<Histogram>(upper_bounds);
            break;
    }
    return series;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help,
                                  const Labels& labels) {
    return *Find(name, help, MetricType::Counter, labels, {}).counter;
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help,
                              const Labels& labels) {
    return *Find(name, help, MetricType::Gauge, labels, {}).gauge;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      const std::vector<double>& upper_bounds,
                                      const Labels& labels) {
    return *Find(name, help, MetricType::Histogram, labels, upper_bounds).histogram;
}

void MetricsRegistry::on_collect(std::function<void()> collector) {
    collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::render() {
    for (const auto& collect : collectors_) {
        collect();
    }
    std::string out;
    for (const auto& [name, family] : families_) {
        out += "# HELP " + name + " " + EscapeHelp(family.help) + "\n";
        out += "# TYPE " + name + " " + std::string(TypeName(family.type)) + "\n";
        for (const Series& series : family.series) {
            switch (family.type) {
                case MetricType::Counter:
                    out += name + RenderLabels(series.labels) + " " +
                           format_metric_value(series.counter->value()) + "\n";
                    break;
                case MetricType::Gauge:
                    out += name + RenderLabels(series.labels) + " " +
                           format_metric_value(series.gauge->value()) + "\n";
                    break;
                case MetricType::Histogram: {
                    const Histogram& h = *series.histogram;
                    std::uint64_t cumulative = 0;
                    for (std::size_t i = 0; i <= h.upper_bounds().size(); ++i) {
                        cumulative += h.bucket_counts()[i];
                        const std::string le = i < h.upper_bounds().size()
                                                   ? format_metric_value(h.upper_bounds()[i])
                                                   : "+Inf";
                        out += name + "_bucket" + RenderLabels(series.labels, "le", le) + " " +
                               std::to_string(cumulative) + "\n";
                    }
                    out += name + "_sum" + RenderLabels(series.labels) + " " +
                           format_metric_value(h.sum()) + "\n";
                    out += name + "_count" + RenderLabels(series.labels) + " " +
                           std::to_string(h.count()) + "\n";
                    break;
                }
            }
        }
    }
    return out;
}

}  // namespace conclave::admin
