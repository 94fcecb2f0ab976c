// SPDX-License-Identifier: Apache-2.0
// Leadership from a coordination store (etcd v3, ZooKeeper) instead of the built-in elector: the
// seam the Node composes when its config names a store backend (node/README.md, "Leadership from
// a store"; docs/design.md, "The lease on a store").
//
// A backend campaigns for one key (etcd: put-if-absent under a lease kept alive; ZooKeeper: the
// lowest ephemeral sequential znode of an election path), reports who holds it with the store's
// own monotonic counter as the fencing token (etcd: the key's create revision; ZooKeeper: the
// znode's czxid), and computes the holder's lease on this node's steady clock from the moment it
// SENT the renewal the store confirmed:
//
//     lease end = send time + ttl * (1000 - drift_permille) / (1000 + drift_permille)
//
// The store cannot let the key go (and grant it to another) before `ttl` of its own clock has
// passed since it received that renewal, which is after it was sent; the factor covers the two
// clocks' rates differing by at most drift_permille. The renewal's time in flight is thereby
// taken off the lease, never added to it.
//
// Threading: start(), resign(), stop() and view() are called on the io_context thread; the
// backend calls `changed` there. lease_deadline() may be read from any thread.
#pragma once

#include <spdlog/logger.h>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "conclave/elector/actions.hpp"
#include "conclave/node/cluster_config.hpp"

namespace conclave::node {

/// The store session as this node sees it.
enum class StoreSession : std::uint8_t {
    Connecting,   // no answer from the store yet (or since a reconnection started)
    Connected,    // the last request was answered
    Unreachable,  // the last request failed: the store is down or cut off
    Expired,      // the store ended this node's lease / session (it campaigns anew)
    Stopped,
};
std::string_view to_string(StoreSession s);

/// Counters of a store backend (monotonic; mirrored into the metrics).
struct StoreCounters {
    std::uint64_t requests_failed = 0;  // requests that got no usable answer
    std::uint64_t renewals = 0;         // renewals the store confirmed
    std::uint64_t sessions_lost = 0;    // leases / sessions the store ended
    std::uint64_t campaigns_won = 0;
    std::uint64_t releases = 0;  // keys released (step-down, stop)
};

/// What a backend knows now.
struct StoreView {
    bool holding = false;               // this node holds the key (lease may have lapsed)
    std::optional<std::string> holder;  // the holder's node id, when known
    std::uint64_t fencing_token = 0;    // the holder's token; 0 when none is known
    elector::Reason reason = elector::Reason::Started;
    std::chrono::steady_clock::time_point changed_at{};
    StoreSession session = StoreSession::Connecting;
    std::string detail;  // the last error, or empty
    /// When the store last answered a request (nullopt: never).
    std::optional<std::chrono::steady_clock::time_point> last_answer;
    StoreCounters counters;
};

/// The holder's lease end from the send time of a renewal the store confirmed.
std::chrono::steady_clock::time_point store_lease_end(std::chrono::steady_clock::time_point sent,
                                                      std::chrono::milliseconds ttl,
                                                      std::uint32_t drift_permille);

class StoreBackend {
  public:
    using Changed = std::function<void()>;
    StoreBackend(boost::asio::io_context& io, BackendSettings settings, std::string cluster,
                 std::string self, std::shared_ptr<spdlog::logger> logger);
    virtual ~StoreBackend();
    StoreBackend(const StoreBackend&) = delete;
    StoreBackend& operator=(const StoreBackend&) = delete;

    /// Starts campaigning; `changed` runs on the io thread after every change of view() and when
    /// the lease ends.
    virtual void start(Changed changed) = 0;
    /// Releases the key at once if held (etcd: revokes the lease; ZooKeeper: deletes the znode)
    /// and stays out of the campaign for one ttl, so that another candidate takes it. nullopt
    /// when released; an error when this node does not hold it.
    virtual std::optional<std::string> resign() = 0;
    /// Releases the key and stops; `done` runs on the io thread once released (or given up).
    virtual void stop(std::function<void()> done) = 0;

    StoreView view() const;
    /// This node's lease end while it holds the key; nullopt otherwise. Any thread.
    std::optional<std::chrono::steady_clock::time_point> lease_deadline() const;
    const BackendSettings& settings() const { return settings_; }

  protected:
    /// Under the backends' own sequencing: update the view (and the lease), then notify.
    void update(const std::function<void(StoreView&)>& change);
    void set_lease_end(std::optional<std::chrono::steady_clock::time_point> end);
    /// Posts `changed` to the io thread, and arms the lease-end notification.
    void notify();
    std::chrono::milliseconds ttl() const { return std::chrono::milliseconds(settings_.ttl_ms); }

    boost::asio::io_context& io_;
    const BackendSettings settings_;
    const std::string cluster_;
    const std::string self_;
    std::shared_ptr<spdlog::logger> logger_;
    Changed changed_;
    /// Expires with the backend: work posted to the io_context checks it first.
    std::shared_ptr<int> alive_ = std::make_shared<int>(0);

  private:
    mutable std::mutex mutex_;  // guards view_
    StoreView view_;
    static constexpr std::int64_t kNoLease = INT64_MIN;
    std::atomic<std::int64_t> lease_end_ns_{kNoLease};
    boost::asio::steady_timer lease_timer_;
};

/// The backend named by `config.backend` (a store kind).
std::unique_ptr<StoreBackend> make_store_backend(boost::asio::io_context& io,
                                                 const ClusterConfig& config,
                                                 std::shared_ptr<spdlog::logger> logger);
std::unique_ptr<StoreBackend> make_etcd_backend(boost::asio::io_context& io,
                                                const ClusterConfig& config,
                                                std::shared_ptr<spdlog::logger> logger);
std::unique_ptr<StoreBackend> make_zookeeper_backend(boost::asio::io_context& io,
                                                     const ClusterConfig& config,
                                                     std::shared_ptr<spdlog::logger> logger);

}  // namespace conclave::node
