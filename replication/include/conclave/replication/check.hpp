// SPDX-License-Identifier: Apache-2.0
// Forwarding header: the always-on checks moved to the vocabulary library (core/). Kept so that
// code including the old path still compiles.
#pragma once

#include "conclave/core/check.hpp"

namespace conclave::replication {
using ::conclave::invariant_failed;
using ::conclave::InvariantFailureHandler;
using ::conclave::set_invariant_failure_handler;
}  // namespace conclave::replication
