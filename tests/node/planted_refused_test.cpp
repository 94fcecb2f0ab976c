// SPDX-License-Identifier: Apache-2.0
// The production log core (conclave_replication, what node/ and conclaved link) has no planted-bug
// code paths and refuses a config naming one; the planted build (conclave_replication_planted)
// accepts them (tests/replication, tests/sim).
#include <catch2/catch.hpp>
#include <stdexcept>

#include "conclave/replication/log.hpp"

namespace {

conclave::replication::LogConfig PlantedRefusedConfig(conclave::replication::PlantedLogBug bug) {
    conclave::replication::LogConfig c;
    c.cluster_size = 3;
    c.self = conclave::NodeId{0};
    c.planted_bug = bug;
    return c;
}

}  // namespace

TEST_CASE("the production log core refuses every planted bug", "[planted]") {
    using conclave::replication::PlantedLogBug;
    using conclave::replication::RecoveredLog;
    using conclave::replication::ReplicatedLog;
    CHECK_NOTHROW(ReplicatedLog(PlantedRefusedConfig(PlantedLogBug::None), RecoveredLog{}));
    for (auto bug : {PlantedLogBug::SkipSync, PlantedLogBug::CommitWithoutQuorum,
                     PlantedLogBug::CompactUncommitted, PlantedLogBug::CountRepaired,
                     PlantedLogBug::SkipOwnTermCommit}) {
        CHECK_THROWS_WITH(ReplicatedLog(PlantedRefusedConfig(bug), RecoveredLog{}),
                          Catch::Contains("exist only in conclave_replication_planted"));
    }
}
