// SPDX-License-Identifier: Apache-2.0
#include "conclave/admin/prometheus_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

namespace conclave::admin {
namespace {

struct LineError {
    std::string message;
};

std::optional<double> ParseValue(std::string_view text) {
    if (text == "NaN") {
        return std::numeric_limits<double>::quiet_NaN();
    }
    if (text == "+Inf" || text == "Inf") {
        return std::numeric_limits<double>::infinity();
    }
    if (text == "-Inf") {
        return -std::numeric_limits<double>::infinity();
    }
    if (!text.empty() && text.front() == '+') {
        text.remove_prefix(1);
    }
    double value = 0;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
    if (result.ec != std::errc{} || result.ptr != text.data() + text.size() || text.empty()) {
        return std::nullopt;
    }
    return value;
}

/// Reads a metric name at the start of `rest`; advances `rest`.
std::string ReadName(std::string_view& rest, bool label) {
    std::size_t n = 0;
    const auto ok = [&](char c, bool first) {
        const bool letter =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
        return letter || (!first && c >= '0' && c <= '9');
    };
    while (n < rest.size() && ok(rest[n], n == 0)) {
        ++n;
    }
    std::string name(rest.substr(0, n));
    rest.remove_prefix(n);
    return name;
}

std::string Unescape(std::string_view text, bool allow_quote) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\\') {
            out += text[i];
            continue;
        }
        if (i + 1 >= text.size()) {
            throw LineError{"dangling backslash"};
        }
        const char next = text[++i];
        if (next == '\\') {
            out += '\\';
        } else if (next == 'n') {
            out += '\n';
        } else if (next == '"' && allow_quote) {
            out += '"';
        } else {
            throw LineError{std::string("invalid escape \\") + next};
        }
    }
    return out;
}

Labels ReadLabels(std::string_view& rest) {
    Labels labels;
    std::set<std::string> seen;
    rest.remove_prefix(1);  // '{'
    while (true) {
        if (!rest.empty() && rest.front() == '}') {
            rest.remove_prefix(1);
            return labels;
        }
        std::string name = ReadName(rest, true);
        if (name.empty()) {
            throw LineError{"expected a label name"};
        }
        if (!seen.insert(name).second) {
            throw LineError{"duplicate label " + name};
        }
        if (rest.size() < 2 || rest[0] != '=' || rest[1] != '"') {
            throw LineError{"expected =\" after label " + name};
        }
        rest.remove_prefix(2);
        std::size_t end = 0;
        while (end < rest.size() && rest[end] != '"') {
            end += rest[end] == '\\' ? std::size_t{2} : std::size_t{1};
        }
        if (end >= rest.size()) {
            throw LineError{"unterminated label value"};
        }
        labels.emplace_back(std::move(name), Unescape(rest.substr(0, end), true));
        rest.remove_prefix(end + 1);
        if (!rest.empty() && rest.front() == ',') {
            rest.remove_prefix(1);
        } else if (rest.empty() || rest.front() != '}') {
            throw LineError{"expected , or } in labels"};
        }
    }
}

bool EndsWith(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct HistogramSeries {
    std::vector<std::pair<double, double>> buckets;  // (le, cumulative count), in written order
    std::optional<double> sum;
    std::optional<double> count;
};

/// The state of one parse: each line in turn, then the histograms' consistency. Errors are thrown
/// as LineError (line_number is the line being read).
struct ExpositionParser {
    PrometheusExposition out;
    std::set<std::string> closed_families;  // families whose samples are complete
    std::string current_family;
    std::set<std::pair<std::string, Labels>> series_seen;
    std::map<std::pair<std::string, Labels>, HistogramSeries> histograms;
    std::size_t line_number = 0;

    /// The family a sample belongs to: its name less _bucket/_sum/_count for histograms and
    /// summaries (no _bucket for summaries), else its name.
    std::string family_of(const std::string& name) const {
        for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
            if (EndsWith(name, suffix)) {
                const std::string base = name.substr(0, name.size() - suffix.size());
                const auto type = out.types.find(base);
                if (type != out.types.end() &&
                    (type->second == "histogram" ||
                     (type->second == "summary" && suffix != "_bucket"))) {
                    return base;
                }
            }
        }
        return name;
    }

    /// A line starting with '#' (`rest` is what follows it): HELP, TYPE or a plain comment.
    void comment_line(std::string_view rest) {
        if (rest.rfind(" HELP ", 0) != 0 && rest.rfind(" TYPE ", 0) != 0) {
            return;  // plain comment
        }
        const bool help = rest.rfind(" HELP ", 0) == 0;
        rest.remove_prefix(6);
        std::string name = ReadName(rest, false);
        if (name.empty()) {
            throw LineError{"expected a metric name"};
        }
        if (help) {
            help_line(name, rest);
        } else {
            type_line(name, rest);
        }
    }

    void help_line(const std::string& name, std::string_view rest) {
        if (!rest.empty() && rest.front() != ' ') {
            throw LineError{"expected a space after the metric name"};
        }
        if (!rest.empty()) {
            rest.remove_prefix(1);
        }
        if (!out.helps.emplace(name, Unescape(rest, false)).second) {
            throw LineError{"second HELP for " + name};
        }
    }

    void type_line(const std::string& name, std::string_view rest) {
        if (rest.empty() || rest.front() != ' ') {
            throw LineError{"expected a type after the metric name"};
        }
        rest.remove_prefix(1);
        const std::set<std::string_view> kTypes = {"counter", "gauge", "histogram", "summary",
                                                   "untyped"};
        if (kTypes.count(rest) == 0) {
            throw LineError{"unknown type \"" + std::string(rest) + "\""};
        }
        if (out.types.count(name) != 0) {
            throw LineError{"second TYPE for " + name};
        }
        if (closed_families.count(name) != 0 || current_family == name) {
            throw LineError{"TYPE for " + name + " after its samples"};
        }
        out.types.emplace(name, std::string(rest));
    }

    /// `name{labels} value [timestamp]`.
    void sample_line(std::string_view rest) {
        PrometheusSample sample;
        sample.name = ReadName(rest, false);
        if (sample.name.empty()) {
            throw LineError{"expected a metric name"};
        }
        if (!rest.empty() && rest.front() == '{') {
            sample.labels = ReadLabels(rest);
        }
        if (rest.empty() || rest.front() != ' ') {
            throw LineError{"expected a space before the value"};
        }
        rest.remove_prefix(1);
        const std::size_t space = rest.find(' ');
        const auto value = ParseValue(rest.substr(0, space));
        if (!value) {
            throw LineError{"invalid value \"" + std::string(rest.substr(0, space)) + "\""};
        }
        sample.value = *value;
        if (space != std::string_view::npos) {
            check_timestamp(rest.substr(space + 1));
        }
        const std::string family = family_of(sample.name);
        enter_family(family);
        if (!series_seen.emplace(sample.name, sample.labels).second) {
            throw LineError{"duplicate series " + sample.name};
        }
        const auto type = out.types.find(family);
        if (type != out.types.end() && type->second == "histogram") {
            histogram_sample(family, sample);
        }
        out.samples.push_back(std::move(sample));
    }

    static void check_timestamp(std::string_view timestamp) {
        std::int64_t ts = 0;
        const auto r = std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ts);
        if (r.ec != std::errc{} || r.ptr != timestamp.data() + timestamp.size()) {
            throw LineError{"invalid timestamp \"" + std::string(timestamp) + "\""};
        }
    }

    /// The samples of a family are contiguous.
    void enter_family(const std::string& family) {
        if (family == current_family) {
            return;
        }
        if (closed_families.count(family) != 0) {
            throw LineError{"samples of " + family + " are not contiguous"};
        }
        if (!current_family.empty()) {
            closed_families.insert(current_family);
        }
        current_family = family;
    }

    void histogram_sample(const std::string& family, const PrometheusSample& sample) {
        Labels base = sample.labels;
        std::optional<double> le;
        for (auto it = base.begin(); it != base.end(); ++it) {
            if (it->first == "le") {
                le = ParseValue(it->second);
                if (!le) {
                    throw LineError{"invalid le \"" + it->second + "\""};
                }
                base.erase(it);
                break;
            }
        }
        HistogramSeries& h = histograms[{family, base}];
        if (EndsWith(sample.name, "_bucket")) {
            if (!le) {
                throw LineError{"histogram bucket without le"};
            }
            h.buckets.emplace_back(*le, sample.value);
        } else if (EndsWith(sample.name, "_sum")) {
            h.sum = sample.value;
        } else if (EndsWith(sample.name, "_count")) {
            h.count = sample.value;
        } else {
            throw LineError{"histogram sample must be _bucket, _sum or _count"};
        }
    }

    void check_histograms() const {
        for (const auto& [key, h] : histograms) {
            const std::string& family = key.first;
            if (h.buckets.empty() || !std::isinf(h.buckets.back().first)) {
                throw LineError{"histogram " + family + " has no +Inf bucket"};
            }
            for (std::size_t i = 1; i < h.buckets.size(); ++i) {
                if (h.buckets[i].first <= h.buckets[i - 1].first) {
                    throw LineError{"histogram " + family + ": le not increasing"};
                }
                if (h.buckets[i].second < h.buckets[i - 1].second) {
                    throw LineError{"histogram " + family + ": buckets not cumulative"};
                }
            }
            if (!h.count || *h.count != h.buckets.back().second) {
                throw LineError{"histogram " + family + ": _count missing or not the +Inf bucket"};
            }
            if (!h.sum) {
                throw LineError{"histogram " + family + ": _sum missing"};
            }
        }
    }
};

}  // namespace

std::optional<double> PrometheusExposition::value(std::string_view name,
                                                  const Labels& labels) const {
    for (const PrometheusSample& s : samples) {
        if (s.name == name && s.labels == labels) {
            return s.value;
        }
    }
    return std::nullopt;
}

std::variant<PrometheusExposition, PrometheusParseError> parse_prometheus_text(
    std::string_view text) {
    ExpositionParser parser;
    try {
        if (!text.empty() && text.back() != '\n') {
            parser.line_number =
                1 + static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
            throw LineError{"the exposition must end with a newline"};
        }
        while (!text.empty()) {
            ++parser.line_number;
            const std::size_t newline = text.find('\n');
            const std::string_view line = text.substr(0, newline);
            text.remove_prefix(newline + 1);
            if (line.empty()) {
                continue;
            }
            if (line.front() == '#') {
                parser.comment_line(line.substr(1));
            } else {
                parser.sample_line(line);
            }
        }
        parser.check_histograms();
    } catch (const LineError& e) {
        return PrometheusParseError{parser.line_number, e.message};
    }
    return std::move(parser.out);
}

}  // namespace conclave::admin
