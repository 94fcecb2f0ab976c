// SPDX-License-Identifier: Apache-2.0
// Test support: network partitions between in-process Nodes on loopback, without privileges.
// Every ordered pair of nodes (i, j) gets a TCP forwarder on 127.0.0.1: node i's config names
// the forwarder's port as node j's peer address (ports_seen_by(i)), and the forwarder relays
// bytes to node j's real peer port. isolate(i) resets every connection relayed to or from node i
// and resets every new one at once (a cut both ways: the mesh sees its peers go down and redials
// in vain); heal() lets new connections through again. The mesh's handshake names node ids, not
// addresses, so the relayed connections are ordinary peer connections. Runs on the io_context it
// is given (poll it with the nodes').
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <cstdint>
#include <memory>
#include <vector>

namespace conclave::test {

class LinkCutter {
  public:
    /// `real_ports[j]`: node j's own peer port (what it listens on).
    LinkCutter(boost::asio::io_context& io, std::vector<std::uint16_t> real_ports)
        : io_(io), real_ports_(std::move(real_ports)) {
        const std::size_t n = real_ports_.size();
        for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t j = 0; j < n; ++j) {
                auto link = std::make_shared<Link>(io_);
                link->from = i;
                link->to = j;
                if (i != j) {
                    link->acceptor.open(boost::asio::ip::tcp::v4());
                    link->acceptor.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
                    link->acceptor.listen();
                    accept(link);
                }
                links_.push_back(link);
            }
        }
    }
    ~LinkCutter() {
        for (auto& link : links_) {
            boost::system::error_code ignored;
            link->acceptor.close(ignored);
            link->reset_all();
        }
    }
    LinkCutter(const LinkCutter&) = delete;
    LinkCutter& operator=(const LinkCutter&) = delete;

    /// The peer ports node i's config names: its own real port, the forwarders for the others.
    std::vector<std::uint16_t> ports_seen_by(std::size_t i) const {
        std::vector<std::uint16_t> ports;
        for (std::size_t j = 0; j < real_ports_.size(); ++j) {
            ports.push_back(i == j ? real_ports_[j] : link(i, j).acceptor.local_endpoint().port());
        }
        return ports;
    }

    /// Cuts node i off from every other node, both ways, until heal().
    void isolate(std::size_t i) {
        for (auto& l : links_) {
            if (l->from == i || l->to == i) {
                l->cut = true;
                l->reset_all();
            }
        }
    }
    void heal() {
        for (auto& l : links_) {
            l->cut = false;
        }
    }

  private:
    using Socket = boost::asio::ip::tcp::socket;
    struct Pipe {
        Socket a, b;
        std::array<char, 16384> ab{}, ba{};
        explicit Pipe(boost::asio::io_context& io) : a(io), b(io) {}
        void reset() {
            boost::system::error_code ignored;
            a.close(ignored);
            b.close(ignored);
        }
    };
    struct Link {
        boost::asio::ip::tcp::acceptor acceptor;
        std::size_t from = 0, to = 0;
        bool cut = false;
        std::vector<std::weak_ptr<Pipe>> pipes;
        explicit Link(boost::asio::io_context& io) : acceptor(io) {}
        void reset_all() {
            for (auto& p : pipes) {
                if (auto pipe = p.lock()) {
                    pipe->reset();
                }
            }
            pipes.clear();
        }
    };

    const Link& link(std::size_t i, std::size_t j) const {
        return *links_[i * real_ports_.size() + j];
    }

    void accept(const std::shared_ptr<Link>& link) {
        auto pipe = std::make_shared<Pipe>(io_);
        link->acceptor.async_accept(pipe->a, [this, link, pipe](boost::system::error_code ec) {
            if (ec == boost::asio::error::operation_aborted || !link->acceptor.is_open()) {
                return;
            }
            if (!ec && !link->cut) {
                link->pipes.push_back(pipe);
                connect(link, pipe);
            } else {
                pipe->reset();
            }
            accept(link);
        });
    }

    void connect(const std::shared_ptr<Link>& link, const std::shared_ptr<Pipe>& pipe) {
        const boost::asio::ip::tcp::endpoint target(boost::asio::ip::make_address("127.0.0.1"),
                                                    real_ports_[link->to]);
        pipe->b.async_connect(target, [pipe](boost::system::error_code ec) {
            if (ec) {
                pipe->reset();
                return;
            }
            pump(pipe, pipe->a, pipe->b, pipe->ab);
            pump(pipe, pipe->b, pipe->a, pipe->ba);
        });
    }

    static void pump(const std::shared_ptr<Pipe>& pipe, Socket& from, Socket& to,
                     std::array<char, 16384>& buffer) {
        from.async_read_some(
            boost::asio::buffer(buffer),
            [pipe, &from, &to, &buffer](boost::system::error_code ec, std::size_t n) {
                if (ec) {
                    pipe->reset();
                    return;
                }
                boost::asio::async_write(
                    to, boost::asio::buffer(buffer.data(), n),
                    [pipe, &from, &to, &buffer](boost::system::error_code wec, std::size_t) {
                        if (wec) {
                            pipe->reset();
                            return;
                        }
                        pump(pipe, from, to, buffer);
                    });
            });
    }

    boost::asio::io_context& io_;
    std::vector<std::uint16_t> real_ports_;
    std::vector<std::shared_ptr<Link>> links_;
};

}  // namespace conclave::test
