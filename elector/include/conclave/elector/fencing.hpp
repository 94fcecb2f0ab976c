// SPDX-License-Identifier: Apache-2.0
// Fencing tokens (departure 7): a downstream store accepts a write only if its token is not older
// than the newest token it has seen. Tokens come from LeadershipSnapshot::fencing_token.
//
// "Departure N" refers to the numbered departures from BlazingMQ in docs/design.md.
#pragma once

#include <cstdint>

#include "conclave/elector/actions.hpp"

namespace conclave::elector {

/// Tracks the highest fencing token seen by a downstream resource. Not thread-safe: guard it with
/// the resource's own lock.
class FencingGate {
  public:
    /// Accepts (and remembers) `token` if it is at least the highest seen so far; token 0 means
    /// "no leader" and is always rejected.
    bool admit(std::uint64_t token) {
        if (token == 0 || token < highest_) {
            return false;
        }
        highest_ = token;
        return true;
    }
    /// The leader lease too (docs/design.md): admits the snapshot's token only while its lease
    /// is valid at `now` (the driver's clock, LeadershipSnapshot::valid_at); work offered after
    /// the lease ended is refused and the token is not remembered.
    bool admit(const LeadershipSnapshot& leadership, Millis now) {
        return leadership.valid_at(now) && admit(leadership.fencing_token);
    }
    std::uint64_t highest() const { return highest_; }

  private:
    std::uint64_t highest_ = 0;
};

}  // namespace conclave::elector
