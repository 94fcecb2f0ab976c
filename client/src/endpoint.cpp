// SPDX-License-Identifier: Apache-2.0
// Endpoints, redirect locations, durations and the TLS context: the client's vocabulary.
#include <boost/asio/ssl/context.hpp>
#include <charconv>
#include <string>

#include "conclave/client/client.hpp"

namespace conclave::client {

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

std::optional<Location> parse_location(std::string_view location) {
    for (const std::string_view scheme : {"http://", "https://"}) {
        if (!location.starts_with(scheme)) {
            continue;
        }
        const std::string_view rest = location.substr(scheme.size());
        const std::size_t slash = rest.find('/');
        const auto endpoint = parse_endpoint(rest.substr(0, slash));
        if (!endpoint) {
            return std::nullopt;
        }
        return Location{*endpoint,
                        slash == std::string_view::npos ? "/" : std::string(rest.substr(slash))};
    }
    return std::nullopt;
}

std::string format_duration(std::chrono::milliseconds duration) {
    return duration.count() % 1000 == 0 ? std::to_string(duration.count() / 1000) + "s"
                                        : std::to_string(duration.count()) + "ms";
}

std::shared_ptr<boost::asio::ssl::context> make_tls_context(const std::string& ca_file,
                                                            const std::string& what,
                                                            const std::string& cert_file,
                                                            const std::string& key_file) {
    namespace ssl = boost::asio::ssl;
    auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
    context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                         ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                         ssl::context::no_tlsv1_1);
    context->set_verify_mode(ssl::verify_peer);
    boost::system::error_code ec;
    const auto refuse = [&](const std::string& file, const std::string& why) {
        return Error(ErrorKind::Refused, Stage::Connect,
                     what + " " + file + ": " + why + ": " + ec.message());
    };
    if (context->load_verify_file(ca_file, ec)) {
        throw refuse(ca_file, "cannot load the CA");
    }
    if (!cert_file.empty() && context->use_certificate_chain_file(cert_file, ec)) {
        throw refuse(cert_file, "cannot load the client certificate");
    }
    if (!key_file.empty() && context->use_private_key_file(key_file, ssl::context::pem, ec)) {
        throw refuse(key_file, "cannot load the client key");
    }
    return context;
}

}  // namespace conclave::client
