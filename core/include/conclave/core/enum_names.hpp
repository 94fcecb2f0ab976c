// SPDX-License-Identifier: Apache-2.0
// The names of enums defined with BOOST_DEFINE_FIXED_ENUM_CLASS (or described with
// BOOST_DESCRIBE_ENUM), derived from the enumerators: an enumerator's name is its C++ name in
// kebab case (SkipSync -> "skip-sync"). Command lines, configuration files and reports take and
// print these names; the enum is the one list.
#pragma once

#include <boost/describe/enum.hpp>
#include <boost/describe/enumerators.hpp>
#include <boost/mp11/algorithm.hpp>

#include <array>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace conclave {

namespace detail {

inline std::string kebab_case(std::string_view camel) {
    std::string out;
    for (const char c : camel) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isupper(u) != 0) {
            if (!out.empty()) {
                out += '-';
            }
            out += static_cast<char>(std::tolower(u));
        } else {
            out += c;
        }
    }
    return out;
}

/// Every enumerator of E with its name, in declaration order, built once.
template <class E>
const auto& enum_name_table() {
    using Enumerators = boost::describe::describe_enumerators<E>;
    using Table = std::array<std::pair<E, std::string>, boost::mp11::mp_size<Enumerators>::value>;
    static const Table table = [] {
        Table t;
        std::size_t i = 0;
        boost::mp11::mp_for_each<Enumerators>([&](auto d) {
            t[i++] = {d.value, kebab_case(d.name)};
        });
        return t;
    }();
    return table;
}

}  // namespace detail

/// The C++ name of `value`'s enumerator ("SkipSync"); "?" for a value that is no enumerator.
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

/// The name of `value` in kebab case ("skip-sync"); "?" for a value that is no enumerator.
template <class E>
std::string_view enum_name(E value) {
    for (const auto& [v, name] : detail::enum_name_table<E>()) {
        if (v == value) {
            return name;
        }
    }
    return "?";
}

/// The enumerator named `name` (exactly, in kebab case); nullopt for any other text.
template <class E>
std::optional<E> parse_enum(std::string_view name) {
    for (const auto& [v, n] : detail::enum_name_table<E>()) {
        if (n == name) {
            return v;
        }
    }
    return std::nullopt;
}

/// Every name, for messages and help texts: "a, b or c".
template <class E>
std::string enum_choices() {
    const auto& table = detail::enum_name_table<E>();
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
