#include "conclave/net/driver.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "conclave/codec/json.hpp"
#include "conclave/net/state_file.hpp"

namespace conclave::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

Config checked(Config config, const Mesh& mesh) {
    if (auto error = config.validate()) {
        throw std::invalid_argument("elector config: " + *error);
    }
    if (config.cluster_size != mesh.membership().size()) {
        throw std::invalid_argument("cluster_size: config says " +
                                    std::to_string(config.cluster_size) + ", membership has " +
                                    std::to_string(mesh.membership().size()) + " nodes");
    }
    if (config.self != mesh.self()) {
        throw std::invalid_argument("self: config and mesh disagree on this node's index");
    }
    return config;
}

DriverOptions with_logger(DriverOptions options) {
    if (!options.logger) {
        options.logger = spdlog::default_logger();
    }
    return options;
}

DurableState restore(const DriverOptions& options, const Config& config, const Mesh& mesh) {
    const std::string& id = mesh.membership().at(config.self).id;
    auto state = load_durable_state(options.data_dir, config.cluster_size);
    if (!state) {
        options.logger->info("[{}] driver: no {} in '{}': starting as a new node (term 0)", id,
                             kStateFileName, options.data_dir.string());
        return DurableState{};
    }
    options.logger->info("[{}] driver: restored term {} (voted for {})", id, state->term.value,
                         state->voted_for ? mesh.membership().at(*state->voted_for).id : "nobody");
    return *state;
}

}  // namespace

std::string_view message_type_name(std::size_t index) {
    return index < kMessageNames.size() ? kMessageNames[index] : "unknown";
}

ElectorDriver::ElectorDriver(asio::io_context& io, Mesh& mesh, Config config, DriverOptions options)
    : io_(io),
      mesh_(mesh),
      options_(with_logger(std::move(options))),
      epoch_(std::chrono::steady_clock::now()),
      rng_(options_.seed ? *options_.seed : std::random_device{}()),
      elector_(checked(config, mesh), restore(options_, config, mesh), [this] { return rng_(); }),
      snapshot_(elector_.snapshot()) {
    for (auto& t : timers_) {
        t = std::make_unique<asio::steady_timer>(io_);
    }
    std::weak_ptr<int> alive = alive_;
    mesh_.set_frame_handler(
        Channel::Elector,
        [this, alive](NodeId from,
                      std::span<const std::uint8_t> payload) -> std::optional<FrameRejection> {
            if (alive.expired()) {
                return FrameRejection{BadFrameKind::UnknownChannel, "elector driver is gone"};
            }
            return on_frame(from, payload);
        });
    mesh_.add_peer_handler([this, alive](NodeId peer, bool up) {
        if (!alive.expired()) {
            on_peer(peer, up);
        }
    });
}

ElectorDriver::~ElectorDriver() {
    alive_.reset();
    for (auto& t : timers_) {
        t->cancel();
    }
}

std::string ElectorDriver::log_prefix() const {
    return "[" + mesh_.membership().at(elector_.config().self).id + "]";
}

Millis ElectorDriver::now() const {
    return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - epoch_);
}

void ElectorDriver::start() {
    if (failed_) {
        return;
    }
    // Connection state first (peers may have come up before the elector started).
    for (std::uint16_t i = 0; i < elector_.config().cluster_size; ++i) {
        const NodeId peer{i};
        if (peer != elector_.config().self && mesh_.is_up(peer)) {
            execute(elector_.peer_up(now(), peer));
        }
    }
    execute(elector_.start(now()));
}

void ElectorDriver::stop() {
    if (failed_) {
        return;
    }
    execute(elector_.stop(now()));
}

void ElectorDriver::subscribe(LeadershipCallback callback) {
    subscribers_.push_back(std::move(callback));
}

std::optional<std::string> ElectorDriver::transfer_leadership(NodeId target) {
    if (failed_) {
        return "the elector driver failed (state write error); restart the node";
    }
    if (auto error = elector_.transfer_error(target)) {
        return error;
    }
    execute(elector_.transfer_leadership(now(), target));
    return std::nullopt;
}

std::optional<Lsn> ElectorDriver::issue_lsn() {
    if (failed_) {
        return std::nullopt;
    }
    return elector_.issue_lsn();
}

std::optional<FrameRejection> ElectorDriver::on_frame(NodeId from,
                                                      std::span<const std::uint8_t> payload) {
    Message message;
    try {
        message = decode_cbor(payload);
    } catch (const DecodeError& e) {
        return FrameRejection{BadFrameKind::Undecodable, e.what()};
    } catch (const std::exception& e) {
        // Defence in depth: no parser exception may escape into the io_context.
        return FrameRejection{BadFrameKind::Undecodable, std::string("cbor: ") + e.what()};
    }
    if (message.from != from) {
        return FrameRejection{BadFrameKind::WrongSender,
                              "message claims sender index " + std::to_string(message.from.value) +
                                  ", connection belongs to index " + std::to_string(from.value)};
    }
    if (const auto* cession = std::get_if<LeadershipCession>(&message.body)) {
        if (cession->successor && cession->successor->value >= elector_.config().cluster_size) {
            return FrameRejection{BadFrameKind::Undecodable,
                                  "successor: node index " +
                                      std::to_string(cession->successor->value) +
                                      " is not in the cluster"};
        }
    }
    ++counters_.messages_in[message.body.index()];
    if (!failed_) {
        execute(elector_.receive(now(), message));
    }
    return std::nullopt;
}

void ElectorDriver::on_peer(NodeId peer, bool up) {
    if (failed_) {
        return;
    }
    execute(up ? elector_.peer_up(now(), peer) : elector_.peer_down(now(), peer));
}

void ElectorDriver::execute(const Actions& actions) {
    for (const Action& action : actions) {
        if (failed_) {
            return;  // nothing after a failed PersistState may take effect
        }
        std::visit(
            [&](const auto& a) {
                using T = std::decay_t<decltype(a)>;
                if constexpr (std::is_same_v<T, SendTo>) {
                    send(a.to, a.message, encode_cbor(a.message));
                } else if constexpr (std::is_same_v<T, Broadcast>) {
                    const auto bytes = encode_cbor(a.message);
                    for (std::uint16_t i = 0; i < elector_.config().cluster_size; ++i) {
                        if (NodeId{i} != elector_.config().self) {
                            send(NodeId{i}, a.message, bytes);
                        }
                    }
                } else if constexpr (std::is_same_v<T, ArmTimer>) {
                    arm(a.timer, a.delay);
                } else if constexpr (std::is_same_v<T, CancelTimer>) {
                    cancel(a.timer);
                } else if constexpr (std::is_same_v<T, PersistState>) {
                    persist(a.state);
                } else if constexpr (std::is_same_v<T, NotifyLeadership>) {
                    notify(a.snapshot);
                } else {
                    static_assert(std::is_same_v<T, RaiseAlarm>);
                    ++counters_.alarms;
                    log().error(
                        "{} ALARM {}: peer {} in term {} — this must never happen; "
                        "investigate (see docs/design.md, departure 6)",
                        log_prefix(), to_string(a.kind), mesh_.membership().at(a.peer).id,
                        a.term.value);
                }
            },
            action);
    }
}

void ElectorDriver::send(NodeId to, const Message& message,
                         const std::vector<std::uint8_t>& bytes) {
    if (mesh_.send(to, Channel::Elector, bytes)) {
        ++counters_.messages_out[message.body.index()];
    } else {
        ++counters_.messages_dropped;
    }
}

void ElectorDriver::arm(TimerId timer, Millis delay) {
    const auto index = static_cast<std::size_t>(timer);
    const std::uint64_t generation = ++generations_[index];
    auto& t = *timers_[index];
    t.expires_after(delay);
    t.async_wait(
        [this, alive = std::weak_ptr<int>(alive_), timer, index, generation](const error_code& ec) {
            if (alive.expired()) {
                return;
            }
            if (ec || generation != generations_[index]) {
                ++counters_.stale_timer_firings;
                return;
            }
            ++generations_[index];  // this instance is consumed
            if (failed_) {
                return;
            }
            ++counters_.timer_firings;
            execute(elector_.timer_fired(now(), timer));
        });
}

void ElectorDriver::cancel(TimerId timer) {
    const auto index = static_cast<std::size_t>(timer);
    ++generations_[index];
    timers_[index]->cancel();
}

void ElectorDriver::persist(const DurableState& state) {
    try {
        store_durable_state(options_.data_dir, state);
        ++counters_.state_writes;
    } catch (const StateFileError& e) {
        ++counters_.state_write_failures;
        failed_ = true;
        for (std::size_t i = 0; i < kTimerCount; ++i) {
            cancel(static_cast<TimerId>(i));
        }
        log().critical(
            "{} driver: cannot persist term {}: {}; this node stops taking part "
            "in elections (messages that depend on it are not sent)",
            log_prefix(), state.term.value, e.what());
        // Tell the application it must not act on any leadership any more.
        LeadershipSnapshot stopped;
        stopped.role = Role::Stopped;
        stopped.term = snapshot_.term;
        stopped.reason = Reason::Stopped;
        stopped.changed_at = now();
        notify(stopped);
    }
}

void ElectorDriver::notify(const LeadershipSnapshot& snapshot) {
    ++counters_.leadership_notifications;
    snapshot_ = snapshot;
    if (options_.log_leadership) {
        log().info("{} leadership: role {} term {} leader {} fencing token {} reason {}",
                   log_prefix(), to_string(snapshot.role), snapshot.term.value,
                   snapshot.leader ? mesh_.membership().at(*snapshot.leader).id : "none",
                   snapshot.fencing_token, to_string(snapshot.reason));
    }
    const auto subscribers = subscribers_;  // a callback may subscribe more
    for (const auto& s : subscribers) {
        s(snapshot);
    }
}

}  // namespace conclave::net
