// SPDX-License-Identifier: Apache-2.0
// JSON form of a membership configuration (docs/membership.md §1): the value of a
// configuration entry (key `_conclave/members`) of the replicated log.
//
//   {"version": 3,
//    "voters":   [{"id": "n1", "peer": "10.0.0.1:7000", "http": "10.0.0.1:8080"}, ...],
//    "learners": [{"id": "n4", "peer": "10.0.0.4:7000", "http": "10.0.0.4:8080"}]}
//
// The log core (replication/) does not link nlohmann_json: it gets decode_configuration as
// LogConfig::decode_configuration. Decoding is bounded and total: anything else than the shape
// above (unknown fields included) is nullopt, never an exception.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "conclave/replication/membership.hpp"

namespace conclave::codec {

/// Bounds checked by the decoder: members per list, bytes per id / address.
inline constexpr std::size_t kMaxConfigMembers = 64;
inline constexpr std::size_t kMaxConfigStringBytes = 256;

std::string encode_configuration(const replication::Configuration& cfg);
/// nullopt when `value` is not a configuration of the shape above: invalid JSON, a missing or
/// extra field, a version >= 2^63, an empty id, more than kMaxConfigMembers members in a list,
/// a string longer than kMaxConfigStringBytes; the optional "table" (docs/membership.md §8) must be
/// a non-empty array of at most kMaxConfigMembers non-empty ids.
std::optional<replication::Configuration> decode_configuration(std::string_view value);

}  // namespace conclave::codec
