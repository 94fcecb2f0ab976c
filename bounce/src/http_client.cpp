// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/http_client.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>

namespace conclave::bounce {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

/// A GET /metadata page of 10,000 small entries is about 1 MB; leave room.
constexpr std::size_t kBodyLimitBytes = 16U << 20;

asio::awaitable<HttpResult> http_call(asio::ip::tcp::endpoint endpoint, bool post,
                                      std::string target, std::string body,
                                      std::chrono::milliseconds timeout) {
    HttpResult result;
    beast::tcp_stream stream(co_await asio::this_coro::executor);
    stream.expires_after(timeout);
    beast::error_code ec;
    co_await stream.async_connect(endpoint, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
        result.stage = HttpStage::Connect;
        result.error = "connect: " + ec.message();
        co_return result;
    }
    http::request<http::string_body> request{post ? http::verb::post : http::verb::get, target, 11};
    request.set(http::field::host, endpoint.address().to_string());
    request.set(http::field::connection, "close");
    if (post) {
        request.set(http::field::content_type, "application/json");
        request.body() = std::move(body);
    }
    request.prepare_payload();
    co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
        result.stage = HttpStage::Write;
        result.error = "write: " + ec.message();
        co_return result;
    }
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kBodyLimitBytes);
    co_await http::async_read(stream, buffer, parser,
                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
        result.stage = HttpStage::Read;
        result.error = "read: " + ec.message();
        co_return result;
    }
    const auto& response = parser.get();
    result.stage = HttpStage::Done;
    result.status = response.result_int();
    result.body = response.body();
    if (const auto it = response.find(http::field::location); it != response.end()) {
        result.location = std::string(it->value());
    }
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    co_return result;
}

std::optional<asio::ip::tcp::endpoint> parse_location(const std::string& location) {
    const std::string_view scheme = "http://";
    if (location.rfind(scheme, 0) != 0) {
        return std::nullopt;
    }
    const std::string_view rest = std::string_view(location).substr(scheme.size());
    const std::size_t slash = rest.find('/');
    const std::string_view authority = rest.substr(0, slash);
    const std::size_t colon = authority.rfind(':');
    if (colon == std::string_view::npos) {
        return std::nullopt;
    }
    beast::error_code ec;
    const auto address = asio::ip::make_address_v4(std::string(authority.substr(0, colon)), ec);
    if (ec) {
        return std::nullopt;
    }
    std::uint16_t port = 0;
    const std::string_view port_text = authority.substr(colon + 1);
    const auto [ptr, err] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (err != std::errc() || ptr != port_text.data() + port_text.size() || port == 0) {
        return std::nullopt;
    }
    return asio::ip::tcp::endpoint(address, port);
}

}  // namespace conclave::bounce
