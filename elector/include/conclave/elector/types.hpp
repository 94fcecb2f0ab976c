// SPDX-License-Identifier: Apache-2.0
// Forwarding header: the vocabulary types moved to the bottom library (core/). Kept so that code
// including the old path still compiles.
#pragma once

#include "conclave/core/types.hpp"
