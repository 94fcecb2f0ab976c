// SPDX-License-Identifier: Apache-2.0
// Links examples/broker against the installed package: its store admits a write under a newer
// fencing token and refuses a late one under an older token.
#include <iostream>

#include "broker.hpp"

int main() {
    conclave::examples::AssignmentStore store;
    const bool ok =
        store.write(2, 0, "n1") && !store.write(1, 0, "n2") && store.assignments().at(0) == "n1";
    std::cout << (ok ? "broker ok" : "broker failed") << "\n";
    return ok ? 0 : 1;
}
