// SPDX-License-Identifier: Apache-2.0
// The keep-alive session: one connection kept between requests, reopened when the server closed it.
#include "conclave/client/session.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "transport.hpp"

namespace conclave::client {

namespace asio = boost::asio;
namespace beast = boost::beast;

/// The open connection: plain or TLS, and the bytes read past the last answer.
struct Session::Connection {
    std::optional<beast::tcp_stream> plain;
    std::optional<detail::TlsStream> tls;
    beast::flat_buffer buffer;

    beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
};

namespace {

/// Whether an idle connection can no longer carry a request: the server closed it (end of file,
/// a reset) or sent bytes nobody asked for (a TLS close_notify, or garbage).
bool ClosedWhileIdle(beast::tcp_stream& stream, const beast::flat_buffer& buffer) {
    if (buffer.size() > 0) {
        return true;
    }
    auto& socket = stream.socket();
    boost::system::error_code ec;
    socket.non_blocking(true, ec);
    if (ec) {
        return true;
    }
    char byte = 0;
    socket.read_some(asio::buffer(&byte, 1), ec);
    boost::system::error_code restored;
    socket.non_blocking(false, restored);
    return ec != asio::error::would_block || restored;
}

}  // namespace

Session::Session(asio::any_io_executor executor, Settings settings, Endpoint endpoint)
    : executor_(std::move(executor)),
      settings_(std::move(settings)),
      endpoint_(std::move(endpoint)) {}

Session::~Session() = default;

asio::awaitable<void> Session::Open(Clock::time_point deadline) {
    connection_.reset();
    auto connection = std::make_unique<Connection>();
    ++connections_;
    if (settings_.tls) {
        connection->tls.emplace(executor_, *settings_.tls);
        co_await detail::open(*connection->tls, settings_, endpoint_, deadline);
    } else {
        connection->plain.emplace(executor_);
        co_await detail::open(*connection->plain, settings_, endpoint_, deadline);
    }
    connection_ = std::move(connection);
}

asio::awaitable<Response> Session::request(Request request, Clock::time_point deadline) {
    std::vector<Request> one;
    one.push_back(std::move(request));
    std::vector<Response> answers = co_await pipeline(std::move(one), deadline);
    co_return std::move(answers.front());
}

asio::awaitable<std::vector<Response>> Session::pipeline(std::vector<Request> requests,
                                                         Clock::time_point deadline) {
    if (connection_ && ClosedWhileIdle(connection_->lowest(), connection_->buffer)) {
        connection_.reset();
    }
    Stage stage = Stage::Connect;
    boost::system::error_code failed;
    bool fresh = false;
    try {
        if (!connection_) {
            fresh = true;
            co_await Open(deadline);
        }
        Connection& c = *connection_;
        detail::set_deadline(c.lowest(), deadline);
        // Named results, no co_await inside a condition: GCC 12 miscompiles both.
        std::vector<boost::beast::http::response<boost::beast::http::string_body>> answers;
        if (c.tls) {
            answers =
                co_await detail::exchange(*c.tls, settings_, endpoint_, requests, c.buffer, stage);
        } else {
            answers = co_await detail::exchange(*c.plain, settings_, endpoint_, requests, c.buffer,
                                                stage);
        }
        if (answers.size() < requests.size() || !answers.back().keep_alive()) {
            connection_.reset();
        }
        std::vector<Response> responses;
        responses.reserve(answers.size());
        for (const auto& answer : answers) {
            responses.push_back(detail::to_response(answer));
        }
        co_return responses;
    } catch (const Error&) {
        connection_.reset();
        throw;
    } catch (const boost::system::system_error& e) {
        connection_.reset();
        failed = e.code();
    }
    // The first request on a plain connection got no HTTP answer: a port that speaks TLS says why.
    if (fresh && !settings_.tls) {
        const auto refusal = co_await detail::https_instead(settings_, endpoint_, deadline, failed);
        if (refusal) {
            throw *refusal;
        }
    }
    throw detail::transport_error(settings_, endpoint_, stage, failed);
}

}  // namespace conclave::client
