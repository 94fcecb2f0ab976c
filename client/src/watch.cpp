// SPDX-License-Identifier: Apache-2.0
// The watch stream: a chunked NDJSON answer read chunk by chunk, a watchdog that closes the
// connection once the node is silent (after half the silence, a snapshot request tells a quiet
// node from a gone one).
#include "conclave/client/watch.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>

#include "transport.hpp"

namespace conclave::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr std::size_t kMaxLineBytes = 1024 * 1024;

/// Splits the stream's bytes into lines for `on_line`; Add is true once it asked to stop.
class LineSplitter {
  public:
    explicit LineSplitter(const std::function<bool(const std::string&)>& on_line)
        : on_line_(on_line) {}

    bool Add(std::string_view bytes) {
        pending_.append(bytes);
        for (std::size_t nl = pending_.find('\n'); nl != std::string::npos;
             nl = pending_.find('\n')) {
            const std::string line = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            if (!line.empty() && !stopped_) {  // an empty line is a keep-alive
                stopped_ = !on_line_(line);
            }
        }
        if (pending_.size() > kMaxLineBytes) {
            pending_.clear();  // no newline in a megabyte: not NDJSON
        }
        return stopped_;
    }

  private:
    const std::function<bool(const std::string&)>& on_line_;
    std::string pending_;
    bool stopped_ = false;
};

/// What one followed stream shares with its watchdog.
struct Watched {
    const Settings& settings;
    const Endpoint& endpoint;
    const WatchOptions& options;
    Clock::time_point heard = Clock::now();  // the last byte from the node
    bool& streaming;                         // set once the node answered with a stream
    bool silent = false;
};

/// Follows the stream until it ends or fails (throws), or the callback stops it (nullopt); the
/// answer of a node that does not stream.
template <class Stream>
asio::awaitable<std::optional<Response>> Follow(
    Stream& stream, Watched& w, const std::function<bool(const std::string&)>& on_line) {
    // Connecting (and the token's checks) must end within the silence too; the stream has no
    // deadline then: the watchdog ends it.
    co_await detail::open(stream, w.settings, w.endpoint, Clock::now() + w.options.silence);
    detail::set_deadline(beast::get_lowest_layer(stream), Clock::time_point::max());
    Request watch;
    watch.target = w.options.target;
    auto message = detail::make_request(w.settings, w.endpoint, watch, /*with_token=*/true);
    co_await http::async_write(stream, message, asio::use_awaitable);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
    w.heard = Clock::now();
    if (parser.get().result_int() != 200 || !parser.chunked()) {
        parser.body_limit(w.settings.body_limit);
        co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
        co_return detail::to_response(parser.get());
    }
    w.streaming = true;
    LineSplitter lines(on_line);
    bool stopped = false;
    auto on_body = [&](std::uint64_t, std::string_view body, beast::error_code&) {
        stopped = lines.Add(body);
        return body.size();
    };
    parser.on_chunk_body(on_body);
    while (!parser.is_done() && !stopped) {
        co_await http::async_read_some(stream, buffer, parser, asio::use_awaitable);
        w.heard = Clock::now();
    }
    if (!stopped) {
        throw Error(ErrorKind::Unreachable, Stage::Read,
                    to_string(w.endpoint) + ": the watch stream ended");
    }
    co_return std::nullopt;
}

/// Any answer to the snapshot request counts as hearing from the node.
asio::awaitable<void> Ping(Watched& w) {
    Request snapshot;
    snapshot.target = w.options.ping_target;
    const auto deadline = Clock::now() + w.options.silence;
    const Response answer = co_await async_request(w.settings, w.endpoint, snapshot, deadline);
    w.heard = Clock::now();
}

/// Closes the stream (`close`) once the node was silent for options.silence.
asio::awaitable<void> Watchdog(Watched& w, std::function<void()> close) {
    const auto executor = co_await asio::this_coro::executor;
    asio::steady_timer timer(executor);
    const auto silence = w.options.silence;
    const auto half = silence / 2;
    for (;;) {
        timer.expires_at(w.heard + half);
        co_await timer.async_wait(asio::use_awaitable);
        if (Clock::now() - w.heard < half) {
            continue;
        }
        asio::co_spawn(executor, Ping(w), [](std::exception_ptr) {});
        timer.expires_at(w.heard + silence);
        co_await timer.async_wait(asio::use_awaitable);
        if (Clock::now() - w.heard >= silence) {
            w.silent = true;
            close();
            co_return;
        }
    }
}

template <class Stream>
std::optional<Response> WatchOn(asio::io_context& io, Stream& stream, Watched& w,
                                const std::function<bool(const std::string&)>& on_line) {
    std::exception_ptr failed;
    std::optional<Response> answer;
    asio::co_spawn(io, Follow(stream, w, on_line),
                   [&](std::exception_ptr error, std::optional<Response> response) {
                       failed = error;
                       answer = std::move(response);
                       io.stop();
                   });
    auto close = [&stream] {
        boost::system::error_code ignored;
        beast::get_lowest_layer(stream).socket().close(ignored);
    };
    asio::co_spawn(io, Watchdog(w, close), [](std::exception_ptr) {});
    io.run();
    if (w.silent) {
        throw Error(ErrorKind::Unreachable, Stage::Read,
                    to_string(w.endpoint) + ": silent for " + format_duration(w.options.silence));
    }
    try {
        if (failed) {
            std::rethrow_exception(failed);
        }
    } catch (const boost::system::system_error& e) {
        throw detail::transport_error(w.settings, w.endpoint, Stage::Read, e.code());
    }
    return answer;
}

}  // namespace

std::optional<Response> watch(const Settings& settings, const Endpoint& endpoint,
                              const WatchOptions& options,
                              const std::function<bool(const std::string& line)>& on_line,
                              bool& streaming) {
    asio::io_context io;
    Watched w{settings, endpoint, options, Clock::now(), streaming};
    if (settings.tls) {
        detail::TlsStream stream(io, *settings.tls);
        return WatchOn(io, stream, w, on_line);
    }
    beast::tcp_stream stream(io);
    return WatchOn(io, stream, w, on_line);
}

}  // namespace conclave::client
