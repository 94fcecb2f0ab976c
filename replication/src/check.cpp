#include "conclave/replication/check.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace conclave::replication {

namespace {
InvariantFailureHandler g_handler = nullptr;
}

InvariantFailureHandler set_invariant_failure_handler(InvariantFailureHandler handler) {
    InvariantFailureHandler old = g_handler;
    g_handler = handler;
    return old;
}

void invariant_failed(const char* file, int line, const char* condition, const char* message) {
    const std::string what = std::string("replication invariant violated: ") + message + " (" +
                             condition + ") at " + file + ":" + std::to_string(line);
    if (g_handler != nullptr) {
        g_handler(what.c_str());
    }
    std::fprintf(stderr, "%s\n", what.c_str());
    std::abort();
}

}  // namespace conclave::replication
