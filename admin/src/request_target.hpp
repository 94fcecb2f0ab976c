// SPDX-License-Identifier: Apache-2.0
// The admin server's request target (private to node/src).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace conclave::admin {

/// Splits an origin-form target ("/path?k=v&...") into its path (not decoded) and its decoded
/// query ('+' is a space; keys unique). An error message on failure: not an absolute path, bad
/// percent-encoding or characters a target may not hold, an empty name, a repeated name.
std::optional<std::string> parse_request_target(std::string_view target, std::string& path,
                                                std::map<std::string, std::string>& query);

/// The target "/path?k=v&..." of `path` (as received, not decoded) and `query` (encoded again),
/// for a redirect's Location.
std::string encode_request_target(std::string_view path,
                                  const std::map<std::string, std::string>& query);

/// A percent-encoded path part ("a%2Fb" -> "a/b"); nullopt when the encoding is malformed.
std::optional<std::string> decode_path_part(std::string_view encoded);

}  // namespace conclave::admin
