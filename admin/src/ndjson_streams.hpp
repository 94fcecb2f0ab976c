// SPDX-License-Identifier: Apache-2.0
// The open NDJSON watch streams of one route (GET /leadership?watch=1, GET /broadcast?watch=1):
// a line written to all of them, a blank line now and then so that a client gone without a word
// is found out (the write fails, or is not taken within the server's write deadline), and each
// stream forgotten when it closes. io_context thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "conclave/admin/admin_server.hpp"

namespace conclave::admin {

class NdjsonStreams : public std::enable_shared_from_this<NdjsonStreams> {
  public:
    static constexpr std::chrono::seconds kKeepaliveInterval{15};

    explicit NdjsonStreams(boost::asio::io_context& io) : io_(io) {}

    /// Keeps `stream` (its first lines already written) until it closes.
    void add(const std::shared_ptr<AdminStream>& stream) {
        const auto it = streams_.insert(streams_.end(), stream);
        std::weak_ptr<NdjsonStreams> weak = weak_from_this();
        stream->on_close([weak, it] {
            if (auto alive = weak.lock()) {
                alive->streams_.erase(it);
            }
        });
        if (streams_.size() == 1) {
            keepalive();
        }
    }

    /// Writes `line` to every open stream (a failed write closes and removes that one).
    void write_all(const std::string& line) {
        for (const auto& stream : std::list(streams_)) {
            stream->write(line);
        }
    }

    std::size_t size() const { return streams_.size(); }

  private:
    void keepalive() {
        if (!timer_) {
            timer_.emplace(io_);
        }
        timer_->expires_after(kKeepaliveInterval);
        timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (ec || self->streams_.empty()) {
                return;
            }
            self->write_all("\n");
            self->keepalive();
        });
    }

    boost::asio::io_context& io_;
    std::list<std::shared_ptr<AdminStream>> streams_;
    std::optional<boost::asio::steady_timer> timer_;
};

}  // namespace conclave::admin
