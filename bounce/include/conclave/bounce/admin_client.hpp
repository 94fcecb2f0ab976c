// SPDX-License-Identifier: Apache-2.0
// leader-bounce's requests to the daemons' admin API, over the admin client (client/): plain HTTP
// to 127.0.0.1 without a token (the clusters leader-bounce starts), one deadline per request.
// Used by the metadata proposer, the log reader, the membership scenarios and the poller.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "conclave/client/client.hpp"

namespace conclave::bounce {

/// The admin client's name of a node's HTTP endpoint.
client::Endpoint admin_endpoint(const boost::asio::ip::tcp::endpoint& endpoint);

/// The address a redirect names: nullopt unless `location` is http(s)://ADDRESS:PORT/...
std::optional<boost::asio::ip::tcp::endpoint> redirect_address(const std::string& location);

/// One request; never throws a client::Error: the outcome holds it. With `follow`, redirects
/// to the leader are followed (client::async_request_following).
boost::asio::awaitable<client::Outcome> admin_call(boost::asio::ip::tcp::endpoint endpoint,
                                                   boost::beast::http::verb method,
                                                   std::string target, std::string body,
                                                   std::chrono::milliseconds timeout,
                                                   bool follow = false);

/// A failed request as "connect: ...", "write: ..." or "read: ..." (the stage and the
/// transport's error), the way leader-bounce's reports name it.
std::string describe_failure(const client::Error& error);

}  // namespace conclave::bounce
