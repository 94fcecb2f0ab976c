// SPDX-License-Identifier: Apache-2.0
// Links examples/broker against the installed package: its assignment keys and values round-trip.
#include <iostream>

#include "broker.hpp"

int main() {
    using namespace conclave::examples;
    const auto a = parse_assignment(assignment_value("n1", 7));
    const bool ok = partition_of(partition_key(3)) == 3 && a && a->primary == "n1" &&
                    a->token == 7 && !partition_of("other/3") && !parse_assignment("{}");
    std::cout << (ok ? "broker ok" : "broker failed") << "\n";
    return ok ? 0 : 1;
}
