// SPDX-License-Identifier: Apache-2.0
// The names of enums defined with BOOST_DEFINE_FIXED_ENUM_CLASS, derived from the enumerators in
// one of four spellings (NameStyle): kebab case (SkipSync -> "skip-sync", the default), snake case
// ("skip_sync"), upper snake case ("SKIP_SYNC") or the C++ name itself. Command lines, files,
// metrics and reports take and print these names; the enum is the one list.
#pragma once

#include <boost/describe/enum.hpp>
#include <boost/describe/enumerators.hpp>
#include <boost/mp11/algorithm.hpp>

#include <array>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace conclave {

enum class NameStyle : std::uint8_t { Kebab, Snake, UpperSnake, Cpp };

/// How many enumerators E has.
template <class E>
inline constexpr std::size_t kEnumeratorCount =
    boost::mp11::mp_size<boost::describe::describe_enumerators<E>>::value;

namespace detail {

inline std::string spelled(std::string_view cpp, NameStyle style) {
    if (style == NameStyle::Cpp) {
        return std::string(cpp);
    }
    const char separator = style == NameStyle::Kebab ? '-' : '_';
    std::string out;
    for (const char c : cpp) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isupper(u) != 0 && !out.empty()) {
            out += separator;
        }
        out +=
            static_cast<char>(style == NameStyle::UpperSnake ? std::toupper(u) : std::tolower(u));
    }
    return out;
}

/// Every enumerator of E with its name in `Style`, in declaration order, built once.
template <class E, NameStyle Style>
const auto& enum_name_table() {
    using Enumerators = boost::describe::describe_enumerators<E>;
    using Table = std::array<std::pair<E, std::string>, boost::mp11::mp_size<Enumerators>::value>;
    static const Table table = [] {
        Table t;
        std::size_t i = 0;
        boost::mp11::mp_for_each<Enumerators>([&](auto d) {
            t[i++] = {d.value, spelled(d.name, Style)};
        });
        return t;
    }();
    return table;
}

}  // namespace detail

/// The C++ name of `value`'s enumerator ("SkipSync"); "?" for a value that is no enumerator.
/// Usable in constant expressions.
template <class E>
constexpr std::string_view enumerator_name(E value) {
    std::string_view name = "?";
    boost::mp11::mp_for_each<boost::describe::describe_enumerators<E>>([&](auto d) {
        if (d.value == value) {
            name = d.name;
        }
    });
    return name;
}

/// The name of `value` in `Style`; "?" for a value that is no enumerator.
template <NameStyle Style = NameStyle::Kebab, class E>
std::string_view enum_name(E value) {
    for (const auto& [v, name] : detail::enum_name_table<E, Style>()) {
        if (v == value) {
            return name;
        }
    }
    return "?";
}

/// The enumerator named `name` (exactly, in `Style`); nullopt for any other text.
template <class E, NameStyle Style = NameStyle::Kebab>
std::optional<E> parse_enum(std::string_view name) {
    for (const auto& [v, n] : detail::enum_name_table<E, Style>()) {
        if (n == name) {
            return v;
        }
    }
    return std::nullopt;
}

/// Every name in `Style`, for messages and help texts: "a, b or c".
template <class E, NameStyle Style = NameStyle::Kebab>
std::string enum_choices() {
    const auto& table = detail::enum_name_table<E, Style>();
    std::string out;
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (i > 0) {
            out += i + 1 == table.size() ? " or " : ", ";
        }
        out += table[i].second;
    }
    return out;
}

}  // namespace conclave
