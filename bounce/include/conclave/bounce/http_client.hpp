// SPDX-License-Identifier: Apache-2.0
// A one-shot HTTP/1.1 client for the daemon's admin endpoints (Beast, one connection per request,
// a deadline for the whole exchange). Used by the metadata proposer and the log reader.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <optional>
#include <string>

namespace conclave::bounce {

/// How far a request got before it failed. The distinction matters for proposals: a request that
/// never connected was certainly not processed; one that was written may have been.
enum class HttpStage : std::uint8_t { Connect, Write, Read, Done };

struct HttpResult {
    HttpStage stage = HttpStage::Connect;  // Done: `status` and `body` are the answer
    unsigned status = 0;
    std::string body;
    std::string location;  // the Location header, if any
    std::string error;     // why it failed (stage != Done)

    bool answered() const { return stage == HttpStage::Done; }
};

/// One request with `Connection: close`. Never throws; `timeout` bounds connect, write and read.
boost::asio::awaitable<HttpResult> http_call(boost::asio::ip::tcp::endpoint endpoint, bool post,
                                             std::string target, std::string body,
                                             std::chrono::milliseconds timeout);

/// "http://127.0.0.1:8080/metadata" -> 127.0.0.1:8080; nullopt if it is not http://IPv4:port/...
std::optional<boost::asio::ip::tcp::endpoint> parse_location(const std::string& location);

}  // namespace conclave::bounce
