// SPDX-License-Identifier: Apache-2.0
// Names of the log's planted bugs (core/enum_names.hpp): instantiated only in
// conclave_replication_planted (the simulator's and the tests' build of the log core), so that
// the production library and `conclaved` carry none of them. The planted core's constructor looks
// its bug up here, so any program that links the planted core carries the enumerators' names
// (tests/tools/CMakeLists.txt: conclaved_has_no_planted_bugs).
#include "conclave/core/enum_names.hpp"
#include "conclave/replication/config.hpp"

#ifndef CONCLAVE_PLANTED_BUGS
#error "planted.cpp belongs to conclave_replication_planted only"
#endif

namespace conclave::replication {

std::string_view to_string(PlantedLogBug b) {
    return enum_name(b);
}

}  // namespace conclave::replication
