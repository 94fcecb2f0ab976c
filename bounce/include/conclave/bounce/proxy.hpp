// SPDX-License-Identifier: Apache-2.0
// The fault proxy: every peer link of a leader-bounce cluster runs through it.
//
// For each directed link A->B the proxy opens one listener on 127.0.0.1; A is configured to dial
// that listener instead of B's real peer address, and the proxy forwards to B. A TCP connection
// carries bytes both ways, so a connection accepted on the A->B listener applies the mode of A->B
// to the bytes flowing A->B and the mode of B->A to the bytes flowing back. The mesh's rule is that
// the lower index dials, so in practice only the listeners of links "low -> high" see traffic, yet
// every directed fault still applies to the right bytes.
//
// Modes, per directed link, changeable at any time:
//   pass       forward bytes as they come.
//   cut        reset (RST, SO_LINGER 0) every connection carrying bytes of this link and refuse new
//              ones (accept, then reset). A connection carries both directions, so cutting one
//              direction drops the connection for both; use blackhole for a one-way fault.
//   blackhole  keep connections open but drop the bytes of this direction.
//   delay      deliver each chunk after latency +- jitter, never reordering bytes of a connection.
//
// Everything runs on the io_context given at construction (one thread); the methods must be called
// from that thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

namespace conclave::bounce {

using NodeIndex = std::size_t;

struct Pass {
    bool operator==(const Pass&) const = default;
};
struct Cut {
    bool operator==(const Cut&) const = default;
};
struct Blackhole {
    bool operator==(const Blackhole&) const = default;
};
struct Delay {
    std::uint32_t latency_ms = 0;
    std::uint32_t jitter_ms = 0;  // each chunk waits uniform [latency - jitter, latency + jitter]
    bool operator==(const Delay&) const = default;
};
using LinkMode = std::variant<Pass, Cut, Blackhole, Delay>;

std::string to_string(const LinkMode& mode);
/// True for every mode that lets bytes through (pass and delay).
bool lets_bytes_through(const LinkMode& mode);

struct DirectedLink {
    NodeIndex from = 0;
    NodeIndex to = 0;
    DirectedLink reversed() const { return DirectedLink{to, from}; }
    auto operator<=>(const DirectedLink&) const = default;
};

struct LinkCounters {
    std::uint64_t bytes_forwarded = 0;
    std::uint64_t bytes_dropped = 0;  // blackholed
    std::uint64_t connections_accepted = 0;
    std::uint64_t connections_refused = 0;  // accepted and reset because the link was cut
    std::uint64_t connections_reset = 0;    // open connections reset by a cut
};

class FaultProxy {
  public:
    /// `node_count` bounds the node indices; `seed` drives the jitter of delay mode.
    FaultProxy(boost::asio::io_context& io, std::size_t node_count, std::uint64_t seed);
    ~FaultProxy();
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;

    /// Opens the listener for `link` on 127.0.0.1 (port chosen by the kernel) that forwards to
    /// `target`. Returns the address the dialing node must use. One route per link.
    boost::asio::ip::tcp::endpoint add_route(DirectedLink link,
                                             boost::asio::ip::tcp::endpoint target);

    void set_mode(DirectedLink link, LinkMode mode);
    const LinkMode& mode(DirectedLink link) const;
    /// Counters of the bytes flowing in the direction of `link` (whichever listener carried them)
    /// and of the connections accepted on the listener of `link`.
    LinkCounters counters(DirectedLink link) const;
    /// Number of open proxied connections between the two nodes of `link`, either listener.
    std::size_t open_connections(DirectedLink link) const;

    /// Closes every listener and connection. Idempotent; the destructor calls it.
    void close();

    struct State;

  private:
    std::shared_ptr<State> state_;
};

}  // namespace conclave::bounce
