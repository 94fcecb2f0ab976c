// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/store_backend.hpp"

#include <boost/asio/post.hpp>

namespace conclave::node {

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
                           std::string cluster, std::string self,
                           std::shared_ptr<spdlog::logger> logger)
    : io_(io),
      settings_(std::move(settings)),
      cluster_(std::move(cluster)),
      self_(std::move(self)),
      logger_(std::move(logger)),
      lease_timer_(io) {
    view_.changed_at = std::chrono::steady_clock::now();
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
