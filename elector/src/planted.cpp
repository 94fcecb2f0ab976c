// SPDX-License-Identifier: Apache-2.0
// Names of the planted bugs (core/enum_names.hpp): instantiated only in conclave_elector_planted
// (the simulator's and the tests' build of the core), so that the production library and
// `conclaved` carry none of them.
#include "conclave/core/enum_names.hpp"
#include "conclave/elector/config.hpp"

#ifndef CONCLAVE_PLANTED_BUGS
#error "planted.cpp belongs to conclave_elector_planted only"
#endif

namespace conclave::elector {

std::string_view to_string(PlantedBug b) {
    return enum_name(b);
}

}  // namespace conclave::elector
