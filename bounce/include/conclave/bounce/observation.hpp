// SPDX-License-Identifier: Apache-2.0
// What the poller saw: one record per GET /status answer (or failure to answer).
#pragma once

#include <boost/describe/enum.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "conclave/bounce/proxy.hpp"

namespace conclave::bounce {

BOOST_DEFINE_FIXED_ENUM_CLASS(ObservedRole, std::uint8_t, Unreachable, Stopped, Follower, Candidate,
                              Leader)

std::string_view to_string(ObservedRole r);
/// "leader" -> Leader, ...; nullopt for anything else.
std::optional<ObservedRole> role_from_string(std::string_view s);

struct Observation {
    std::int64_t at_ms = 0;  // when the request was sent, since the start of the run
    NodeIndex node = 0;
    ObservedRole role = ObservedRole::Unreachable;
    std::uint64_t term = 0;
    std::optional<NodeIndex> leader;  // who the node says leads `term`
    /// A leader whose "lease" is valid: the milliseconds it had left (rounded down) when it
    /// answered; nullopt otherwise (no lease, not valid, or a daemon without the field).
    std::optional<std::int64_t> lease_remaining_ms;
    std::int64_t answered_ms = 0;  // when the answer arrived, on the same clock as at_ms
};

/// Node ids in configs and /status: "n1".."nN" for indices 0..N-1.
std::string node_name(NodeIndex i);
std::optional<NodeIndex> node_index(std::string_view name, std::size_t node_count);

}  // namespace conclave::bounce
