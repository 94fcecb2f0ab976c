// SPDX-License-Identifier: Apache-2.0
// A "host:port" endpoint as the configs, the command lines and the redirects write it. The host is
// not resolved here: the mesh, the HTTP server and the client resolve it when they bind or connect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conclave {

/// A host name or address (an IPv6 address without its brackets) and a port.
struct Endpoint {
    std::string host;
    std::uint16_t port = 0;
    bool operator==(const Endpoint&) const = default;
};

/// "host:port", with brackets around an IPv6 address.
std::string to_string(const Endpoint& endpoint);
/// "host:port" or "[v6]:port" with a port in 1..65535; nullopt otherwise (an unbracketed IPv6
/// address is ambiguous, brackets are only for IPv6 addresses).
std::optional<Endpoint> parse_endpoint(std::string_view text);

}  // namespace conclave
