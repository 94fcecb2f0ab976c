// SPDX-License-Identifier: Apache-2.0
// Node's side of liveness and advisory broadcast (broadcast.hpp, docs/design.md "Liveness and
// broadcast"): the beats every third of the liveness window, the broadcast channel's frame handler,
// the liveness of each member in /status and /members, and Node::broadcast / subscribe. With a
// store backend, the beats and the messages are the store's records (store_backend.hpp).
#include <fmt/format.h>
#include <algorithm>
#include <boost/asio/post.hpp>
#include <future>
#include <random>

#include "conclave/codec/json.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/node.hpp"
#include "conclave/node/store_backend.hpp"

namespace conclave::node {

using admin::BroadcastMessage;
using admin::BroadcastResult;
using admin::Counter;

namespace {

std::string NewBootId() {
    std::random_device device;
    const std::uint64_t high = device();
    const std::uint64_t low = device();
    return fmt::format("{:016x}", (high << 32U) ^ low);
}

}  // namespace

void Node::create_broadcast() {
    broadcasts_.boot_id = NewBootId();
    broadcasts_.beat_timer = std::make_unique<boost::asio::steady_timer>(*runtime_.io);
    cores_.mesh->set_frame_handler(
        net::Channel::Broadcast,
        [this](NodeId from,
               std::span<const std::uint8_t> bytes) -> std::optional<net::FrameRejection> {
            std::variant<BroadcastBeat, BroadcastMessage> decoded;
            try {
                decoded = decode_broadcast_frame(bytes);
            } catch (const codec::DecodeError& e) {
                return net::FrameRejection{net::BadFrameKind::Undecodable, e.what()};
            }
            const std::string& sender = std::visit([](const auto& d) { return d.from; }, decoded);
            if (sender != config_.node_name(from)) {
                return net::FrameRejection{net::BadFrameKind::WrongSender,
                                           "broadcast from '" + sender.substr(0, 64) +
                                               "' on the connection of '" +
                                               config_.node_name(from) + "'"};
            }
            if (auto* message = std::get_if<BroadcastMessage>(&decoded)) {
                on_broadcast_message(std::move(*message));
            } else {
                ++broadcasts_.counters.beats_received;  // the mesh noted the contact
            }
            return std::nullopt;
        });
}

std::chrono::milliseconds Node::liveness_window() const {
    return cores_.store ? cores_.store->liveness_window() : config_.elector.inactivity_interval();
}

// A beat every third of the liveness window (at least every heartbeat period): a live member is
// heard at least twice per window, at a fraction of the elector's heartbeat traffic.
std::chrono::milliseconds Node::beat_period() const {
    return std::max<std::chrono::milliseconds>(config_.elector.heartbeat_period,
                                               liveness_window() / 3);
}

void Node::start_beats() {
    send_beats();
    broadcasts_.beat_timer->expires_after(beat_period());
    broadcasts_.beat_timer->async_wait(
        [this, alive = std::weak_ptr<int>(runtime_.alive)](boost::system::error_code ec) {
            if (ec || alive.expired() || runtime_.stopping || runtime_.stopped) {
                return;
            }
            start_beats();
        });
}

void Node::send_beats() {
    const std::vector<std::uint8_t> beat = encode_beat(config_.self_entry().id);
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        const NodeId n{i};
        if (n != config_.self && !cores_.mesh->is_retired(n) && cores_.mesh->is_up(n)) {
            cores_.mesh->send(n, net::Channel::Broadcast, beat);
        }
    }
}

void Node::on_broadcast_message(BroadcastMessage message) {
    if (!broadcasts_.dedupe.accept(message)) {
        ++broadcasts_.counters.duplicates;
        return;
    }
    ++broadcasts_.counters.delivered;
    const auto subscribers = broadcasts_.subscribers;  // a subscriber may subscribe another one
    for (const auto& callback : subscribers) {
        callback(message);
    }
}

void Node::subscribe(BroadcastCallback callback) {
    if (must_post()) {
        boost::asio::post(*runtime_.io,
                          [this, cb = std::move(callback)]() mutable { subscribe(std::move(cb)); });
        return;
    }
    broadcasts_.subscribers.push_back(std::move(callback));
}

BroadcastResult Node::broadcast(std::string topic, nlohmann::json payload) {
    if (!must_post()) {
        return broadcast_on_io(std::move(topic), std::move(payload));
    }
    auto result = std::make_shared<BroadcastResult>();
    const auto error = call_on_io(
        [this, result, topic = std::move(topic), payload = std::move(payload)]() mutable {
            *result = broadcast_on_io(std::move(topic), std::move(payload));
            return std::optional<std::string>();
        });
    if (error) {
        return {BroadcastResult::Outcome::Unavailable, *error, "", {}, {}};
    }
    return *result;
}

BroadcastResult Node::broadcast_on_io(std::string topic, nlohmann::json payload) {
    using Outcome = BroadcastResult::Outcome;
    if (auto refusal = check_broadcast(topic, payload)) {
        return {
            refusal->too_large ? Outcome::TooLarge : Outcome::Invalid, refusal->detail, "", {}, {}};
    }
    if (!runtime_.started || runtime_.stopping || runtime_.stopped) {
        return {Outcome::Unavailable, "the node is not running", "", {}, {}};
    }
    BroadcastMessage message{config_.self_entry().id, broadcasts_.boot_id, ++broadcasts_.seq,
                             std::move(topic), std::move(payload)};
    const std::vector<std::uint8_t> bytes = encode_broadcast(message);
    BroadcastResult result{Outcome::Sent, "", message.id(), {}, {}};
    const auto now = std::chrono::steady_clock::now();
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        const NodeId n{i};
        if (n == config_.self || cores_.mesh->is_retired(n)) {
            continue;
        }
        // Through a store, every member reads the one record: "sent to" the live ones.
        const bool sent = liveness_of(n, now).second &&
                          (cores_.store || cores_.mesh->send(n, net::Channel::Broadcast, bytes));
        (sent ? result.sent_to : result.not_sent).push_back(config_.nodes[i].id);
    }
    if (cores_.store) {
        cores_.store->send(std::move(message));
    }
    ++broadcasts_.counters.broadcasts;
    broadcasts_.counters.frames_sent += result.sent_to.size();
    return result;
}

std::pair<std::optional<std::int64_t>, bool> Node::liveness_of(
    NodeId n, std::chrono::steady_clock::time_point now) const {
    if (n == config_.self) {
        return {0, true};
    }
    if (cores_.store) {
        const auto beats = cores_.store->heartbeats();
        const auto it = beats.find(config_.nodes[n.value].id);
        if (it == beats.end()) {
            return {std::nullopt, false};
        }
        const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second);
        return {age.count(), age <= liveness_window()};
    }
    const net::PeerStatus ps = cores_.mesh->peer_status(n);
    if (!ps.last_contact) {
        return {std::nullopt, false};
    }
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - *ps.last_contact);
    return {age.count(), ps.up && age <= liveness_window()};
}

void Node::add_liveness(admin::MembersView& view) const {
    view.liveness_window_ms = liveness_window().count();
    const auto now = std::chrono::steady_clock::now();
    for (admin::MemberInfo& m : view.members) {
        const std::optional<NodeId> n = config_.find_node(m.id);
        if (!n) {
            continue;
        }
        const auto [last, live] = liveness_of(*n, now);
        m.last_heartbeat_ms = last;
        m.live = live;
    }
}

void Node::register_broadcast_metrics() {
    Counter& broadcasts = admin_.metrics.counter("conclave_broadcasts_total",
                                                 "Advisory broadcasts sent by this node");
    Counter& frames = admin_.metrics.counter("conclave_broadcast_frames_sent_total",
                                             "Broadcast messages queued, one per live recipient");
    const auto received = [this](const char* result) {
        return &admin_.metrics.counter(
            "conclave_broadcasts_received_total",
            "Broadcasts received from peers, by result (delivered to the "
            "subscribers, or a duplicate dropped)",
            {{"result", result}});
    };
    Counter* delivered = received("delivered");
    Counter* duplicate = received("duplicate");
    Counter& beats = admin_.metrics.counter("conclave_liveness_beats_received_total",
                                            "Liveness beats received from peers");
    admin_.metrics.on_collect([this, &broadcasts, &frames, delivered, duplicate, &beats] {
        const BroadcastCounters& c = broadcasts_.counters;
        broadcasts.set_total(static_cast<double>(c.broadcasts));
        frames.set_total(static_cast<double>(c.frames_sent));
        delivered->set_total(static_cast<double>(c.delivered));
        duplicate->set_total(static_cast<double>(c.duplicates));
        beats.set_total(static_cast<double>(c.beats_received));
    });
}

}  // namespace conclave::node
