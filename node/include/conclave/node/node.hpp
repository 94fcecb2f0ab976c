// SPDX-License-Identifier: Apache-2.0
// Node: one Conclave cluster member in a process — the mesh, the elector driver, the metrics and
// (optionally) the HTTP admin server, all on one io_context. This is the embedding API; the
// `conclaved` daemon is a thin main() around it.
//
//   conclave::node::Node node(config);              // config from load_cluster_config()
//   node.subscribe([](const conclave::node::Leadership& l) { ... });
//   if (auto error = node.start()) { ... }          // binds the ports
//   node.run();                                     // until stop() completes
//
// Leadership is reported with the config's string ids. subscribe() is level-triggered: the
// callback gets the current snapshot at once, then every change in order ("no leader" included).
// Leader-only work must carry `fencing_token` to downstream resources guarded by a FencingGate.
//
// Threading: everything (callbacks included) runs on the io_context thread. While Node::run()
// drives the io_context on some thread, current(), subscribe(), propose(), add_learner(),
// promote(), remove_member(), transfer_leadership(), step_down(), broadcast() and stop() may
// also be called from any other thread: current() then returns the last snapshot the io thread
// published; subscribe() (both kinds), propose(), the membership changes and stop() are posted
// to the io thread (they return at once; their callbacks run there); transfer_leadership(),
// step_down() and broadcast() are posted and wait for the answer (at most 5 s). Without Node::run()
// (an io_context driven by the caller, e.g. run_one_for in tests) call every method from the thread
// that drives it. Everything else (status(), members(), config(), metrics_text(), ...) is io-thread
// only. One more thread, the reader, builds GET /metadata pages from copies of their entries
// (AdminSource::offload) and posts each answer back to the io thread.
#pragma once

#include <spdlog/logger.h>
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/admin/admin_routes.hpp"
#include "conclave/admin/membership.hpp"
#include "conclave/admin/metadata.hpp"
#include "conclave/admin/metrics.hpp"
#include "conclave/drivers/state_file.hpp"
#include "conclave/elector/fencing.hpp"
#include "conclave/net/handshake.hpp"
#include "conclave/node/broadcast.hpp"
#include "conclave/node/cluster_config.hpp"
#include "conclave/node/identity.hpp"
#include "conclave/replication/actions.hpp"

namespace conclave::net {
class Mesh;
}  // namespace conclave::net

namespace conclave::drivers {
class ElectorDriver;
class LogDriver;
}  // namespace conclave::drivers

namespace conclave::admin {
class LeadershipMetrics;
}  // namespace conclave::admin

namespace conclave::node {

using conclave::elector::FencingGate;

class StoreBackend;
struct StoredTable;

/// What the application may act on, with string node ids.
struct Leadership {
    elector::Role role = elector::Role::Stopped;
    std::uint64_t term = 0;
    std::optional<std::string> leader;  // nullopt: no leader known
    std::uint64_t fencing_token = 0;    // 0 when no leader is known
    elector::Reason reason = elector::Reason::Stopped;
    /// The leader lease (docs/design.md): the end of this node's lease on steady_clock, read when
    /// the value is made (current(), or a subscriber's notification); nullopt when it does not
    /// lead or no quorum has acknowledged a heartbeat round of its leadership yet.
    std::optional<std::chrono::steady_clock::time_point> lease_deadline;
    bool is_leader() const { return role == elector::Role::Leader; }
    /// True iff this node leads and its lease has not ended: check it right before each action
    /// (a paused process finds it false when it resumes, before the elector has run again).
    bool valid_now() const {
        return is_leader() && lease_deadline && std::chrono::steady_clock::now() < *lease_deadline;
    }
    /// A leadership change: role, term, leader, token and reason (lease renewals are not).
    bool operator==(const Leadership& o) const {
        return role == o.role && term == o.term && leader == o.leader &&
               fencing_token == o.fencing_token && reason == o.reason;
    }
};

/// Planted bugs of the read path, for tests only (NodeOptions::planted_read_bug; conclaved's
/// config has no field for it): the tests of linearizable reads must fail with each.
enum class PlantedReadBug : std::uint8_t {
    None,
    LocalReads,     // every node answers a linearizable read from its own state (followers too)
    SkipSyncPoint,  // a leader answers before its sync point committed (its log PASSIVE)
    SkipReadIndex,  // an active leader answers at once, its lease valid or not (no quorum round)
};

struct NodeOptions {
    /// Serve /status, /metrics, ... on the config's `http` endpoint.
    bool admin_http = true;
    /// Seeds the elector's and the mesh's RNGs (tests); random when unset.
    std::optional<std::uint64_t> seed;
    /// Logger to use; by default make_logger(node id, config.log).
    std::shared_ptr<spdlog::logger> logger;
    /// Makes the metadata log's storage from (<data_dir>/log, metadata.fsync), not yet recovered;
    /// a FileStorage when unset. Tests inject faulty storage here (tests/node/metadata_test.cpp).
    std::function<std::shared_ptr<replication::LogStorage>(const std::filesystem::path&,
                                                           replication::FsyncPolicy)>
        log_storage;
    /// Called before each write of the elector's durable state; tests inject write failures
    /// here by throwing drivers::StateFileError.
    std::function<void(const std::filesystem::path&, const elector::DurableState&)>
        store_elector_state;
    /// Tests only: a planted bug of the read path (PlantedReadBug).
    PlantedReadBug planted_read_bug = PlantedReadBug::None;
    /// conclaved --trace-elector FILE: the elector's trace mode (drivers/elector_trace.hpp).
    std::filesystem::path elector_trace{};
};

class Node {
  public:
    using LeadershipCallback = std::function<void(const Leadership&)>;
    using BroadcastCallback = std::function<void(const admin::BroadcastMessage&)>;

    /// Owns its io_context (drive it with run()).
    explicit Node(ClusterConfig config, NodeOptions options = {});
    /// Borrows the caller's io_context, which must outlive the Node.
    Node(boost::asio::io_context& io, ClusterConfig config, NodeOptions options = {});
    ~Node();
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    /// Binds the mesh and admin ports and starts the elector. Returns an error message (e.g.
    /// "127.0.0.1:7101: address already in use") when it could not start; nothing is left running.
    std::optional<std::string> start();

    /// Graceful stop: a leader hands over first (transfer to an up peer and wait until a new
    /// leader is known or the election timeout passes; with no peer up it cedes), then the elector
    /// stops, queued frames get a moment to leave, and the ports are closed. `done` runs when it
    /// is over. Idempotent.
    void stop(std::function<void()> done = {});
    bool stopped() const { return runtime_.stopped; }

    /// Runs the io_context until stop() completes (owned io_context), or like io.run().
    void run();

    void subscribe(LeadershipCallback callback);
    Leadership current() const;
    /// Leader only. nullopt when accepted (the outcome shows in the next snapshots).
    std::optional<std::string> transfer_leadership(const std::string& node_id);
    /// Leader only: hands over to an up peer. nullopt when accepted.
    std::optional<std::string> step_down();
    /// Priorities (docs/design.md): `node_id`'s priority on this node at once (the operator sets
    /// it on every node: conclavectl set-priority); with the metadata log, the leader also writes
    /// it under kPriorityKeyPrefix, which every node applies when it commits and again at each
    /// start, so that it outlives restarts. nullopt when accepted.
    std::optional<std::string> set_priority(const std::string& node_id, std::uint32_t priority);
    /// The metadata keys that carry priorities: kPriorityKeyPrefix + node id, value N.
    static constexpr std::string_view kPriorityKeyPrefix = "conclave/priority/";

    // ---- Liveness and advisory broadcast (broadcast.hpp, docs/design.md) -------------------
    /// Sends an advisory message to every live member (up on the mesh and heard from within the
    /// liveness window; with a store backend, written to the store for every member to read),
    /// this node excluded; each receiver delivers it at most once. The result names the members
    /// it was queued for and those it was not. Refused for a bad topic or payload
    /// (check_broadcast), or while the node is not running. May be called from any thread (posted,
    /// waits at most 5 s).
    admin::BroadcastResult broadcast(std::string topic, nlohmann::json payload);
    /// Every broadcast this node receives from now on, once each, on the io_context thread.
    void subscribe(BroadcastCallback callback);
    /// How long after a member was last heard from it still counts as live: the elector's
    /// inactivity interval (heartbeat_period x miss_count), after which a follower presumes its
    /// leader gone. Every node sends a liveness beat to each peer every beat_period().
    std::chrono::milliseconds liveness_window() const;
    /// A third of the liveness window, at least the heartbeat period.
    std::chrono::milliseconds beat_period() const;

    // ---- Replicated metadata log (config "metadata"; see metadata.hpp, node/README.md) --------
    /// Proposes an entry (`value`: JSON text or opaque bytes). `done` runs exactly once on the
    /// io_context thread: Committed with the LSN once a quorum stored it, or an error (not
    /// leader, no leader, not active, timed out / leadership lost = outcome unknown, stopped).
    void propose(std::string key, std::string value, admin::MetadataProposeCallback done);
    /// The same, appended only if `condition` holds (a conditional or fenced write): else
    /// ConditionFailed with the key's current LSN and the leader's term, nothing appended.
    void propose(std::string key, std::string value, admin::MetadataCondition condition,
                 admin::MetadataProposeCallback done);
    /// The key as this node applied it (a serializable read, io thread only): its last write
    /// (none when absent) and, in `outcome.lsn`, the commit LSN the answer reflects.
    admin::MetadataReadResult get(std::string_view key) const;
    /// A read of a key or a prefix at `query.consistency` (ReadConsistency); `done` runs once on
    /// the io_context thread. Linearizable reads wait (at most metadata.propose_timeout_ms) for
    /// the leader's sync point or a quorum round; other nodes answer NotLeader (with the leader).
    void read(admin::MetadataQuery query, admin::MetadataReadCallback done);
    /// Level-triggered: the callback gets every entry committed so far, in LSN order, then each
    /// new one (sync points of new leaders included: replication::is_sync_point; skip them).
    /// After a restart the committed prefix is replayed from the start.
    void subscribe_committed(admin::CommittedCallback callback);
    /// The same for the entries whose key starts with `prefix` only (sync points left out).
    void subscribe_committed(std::string prefix, admin::CommittedCallback callback);
    /// Committed entries after `after` (exclusive), at most `max_entries`.
    std::vector<replication::Entry> committed_after(Lsn after, std::size_t max_entries) const;
    /// The commit point (kNoLsn without a metadata log).
    Lsn commit_lsn() const;
    bool metadata_enabled() const { return cores_.log_driver != nullptr; }
    /// The log driver (counters, recovery report); nullptr when disabled.
    const drivers::LogDriver* log_driver() const { return cores_.log_driver.get(); }

    // ---- Membership (membership.hpp, docs/membership.md) ----------------------------
    // Leader only. Each builds the next configuration from the active one (the implicit one,
    // every node of the table a voter at version 0, while no configuration entry committed) and
    // proposes it; `done` runs exactly once on the io_context thread: Committed with the new
    // version, or an error: NotLeader (with the leader) / NoLeader / NotActive; InvalidEntry for
    // an id outside the config's node table ("unknown node id ..."); Refused with the reason (a
    // change pending, not a single change, the op does not fit the member, promote lag);
    // TimedOut / LeadershipLost (outcome unknown); Stopped; Disabled.
    /// Adds a node of the table as a learner (it receives the log, never votes nor stands).
    void add_learner(std::string id, admin::MembershipCallback done);
    /// Adds a node as a learner under a new id, with its peer and http addresses ("host:port"):
    /// the configuration carries the node table, which grows on every node when it commits
    /// (docs/membership.md §8). An id already in the table is added back with its known
    /// addresses (the ones given must match). This is what a seed does for `conclaved --join`.
    void add_learner(replication::Member member, admin::MembershipCallback done);
    /// Promotes a learner to voter, only once it holds the leader's committed prefix and is
    /// within metadata.promote_lag_entries of the leader's last entry (R7).
    void promote(std::string id, admin::MembershipCallback done);
    /// Removes a voter or a learner (the leader itself included: it steps down once it commits).
    void remove_member(std::string id, admin::MembershipCallback done);
    /// The active configuration; on the leader with each member's catch-up state.
    admin::MembersView members() const;

    const ClusterConfig& config() const { return config_; }
    boost::asio::io_context& io() { return *runtime_.io; }
    /// Bound ports (after start()).
    std::uint16_t peer_port() const;
    std::uint16_t http_port() const;
    spdlog::logger& logger() { return *logger_; }

    /// The admin view (what /status, /metrics and /healthz serve).
    admin::StatusReport status();
    std::string metrics_text();
    admin::HealthReport health();
    /// Why a storage failure (metadata log, elector state file) took the node out of service, if
    /// one did: the node then steps down (handing over when it can) and stops; conclaved exits 1.
    const std::optional<std::string>& storage_failure() const { return runtime_.storage_failure; }
    /// Why a peer refused this node as state_lost (it knows this node by an earlier incarnation:
    /// the data directory was lost or replaced), if one did: the node stops without having taken
    /// part; conclaved exits 3.
    const std::optional<std::string>& state_refused() const { return peers_.state_refused; }
    /// The node's identity (cluster, id, incarnation), read or created at construction.
    const drivers::NodeIdentity& identity() const { return peers_.identity; }
    /// The AdminSource the HTTP routes use (for embedding in another server).
    admin::AdminSource& admin_source();

  private:
    class Admin;
    /// True when another thread runs the io_context through run(): post instead of acting.
    bool must_post() const;
    /// Runs `fn` on the io thread and waits for its answer (at most kCallOnIoTimeout).
    std::optional<std::string> call_on_io(std::function<std::optional<std::string>()> fn);
    static constexpr std::chrono::seconds kCallOnIoTimeout{5};
    Node(std::unique_ptr<boost::asio::io_context> owned_io, boost::asio::io_context* io,
         ClusterConfig config, NodeOptions options);
    Leadership to_leadership(const elector::LeadershipSnapshot& s) const;
    void on_snapshot(const elector::LeadershipSnapshot& snapshot);
    /// A committed priority entry (kPriorityKeyPrefix): applied to the elector, or refused with a
    /// warning (unknown node, not an integer in range, every node at 0).
    void apply_committed_priority(const replication::Entry& e);
    void finish_stop();
    void fail_stop(std::string why);
    void register_metrics();
    void register_security_metrics();
    // Steps of the constructor: the mesh (its options from the config, the security material
    // and the node's callbacks), the removed nodes and voters of a stored table, every metric.
    void create_mesh();
    std::function<void(const std::filesystem::path&, const elector::DurableState&)>
    announcing_store_hook();
    void restore_stored_configuration(const StoredTable& stored);
    void register_all_metrics();
    void register_dial_request_metrics();
    std::optional<NodeId> pick_successor() const;
    // metadata.cpp
    void create_log_driver();
    void register_metadata_metrics();
    /// A proposal's answer: `status`, the known leader (for redirects), the detail text.
    admin::MetadataProposeResult proposal_result(admin::MetadataProposeStatus status,
                                                 Lsn lsn) const;
    /// propose() and the membership changes (`config`: a configuration entry, `key` unused).
    void propose_entry(std::string key, std::string value, bool config,
                       const admin::MetadataCondition& condition,
                       admin::MetadataProposeCallback done);
    // metadata_keys.cpp: reads of the key state.
    struct ReadWaiter;
    /// Whether a linearizable read that arrived at `arrived` in `term` may be served now (true),
    /// must wait (false), or is answered by `refusal`.
    bool read_ready(std::chrono::steady_clock::time_point arrived, std::uint64_t term,
                    std::optional<admin::MetadataProposeResult>& refusal) const;
    /// Serves (or refuses) the waiting reads that can be answered now; re-arms the timer.
    void poll_reads();
    void serve_read(const admin::MetadataQuery& query,
                    const admin::MetadataReadCallback& done) const;
    // membership.cpp
    void change_membership(admin::MembershipOp op, replication::Member member,
                           admin::MembershipCallback done);
    // Node table at run time (docs/membership.md §8; node_table.hpp).
    /// Inside the log's batch, for every configuration that becomes active: when its table is
    /// longer, it names an id this node kept only by index (added back), or this node's own
    /// membership changed, store the table (members.json), then grow or update the mesh, the
    /// elector and config_.nodes.
    void follow_table(const replication::NotifyMembership& m);
    /// Connections follow the active configuration: a removed node is retired from the mesh once
    /// the log stops replicating to it (R8), a node added back is readmitted.
    void follow_members();
    /// Seed side of `conclaved --join`: add the joiner as a learner (leader), redirect to the
    /// leader, or refuse.
    void answer_join(std::string id, net::JoinRequest request,
                     std::function<void(net::JoinAnswer)> respond);
    /// The active configuration as an entry's value would hold it (table included).
    replication::Configuration active_configuration() const;
    void register_membership_metrics();
    std::optional<admin::MembershipState> membership_state() const;
    // store_node.cpp: leadership from a coordination store (config "backend"; store_backend.hpp).
    // The mesh and the built-in elector are then created but never started.
    void create_store();
    std::optional<std::string> start_store();
    void on_store_change();
    Leadership store_leadership() const;
    admin::StatusReport store_status();
    admin::HealthReport store_health();
    std::optional<std::string> store_step_down();
    void register_store_metrics();
    /// Tells the subscribers about `l` when it differs from the last one (both sources).
    void publish(const Leadership& l);
    // broadcast_node.cpp
    void create_broadcast();
    void start_beats();
    void send_beats();
    /// A decoded broadcast from a peer: delivered to the subscribers unless already seen.
    void on_broadcast_message(admin::BroadcastMessage message);
    admin::BroadcastResult broadcast_on_io(std::string topic, nlohmann::json payload);
    /// A member's liveness on this node: (last_heartbeat_ms, live); nullopt when never heard.
    std::pair<std::optional<std::int64_t>, bool> liveness_of(
        NodeId n, std::chrono::steady_clock::time_point now) const;
    void add_liveness(admin::MembersView& view) const;
    void register_broadcast_metrics();
    // peer_metrics.cpp
    void register_peer_metrics();
    std::optional<admin::LogStatus> log_status() const;

    // Peers' view of this node's incarnation (node.cpp): admission, refusals, quarantine.
    std::optional<std::string> admit_peer(NodeId peer, const std::string& incarnation,
                                          bool repaired);
    void refused_as_lost(NodeId peer, const std::string& detail);
    /// Why the node looks removed: a majority of the other nodes of its table do not know it.
    std::optional<std::string> removed_by_peers() const;
    void refused_as_regressed(NodeId peer, const std::string& detail);
    /// Records a rise of a peer incarnation's announced durable term (peers.json).
    void remember_peer_term(NodeId peer, const std::string& incarnation, std::uint64_t term);
    /// Why the node looks restored from an older copy: a peer refuses it (state_regressed).
    std::optional<std::string> regressed_report() const;
    void on_admitted_by(NodeId peer);
    void maybe_end_quarantine(const std::string& last);
    void note_log_created();
    /// Writes the vote record with the identity and hands it to the elector driver (throws
    /// drivers::StateFileError).
    void store_identity();

    // ---- The node's state, in parts. Declared in this order on purpose: the io_context first
    // (destroyed last, after every timer), the cores before what refers to them.

    /// How the node runs: its io_context, the threads that call in, start and stop.
    struct Runtime {
        Runtime(std::unique_ptr<boost::asio::io_context> owned, boost::asio::io_context* borrowed)
            : owned_io(std::move(owned)),
              io(owned_io ? owned_io.get() : borrowed),
              stop_timer(*io) {}
        std::unique_ptr<boost::asio::io_context> owned_io;
        boost::asio::io_context* io;
        boost::asio::steady_timer stop_timer;
        bool started = false;
        bool stopping = false;
        bool handing_over = false;
        bool stopped = false;
        std::vector<std::function<void()>> stop_waiters;
        /// A storage failure takes the node out of service: step down (hand over when it can),
        /// stop, and conclaved exits with status 1.
        std::optional<std::string> storage_failure;
        std::string storage_failure_since;  // RFC 3339 UTC, set with storage_failure
        std::atomic<int> run_threads{0};    // threads inside run()
        /// Builds GET /metadata pages off the io thread (AdminSource::offload); joined first in
        /// the destructor. Started at the first use.
        std::unique_ptr<boost::asio::thread_pool> reader;
        /// Expires with the Node: work posted to the io_context checks it first.
        std::shared_ptr<int> alive = std::make_shared<int>(0);
    };

    /// What decides leadership and carries the metadata: the mesh, the elector driver, the
    /// metadata log (or a coordination store), and the linearizable reads waiting on them.
    struct Cores {
        std::unique_ptr<net::Mesh> mesh;
        std::unique_ptr<drivers::ElectorDriver> driver;
        std::unique_ptr<drivers::LogDriver>
            log_driver;                       // nullptr when the metadata log is disabled
        std::unique_ptr<StoreBackend> store;  // nullptr with the built-in elector
        std::vector<std::shared_ptr<ReadWaiter>> read_waiters;
        std::unique_ptr<boost::asio::steady_timer> read_timer;
    };

    /// The admin surface (conclave::admin): the metrics, the AdminSource the routes use, the
    /// HTTP server (nullptr without NodeOptions::admin_http or before start()).
    struct AdminSurface {
        admin::MetricsRegistry metrics;
        std::unique_ptr<admin::LeadershipMetrics> leadership_metrics;
        admin::Histogram* commit_latency = nullptr;  // conclave_metadata_commit_latency_seconds
        // conclave_membership_changes_total{op}, conclave_config_refusals_total{reason}
        std::array<admin::Counter*, admin::kMembershipOpCount> membership_changes{};
        std::array<admin::Counter*, admin::kConfigRefusalCount> config_refusals{};
        std::unique_ptr<Admin> source;
        std::unique_ptr<admin::AdminServer> server;
        /// Bearer token of the admin API (security.admin_token_file), read at construction.
        std::optional<std::string> token;
    };

    /// This node's incarnation and what its peers say of it (identity.hpp, node_table.hpp).
    struct Peers {
        explicit Peers(boost::asio::io_context& io) : members_timer(io) {}
        drivers::NodeIdentity identity;  // checked at construction (identity.hpp)
        std::unique_ptr<PeerIncarnations> incarnations;
        /// Why a peer refused this node as state_lost, if one did.
        std::optional<std::string> state_refused;
        /// Peers that answered this node's dial with unknown_node (their tables do not hold it).
        std::set<NodeId> unknown_to;
        /// Peers that refused this node as state_regressed, with their detail (cleared when the
        /// peer admits it again).
        std::map<NodeId, std::string> regressed_by;
        std::uint64_t announced_term = 0;  // the last durable term announced to the up peers
        NodeSet admitted_by;  // peers that admitted this node's new incarnation (quarantine)
        /// members.json marks this node removed (not a member of its active configuration).
        bool self_removed_stored = false;
        boost::asio::steady_timer members_timer;  // follow_members() while a removal is pending
    };

    /// Leadership as told to the application: subscribers, the last snapshot told, and the
    /// snapshot current() returns to other threads.
    struct Publication {
        std::vector<LeadershipCallback> subscribers;
        std::optional<Leadership> last;
        mutable std::mutex mutex;  // guards snapshot
        Leadership snapshot;       // for current() from other threads
    };

    /// Liveness beats and advisory broadcasts (broadcast_node.cpp).
    struct Broadcasts {
        std::string boot_id;    // 16 hex digits, drawn at construction
        std::uint64_t seq = 0;  // the last broadcast's sequence number
        BroadcastDedupe dedupe;
        std::vector<BroadcastCallback> subscribers;
        std::unique_ptr<boost::asio::steady_timer> beat_timer;
        BroadcastCounters counters;
    };

    Runtime runtime_;
    ClusterConfig config_;
    NodeOptions options_;
    std::shared_ptr<spdlog::logger> logger_;
    Cores cores_;
    AdminSurface admin_;
    Peers peers_;
    Publication publication_;
    Broadcasts broadcasts_;
};

}  // namespace conclave::node
