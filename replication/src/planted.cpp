// SPDX-License-Identifier: Apache-2.0
// Names of the log's planted bugs: compiled only into conclave_replication_planted (the
// simulator's and the tests' build of the log core), so that the production library and
// `conclaved` carry none of them. The planted core's constructor looks its bug up here, so any
// program that links the planted core carries these names (tests/tools/CMakeLists.txt:
// conclaved_has_no_planted_bugs).
#include "conclave/replication/config.hpp"

#ifndef CONCLAVE_PLANTED_BUGS
#error "planted.cpp belongs to conclave_replication_planted only"
#endif

namespace conclave::replication {

std::string_view to_string(PlantedLogBug b) {
    switch (b) {
        case PlantedLogBug::None:
            return "none";
        case PlantedLogBug::SkipSync:
            return "skip_sync";
        case PlantedLogBug::CommitWithoutQuorum:
            return "commit_without_quorum";
        case PlantedLogBug::CompactUncommitted:
            return "compact_uncommitted";
        case PlantedLogBug::CountRepaired:
            return "count_repaired";
        case PlantedLogBug::SkipOwnTermCommit:
            return "skip_own_term_commit";
    }
    return "?";
}

}  // namespace conclave::replication
