// Always-on invariant checks (TigerStyle): a violated invariant stops the node at the line where
// the assumption broke, in release builds too. Tests may install a handler that throws instead, to
// prove that planted bugs are caught.
#pragma once

namespace conclave::replication {

/// Called with a description of the violated invariant. Must not return normally (abort or throw).
using InvariantFailureHandler = void (*)(const char* what);

/// Installs `handler` (nullptr restores the default: print to stderr and abort). Returns the old
/// one.
InvariantFailureHandler set_invariant_failure_handler(InvariantFailureHandler handler);

[[noreturn]] void invariant_failed(const char* file, int line, const char* condition,
                                   const char* message);

}  // namespace conclave::replication

#define CONCLAVE_CHECK(condition, message)                                                      \
    do {                                                                                        \
        if (!(condition)) {                                                                     \
            ::conclave::replication::invariant_failed(__FILE__, __LINE__, #condition, message); \
        }                                                                                       \
    } while (false)
