// SPDX-License-Identifier: Apache-2.0
// Always-on invariant checks (TigerStyle): a violated invariant stops the node at the line where
// the assumption broke, in release builds too. Unlike `assert`, CONCLAVE_CHECK is never compiled
// out. It is for the code's own invariants only: data from the network or disk is validated,
// dropped and counted, never checked with CONCLAVE_CHECK.
//
// Tests and the simulator may install a handler that throws instead, to prove that planted bugs
// are caught. The handler is per thread (tests running on several threads do not see each other's
// handler); ScopedInvariantHandler installs one for a scope.
#pragma once

namespace conclave {

/// Called with a description of the violated invariant. Must not return normally (abort or throw).
using InvariantFailureHandler = void (*)(const char* what);

/// Installs `handler` for the calling thread (nullptr restores the default: print to stderr and
/// abort). Returns the old one.
InvariantFailureHandler set_invariant_failure_handler(InvariantFailureHandler handler);

/// Installs a handler for the lifetime of the object, then restores the previous one.
class ScopedInvariantHandler {
  public:
    explicit ScopedInvariantHandler(InvariantFailureHandler handler)
        : previous_(set_invariant_failure_handler(handler)) {}
    ~ScopedInvariantHandler() { set_invariant_failure_handler(previous_); }
    ScopedInvariantHandler(const ScopedInvariantHandler&) = delete;
    ScopedInvariantHandler& operator=(const ScopedInvariantHandler&) = delete;

  private:
    InvariantFailureHandler previous_;
};

[[noreturn]] void invariant_failed(const char* file, int line, const char* condition,
                                   const char* message);

}  // namespace conclave

#define CONCLAVE_CHECK(condition, message)                                         \
    do {                                                                           \
        if (!(condition)) [[unlikely]] {                                           \
            ::conclave::invariant_failed(__FILE__, __LINE__, #condition, message); \
        }                                                                          \
    } while (false)
