// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/proxy.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

#include "conclave/core/check.hpp"

namespace conclave::bounce {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string to_string(const LinkMode& mode) {
    if (std::holds_alternative<Pass>(mode)) {
        return "pass";
    }
    if (std::holds_alternative<Cut>(mode)) {
        return "cut";
    }
    if (std::holds_alternative<Blackhole>(mode)) {
        return "blackhole";
    }
    const auto& d = std::get<Delay>(mode);
    return "delay " + std::to_string(d.latency_ms) + "+-" + std::to_string(d.jitter_ms) + "ms";
}

bool lets_bytes_through(const LinkMode& mode) {
    return std::holds_alternative<Pass>(mode) || std::holds_alternative<Delay>(mode);
}

namespace {

/// A pump holds at most this many bytes queued (delay mode) before it stops reading: the bound
/// that keeps a slow direction from growing memory without limit.
constexpr std::size_t kPumpQueueMaxBytes = 1U << 20;
constexpr std::size_t kReadChunkBytes = 16U << 10;

struct Chunk {
    std::vector<char> bytes;
    Clock::time_point due;
};

/// One direction of one connection.
struct Pump {
    explicit Pump(asio::any_io_executor ex) : wake(ex), space(ex) {}
    std::deque<Chunk> queue;
    std::size_t queued_bytes = 0;
    Clock::time_point last_due{};
    bool eof = false;          // the source finished sending; shut down the sink when drained
    asio::steady_timer wake;   // the writer waits on it (new chunk or due time)
    asio::steady_timer space;  // the reader waits on it when the queue is full
};

}  // namespace

struct Connection {
    Connection(tcp::socket accepted, DirectedLink link_)
        : link(link_),
          client(std::move(accepted)),
          upstream(client.get_executor()),
          forward(client.get_executor()),
          backward(client.get_executor()) {}
    DirectedLink link;  // the listener's link: client = link.from, upstream = link.to
    tcp::socket client;
    tcp::socket upstream;
    Pump forward;   // client -> upstream, mode of `link`
    Pump backward;  // upstream -> client, mode of `link.reversed()`
    bool closed = false;
    int pumps_done = 0;
};

struct FaultProxy::State {
    State(asio::io_context& io_, std::size_t node_count_, std::uint64_t seed)
        : io(io_), node_count(node_count_), random(seed) {
        modes.assign(node_count * node_count, LinkMode{Pass{}});
        counters.assign(node_count * node_count, LinkCounters{});
    }
    asio::io_context& io;
    std::size_t node_count;
    std::mt19937_64 random;
    std::vector<LinkMode> modes;
    std::vector<LinkCounters> counters;
    std::map<DirectedLink, std::unique_ptr<tcp::acceptor>> acceptors;
    std::list<std::weak_ptr<Connection>> connections;
    bool closed = false;

    std::size_t index(DirectedLink l) const {
        if (l.from >= node_count || l.to >= node_count || l.from == l.to) {
            throw std::invalid_argument("fault proxy: bad link " + std::to_string(l.from) + "->" +
                                        std::to_string(l.to));
        }
        return l.from * node_count + l.to;
    }
    LinkMode& mode(DirectedLink l) { return modes[index(l)]; }
    LinkCounters& count(DirectedLink l) { return counters[index(l)]; }
    bool pair_cut(DirectedLink l) {
        return std::holds_alternative<Cut>(mode(l)) ||
               std::holds_alternative<Cut>(mode(l.reversed()));
    }
    Clock::duration sample_delay(const LinkMode& m) {
        const auto* d = std::get_if<Delay>(&m);
        if (d == nullptr) {
            return Clock::duration::zero();
        }
        const std::int64_t low = std::int64_t{d->latency_ms} - std::int64_t{d->jitter_ms};
        const std::int64_t high = std::int64_t{d->latency_ms} + std::int64_t{d->jitter_ms};
        std::uniform_int_distribution<std::int64_t> dist(low, high);
        const std::int64_t ms = std::max<std::int64_t>(0, dist(random));
        return std::chrono::milliseconds(ms);
    }
};

namespace {

using State = FaultProxy::State;

void reset_socket(tcp::socket& s) {
    boost::system::error_code ec;
    if (s.is_open()) {
        s.set_option(asio::socket_base::linger(true, 0), ec);
        s.close(ec);
    }
}

/// Reset both sides of a connection (RST), waking its pumps so that their coroutines end.
void reset_connection(Connection& c) {
    if (c.closed) {
        return;
    }
    c.closed = true;
    reset_socket(c.client);
    reset_socket(c.upstream);
    for (Pump* p : {&c.forward, &c.backward}) {
        p->wake.cancel();
        p->space.cancel();
    }
}

void pump_finished(Connection& c) {
    c.pumps_done += 1;
    if (c.pumps_done == 4 && !c.closed) {  // both readers and both writers ended cleanly
        c.closed = true;
        boost::system::error_code ec;
        c.client.close(ec);
        c.upstream.close(ec);
    }
}

asio::awaitable<void> wait(asio::steady_timer& t) {
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> read_loop(std::shared_ptr<State> st, std::shared_ptr<Connection> c,
                                bool is_forward) {
    tcp::socket& source = is_forward ? c->client : c->upstream;
    Pump& pump = is_forward ? c->forward : c->backward;
    const DirectedLink link = is_forward ? c->link : c->link.reversed();
    std::vector<char> buffer(kReadChunkBytes);
    while (!c->closed) {
        boost::system::error_code ec;
        const std::size_t n = co_await source.async_read_some(
            asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
        if (c->closed) {
            break;
        }
        if (ec == asio::error::eof) {
            pump.eof = true;
            pump.wake.cancel();
            break;
        }
        if (ec) {
            reset_connection(*c);
            break;
        }
        const LinkMode& m = st->mode(link);
        if (std::holds_alternative<Blackhole>(m)) {
            st->count(link).bytes_dropped += n;
            continue;
        }
        if (std::holds_alternative<Cut>(m)) {  // set_mode resets such connections; be safe
            reset_connection(*c);
            break;
        }
        const Clock::time_point due = std::max(Clock::now() + st->sample_delay(m), pump.last_due);
        pump.last_due = due;
        pump.queue.push_back(
            Chunk{std::vector<char>(buffer.begin(), buffer.begin() + static_cast<long>(n)), due});
        pump.queued_bytes += n;
        pump.wake.cancel();
        while (!c->closed && pump.queued_bytes > kPumpQueueMaxBytes) {
            pump.space.expires_at(Clock::time_point::max());
            co_await wait(pump.space);
        }
    }
    pump_finished(*c);
}

asio::awaitable<void> write_loop(std::shared_ptr<State> st, std::shared_ptr<Connection> c,
                                 bool is_forward) {
    tcp::socket& sink = is_forward ? c->upstream : c->client;
    Pump& pump = is_forward ? c->forward : c->backward;
    const DirectedLink link = is_forward ? c->link : c->link.reversed();
    while (!c->closed) {
        if (pump.queue.empty()) {
            if (pump.eof) {
                boost::system::error_code ec;
                sink.shutdown(tcp::socket::shutdown_send, ec);
                break;
            }
            pump.wake.expires_at(Clock::time_point::max());
            co_await wait(pump.wake);
            continue;
        }
        if (pump.queue.front().due > Clock::now()) {
            pump.wake.expires_at(pump.queue.front().due);
            co_await wait(pump.wake);
            continue;
        }
        Chunk chunk = std::move(pump.queue.front());
        pump.queue.pop_front();
        pump.queued_bytes -= chunk.bytes.size();
        pump.space.cancel();
        boost::system::error_code ec;
        co_await asio::async_write(sink, asio::buffer(chunk.bytes),
                                   asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            reset_connection(*c);
            break;
        }
        st->count(link).bytes_forwarded += chunk.bytes.size();
    }
    pump_finished(*c);
}

asio::awaitable<void> serve(std::shared_ptr<State> st, std::shared_ptr<Connection> c,
                            tcp::endpoint target) {
    boost::system::error_code ec;
    co_await c->upstream.async_connect(target, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || c->closed || st->closed || st->pair_cut(c->link)) {
        // Target down or the link was cut meanwhile: the dialer sees a reset, like a refusal.
        reset_connection(*c);
        co_return;
    }
    c->upstream.set_option(tcp::no_delay(true), ec);
    c->client.set_option(tcp::no_delay(true), ec);
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex, read_loop(st, c, true), asio::detached);
    asio::co_spawn(ex, read_loop(st, c, false), asio::detached);
    asio::co_spawn(ex, write_loop(st, c, true), asio::detached);
    asio::co_spawn(ex, write_loop(st, c, false), asio::detached);
}

asio::awaitable<void> accept_loop(std::shared_ptr<State> st, DirectedLink link,
                                  tcp::endpoint target) {
    tcp::acceptor& acceptor = *st->acceptors.at(link);
    for (;;) {
        boost::system::error_code ec;
        tcp::socket socket =
            co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (st->closed || ec == asio::error::operation_aborted) {
            co_return;
        }
        if (ec) {
            continue;  // e.g. too many open files: keep serving
        }
        if (st->pair_cut(link)) {
            st->count(link).connections_refused += 1;
            reset_socket(socket);
            continue;
        }
        st->count(link).connections_accepted += 1;
        auto c = std::make_shared<Connection>(std::move(socket), link);
        // Forget connections that ended, so the list stays as long as the open ones.
        st->connections.remove_if([](const std::weak_ptr<Connection>& w) {
            auto p = w.lock();
            return !p || p->closed;
        });
        st->connections.push_back(c);
        asio::co_spawn(acceptor.get_executor(), serve(st, c, target), asio::detached);
    }
}

}  // namespace

FaultProxy::FaultProxy(asio::io_context& io, std::size_t node_count, std::uint64_t seed)
    : state_(std::make_shared<State>(io, node_count, seed)) {
    CONCLAVE_CHECK(node_count >= 1, "the proxy serves at least one node");
}

FaultProxy::~FaultProxy() {
    close();
}

tcp::endpoint FaultProxy::add_route(DirectedLink link, tcp::endpoint target) {
    (void)state_->index(link);  // validates
    if (state_->acceptors.contains(link)) {
        throw std::invalid_argument("fault proxy: route " + std::to_string(link.from) + "->" +
                                    std::to_string(link.to) + " added twice");
    }
    auto acceptor = std::make_unique<tcp::acceptor>(
        state_->io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const tcp::endpoint local = acceptor->local_endpoint();
    state_->acceptors.emplace(link, std::move(acceptor));
    asio::co_spawn(state_->io, accept_loop(state_, link, target), asio::detached);
    return local;
}

void FaultProxy::set_mode(DirectedLink link, LinkMode mode) {
    state_->mode(link) = mode;
    if (!std::holds_alternative<Cut>(mode)) {
        return;
    }
    for (auto& weak : state_->connections) {
        auto c = weak.lock();
        if (c && !c->closed && (c->link == link || c->link == link.reversed())) {
            state_->count(c->link).connections_reset += 1;
            reset_connection(*c);
        }
    }
}

const LinkMode& FaultProxy::mode(DirectedLink link) const {
    return state_->mode(link);
}

LinkCounters FaultProxy::counters(DirectedLink link) const {
    return state_->count(link);
}

std::size_t FaultProxy::open_connections(DirectedLink link) const {
    (void)state_->index(link);
    std::size_t n = 0;
    for (const auto& weak : state_->connections) {
        auto c = weak.lock();
        if (c && !c->closed && (c->link == link || c->link == link.reversed())) {
            n += 1;
        }
    }
    return n;
}

void FaultProxy::close() {
    if (state_->closed) {
        return;
    }
    state_->closed = true;
    for (auto& [link, acceptor] : state_->acceptors) {
        boost::system::error_code ec;
        acceptor->close(ec);
    }
    for (auto& weak : state_->connections) {
        if (auto c = weak.lock()) {
            reset_connection(*c);
        }
    }
    state_->connections.clear();
}

}  // namespace conclave::bounce
