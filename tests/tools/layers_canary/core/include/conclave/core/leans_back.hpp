// SPDX-License-Identifier: Apache-2.0
// Canary for tests/tools/layers_test.sh: core/ includes nothing above it. Not compiled.
#pragma once
#include "conclave/elector/messages.hpp"
