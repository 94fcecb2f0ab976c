// SPDX-License-Identifier: Apache-2.0
#include "transport.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace conclave::client::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

Error PlainTokenRefused(const Settings& settings, const Endpoint& endpoint) {
    return Error(ErrorKind::Refused, Stage::Connect,
                 to_string(endpoint) +
                     ": refusing to send the token over plain HTTP to a non-loopback address: "
                     "serve the admin API over HTTPS (admin.tls) and pass " +
                     settings.ca_option);
}

/// Resolves and connects; with `loopback_only`, refuses (before connecting) a name that resolves
/// to any address that is not loopback.
asio::awaitable<void> Dial(beast::tcp_stream& stream, const Settings& settings,
                           const Endpoint& endpoint, Clock::time_point deadline,
                           bool loopback_only) {
    set_deadline(stream, deadline);
    boost::system::error_code not_an_address;
    const auto address = asio::ip::make_address(endpoint.host, not_an_address);
    if (!not_an_address) {  // an address: no resolver (it would run on a thread of its own)
        if (loopback_only && !address.is_loopback()) {
            throw PlainTokenRefused(settings, endpoint);
        }
        const tcp::endpoint to(address, endpoint.port);
        co_await stream.async_connect(to, asio::use_awaitable);
        co_return;
    }
    tcp::resolver resolver(co_await asio::this_coro::executor);
    // Arguments of co_await are named variables: GCC 12 destroys some temporaries there twice.
    const std::string port = std::to_string(endpoint.port);
    const auto results = co_await resolver.async_resolve(endpoint.host, port, asio::use_awaitable);
    for (const auto& entry : results) {
        if (loopback_only && !entry.endpoint().address().is_loopback()) {
            throw PlainTokenRefused(settings, endpoint);
        }
    }
    co_await stream.async_connect(results, asio::use_awaitable);
}

/// Whether `endpoint` completes a TLS handshake (certificate not checked).
asio::awaitable<bool> SpeaksTls(const Settings& settings, const Endpoint& endpoint,
                                Clock::time_point deadline) {
    asio::ssl::context context(asio::ssl::context::tls_client);
    context.set_verify_mode(asio::ssl::verify_none);
    TlsStream stream(co_await asio::this_coro::executor, context);
    try {
        co_await Dial(beast::get_lowest_layer(stream), settings, endpoint, deadline, false);
        co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
    } catch (const boost::system::system_error&) {
        co_return false;
    }
    co_return true;
}

Error SpeaksHttps(const Settings& settings, const Endpoint& endpoint) {
    return Error(ErrorKind::Refused, Stage::Connect,
                 to_string(endpoint) + ": this endpoint speaks HTTPS: pass " + settings.ca_option +
                     " (the cluster CA); no token was sent");
}

/// Before a token goes over plain HTTP: the address must be loopback, and the port must answer
/// HTTP to a request without the token (a port that speaks TLS would get the token in clear).
asio::awaitable<void> CheckPlainForToken(const Settings& settings, const Endpoint& endpoint,
                                         Clock::time_point deadline) {
    beast::tcp_stream stream(co_await asio::this_coro::executor);
    co_await Dial(stream, settings, endpoint, deadline, /*loopback_only=*/true);
    bool http_answer = true;
    try {
        Request probe;
        probe.target = "/healthz";
        auto message = make_request(settings, endpoint, probe, /*with_token=*/false);
        co_await http::async_write(stream, message, asio::use_awaitable);
        beast::flat_buffer buffer;
        http::response_parser<http::string_body> parser;
        parser.body_limit(settings.body_limit);
        co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
    } catch (const boost::system::system_error&) {
        http_answer = false;
    }
    if (!http_answer) {
        const bool tls = co_await SpeaksTls(settings, endpoint, deadline);
        if (tls) {
            throw SpeaksHttps(settings, endpoint);
        }
        throw Error(ErrorKind::Unreachable, Stage::Connect,
                    to_string(endpoint) + ": no HTTP answer (the token was not sent)");
    }
}

}  // namespace

void set_deadline(beast::tcp_stream& stream, Clock::time_point deadline) {
    if (deadline == Clock::time_point::max()) {
        stream.expires_never();
    } else {
        stream.expires_at(deadline);
    }
}

asio::awaitable<void> open(beast::tcp_stream& stream, const Settings& settings,
                           const Endpoint& endpoint, Clock::time_point deadline) {
    const bool token = !settings.token.empty();
    if (token) {
        co_await CheckPlainForToken(settings, endpoint, deadline);
    }
    co_await Dial(stream, settings, endpoint, deadline, /*loopback_only=*/token);
}

asio::awaitable<void> open(TlsStream& stream, const Settings& settings, const Endpoint& endpoint,
                           Clock::time_point deadline) {
    co_await Dial(beast::get_lowest_layer(stream), settings, endpoint, deadline, false);
    // No SNI: a node serves one certificate. The name checked is the one we dialled.
    stream.set_verify_callback(asio::ssl::host_name_verification(endpoint.host));
    co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
}

http::request<http::string_body> make_request(const Settings& settings, const Endpoint& endpoint,
                                              const Request& request, bool with_token) {
    http::request<http::string_body> message{request.method, request.target, 11};
    message.set(http::field::host, to_string(endpoint));
    message.set(http::field::user_agent, settings.user_agent);
    if (with_token && !settings.token.empty()) {
        message.set(http::field::authorization, "Bearer " + settings.token);
    }
    for (const auto& [name, value] : request.headers) {
        message.set(name, value);
    }
    if (!request.body.empty()) {
        message.set(http::field::content_type, "application/json");
        message.body() = request.body;
    }
    message.prepare_payload();
    return message;
}

Response to_response(const http::response<http::string_body>& answer) {
    Response response;
    response.status = answer.result_int();
    response.body = answer.body();
    if (auto it = answer.find(http::field::location); it != answer.end()) {
        response.location = std::string(it->value());
    }
    response.document = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
    return response;
}

Error transport_error(const Settings& settings, const Endpoint& endpoint, Stage stage,
                      const boost::system::error_code& code) {
    if (code == beast::error::timeout) {
        return Error(
            ErrorKind::Unreachable, stage,
            to_string(endpoint) + ": no answer within " + format_duration(settings.timeout), code);
    }
    return Error(ErrorKind::Unreachable, stage, to_string(endpoint) + ": " + code.message(), code);
}

asio::awaitable<std::optional<Error>> https_instead(const Settings& settings,
                                                    const Endpoint& endpoint,
                                                    Clock::time_point deadline,
                                                    const boost::system::error_code& code) {
    std::optional<Error> refusal;
    if (settings.detect_https && code != beast::error::timeout) {
        // A named result: GCC 12 loops on some co_await inside a condition.
        const bool tls = co_await SpeaksTls(settings, endpoint, deadline);
        if (tls) {
            refusal.emplace(SpeaksHttps(settings, endpoint));
        }
    }
    co_return refusal;
}

}  // namespace conclave::client::detail
