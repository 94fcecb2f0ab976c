// SPDX-License-Identifier: Apache-2.0
// One request (async and blocking), the redirect to the leader, a batch of requests at once.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>

#include "conclave/client/client.hpp"
#include "transport.hpp"

namespace conclave::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

/// One request on a fresh connection, closed after the answer.
template <class Stream>
asio::awaitable<Response> Exchange(Stream& stream, const Settings& settings,
                                   const Endpoint& endpoint, const Request& request, Stage& stage) {
    beast::flat_buffer buffer;
    const auto answers = co_await detail::exchange(stream, settings, endpoint,
                                                   std::span(&request, 1), buffer, stage);
    beast::error_code ignored;
    beast::get_lowest_layer(stream).socket().shutdown(asio::ip::tcp::socket::shutdown_both,
                                                      ignored);
    co_return detail::to_response(answers.front());
}

asio::awaitable<Response> PlainRequest(const Settings& settings, const Endpoint& endpoint,
                                       const Request& request, Clock::time_point deadline,
                                       Stage& stage) {
    beast::tcp_stream stream(co_await asio::this_coro::executor);
    co_await detail::open(stream, settings, endpoint, deadline);
    boost::system::error_code failed;
    try {
        co_return co_await Exchange(stream, settings, endpoint, request, stage);
    } catch (const boost::system::system_error& e) {
        failed = e.code();
    }
    // No HTTP answer: a port that speaks TLS says why better than the transport's error.
    const auto refusal = co_await detail::https_instead(settings, endpoint, deadline, failed);
    if (refusal) {
        throw *refusal;
    }
    throw boost::system::system_error(failed);
}

asio::awaitable<Response> TlsRequest(const Settings& settings, const Endpoint& endpoint,
                                     const Request& request, Clock::time_point deadline,
                                     Stage& stage) {
    detail::TlsStream stream(co_await asio::this_coro::executor, *settings.tls);
    co_await detail::open(stream, settings, endpoint, deadline);
    co_return co_await Exchange(stream, settings, endpoint, request, stage);
}

/// What a request launched on an io_context ended with, if it ended.
struct Pending {
    bool done = false;
    std::optional<Response> response;
    std::exception_ptr error;
};

void Launch(asio::io_context& io, const Settings& settings, const Call& call,
            Clock::time_point deadline, Pending& out, std::function<void(const Pending&)> then) {
    asio::co_spawn(io, async_request(settings, call.endpoint, call.request, deadline),
                   [&out, then = std::move(then)](std::exception_ptr error, Response response) {
                       out.done = true;
                       if (error) {
                           out.error = error;
                       } else {
                           out.response = std::move(response);
                       }
                       if (then) {
                           then(out);
                       }
                   });
}

Error NoAnswer(const Settings& settings, const Endpoint& endpoint) {
    // Not known whether the request was written: as if it may have been.
    return Error(ErrorKind::Unreachable, Stage::Read,
                 to_string(endpoint) + ": no answer within " + format_duration(settings.timeout));
}

/// The response, or the failure: thrown, or (no answer before the deadline) made up.
Response Take(const Pending& out, const Settings& settings, const Endpoint& endpoint) {
    if (!out.done) {
        throw NoAnswer(settings, endpoint);
    }
    if (out.error) {
        std::rethrow_exception(out.error);
    }
    return *out.response;
}

bool Redirected(const Response& response) {
    return response.status == 307 || response.status == 308;
}

/// Where a redirect from `endpoint` leads; Error(BadRedirect) if it cannot be followed.
Location Followed(const Endpoint& endpoint, const std::string& location) {
    const std::string quoted = "\"" + location.substr(0, 200) + "\"";
    if (!location.starts_with("http://") && !location.starts_with("https://")) {
        throw Error(ErrorKind::BadRedirect, Stage::Read,
                    to_string(endpoint) + ": redirect to an unsupported location " + quoted);
    }
    auto next = parse_location(location);
    if (!next) {
        throw Error(ErrorKind::BadRedirect, Stage::Read,
                    to_string(endpoint) + ": redirect to a malformed location " + quoted);
    }
    return std::move(*next);
}

}  // namespace

asio::awaitable<Response> async_request(const Settings& settings, Endpoint endpoint,
                                        Request request, Clock::time_point deadline) {
    Stage stage = Stage::Connect;
    try {
        if (settings.tls) {
            co_return co_await TlsRequest(settings, endpoint, request, deadline, stage);
        }
        co_return co_await PlainRequest(settings, endpoint, request, deadline, stage);
    } catch (const boost::system::system_error& e) {
        throw detail::transport_error(settings, endpoint, stage, e.code());
    }
}

Response request(const Settings& settings, const Endpoint& endpoint, const Request& request,
                 std::optional<Clock::time_point> deadline) {
    const Clock::time_point until = deadline.value_or(Clock::now() + settings.timeout);
    asio::io_context io;
    Pending out;
    Launch(io, settings, Call{endpoint, request}, until, out, {});
    io.run_until(until);
    return Take(out, settings, endpoint);
}

Response request_following(const Settings& settings, Endpoint endpoint, Request request,
                           std::optional<Clock::time_point> deadline, Endpoint* answered) {
    const Clock::time_point until = deadline.value_or(Clock::now() + settings.timeout);
    for (int hop = 0;; ++hop) {
        Response response = client::request(settings, endpoint, request, until);
        if (!Redirected(response) || hop >= settings.max_redirects) {
            if (answered) {
                *answered = endpoint;
            }
            return response;
        }
        Location next = Followed(endpoint, response.location);
        endpoint = std::move(next.endpoint);
        request.target = std::move(next.target);
    }
}

asio::awaitable<Response> async_request_following(const Settings& settings, Endpoint endpoint,
                                                  Request request, Clock::time_point deadline) {
    for (int hop = 0;; ++hop) {
        Response response = co_await async_request(settings, endpoint, request, deadline);
        if (!Redirected(response) || hop >= settings.max_redirects) {
            co_return response;
        }
        Location next = Followed(endpoint, response.location);
        endpoint = std::move(next.endpoint);
        request.target = std::move(next.target);
    }
}

std::vector<Outcome> request_all(const Settings& settings, const std::vector<Call>& calls,
                                 Clock::time_point deadline,
                                 const std::function<bool(const Response&)>& enough) {
    asio::io_context io;
    std::vector<Pending> pending(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
        Launch(io, settings, calls[i], deadline, pending[i], [&io, &enough](const Pending& out) {
            if (enough && out.response && enough(*out.response)) {
                io.stop();
            }
        });
    }
    io.run_until(deadline);
    std::vector<Outcome> outcomes(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
        try {
            outcomes[i].response = Take(pending[i], settings, calls[i].endpoint);
        } catch (const Error& e) {
            outcomes[i].error = e;
        }
    }
    return outcomes;
}

}  // namespace conclave::client
