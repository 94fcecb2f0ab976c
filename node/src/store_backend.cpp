// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/store_backend.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <boost/asio/post.hpp>
#include <random>

#include "conclave/codec/json.hpp"
#include "conclave/node/broadcast.hpp"
#include "conclave/node/logging.hpp"

namespace conclave::node {

namespace {

using nlohmann::json;

/// Malformed record versions remembered, so that one left in the store counts once.
constexpr std::size_t kMalformedRemembered = 256;
constexpr std::size_t kMemberBootDigits = 16;
constexpr std::size_t kMemberFieldBytes = 256;

std::string MemberBootId() {
    std::random_device device;
    const std::uint64_t high = device();
    const std::uint64_t low = device();
    return fmt::format("{:016x}", (high << 32U) ^ low);
}

std::string BoundedMemberField(const json& j, const char* field) {
    std::string value = codec::get_string(j, field);
    if (value.empty() || value.size() > kMemberFieldBytes) {
        throw codec::DecodeError(std::string(field) + ": expected 1 to " +
                                 std::to_string(kMemberFieldBytes) + " bytes");
    }
    return value;
}

}  // namespace

std::string encode_member_record(const StoreMemberRecord& record) {
    return json{
        {"id", record.id}, {"http", record.http}, {"boot", record.boot}, {"beat", record.beat}}
        .dump();
}

StoreMemberRecord decode_member_record(std::string_view text) {
    if (text.size() > kStoreRecordLimit) {
        throw codec::DecodeError("member record: larger than " + std::to_string(kStoreRecordLimit) +
                                 " bytes");
    }
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
        throw codec::DecodeError("member record: not a JSON object");
    }
    for (const auto& [key, value] : j.items()) {
        (void)value;
        if (key != "id" && key != "http" && key != "boot" && key != "beat") {
            throw codec::DecodeError("member record: unknown field '" + key.substr(0, 64) + "'");
        }
    }
    StoreMemberRecord r;
    r.id = BoundedMemberField(j, "id");
    r.http = BoundedMemberField(j, "http");
    r.boot = codec::get_string(j, "boot");
    if (r.boot.size() != kMemberBootDigits ||
        !std::all_of(r.boot.begin(), r.boot.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
        throw codec::DecodeError("boot: expected 16 lowercase hex digits");
    }
    r.beat = codec::get_u64(j, "beat");
    if (r.beat == 0) {
        throw codec::DecodeError("beat: expected a count from 1");
    }
    return r;
}

std::vector<StoreMemberTable::Malformed> StoreMemberTable::observe(
    const std::vector<std::pair<std::string, std::string>>& records, TimePoint now) {
    std::vector<Malformed> malformed;
    for (const auto& [name, text] : records) {
        std::optional<StoreMemberRecord> record;
        std::string detail;
        try {
            record = decode_member_record(text);
            if (record->id != name) {
                detail = "id '" + record->id.substr(0, 64) + "' under the name of another member";
                record.reset();
            }
        } catch (const codec::DecodeError& e) {
            detail = e.what();
        }
        if (!record) {
            const std::string seen = name + "\n" + text.substr(0, 1024);
            if (malformed_.size() >= kMalformedRemembered) {
                malformed_.clear();
            }
            if (malformed_.insert(seen).second) {
                malformed.push_back({name.substr(0, 64), detail});
            }
            continue;
        }
        const auto it = seen_.find(name);
        if (it == seen_.end() || it->second.boot != record->boot ||
            it->second.beat != record->beat) {
            seen_[name] = Seen{record->boot, record->beat, now};
        }
    }
    return malformed;
}

std::map<std::string, StoreMemberTable::TimePoint> StoreMemberTable::heartbeats() const {
    std::map<std::string, TimePoint> out;
    for (const auto& [name, seen] : seen_) {
        out.emplace(name, seen.changed);
    }
    return out;
}

admin::BroadcastMessage decode_store_broadcast(std::string_view bytes) {
    if (bytes.size() > kStoreRecordLimit) {
        throw codec::DecodeError("broadcast record: larger than " +
                                 std::to_string(kStoreRecordLimit) + " bytes");
    }
    auto decoded = decode_broadcast_frame(std::span<const std::uint8_t>(
        reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    if (auto* message = std::get_if<admin::BroadcastMessage>(&decoded)) {
        return std::move(*message);
    }
    throw codec::DecodeError("broadcast record: a beat, not a message");
}

std::string_view to_string(StoreSession s) {
    switch (s) {
        case StoreSession::Connecting:
            return "connecting";
        case StoreSession::Connected:
            return "connected";
        case StoreSession::Unreachable:
            return "unreachable";
        case StoreSession::Expired:
            return "expired";
        case StoreSession::Stopped:
            break;
    }
    return "stopped";
}

std::chrono::steady_clock::time_point store_lease_end(std::chrono::steady_clock::time_point sent,
                                                      std::chrono::milliseconds ttl,
                                                      std::uint32_t drift_permille) {
    // In microseconds, rounded down: the holder never counts more than the store grants.
    const std::int64_t ttl_us = std::chrono::duration_cast<std::chrono::microseconds>(ttl).count();
    const std::int64_t d = drift_permille;
    return sent + std::chrono::microseconds(ttl_us * (1000 - d) / (1000 + d));
}

StoreBackend::StoreBackend(boost::asio::io_context& io, BackendSettings settings,
                           std::string cluster, std::string self, std::string http,
                           std::shared_ptr<spdlog::logger> logger)
    : io_(io),
      settings_(std::move(settings)),
      cluster_(std::move(cluster)),
      self_(std::move(self)),
      http_(std::move(http)),
      logger_(std::move(logger)),
      boot_(MemberBootId()),
      lease_timer_(io) {
    view_.changed_at = std::chrono::steady_clock::now();
}

void StoreBackend::send(admin::BroadcastMessage message) {
    {
        const std::lock_guard lock(mutex_);
        outbox_.push_back(std::move(message));
    }
    wake();
}

std::vector<admin::BroadcastMessage> StoreBackend::take_outbox() {
    const std::lock_guard lock(mutex_);
    return std::exchange(outbox_, {});
}

std::map<std::string, std::chrono::steady_clock::time_point> StoreBackend::heartbeats() const {
    const std::lock_guard lock(mutex_);
    return members_.heartbeats();
}

std::string StoreBackend::next_member_record() {
    const std::lock_guard lock(mutex_);
    return encode_member_record({self_, http_, boot_, ++beat_});
}

void StoreBackend::observe_members(
    const std::vector<std::pair<std::string, std::string>>& records) {
    std::vector<StoreMemberTable::Malformed> malformed;
    {
        const std::lock_guard lock(mutex_);
        malformed = members_.observe(records, std::chrono::steady_clock::now());
    }
    for (const auto& m : malformed) {
        record_malformed("member", m.name, m.detail);
    }
}

void StoreBackend::receive_broadcast(const std::string& name, std::string_view bytes) {
    admin::BroadcastMessage message;
    try {
        message = decode_store_broadcast(bytes);
    } catch (const codec::DecodeError& e) {
        record_malformed("broadcast", name, e.what());
        return;
    }
    if (message.from == self_) {
        return;  // this node's own
    }
    boost::asio::post(io_, [this, alive = std::weak_ptr<int>(alive_), m = std::move(message)] {
        if (!alive.expired() && on_message_) {
            on_message_(m);
        }
    });
}

void StoreBackend::record_malformed(const std::string& what, const std::string& name,
                                    const std::string& detail) {
    {
        const std::lock_guard lock(mutex_);
        view_.counters.records_malformed += 1;
    }
    log_event(*logger_, spdlog::level::warn, "store: a malformed record is dropped",
              {{"record", what}, {"name", name.substr(0, 128)}, {"error", detail}});
}

StoreBackend::~StoreBackend() = default;

StoreView StoreBackend::view() const {
    const std::lock_guard lock(mutex_);
    return view_;
}

std::optional<std::chrono::steady_clock::time_point> StoreBackend::lease_deadline() const {
    const std::int64_t ns = lease_end_ns_.load();
    if (ns == kNoLease) {
        return std::nullopt;
    }
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

void StoreBackend::update(const std::function<void(StoreView&)>& change) {
    {
        const std::lock_guard lock(mutex_);
        const StoreView before = view_;
        change(view_);
        if (before.holding != view_.holding || before.holder != view_.holder ||
            before.fencing_token != view_.fencing_token || before.reason != view_.reason) {
            view_.changed_at = std::chrono::steady_clock::now();
        }
        if (!view_.holding) {
            lease_end_ns_ = kNoLease;
        }
    }
    notify();
}

void StoreBackend::set_lease_end(std::optional<std::chrono::steady_clock::time_point> end) {
    lease_end_ns_ =
        end ? std::chrono::duration_cast<std::chrono::nanoseconds>(end->time_since_epoch()).count()
            : kNoLease;
}

void StoreBackend::notify() {
    boost::asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
        if (alive.expired()) {
            return;
        }
        // The role changes when the lease lapses without a renewal: wake the node up then.
        if (const auto end = lease_deadline()) {
            lease_timer_.expires_at(*end);
            lease_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
                if (!ec && !alive.expired() && changed_) {
                    changed_();
                }
            });
        } else {
            lease_timer_.cancel();
        }
        if (changed_) {
            changed_();
        }
    });
}

std::unique_ptr<StoreBackend> make_store_backend(boost::asio::io_context& io,
                                                 const ClusterConfig& config,
                                                 std::shared_ptr<spdlog::logger> logger) {
    if (config.backend.kind == BackendSettings::Kind::ZooKeeper) {
        return make_zookeeper_backend(io, config, std::move(logger));
    }
    return make_etcd_backend(io, config, std::move(logger));
}

}  // namespace conclave::node
