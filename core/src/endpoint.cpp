// SPDX-License-Identifier: Apache-2.0
#include "conclave/core/endpoint.hpp"

#include <charconv>
#include <utility>

namespace conclave {

namespace {

constexpr std::string_view kHostCharacters =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:_";

/// The host and the port text of "host:port" / "[v6]:port", split without judging either.
std::optional<std::pair<std::string_view, std::string_view>> SplitHostPort(std::string_view text) {
    if (text.starts_with('[')) {
        const std::size_t close = text.find("]:");
        if (close == std::string_view::npos) {
            return std::nullopt;
        }
        const std::string_view host = text.substr(1, close - 1);
        if (host.find(':') == std::string_view::npos) {
            return std::nullopt;  // brackets only for IPv6 literals
        }
        return std::pair{host, text.substr(close + 2)};
    }
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos ||
        text.substr(0, colon).find(':') != std::string_view::npos) {
        return std::nullopt;  // no port, or an unbracketed IPv6 address (ambiguous)
    }
    return std::pair{text.substr(0, colon), text.substr(colon + 1)};
}

}  // namespace

std::string to_string(const Endpoint& endpoint) {
    const std::string port = ":" + std::to_string(endpoint.port);
    if (endpoint.host.find(':') != std::string::npos) {
        return "[" + endpoint.host + "]" + port;
    }
    return endpoint.host + port;
}

std::optional<Endpoint> parse_endpoint(std::string_view text) {
    const auto parts = SplitHostPort(text);
    if (!parts) {
        return std::nullopt;
    }
    const auto [host, port_text] = *parts;
    if (host.empty() || host.size() > 253 ||
        host.find_first_not_of(kHostCharacters) != std::string_view::npos) {
        return std::nullopt;
    }
    unsigned port = 0;
    const char* last = port_text.data() + port_text.size();
    const auto [end, error] = std::from_chars(port_text.data(), last, port);
    if (error != std::errc{} || end != last || port_text.size() > 5 || port == 0 || port > 65535) {
        return std::nullopt;
    }
    return Endpoint{std::string(host), static_cast<std::uint16_t>(port)};
}

}  // namespace conclave
