// SPDX-License-Identifier: Apache-2.0
// The client's connection steps, shared by one-shot requests (request.cpp) and the watch stream
// (watch.cpp): dial with a deadline, the plain-HTTP token rule, the TLS handshake, one exchange.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <span>
#include <sstream>
#include <vector>

#include "conclave/client/client.hpp"

namespace conclave::client::detail {

using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

/// Clock::time_point::max(): no deadline.
void set_deadline(boost::beast::tcp_stream& stream, Clock::time_point deadline);

/// Connects a plain stream; with a token, first checks that the token may go over it (a loopback
/// address whose port answers HTTP without the token), else throws Error(Refused).
boost::asio::awaitable<void> open(boost::beast::tcp_stream& stream, const Settings& settings,
                                  const Endpoint& endpoint, Clock::time_point deadline);
/// Connects and completes the handshake, checking that the certificate names endpoint.host.
boost::asio::awaitable<void> open(TlsStream& stream, const Settings& settings,
                                  const Endpoint& endpoint, Clock::time_point deadline);

boost::beast::http::request<boost::beast::http::string_body> make_request(const Settings& settings,
                                                                          const Endpoint& endpoint,
                                                                          const Request& request,
                                                                          bool with_token);

/// Writes `requests` on the open `stream` in one write (HTTP/1.1 pipelining) and reads their
/// answers in order (the stream stays open; `buffer` keeps what was read past them). Fewer answers
/// than requests when an answer closes the connection: the server processed none of the rest.
/// `stage` follows the progress, for the error.
template <class Stream>
boost::asio::awaitable<std::vector<boost::beast::http::response<boost::beast::http::string_body>>>
exchange(Stream& stream, const Settings& settings, const Endpoint& endpoint,
         std::span<const Request> requests, boost::beast::flat_buffer& buffer, Stage& stage) {
    namespace http = boost::beast::http;
    std::ostringstream out;
    for (const Request& request : requests) {
        out << make_request(settings, endpoint, request, /*with_token=*/true);
    }
    const std::string written = std::move(out).str();
    stage = Stage::Write;
    co_await boost::asio::async_write(stream, boost::asio::buffer(written),
                                      boost::asio::use_awaitable);
    stage = Stage::Read;
    std::vector<http::response<http::string_body>> answers;
    answers.reserve(requests.size());
    while (answers.size() < requests.size()) {
        http::response_parser<http::string_body> parser;
        parser.body_limit(settings.body_limit);
        co_await http::async_read(stream, buffer, parser, boost::asio::use_awaitable);
        answers.push_back(parser.release());
        if (!answers.back().keep_alive()) {
            break;
        }
    }
    co_return answers;
}
Response to_response(const boost::beast::http::response<boost::beast::http::string_body>& answer);

/// The Error for a transport failure at `stage` ("<endpoint>: <what>", or "no answer within
/// <settings.timeout>" once the deadline closed the connection).
Error transport_error(const Settings& settings, const Endpoint& endpoint, Stage stage,
                      const boost::system::error_code& code);

/// Whether a plain request that failed at `stage` went to a port that speaks TLS: then the
/// Refused error to throw instead ("this endpoint speaks HTTPS: pass --cacert FILE ...").
boost::asio::awaitable<std::optional<Error>> https_instead(const Settings& settings,
                                                           const Endpoint& endpoint,
                                                           Clock::time_point deadline,
                                                           const boost::system::error_code& code);

}  // namespace conclave::client::detail
