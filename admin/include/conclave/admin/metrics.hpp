// SPDX-License-Identifier: Apache-2.0
// A small metrics registry rendered as Prometheus text exposition format 0.0.4.
//
// Threading: single-threaded by design. A node runs its mesh, timers, elector and HTTP server on
// one io_context, so every update and every render happens on that io_context's thread; there are
// no locks and no atomics. Do not share a registry between threads.
//
// Families are registered once by name (with help text and type); each distinct label set is one
// series. Registration returns a reference that stays valid for the registry's lifetime (series
// are never removed), so hot paths keep the reference and update it without a lookup.
// Names and label names are checked against the Prometheus grammar; a bad name, or the same name
// registered with another type, help text or bucket layout, is a programming error
// (std::invalid_argument).
#pragma once

#include <boost/describe/enum.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conclave/core/check.hpp"

namespace conclave::admin {

/// Label name/value pairs, in the order they are rendered.
using Labels = std::vector<std::pair<std::string, std::string>>;

/// Monotonic count (a double, as in Prometheus: exact for integers up to 2^53, and able to
/// count seconds). Prometheus convention: the name ends in "_total".
class Counter {
  public:
    void inc(double n = 1) {
        CONCLAVE_CHECK(n >= 0, "a counter only grows");
        value_ += n;
    }
    /// For counters mirrored from a monotonic source (e.g. ElectorCounters) in a collector.
    void set_total(double total) {
        CONCLAVE_CHECK(total >= value_, "a mirrored counter only grows");
        value_ = total;
    }
    double value() const { return value_; }

  private:
    double value_ = 0;
};

class Gauge {
  public:
    void set(double v) { value_ = v; }
    void add(double v) { value_ += v; }
    double value() const { return value_; }

  private:
    double value_ = 0;
};

/// Fixed buckets (upper bounds, strictly increasing, finite); "+Inf" is implicit.
class Histogram {
  public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double v);
    const std::vector<double>& upper_bounds() const { return upper_bounds_; }
    /// Per-bucket (not cumulative) counts; the last entry is the +Inf bucket.
    const std::vector<std::uint64_t>& bucket_counts() const { return counts_; }
    std::uint64_t count() const { return count_; }
    double sum() const { return sum_; }

  private:
    std::vector<double> upper_bounds_;
    std::vector<std::uint64_t> counts_;
    std::uint64_t count_ = 0;
    double sum_ = 0;
};

BOOST_DEFINE_FIXED_ENUM_CLASS(MetricType, std::uint8_t, Counter, Gauge, Histogram)

class MetricsRegistry {
  public:
    Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
    Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
    Histogram& histogram(const std::string& name, const std::string& help,
                         const std::vector<double>& upper_bounds, const Labels& labels = {});

    /// Runs before every render: lets the owner refresh gauges computed on demand (peers up,
    /// leaderless time, ...).
    void on_collect(std::function<void()> collector);

    /// Prometheus text format 0.0.4; families in name order, series in registration order.
    std::string render();

    /// Content-Type of the rendered text.
    static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  private:
    struct Series {
        Labels labels;
        std::unique_ptr<Counter> counter;
        std::unique_ptr<Gauge> gauge;
        std::unique_ptr<Histogram> histogram;
    };
    struct Family {
        std::string help;
        MetricType type = MetricType::Counter;
        std::vector<double> upper_bounds;  // histograms
        std::deque<Series> series;
    };
    Series& Find(const std::string& name, const std::string& help, MetricType type,
                 const Labels& labels, const std::vector<double>& upper_bounds);

    std::map<std::string, Family> families_;
    std::vector<std::function<void()>> collectors_;
};

/// Registers process_cpu_seconds_total, process_resident_memory_bytes,
/// process_virtual_memory_bytes, process_open_fds, process_max_fds, process_start_time_seconds
/// (refreshed at every render; process_metrics.cpp) and conclave_build_info{version} 1.
void register_process_metrics(MetricsRegistry& registry, std::string_view version);

/// Text helpers shared by the renderer and the parser.
bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);
/// A sample value: shortest round-trip form; "NaN", "+Inf", "-Inf".
std::string format_metric_value(double v);

}  // namespace conclave::admin
