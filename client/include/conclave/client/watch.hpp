// SPDX-License-Identifier: Apache-2.0
// The watch stream of the admin API (GET /leadership?watch=1, GET /broadcast?watch=1): a chunked
// answer of NDJSON lines, one callback per line, ended by the caller, the node or its silence.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "conclave/client/client.hpp"

namespace conclave::client {

struct WatchOptions {
    std::string target = "/leadership?watch=1";
    /// Asked (GET, answered at once) after half of `silence` without a byte, to tell a quiet
    /// node from a gone one.
    std::string ping_target = "/leadership";
    /// The stream is closed once the node was silent this long.
    std::chrono::milliseconds silence{5000};
};

/// Follows the stream of `options.target` on one node and calls `on_line` with every non-empty
/// line (keep-alive newlines skipped; a megabyte without a newline is dropped, not NDJSON) until
/// it returns false: then returns nullopt. A node that answers without a stream (a status other
/// than 200, or not chunked) gives its answer. Throws Error(Unreachable) when the stream ends
/// ("<endpoint>: the watch stream ended"), fails, or the node is silent for `options.silence`
/// ("<endpoint>: silent for 5s"); Error(Refused) as `request` does. `streaming` is set once the
/// node answered with a stream.
std::optional<Response> watch(const Settings& settings, const Endpoint& endpoint,
                              const WatchOptions& options,
                              const std::function<bool(const std::string& line)>& on_line,
                              bool& streaming);

}  // namespace conclave::client
