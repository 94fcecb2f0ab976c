// SPDX-License-Identifier: Apache-2.0
// Canary for tests/tools/layers_test.sh: the admin surface must never include the Node it serves
// (a Node implements AdminSource). Not compiled.
#include "conclave/node/node.hpp"
