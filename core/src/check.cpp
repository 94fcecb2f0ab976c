// SPDX-License-Identifier: Apache-2.0
#include "conclave/core/check.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace conclave {

namespace {
thread_local InvariantFailureHandler t_handler = nullptr;
}

InvariantFailureHandler set_invariant_failure_handler(InvariantFailureHandler handler) {
    InvariantFailureHandler old = t_handler;
    t_handler = handler;
    return old;
}

void invariant_failed(const char* file, int line, const char* condition, const char* message) {
    const std::string what = std::string("invariant violated: ") + message + " (" + condition +
                             ") at " + file + ":" + std::to_string(line);
    if (t_handler != nullptr) {
        t_handler(what.c_str());
    }
    std::fprintf(stderr, "%s\n", what.c_str());
    std::abort();
}

}  // namespace conclave
