// SPDX-License-Identifier: Apache-2.0
// Polls every node's GET /status (the admin client, short timeouts) and feeds the recorder.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "conclave/bounce/observation.hpp"
#include "conclave/bounce/recorder.hpp"

namespace conclave::bounce {

/// Decodes a /status body into an observation. Throws std::runtime_error naming the field.
Observation parse_status(const std::string& body, NodeIndex node, std::size_t node_count);

/// One GET /status. Never throws: failures give an Unreachable observation and set `error`.
boost::asio::awaitable<Observation> fetch_status(boost::asio::ip::tcp::endpoint http,
                                                 NodeIndex node, std::size_t node_count,
                                                 std::chrono::milliseconds timeout,
                                                 std::string& error);

class Poller {
  public:
    static constexpr std::chrono::milliseconds kPeriod{50};
    static constexpr std::chrono::milliseconds kTimeout{300};

    Poller(boost::asio::io_context& io, std::vector<boost::asio::ip::tcp::endpoint> endpoints,
           Recorder& recorder);
    void start();
    void stop();  // the loops end at their next wake-up

  private:
    boost::asio::awaitable<void> loop(NodeIndex node);

    boost::asio::io_context& io_;
    std::vector<boost::asio::ip::tcp::endpoint> endpoints_;
    Recorder& recorder_;
    std::shared_ptr<bool> stopped_;
    std::vector<std::string> last_error_;
};

}  // namespace conclave::bounce
