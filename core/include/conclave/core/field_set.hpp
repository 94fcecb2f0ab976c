// SPDX-License-Identifier: Apache-2.0
// A compile-time set of data members, named by member pointer: the per-field tables (fields a
// codec leaves out when they hold their default, fields a hash leaves out) that go with the
// Boost.Describe field lists of the message bodies. Naming a field by its member pointer means a
// renamed or removed field fails the build of the table that names it.
#pragma once

#include <cstddef>
#include <type_traits>

namespace conclave {

template <auto A, auto B>
constexpr bool same_member() {
    if constexpr (std::is_same_v<decltype(A), decltype(B)>) {
        return A == B;
    } else {
        return false;
    }
}

template <auto... Members>
struct FieldSet {
    /// True when `Member` (a member pointer) is in the set.
    template <auto Member>
    static constexpr bool contains = (same_member<Member, Members>() || ...);
    static constexpr std::size_t size = sizeof...(Members);
};

}  // namespace conclave
