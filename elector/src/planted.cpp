// SPDX-License-Identifier: Apache-2.0
// Names of the planted bugs: compiled only into conclave_elector_planted (the simulator's and the
// tests' build of the core), so that the production library and `conclaved` carry none of them.
#include "conclave/elector/config.hpp"

#ifndef CONCLAVE_PLANTED_BUGS
#error "planted.cpp belongs to conclave_elector_planted only"
#endif

namespace conclave::elector {

std::string_view to_string(PlantedBug b) {
    switch (b) {
        case PlantedBug::None:
            return "none";
        case PlantedBug::DoubleVote:
            return "double-vote";
        case PlantedBug::MinorityQuorum:
            return "minority-quorum";
        case PlantedBug::CountStaleScoutingReplies:
            return "count-stale-scouting-replies";
        case PlantedBug::SkipStickyLeader:
            return "skip-sticky-leader";
        case PlantedBug::IgnoreConfigVersion:
            return "ignore-config-version";
        case PlantedBug::LeaseIgnoresDrift:
            return "lease-ignores-drift";
        case PlantedBug::LeaseKeptOnPeerDown:
            return "lease-kept-on-peer-down";
    }
    return "?";
}

}  // namespace conclave::elector
