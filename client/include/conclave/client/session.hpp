// SPDX-License-Identifier: Apache-2.0
// A keep-alive session: one HTTP/1.1 connection to one node reused for request after request
// (client/README.md, "Keep-alive sessions"), for a program that sends many requests, such as a
// load generator.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <memory>
#include <vector>

#include "conclave/client/client.hpp"

namespace conclave::client {

/// Requests to one node over one connection, reused while the server keeps it open. HTTP or HTTPS
/// and the token as `async_request` (the plain-HTTP token check runs once per connection). The
/// connection is opened before a request when there is none: the first time, after an answer
/// that said "Connection: close", after the server closed it while idle (looked at before each
/// reuse) and after a failed request. A failed request is not sent again (it may have been
/// processed): it throws Error as `async_request` does. One request at a time, on `executor`.
class Session {
  public:
    Session(boost::asio::any_io_executor executor, Settings settings, Endpoint endpoint);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    /// One request, (re)connecting first if needed; everything ends by `deadline`.
    boost::asio::awaitable<Response> request(Request request, Clock::time_point deadline);
    /// Several requests at once (HTTP/1.1 pipelining): written together on the connection, the
    /// answers read in order. Fewer answers than requests when an answer closed the connection
    /// (conclaved does after 1000 requests): the server processed none of the rest, which may be
    /// sent again. Throws like request() when no answer came.
    boost::asio::awaitable<std::vector<Response>> pipeline(std::vector<Request> requests,
                                                           Clock::time_point deadline);
    /// Connections opened so far: the first one and every reconnection.
    std::size_t connections() const { return connections_; }
    const Endpoint& endpoint() const { return endpoint_; }

  private:
    struct Connection;
    boost::asio::awaitable<void> Open(Clock::time_point deadline);

    boost::asio::any_io_executor executor_;
    Settings settings_;
    Endpoint endpoint_;
    std::unique_ptr<Connection> connection_;
    std::size_t connections_ = 0;
};

}  // namespace conclave::client
