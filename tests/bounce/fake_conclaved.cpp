// SPDX-License-Identifier: Apache-2.0
// A stand-in for `conclaved`, for leader-bounce's own end-to-end tests until the real daemon
// lands. It speaks the command line, config and GET /status of docs/interfaces.md, runs
// the real elector core, and uses a deliberately simple mesh: newline-delimited JSON messages over
// TCP, the lower index dials, a one-line hello naming the dialer. Not a daemon for anything else.
#include <unistd.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <span>

#include "conclave/codec/json.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/runtime/elector_runtime.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using nlohmann::json;
using namespace conclave;

namespace {

tcp::endpoint parse_endpoint(const std::string& s) {
    const auto colon = s.rfind(':');
    return tcp::endpoint(asio::ip::make_address(s.substr(0, colon)),
                         static_cast<std::uint16_t>(std::stoi(s.substr(colon + 1))));
}

struct Conn {
    explicit Conn(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::deque<std::string> out;
    bool writing = false;
    bool dead = false;
};

struct Node {
    asio::io_context io;
    std::size_t n = 0;
    std::size_t self = 0;
    std::vector<std::string> ids;
    std::vector<tcp::endpoint> peers;
    std::string cluster;
    std::string state_path;
    /// The runtime's environment: Asio timers, this toy mesh, a JSON state file, stdout.
    struct Env {
        static constexpr bool kPlantedBugs = false;
        Node& node;
        Millis now() const { return node.now(); }
        void send(std::span<const NodeId> to, const elector::Message& m) {
            for (const NodeId n : to) {
                node.send(n.value, m);
            }
        }
        void arm(elector::TimerId id, Millis delay, runtime::TimerGeneration gen) {
            auto& t = node.timers[id];
            if (!t) {
                t = std::make_unique<asio::steady_timer>(node.io);
            }
            t->expires_after(delay);
            Node* n = &node;
            t->async_wait([n, id, gen](boost::system::error_code ec) {
                if (!ec) {
                    n->elector->timer_fired(id, gen);
                }
            });
        }
        void cancel(elector::TimerId id) {
            if (node.timers[id]) {
                node.timers[id]->cancel();
            }
        }
        bool persist(const elector::DurableState& state) {
            json j;
            to_json(j, state);
            std::ofstream(node.state_path + ".tmp") << j.dump();
            return std::rename((node.state_path + ".tmp").c_str(), node.state_path.c_str()) == 0;
        }
        void notify(const elector::LeadershipSnapshot& s) {
            std::cout << "leadership: " << to_string(s.role) << " term " << s.term.value
                      << " reason " << to_string(s.reason) << std::endl;
        }
        void alarm(const elector::RaiseAlarm& a) {
            std::cout << "ALARM: " << to_string(elector::Action{a}) << std::endl;
        }
        void failed(const elector::DurableState&) {
            std::cout << "state write failed: out of service" << std::endl;
        }
    };

    Env env{*this};
    std::unique_ptr<runtime::ElectorRuntime<Env>> elector;
    std::vector<std::shared_ptr<Conn>> conns;
    std::map<elector::TimerId, std::unique_ptr<asio::steady_timer>> timers;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

    Millis now() const {
        return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start);
    }

    void send(std::size_t to, const elector::Message& m) {
        auto c = conns[to];
        if (!c || c->dead) {
            return;
        }
        c->out.push_back(codec::message_to_json(m).dump() + "\n");
        flush(c);
    }
    void flush(std::shared_ptr<Conn> c) {
        if (c->writing || c->out.empty() || c->dead) {
            return;
        }
        c->writing = true;
        asio::async_write(c->socket, asio::buffer(c->out.front()),
                          [this, c](boost::system::error_code ec, std::size_t) {
                              c->writing = false;
                              if (ec) {
                                  return;
                              }
                              c->out.pop_front();
                              flush(c);
                          });
    }

    void attach(std::size_t peer, std::shared_ptr<Conn> c) {
        if (conns[peer] && !conns[peer]->dead) {
            drop(peer, conns[peer]);
        }
        conns[peer] = c;
        elector->peer_up(NodeId{static_cast<std::uint16_t>(peer)});
        read(peer, c, std::make_shared<asio::streambuf>());
    }
    void drop(std::size_t peer, std::shared_ptr<Conn> c) {
        if (c->dead) {
            return;
        }
        c->dead = true;
        boost::system::error_code ec;
        c->socket.close(ec);
        if (conns[peer] == c) {
            conns[peer].reset();
            elector->peer_down(NodeId{static_cast<std::uint16_t>(peer)});
            if (peer > self) {
                redial(peer);
            }
        }
    }
    void read(std::size_t peer, std::shared_ptr<Conn> c, std::shared_ptr<asio::streambuf> buf) {
        asio::async_read_until(
            c->socket, *buf, '\n', [this, peer, c, buf](boost::system::error_code ec, std::size_t) {
                if (ec || c->dead) {
                    drop(peer, c);
                    return;
                }
                std::istream in(buf.get());
                std::string line;
                std::getline(in, line);
                try {
                    const elector::Message m = codec::message_from_json(json::parse(line));
                    if (m.from.value == peer) {
                        elector->receive(m);
                    }
                } catch (const std::exception& e) {
                    std::cout << "bad message from " << ids[peer] << ": " << e.what() << std::endl;
                }
                read(peer, c, buf);
            });
    }
    void redial(std::size_t peer) {
        auto t = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(100));
        t->async_wait([this, peer, t](boost::system::error_code) { dial(peer); });
    }
    void dial(std::size_t peer) {
        auto c = std::make_shared<Conn>(tcp::socket(io));
        c->socket.async_connect(peers[peer], [this, peer, c](boost::system::error_code ec) {
            if (ec) {
                redial(peer);
                return;
            }
            auto hello = std::make_shared<std::string>(std::to_string(self) + "\n");
            asio::async_write(c->socket, asio::buffer(*hello),
                              [this, peer, c, hello](boost::system::error_code wec, std::size_t) {
                                  if (wec) {
                                      redial(peer);
                                      return;
                                  }
                                  attach(peer, c);
                              });
        });
    }
    void accept(tcp::acceptor& acceptor) {
        acceptor.async_accept([this, &acceptor](boost::system::error_code ec, tcp::socket s) {
            if (!ec) {
                auto c = std::make_shared<Conn>(std::move(s));
                auto buf = std::make_shared<asio::streambuf>();
                asio::async_read_until(c->socket, *buf, '\n',
                                       [this, c, buf](boost::system::error_code rec, std::size_t) {
                                           if (rec) {
                                               return;
                                           }
                                           std::istream in(buf.get());
                                           std::size_t peer = n;
                                           in >> peer;
                                           if (peer < self) {
                                               attach(peer, c);  // buf is empty past the hello
                                           }
                                       });
            }
            accept(acceptor);
        });
    }

    json status() const {
        const auto& s = elector->elector().state();
        json peers_json = json::array();
        for (std::size_t j = 0; j < n; ++j) {
            if (j != self) {
                peers_json.push_back({{"id", ids[j]}, {"up", conns[j] != nullptr}});
            }
        }
        const auto& snap = elector->elector().snapshot();
        return json{{"id", ids[self]},
                    {"cluster", cluster},
                    {"role", std::string(to_string(s.role))},
                    {"term", s.term.value},
                    {"leader", snap.leader ? json(ids[snap.leader->value]) : json(nullptr)},
                    {"fencing_token", snap.fencing_token},
                    {"peers", peers_json}};
    }
    void serve_http(tcp::acceptor& acceptor) {
        acceptor.async_accept([this, &acceptor](boost::system::error_code ec, tcp::socket s) {
            if (!ec) {
                auto stream = std::make_shared<beast::tcp_stream>(std::move(s));
                auto buf = std::make_shared<beast::flat_buffer>();
                auto req = std::make_shared<http::request<http::string_body>>();
                http::async_read(
                    *stream, *buf, *req,
                    [this, stream, buf, req](boost::system::error_code rec, std::size_t) {
                        if (rec) {
                            return;
                        }
                        auto res = std::make_shared<http::response<http::string_body>>(
                            http::status::ok, req->version());
                        res->set(http::field::content_type, "application/json");
                        res->body() = status().dump();
                        res->keep_alive(false);
                        res->prepare_payload();
                        http::async_write(
                            *stream, *res, [stream, res](boost::system::error_code, std::size_t) {
                                beast::error_code x;
                                stream->socket().shutdown(tcp::socket::shutdown_send, x);
                            });
                    });
            }
            serve_http(acceptor);
        });
    }
};

}  // namespace

int main(int argc, char** argv) {
    std::string config_path;
    std::string id;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--config") {
            config_path = argv[i + 1];
        } else if (a == "--node-id") {
            id = argv[i + 1];
        }
    }
    if (config_path.empty() || id.empty()) {
        std::cerr << "usage: fake_conclaved --config FILE --node-id ID\n";
        return 2;
    }
    Node node;
    tcp::endpoint http_endpoint;
    try {
        std::ifstream in(config_path);
        const json cfg = json::parse(in);
        node.cluster = cfg.at("cluster").get<std::string>();
        for (const auto& entry : cfg.at("nodes")) {
            node.ids.push_back(entry.at("id").get<std::string>());
            node.peers.push_back(parse_endpoint(entry.at("peer").get<std::string>()));
            if (node.ids.back() == id) {
                node.self = node.ids.size() - 1;
                http_endpoint = parse_endpoint(entry.at("http").get<std::string>());
            }
        }
        node.n = node.ids.size();
        auto c = elector::Config::profile(cfg.value("profile", "default"), node.n,
                                          NodeId{static_cast<std::uint16_t>(node.self)});
        if (!c) {
            std::cerr << "bad profile\n";
            return 2;
        }
        c->scouting = cfg.value("scouting", true);
        std::string dir = cfg.value("data_dir", std::string("/tmp/{id}"));
        dir.replace(dir.find("{id}"), 4, id);
        std::filesystem::create_directories(dir);
        node.state_path = dir + "/state.json";
        elector::DurableState restored;
        if (std::ifstream state(node.state_path); state) {
            restored = codec::durable_state_from_json(json::parse(state));
        }
        std::mt19937_64 rng(static_cast<std::uint64_t>(::getpid()));
        node.elector = std::make_unique<runtime::ElectorRuntime<Node::Env>>(
            node.env, *c, restored, [rng]() mutable { return rng(); });
    } catch (const std::exception& e) {
        std::cerr << "config: " << e.what() << "\n";
        return 2;
    }
    node.conns.resize(node.n);
    tcp::acceptor peer_acceptor(node.io, node.peers[node.self]);
    tcp::acceptor http_acceptor(node.io, http_endpoint);
    asio::signal_set signals(node.io, SIGTERM, SIGINT);
    signals.async_wait([&](boost::system::error_code, int) { node.io.stop(); });
    node.accept(peer_acceptor);
    node.serve_http(http_acceptor);
    for (std::size_t j = node.self + 1; j < node.n; ++j) {
        node.dial(j);
    }
    node.elector->start();
    node.io.run();
    std::cout << "stopped" << std::endl;
    return 0;
}
