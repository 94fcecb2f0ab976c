// SPDX-License-Identifier: Apache-2.0
// Canary for tests/tools/layers_test.sh: the mesh must never include a driver. Not compiled.
#include "conclave/drivers/driver.hpp"
