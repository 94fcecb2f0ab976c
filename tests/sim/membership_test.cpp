// Membership, the elector's slice (issue 18): voter sets changed the way the log would change
// them (sim/include/conclave/sim/membership.hpp), under faults. The version fence (R5) keeps one
// leader per term; the planted IgnoreConfigVersion (no fence) must be caught.
#include <catch2/catch.hpp>

#include "conclave/sim/membership.hpp"

using namespace conclave;
using namespace conclave::sim;

namespace {

#ifdef SIM_TEST_LIGHT
constexpr std::uint64_t kSeeds = 150;  // sanitizer builds check memory safety, not volume
#else
constexpr std::uint64_t kSeeds = 1000;  // ~1 s per test case in release
#endif

}  // namespace

TEST_CASE("membership: voter-set changes under faults keep one leader per term",
          "[.][membership]") {
    std::uint64_t committed = 0;
    std::uint64_t fenced = 0;
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
        MembershipRunOptions o;
        o.seed = seed;
        const MembershipRunResult r = run_membership_seed(o);
        INFO("seed " << seed << ": " << (r.violation ? r.violation->detail : ""));
        REQUIRE_FALSE(r.violation);
        committed += r.committed_version > 1 ? 1 : 0;
        fenced += r.stale_config_refusals;
    }
    // The runs do change configurations, and the fence does refuse (else this proves nothing).
    CHECK(committed >= kSeeds / 2);
    CHECK(fenced > 0);
}

TEST_CASE("membership: without the version fence, a term gets two leaders", "[.][membership]") {
    std::uint64_t found = 0;
    std::uint64_t first = 0;
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
        MembershipRunOptions o;
        o.seed = seed;
        o.planted_bug = PlantedBug::IgnoreConfigVersion;
        const MembershipRunResult r = run_membership_seed(o);
        if (r.violation) {
            CHECK(r.violation->kind == ViolationKind::TwoLeadersInTerm);
            found += 1;
            first = first == 0 ? seed : first;
        }
    }
    WARN("IgnoreConfigVersion: two leaders in one term in "
         << found << " of " << kSeeds << " seeds (first: seed " << first << ")");
    CHECK(found > 0);
}
