// SPDX-License-Identifier: Apache-2.0
// Quorum arithmetic, written once: every count of a majority and every "the value a quorum has
// reached" in the cores, the simulator and the tools calls these.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <iterator>

#include "conclave/core/check.hpp"

namespace conclave {

/// The smallest number of members that is more than half of `members`: any two sets of this size
/// share a member. majority(0) is 1 (an empty set has no quorum).
constexpr std::size_t majority(std::size_t members) {
    return members / 2 + 1;
}

/// Whether `count` members of `members` are a majority.
constexpr bool is_majority(std::size_t count, std::size_t members) {
    return count >= majority(members);
}

/// How many of `members` may be lost while a majority remains.
constexpr std::size_t tolerated_failures(std::size_t members) {
    return members - std::min(members, majority(members));
}

/// The `quorum`-th largest of [first, last): the largest value that at least `quorum` of the values
/// reach (a commit index stored on a quorum, a lease end promised by a quorum). Reorders the range
/// (std::nth_element). 1 <= quorum <= the number of values.
template <class RandomIt>
auto quorum_th_largest(RandomIt first, RandomIt last, std::size_t quorum) {
    CONCLAVE_CHECK(quorum >= 1, "a quorum has at least one member");
    CONCLAVE_CHECK(quorum <= static_cast<std::size_t>(std::distance(first, last)),
                   "a quorum cannot be larger than the values it is taken over");
    const RandomIt nth = first + static_cast<std::ptrdiff_t>(quorum - 1);
    std::nth_element(first, nth, last, std::greater<>());
    return *nth;
}

}  // namespace conclave
