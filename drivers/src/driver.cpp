// SPDX-License-Identifier: Apache-2.0
#include "conclave/drivers/driver.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "conclave/codec/json.hpp"
#include "conclave/drivers/state_file.hpp"

namespace conclave::drivers {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

elector::Config checked(elector::Config config, const net::Mesh& mesh) {
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

elector::DurableState restore(const DriverOptions& options, const elector::Config& config,
                              const net::Mesh& mesh) {
    const std::string& id = mesh.membership().at(config.self).id;
    auto state = load_durable_state(options.data_dir, config.cluster_size);
    if (!state) {
        options.logger->info("[{}] driver: no {} in '{}': starting as a new node (term 0)", id,
                             kStateFileName, options.data_dir.string());
        return elector::DurableState{};
    }
    options.logger->info("[{}] driver: restored term {} (voted for {})", id, state->term.value,
                         state->voted_for ? mesh.membership().at(*state->voted_for).id : "nobody");
    return *state;
}

}  // namespace

std::string_view message_type_name(std::size_t index) {
    return index < elector::kMessageNames.size() ? elector::kMessageNames[index] : "unknown";
}

ElectorDriver::ElectorDriver(asio::io_context& io, net::Mesh& mesh, elector::Config config,
                             DriverOptions options)
    : io_(io),
      mesh_(mesh),
      options_(with_logger(std::move(options))),
      epoch_(std::chrono::steady_clock::now()),
      rng_(options_.seed ? *options_.seed : std::random_device{}()),
      runtime_(env_, checked(config, mesh), restore(options_, config, mesh),
               [this] { return rng_(); }),
      snapshot_(runtime_.elector().snapshot()) {
    if (!options_.trace_file.empty()) {
        trace_ = std::make_unique<ElectorTrace>(options_.trace_file, runtime_.elector().config(),
                                                runtime_.elector().state().durable());
    }
    for (auto& t : timers_) {
        t = std::make_unique<asio::steady_timer>(io_);
    }
    std::weak_ptr<int> alive = alive_;
    mesh_.set_frame_handler(
        net::Channel::Elector,
        [this, alive](NodeId from,
                      std::span<const std::uint8_t> payload) -> std::optional<net::FrameRejection> {
            if (alive.expired()) {
                return net::FrameRejection{net::BadFrameKind::UnknownChannel,
                                           "elector driver is gone"};
            }
            return on_frame(from, payload);
        });
    mesh_.add_peer_handler([this, alive](NodeId peer, bool up, LinkLoss loss) {
        if (!alive.expired()) {
            on_peer(peer, up, loss);
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
    return "[" + mesh_.membership().at(elector().config().self).id + "]";
}

Millis ElectorDriver::now() const {
    return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - epoch_);
}

void ElectorDriver::start() {
    if (failed()) {
        return;
    }
    // Connection state first (peers may have come up before the elector started).
    for (const NodeId peer : runtime_.others()) {
        if (mesh_.is_up(peer)) {
            runtime_.peer_up(peer);
        }
    }
    runtime_.start();
}

void ElectorDriver::stop() {
    runtime_.stop();
}

void ElectorDriver::subscribe(LeadershipCallback callback) {
    subscribers_.push_back(std::move(callback));
}

std::optional<std::string> ElectorDriver::transfer_leadership(NodeId target) {
    return runtime_.transfer_leadership(target);
}

std::optional<std::string> ElectorDriver::set_priority(NodeId node, std::uint32_t priority) {
    return runtime_.set_priority(node, priority);
}

std::optional<Lsn> ElectorDriver::issue_lsn() {
    const std::optional<Lsn> lsn = runtime_.issue_lsn();
    if (lsn && trace_) {
        trace_failed(trace_->issue_lsn(runtime_.elector().state()));
    }
    return lsn;
}

void ElectorDriver::trace_step(const runtime::StepInput& input, const elector::Actions& actions) {
    if (trace_) {
        trace_failed(trace_->step(input, actions, runtime_.elector().state(), runtime_.others()));
    }
}

void ElectorDriver::trace_failed(const std::optional<std::string>& error) {
    if (error) {
        log().error("{} {}", log_prefix(), *error);
        trace_.reset();
    }
}

std::optional<std::string> ElectorDriver::set_voters(NodeSet voters, std::uint64_t version) {
    return runtime_.set_voters(voters, version);
}

std::optional<std::string> ElectorDriver::grow_table(std::size_t cluster_size) {
    return runtime_.grow_table(cluster_size);
}

std::optional<net::FrameRejection> ElectorDriver::on_frame(NodeId from,
                                                           std::span<const std::uint8_t> payload) {
    elector::Message message;
    try {
        message = codec::decode_cbor(payload);
    } catch (const codec::DecodeError& e) {
        return net::FrameRejection{net::BadFrameKind::Undecodable, e.what()};
    } catch (const std::exception& e) {
        // Defence in depth: no parser exception may escape into the io_context.
        return net::FrameRejection{net::BadFrameKind::Undecodable,
                                   std::string("cbor: ") + e.what()};
    }
    if (message.from != from) {
        return net::FrameRejection{
            net::BadFrameKind::WrongSender,
            "message claims sender index " + std::to_string(message.from.value) +
                ", connection belongs to index " + std::to_string(from.value)};
    }
    if (const auto* cession = std::get_if<elector::LeadershipCession>(&message.body)) {
        if (cession->successor && cession->successor->value >= elector().config().cluster_size) {
            return net::FrameRejection{net::BadFrameKind::Undecodable,
                                       "successor: node index " +
                                           std::to_string(cession->successor->value) +
                                           " is not in the cluster"};
        }
    }
    ++counters_.messages_in[message.body.index()];
    refresh_round_trip();
    runtime_.receive(message);  // nothing once the runtime is out of service
    return std::nullopt;
}

void ElectorDriver::refresh_round_trip() {
    std::optional<std::chrono::microseconds> largest;
    for (const NodeId peer : runtime_.others()) {
        if (const auto rtt = mesh_.round_trip(peer); rtt && (!largest || *rtt > *largest)) {
            largest = rtt;
        }
    }
    if (largest) {
        runtime_.observe_round_trip(*largest);
    }
}

void ElectorDriver::on_peer(NodeId peer, bool up, LinkLoss loss) {
    refresh_round_trip();
    if (up) {
        runtime_.peer_up(peer);
    } else {
        runtime_.peer_down(peer, loss);  // only a proven closure ends a promise
    }
}

void ElectorDriver::send(NodeId to, const elector::Message& message,
                         const std::vector<std::uint8_t>& bytes) {
    if (mesh_.send(to, net::Channel::Elector, bytes)) {
        ++counters_.messages_out[message.body.index()];
    } else {
        ++counters_.messages_dropped;
    }
}

void ElectorDriver::sync_timer_counters() {
    counters_.timer_firings = runtime_.timer_firings();
    counters_.stale_timer_firings = runtime_.stale_timer_firings() + aborted_waits_;
}

// ---- The runtime's environment ----------------------------------------------------------------

void ElectorDriver::Env::send(std::span<const NodeId> to, const elector::Message& message) {
    const auto bytes = codec::encode_cbor(message);  // once for every recipient of a broadcast
    for (const NodeId peer : to) {
        driver->send(peer, message, bytes);
    }
}

void ElectorDriver::Env::arm(elector::TimerId timer, Millis delay,
                             runtime::TimerGeneration generation) {
    ElectorDriver* d = driver;
    auto& t = *d->timers_[static_cast<std::size_t>(timer)];
    t.expires_after(delay);
    t.async_wait(
        [d, alive = std::weak_ptr<int>(d->alive_), timer, generation](const error_code& ec) {
            if (alive.expired()) {
                return;
            }
            if (ec) {
                ++d->aborted_waits_;  // cancelled or replaced: the runtime already moved on
            } else {
                d->refresh_round_trip();
                d->runtime_.timer_fired(timer, generation);  // filters stale instances itself
                if (timer == elector::TimerId::HeartbeatBroadcast) {
                    d->runtime_.hand_back();  // the preferred leader's hand-back, when due
                }
            }
            d->sync_timer_counters();
        });
}

void ElectorDriver::Env::cancel(elector::TimerId timer) {
    driver->timers_[static_cast<std::size_t>(timer)]->cancel();
}

bool ElectorDriver::Env::persist(const elector::DurableState& state) {
    try {
        if (driver->options_.store_state) {
            driver->options_.store_state(driver->options_.data_dir, state);
        }
        store_durable_state(driver->options_.data_dir, state, driver->options_.identity);
        ++driver->counters_.state_writes;
        return true;
    } catch (const StateFileError& e) {
        ++driver->counters_.state_write_failures;
        driver->log().critical(
            "{} driver: cannot persist term {}: {}; this node stops taking part "
            "in elections (messages that depend on it are not sent)",
            driver->log_prefix(), state.term.value, e.what());
        return false;
    }
}

void ElectorDriver::Env::alarm(const elector::RaiseAlarm& a) {
    ++driver->counters_.alarms;
    driver->log().error(
        "{} ALARM {}: peer {} in term {} — this must never happen; "
        "investigate (see docs/design.md, departure 6)",
        driver->log_prefix(), to_string(a.kind), driver->mesh_.membership().at(a.peer).id,
        a.term.value);
}

void ElectorDriver::Env::failed(const elector::DurableState&) {
    // The runtime has cancelled every timer and ignores further inputs. Tell the application it
    // must not act on any leadership any more.
    driver->lease_deadline_ns_.store(kNoLease);
    elector::LeadershipSnapshot stopped;
    stopped.role = elector::Role::Stopped;
    stopped.term = driver->snapshot_.term;
    stopped.reason = elector::Reason::Stopped;
    stopped.changed_at = driver->now();
    driver->notify(stopped);
}

void ElectorDriver::publish_lease() {
    const std::optional<Millis> end = runtime_.elector().lease_end();
    if (!end || runtime_.failed()) {
        lease_deadline_ns_.store(kNoLease);
        return;
    }
    const auto deadline =
        epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(*end);
    lease_deadline_ns_.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count());
}

std::optional<std::chrono::steady_clock::time_point> ElectorDriver::lease_deadline() const {
    const std::int64_t ns = lease_deadline_ns_.load();
    if (ns == kNoLease) {
        return std::nullopt;
    }
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::nanoseconds(ns)));
}

bool ElectorDriver::lease_valid_now() const {
    const auto deadline = lease_deadline();
    return deadline && std::chrono::steady_clock::now() < *deadline;
}

void ElectorDriver::notify(const elector::LeadershipSnapshot& snapshot) {
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

}  // namespace conclave::drivers
