// SPDX-License-Identifier: Apache-2.0
// ElectorDriver: runs the pure elector core on an io_context, over a Mesh.
//
// The core's Actions are interpreted by the shared runtime (runtime/elector_runtime.hpp, the same
// code the simulator runs: timer generations, fan-out, persist before send, stop after a failed
// persist); this driver is its production environment. The effects, in order:
//   SendTo / Broadcast  -> CBOR-encode (codec/json.hpp) and Mesh::send on Channel::Elector
//   ArmTimer/CancelTimer-> one steady_timer per TimerId with a generation number: a replaced or
//                          cancelled instance that still completes never reaches the core
//   PersistState        -> <data_dir>/elector-state.json, durable (fsync + rename + fsync dir)
//                          before the next action of the batch runs; if that fails the driver
//                          stops feeding the core (failed() turns true) and nothing more is sent
//   NotifyLeadership    -> subscriber callbacks (and one log line, unless
//                          DriverOptions::log_leadership is off because the owner logs it)
//   RaiseAlarm          -> error log line + counter
// and turns mesh events into core inputs: Elector-channel frames (decoded; the decoded sender
// must equal the handshaken peer, else the frame is rejected and the connection closed) and
// peer up/down. `now` is steady-clock milliseconds since the driver was constructed. Randomness
// comes from a std::mt19937_64 seeded from DriverOptions::seed or std::random_device.
//
// Threading: one io_context, one thread; call everything from the thread that runs it.
// The driver and its mesh may be destroyed in either order: the callbacks the driver registers
// with the mesh check that it is still alive.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "conclave/drivers/elector_trace.hpp"
#include "conclave/drivers/state_file.hpp"
#include "conclave/elector/elector.hpp"
#include "conclave/net/mesh.hpp"  // also declares spdlog::logger
#include "conclave/runtime/elector_runtime.hpp"

namespace conclave::drivers {

inline constexpr std::size_t kMessageTypeCount = std::variant_size_v<elector::MessageBody>;

struct DriverOptions {
    /// Where elector-state.json lives; created if missing.
    std::filesystem::path data_dir;
    /// RNG seed (backoff of the core); std::random_device when unset.
    std::optional<std::uint64_t> seed;
    /// Where the driver logs; spdlog's default logger when unset.
    std::shared_ptr<spdlog::logger> logger{};
    /// Log every leadership change (info). An owner that logs the changes itself (Node does,
    /// with structured fields) turns this off so that each transition is logged once.
    bool log_leadership = true;
    /// Called before each write of the durable state; tests inject write failures here (ENOSPC,
    /// EIO, EROFS) by throwing StateFileError.
    std::function<void(const std::filesystem::path&, const elector::DurableState&)> store_state{};
    /// Written into every state file beside the term and vote (state_file.hpp). Its cluster and
    /// node are checked by the owner before the driver is built (identity.hpp).
    NodeIdentity identity{};
    /// The trace mode (ElectorTrace, elector_trace.hpp): append one NDJSON line per elector
    /// step to this file. Empty: off.
    std::filesystem::path trace_file{};
};

/// Counters for the /metrics layer. Monotonic. Message arrays are indexed by MessageBody index
/// (ScoutingRequest = 0 ... LeadershipCession = 7, see message_type_name()).
struct DriverCounters {
    std::array<std::uint64_t, kMessageTypeCount> messages_in{};
    std::array<std::uint64_t, kMessageTypeCount> messages_out{};  // accepted by the mesh
    std::uint64_t messages_dropped = 0;     // the mesh refused: peer down or queue overflow
    std::uint64_t timer_firings = 0;        // delivered to the core
    std::uint64_t stale_timer_firings = 0;  // replaced/cancelled instances filtered out
    std::uint64_t state_writes = 0;
    std::uint64_t state_write_failures = 0;
    std::uint64_t leadership_notifications = 0;
    std::uint64_t alarms = 0;
};

/// "ScoutingRequest", ... for an index of DriverCounters::messages_in/out.
std::string_view message_type_name(std::size_t index);

class ElectorDriver {
  public:
    using LeadershipCallback = std::function<void(const elector::LeadershipSnapshot&)>;

    /// Loads the durable state from options.data_dir (missing file: new node). Throws
    /// StateFileError for a corrupt state file and std::invalid_argument for a config that does
    /// not validate or does not match the mesh (cluster size, self).
    ElectorDriver(boost::asio::io_context& io, net::Mesh& mesh, elector::Config config,
                  DriverOptions options);
    ~ElectorDriver();
    ElectorDriver(const ElectorDriver&) = delete;
    ElectorDriver& operator=(const ElectorDriver&) = delete;

    /// Starts the elector (the mesh is started separately, before or after).
    void start();
    /// Replaces the identity written with every later state write (DriverOptions::identity).
    void set_identity(NodeIdentity identity) { options_.identity = std::move(identity); }
    /// Stops the elector: a leader sends its cession; timers are cancelled.
    void stop();

    /// Called on every leadership change, on the io_context thread.
    void subscribe(LeadershipCallback callback);
    /// Leader only: hand over to `target`. Returns the reason when refused.
    std::optional<std::string> transfer_leadership(NodeId target);
    /// Priorities (docs/design.md): `node`'s priority on this node from now on (not persisted:
    /// the config file's at the next start). Returns the reason when refused.
    std::optional<std::string> set_priority(NodeId node, std::uint32_t priority);

    /// Leader only: the next proposal LSN (Elector::issue_lsn()), for the replicated log.
    /// nullopt when not the leader or after a failed state write.
    std::optional<Lsn> issue_lsn();
    /// Membership: the active configuration's voters and version, from the log
    /// (LogDriver, on every NotifyMembership). Returns the reason when the elector refused them
    /// (Elector::voters_error; counted in its voter_set_refused).
    std::optional<std::string> set_voters(NodeSet voters, std::uint64_t version);
    /// Membership (docs/membership.md §8): the node table grew to `cluster_size` (the mesh has
    /// grown first). Returns the reason when the elector refused.
    std::optional<std::string> grow_table(std::size_t cluster_size);

    const elector::Elector& elector() const { return runtime_.elector(); }
    /// The last snapshot delivered to subscribers: what the application may act on. After a
    /// failed state write it is Stopped (the core's in-memory state may have moved further in
    /// the failed batch; none of that took effect).
    const elector::LeadershipSnapshot& snapshot() const { return snapshot_; }
    const DriverCounters& counters() const { return counters_; }
    /// True after a state write failed: the node no longer takes part (restart it).
    bool failed() const { return runtime_.failed(); }
    /// The driver's clock, as given to the core.
    Millis now() const;
    /// The leader lease (docs/design.md) on std::chrono::steady_clock: the end of this node's
    /// current lease; nullopt when it does not lead, no quorum has acknowledged a heartbeat round
    /// of its leadership yet, or a state write failed. Updated after every elector input, before
    /// any of its actions (a transfer's cession leaves after the lease ended). Thread-safe.
    std::optional<std::chrono::steady_clock::time_point> lease_deadline() const;
    /// True iff this node holds a lease now (lease_deadline() is in the future): what an
    /// application checks right before it acts as the leader. Thread-safe.
    bool lease_valid_now() const;

  private:
    /// The runtime's production environment: Asio timers, the mesh, the state file.
    struct Env {
        ElectorDriver* driver = nullptr;
        static constexpr bool kPlantedBugs = false;  // planted bugs cannot be enabled here
        Millis now() const { return driver->now(); }
        void send(std::span<const NodeId> to, const elector::Message& message);
        void arm(elector::TimerId timer, Millis delay, runtime::TimerGeneration generation);
        void cancel(elector::TimerId timer);
        bool persist(const elector::DurableState& state);
        void notify(const elector::LeadershipSnapshot& snapshot) { driver->notify(snapshot); }
        void alarm(const elector::RaiseAlarm& alarm);
        void failed(const elector::DurableState& state);
        /// After each input, before its actions: publishes the elector's lease.
        void before_actions(const elector::Actions&) { driver->publish_lease(); }
        /// The same moment, told the input: the trace mode's line.
        void before_step(const runtime::StepInput& input, const elector::Actions& actions) {
            driver->trace_step(input, actions);
        }
    };

    std::optional<net::FrameRejection> on_frame(NodeId from, std::span<const std::uint8_t> payload);
    void on_peer(NodeId peer, bool up, LinkLoss loss);
    /// Gives the core the largest smoothed round trip among the up peers (Mesh::round_trip), so
    /// that its ranked backoff's slot follows the links; called before every input.
    void refresh_round_trip();
    void send(NodeId to, const elector::Message& message, const std::vector<std::uint8_t>& bytes);
    void sync_timer_counters();
    void trace_step(const runtime::StepInput& input, const elector::Actions& actions);
    void trace_failed(const std::optional<std::string>& error);
    void notify(const elector::LeadershipSnapshot& snapshot);
    /// lease_deadline_ from the elector's lease (none after a failed state write).
    void publish_lease();
    std::string log_prefix() const;
    spdlog::logger& log() const { return *options_.logger; }

    boost::asio::io_context& io_;
    net::Mesh& mesh_;
    DriverOptions options_;
    std::chrono::steady_clock::time_point epoch_;
    std::mt19937_64 rng_;
    Env env_{this};
    runtime::ElectorRuntime<Env> runtime_;
    std::array<std::unique_ptr<boost::asio::steady_timer>, elector::kTimerCount> timers_;
    std::uint64_t aborted_waits_ = 0;  // timer waits cancelled (always of a stale instance)
    std::vector<LeadershipCallback> subscribers_;
    std::unique_ptr<ElectorTrace> trace_;  // the trace mode; null when off
    elector::LeadershipSnapshot snapshot_;
    /// lease_deadline() as steady_clock nanoseconds since its epoch; kNoLease when none.
    static constexpr std::int64_t kNoLease = 0;
    std::atomic<std::int64_t> lease_deadline_ns_{kNoLease};
    DriverCounters counters_;
    /// Callbacks registered with the mesh and the timers hold a weak_ptr to this: a callback
    /// that outlives the driver sees it expired and does nothing.
    std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace conclave::drivers
