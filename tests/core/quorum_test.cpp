// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <array>
#include <stdexcept>
#include <vector>

#include "conclave/core/check.hpp"
#include "conclave/core/quorum.hpp"

using namespace conclave;

namespace {

[[noreturn]] void ThrowOnViolation(const char* what) {
    throw std::logic_error(what);
}

}  // namespace

TEST_CASE("majority: any two majorities of the same members intersect", "[quorum]") {
    CHECK(majority(1) == 1);
    CHECK(majority(2) == 2);
    CHECK(majority(3) == 2);
    CHECK(majority(4) == 3);
    CHECK(majority(5) == 3);
    CHECK(majority(7) == 4);
    for (std::size_t n = 1; n <= 64; ++n) {
        INFO("members " << n);
        CHECK(2 * majority(n) > n);         // two majorities share a member
        CHECK(2 * (majority(n) - 1) <= n);  // one less does not
        CHECK(is_majority(majority(n), n));
        CHECK_FALSE(is_majority(majority(n) - 1, n));
        CHECK(tolerated_failures(n) + majority(n) == n);
    }
    CHECK(tolerated_failures(0) == 0);
}

TEST_CASE("quorum_th_largest: the value a quorum has reached", "[quorum]") {
    std::array<int, 5> v{3, 9, 1, 7, 5};
    CHECK(quorum_th_largest(v.begin(), v.end(), 1) == 9);
    CHECK(quorum_th_largest(v.begin(), v.end(), 3) == 5);  // 9, 7, 5 reach 5
    CHECK(quorum_th_largest(v.begin(), v.end(), 5) == 1);
    std::vector<std::size_t> lens{10, 10, 4};
    CHECK(quorum_th_largest(lens.begin(), lens.end(), majority(lens.size())) == 10);
    lens = {10, 4, 4};
    CHECK(quorum_th_largest(lens.begin(), lens.end(), majority(lens.size())) == 4);
}

TEST_CASE("quorum_th_largest refuses a quorum it cannot take", "[quorum]") {
    const ScopedInvariantHandler handler(&ThrowOnViolation);
    std::array<int, 2> v{1, 2};
    CHECK_THROWS_AS(quorum_th_largest(v.begin(), v.end(), 0), std::logic_error);
    CHECK_THROWS_AS(quorum_th_largest(v.begin(), v.end(), 3), std::logic_error);
}
