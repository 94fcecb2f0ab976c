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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/admin/broadcast.hpp"
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
    std::uint64_t releases = 0;           // keys released (step-down, stop)
    std::uint64_t records_malformed = 0;  // member / broadcast records dropped (each version once)
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

/// A member's record in the store (docs/design.md, "Liveness and broadcast on a store"), JSON:
///   {"id": "<node id>", "http": "<host:port>", "boot": "<16 hex>", "beat": N}
/// `beat` counts from 1 and grows with every rewrite; the reader never reads a time in it.
struct StoreMemberRecord {
    std::string id;
    std::string http;
    std::string boot;
    std::uint64_t beat = 0;
};
std::string encode_member_record(const StoreMemberRecord& record);
/// Validates one record read from the store (bounded, no unknown field); throws
/// codec::DecodeError naming the field.
StoreMemberRecord decode_member_record(std::string_view text);

/// Largest record read from the store (a member record is ~150 bytes; a broadcast record holds a
/// payload of at most kMaxPayloadBytes of JSON, CBOR-encoded).
inline constexpr std::size_t kStoreRecordLimit = 48 * 1024;

/// What this node saw of each member's record, on its own steady clock only: a member's last
/// heartbeat is when THIS node first saw its record carry a new (boot, beat). Pure.
class StoreMemberTable {
  public:
    using TimePoint = std::chrono::steady_clock::time_point;
    struct Malformed {
        std::string name;
        std::string detail;
    };
    /// One full read of the member records, as (name in the store, record text). A record that
    /// does not decode, or whose id is not its name, is dropped; each distinct malformed text is
    /// returned (to count and log) once. A member whose record is gone keeps its last heartbeat.
    std::vector<Malformed> observe(const std::vector<std::pair<std::string, std::string>>& records,
                                   TimePoint now);
    /// Each member's last heartbeat as this node saw it.
    std::map<std::string, TimePoint> heartbeats() const;

  private:
    struct Seen {
        std::string boot;
        std::uint64_t beat = 0;
        TimePoint changed{};
    };
    std::map<std::string, Seen> seen_;
    std::set<std::string> malformed_;  // "<name>\n<text>" already reported (bounded)
};

/// Decodes a broadcast record read from the store (the mesh's CBOR form, broadcast.hpp); throws
/// codec::DecodeError when it is not a valid message.
admin::BroadcastMessage decode_store_broadcast(std::string_view bytes);

class StoreBackend {
  public:
    using Changed = std::function<void()>;
    StoreBackend(boost::asio::io_context& io, BackendSettings settings, std::string cluster,
                 std::string self, std::string http, std::shared_ptr<spdlog::logger> logger);
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

    /// Where received broadcasts go (on the io thread); set before start().
    void on_message(std::function<void(admin::BroadcastMessage)> received) {
        on_message_ = std::move(received);
    }
    /// Queues a broadcast for the store (any thread); the backend writes it on its next step.
    void send(admin::BroadcastMessage message);
    /// Each member's last heartbeat (its record's last change) as this node saw it. Any thread.
    std::map<std::string, std::chrono::steady_clock::time_point> heartbeats() const;
    /// The liveness window: the store's TTL (a member not seen beating for that long is not live).
    std::chrono::milliseconds liveness_window() const { return ttl(); }

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
    /// A member record rewrite is due every quarter of the liveness window.
    std::chrono::milliseconds beat_period() const { return ttl() / 4; }
    /// This node's member record with the next beat.
    std::string next_member_record();
    /// One full read of the member records (counts and logs the malformed ones).
    void observe_members(const std::vector<std::pair<std::string, std::string>>& records);
    /// Decodes one broadcast record read from the store and delivers it on the io thread, unless
    /// it is this node's own; a malformed one is dropped, counted and logged.
    void receive_broadcast(const std::string& name, std::string_view bytes);
    std::vector<admin::BroadcastMessage> take_outbox();
    /// Wakes the backend's loop (a broadcast is queued).
    virtual void wake() = 0;
    void record_malformed(const std::string& what, const std::string& name,
                          const std::string& detail);

    boost::asio::io_context& io_;
    const BackendSettings settings_;
    const std::string cluster_;
    const std::string self_;
    const std::string http_;  // this node's admin endpoint, in its member record
    std::shared_ptr<spdlog::logger> logger_;
    Changed changed_;
    /// Expires with the backend: work posted to the io_context checks it first.
    std::shared_ptr<int> alive_ = std::make_shared<int>(0);

  private:
    mutable std::mutex mutex_;  // guards view_, members_, outbox_
    StoreView view_;
    StoreMemberTable members_;
    std::vector<admin::BroadcastMessage> outbox_;
    std::function<void(admin::BroadcastMessage)> on_message_;
    std::uint64_t beat_ = 0;  // this node's last beat
    std::string boot_;        // this backend's boot id (16 hex digits)
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
