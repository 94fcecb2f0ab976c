// SPDX-License-Identifier: Apache-2.0
// Endpoints, redirect locations, durations and the TLS context: the client's vocabulary.
#include <boost/asio/ssl/context.hpp>
#include <string>

#include "conclave/client/client.hpp"

namespace conclave::client {

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
