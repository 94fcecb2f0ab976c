// SPDX-License-Identifier: Apache-2.0
// A stand-in for a node's admin HTTP API in tests: a Beast server on 127.0.0.1 (HTTP, or HTTPS
// with a given context) on its own thread, answering canned replies per "METHOD /target" and
// recording what it was asked. A reply may also be a chunked NDJSON stream or silence (the
// connection held open, nothing answered). One request per connection unless keep_alive() says
// more. Used by the admin client's and conclavectl's tests.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conclave/client/client.hpp"

namespace conclave::test {

struct Canned {
    unsigned status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    bool silent = false;             // hold the connection, answer nothing
    bool stream = false;             // a chunked answer of `lines` (each + "\n")
    std::vector<std::string> lines;  // the stream's lines ("" is a keep-alive)
    bool end_stream = true;          // the last chunk after the lines; else hold
};

/// What the server was asked.
struct Seen {
    std::string method;
    std::string target;
    std::string authorization;
    std::string body;
};

class FakeAdmin {
  public:
    using Handler = std::function<Canned(const Seen&)>;

    explicit FakeAdmin(std::shared_ptr<boost::asio::ssl::context> tls = nullptr)
        : tls_(std::move(tls)), acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
        boost::asio::co_spawn(io_, Accept(), boost::asio::detached);
        thread_ = std::thread([this] { io_.run(); });
    }
    ~FakeAdmin() {
        io_.stop();
        thread_.join();
    }
    FakeAdmin(const FakeAdmin&) = delete;
    FakeAdmin& operator=(const FakeAdmin&) = delete;

    /// Answers `key` ("GET /status": method and target, query included) with `handler`.
    void on(const std::string& key, Handler handler) {
        std::lock_guard lock(mutex_);
        routes_[key] = std::move(handler);
    }
    void on(const std::string& key, Canned canned) {
        on(key, [canned](const Seen&) { return canned; });
    }
    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    client::Endpoint endpoint() const { return {"127.0.0.1", port()}; }
    std::vector<Seen> seen() const {
        std::lock_guard lock(mutex_);
        return seen_;
    }
    /// Serves up to `requests` requests per connection, then closes it: with "Connection: close"
    /// on the last answer when `announce`, else without a word (as after an idle timeout).
    void keep_alive(std::size_t requests, bool announce) {
        std::lock_guard lock(mutex_);
        requests_per_connection_ = requests;
        announce_close_ = announce;
    }
    /// Connections accepted, and connections the server has closed.
    std::size_t accepted() const {
        std::lock_guard lock(mutex_);
        return accepted_;
    }
    std::size_t closed() const {
        std::lock_guard lock(mutex_);
        return closed_;
    }
    std::size_t count(const std::string& method, const std::string& target) const {
        std::size_t n = 0;
        for (const Seen& s : seen()) {
            n += s.method == method && s.target == target ? 1U : 0U;
        }
        return n;
    }

  private:
    using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

    boost::asio::awaitable<void> Accept() {
        for (;;) {
            auto socket = co_await acceptor_.async_accept(boost::asio::use_awaitable);
            {
                std::lock_guard lock(mutex_);
                ++accepted_;
            }
            boost::asio::co_spawn(io_, Serve(std::move(socket)), boost::asio::detached);
        }
    }

    boost::asio::awaitable<void> Serve(boost::asio::ip::tcp::socket socket) {
        try {
            if (tls_) {
                TlsStream stream(boost::beast::tcp_stream(std::move(socket)), *tls_);
                co_await stream.async_handshake(boost::asio::ssl::stream_base::server,
                                                boost::asio::use_awaitable);
                co_await Answer(stream);
            } else {
                boost::beast::tcp_stream stream(std::move(socket));
                co_await Answer(stream);
            }
        } catch (const std::exception&) {
            // the client went away: nothing to do
        }
        std::lock_guard lock(mutex_);  // the stream, and with it the socket, is closed
        ++closed_;
    }

    Canned Route(const Seen& seen) {
        std::lock_guard lock(mutex_);
        seen_.push_back(seen);
        const auto it = routes_.find(seen.method + " " + seen.target);
        if (it == routes_.end()) {
            return Canned{404, R"({"error":"not_found"})", {}, false, false, {}, true};
        }
        return it->second(seen);
    }

    template <class Stream>
    boost::asio::awaitable<void> Answer(Stream& stream) {
        boost::beast::flat_buffer buffer;
        std::size_t limit = 1;
        bool announce = false;
        {
            std::lock_guard lock(mutex_);
            limit = requests_per_connection_;
            announce = announce_close_;
        }
        for (std::size_t served = 1;; ++served) {
            const bool more = co_await AnswerOne(stream, buffer, served < limit || !announce);
            if (!more || served >= limit) {
                co_return;
            }
        }
    }

    /// One request; false when the connection must end after it (silence, a stream).
    template <class Stream>
    boost::asio::awaitable<bool> AnswerOne(Stream& stream, boost::beast::flat_buffer& buffer,
                                           bool keep_alive) {
        namespace http = boost::beast::http;
        http::request<http::string_body> request;
        co_await http::async_read(stream, buffer, request, boost::asio::use_awaitable);
        const Seen seen{std::string(request.method_string()), std::string(request.target()),
                        std::string(request[http::field::authorization]), request.body()};
        const Canned canned = Route(seen);
        if (canned.silent) {
            co_await Hold(stream, buffer);
            co_return false;
        }
        if (canned.stream) {
            co_await Stream_(stream, canned, buffer);
            co_return false;
        }
        http::response<http::string_body> response{static_cast<http::status>(canned.status), 11};
        response.set(http::field::content_type, "application/json");
        for (const auto& [name, value] : canned.headers) {
            response.set(name, value);
        }
        response.keep_alive(keep_alive);
        response.body() = canned.body;
        response.prepare_payload();
        co_await http::async_write(stream, response, boost::asio::use_awaitable);
        co_return true;
    }

    /// Reads until the client closes (or the server stops).
    template <class Stream>
    boost::asio::awaitable<void> Hold(Stream& stream, boost::beast::flat_buffer& buffer) {
        for (;;) {
            co_await stream.async_read_some(buffer.prepare(1024), boost::asio::use_awaitable);
        }
    }

    template <class Stream>
    boost::asio::awaitable<void> Stream_(Stream& stream, const Canned& canned,
                                         boost::beast::flat_buffer& buffer) {
        std::string text =
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            "Transfer-Encoding: chunked\r\n\r\n";
        for (const std::string& line : canned.lines) {
            const std::string chunk = line + "\n";
            char size[32];
            std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
            text += size + chunk + "\r\n";
        }
        if (canned.end_stream) {
            text += "0\r\n\r\n";
        }
        co_await boost::asio::async_write(stream, boost::asio::buffer(text),
                                          boost::asio::use_awaitable);
        if (!canned.end_stream) {
            co_await Hold(stream, buffer);
        }
    }

    std::shared_ptr<boost::asio::ssl::context> tls_;
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    std::thread thread_;
    mutable std::mutex mutex_;
    std::map<std::string, Handler> routes_;
    std::vector<Seen> seen_;
    std::size_t requests_per_connection_ = 1;
    bool announce_close_ = false;
    std::size_t accepted_ = 0;
    std::size_t closed_ = 0;
};

}  // namespace conclave::test
