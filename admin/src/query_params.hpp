// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the admin route files for reading query parameters (private to node/src).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

namespace conclave::admin {

/// A whole decimal number that fits 64 bits, or nullopt ("", "12x", "-1", overflow).
inline std::optional<std::uint64_t> ParseU64(std::string_view text) {
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc{} || ptr != end) {
        return std::nullopt;
    }
    return value;
}

}  // namespace conclave::admin
