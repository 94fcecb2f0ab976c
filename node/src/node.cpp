// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/node.hpp"
#include "conclave/core/check.hpp"
#include "conclave/core/quorum.hpp"
#include "conclave/node/cli.hpp"

#include <array>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <ctime>
#include <future>
#include <nlohmann/json.hpp>
#include <utility>
#include <variant>

#include "conclave/admin/hostile_input_metrics.hpp"
#include "conclave/admin/leadership_metrics.hpp"
#include "conclave/drivers/driver.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/node/identity.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/node_table.hpp"
#include "conclave/node/security.hpp"
#include "conclave/node/store_backend.hpp"
#include "conclave/replication/storage.hpp"

namespace conclave::node {

using admin::CommandResult;
using admin::Counter;
using admin::lsn_text;
using admin::StatusReport;

namespace {

/// After the elector stopped, queued frames (the cession, votes) get this long to leave before the
/// connections close.
constexpr std::chrono::milliseconds kDrainTime{100};

/// How many nodes of the table other than this one `counts` (called once for each) holds for.
template <typename Counts>
std::size_t count_others(const ClusterConfig& config, Counts&& counts) {
    std::size_t others = 0;
    for (std::uint16_t i = 0; i < config.nodes.size(); ++i) {
        const NodeId n{i};
        if (n != config.self && counts(n)) {
            ++others;
        }
    }
    return others;
}

void log_identity(spdlog::logger& logger, const ClusterConfig& config,
                  const IdentityCheck& identity) {
    if (identity.created) {
        logger.info(
            "identity: '{}' was empty: this is a new node of cluster '{}' "
            "(incarnation {})",
            config.data_dir.string(), config.cluster, identity.identity.incarnation);
    } else if (identity.upgraded) {
        logger.info("identity: {} had no identity (an earlier format): incarnation {} written",
                    drivers::kStateFileName, identity.identity.incarnation);
    }
}

/// R9 (docs/membership.md §8): a table learnt at run time (or by joining), stored in the data
/// directory, replaces the config file's `nodes`.
std::optional<StoredTable> adopt_stored_table(ClusterConfig& config, spdlog::logger& logger) {
    std::optional<StoredTable> stored = load_node_table(config.data_dir);
    if (!stored) {
        return stored;
    }
    if (auto error = apply_stored_table(config, *stored)) {
        throw std::runtime_error(config.data_dir.string() + "/" + kNodeTableFile + ": " + *error);
    }
    logger.info(
        "membership: using the node table stored in {} ({} nodes; the config "
        "file's nodes list is not used once the table is stored)",
        (config.data_dir / kNodeTableFile).string(), config.nodes.size());
    return stored;
}

/// The admin server of a node (not yet listening): its request checks and limits from the config,
/// HTTPS when admin.tls asks for it; an error naming the endpoint when the TLS files do not load.
std::variant<std::unique_ptr<admin::AdminServer>, std::string> MakeAdminServer(
    boost::asio::io_context& io, const ClusterConfig& config,
    const std::optional<std::string>& token) {
    admin::AdminSecurity security;
    security.token = token;
    security.open_reads = config.security.admin_open_reads;
    security.public_paths = {"/healthz", "/metrics"};
    security.allowed_hosts = {config.self_entry().http.host, "localhost", "127.0.0.1", "::1"};
    for (const std::string& host : config.security.admin_hosts) {
        security.allowed_hosts.push_back(host);
    }
    admin::AdminServerLimits limits;
    limits.max_connections_per_source = config.security.admin_max_connections_per_source;
    limits.idle_timeout = std::chrono::milliseconds(config.security.admin_idle_timeout_ms);
    std::shared_ptr<boost::asio::ssl::context> tls;
    if (config.security.admin_tls != SecuritySettings::AdminTls::Off) {
        std::string error;
        tls = admin::make_admin_tls_context(config.security.admin_tls_cert,
                                            config.security.admin_tls_key, "admin.tls", error);
        if (!tls) {
            return "https " + to_string(config.self_entry().http) + ": " + error;
        }
    }
    return std::make_unique<admin::AdminServer>(io, limits, std::move(security), std::move(tls));
}

}  // namespace

class Node::Admin final : public admin::AdminSource {
  public:
    explicit Admin(Node& node) : node_(node) {}
    StatusReport status() override { return node_.status(); }
    std::string metrics_text() override { return node_.metrics_text(); }
    admin::HealthReport health() override { return node_.health(); }
    CommandResult transfer_leadership(const std::string& to) override {
        if (node_.runtime_.stopping || !node_.runtime_.started) {
            return {CommandResult::Outcome::Unavailable, "the node is not running"};
        }
        if (auto error = node_.transfer_leadership(to)) {
            return {CommandResult::Outcome::Refused, *error};
        }
        return {CommandResult::Outcome::Accepted, "leadership transfer to " + to + " started"};
    }
    CommandResult set_priority(const std::string& id, std::uint32_t priority) override {
        if (node_.runtime_.stopping || !node_.runtime_.started) {
            return {CommandResult::Outcome::Unavailable, "the node is not running"};
        }
        if (auto error = node_.set_priority(id, priority)) {
            return {CommandResult::Outcome::Refused, *error};
        }
        return {CommandResult::Outcome::Accepted,
                "priority of " + id + " is " + std::to_string(priority) + " on this node"};
    }
    CommandResult step_down() override {
        if (node_.runtime_.stopping || !node_.runtime_.started) {
            return {CommandResult::Outcome::Unavailable, "the node is not running"};
        }
        if (auto error = node_.step_down()) {
            return {CommandResult::Outcome::Refused, *error};
        }
        return {CommandResult::Outcome::Accepted, "stepping down"};
    }
    void propose_metadata(std::string key, std::string value,
                          admin::MetadataProposeCallback done) override {
        node_.propose(std::move(key), std::move(value), std::move(done));
    }
    void propose_metadata_if(std::string key, std::string value, admin::MetadataCondition condition,
                             admin::MetadataProposeCallback done) override {
        node_.propose(std::move(key), std::move(value), condition, std::move(done));
    }
    void read_metadata(admin::MetadataQuery query, admin::MetadataReadCallback done) override {
        node_.read(std::move(query), std::move(done));
    }
    std::optional<std::uint64_t> watch_committed(std::string prefix, Lsn after,
                                                 admin::CommittedCallback callback) override {
        if (!node_.cores_.log_driver) {
            return std::nullopt;
        }
        return node_.cores_.log_driver->subscribe_committed(std::move(callback), std::move(prefix),
                                                            after);
    }
    void unwatch_committed(std::uint64_t id) override {
        if (node_.cores_.log_driver) {
            node_.cores_.log_driver->unsubscribe(id);
        }
    }
    std::optional<admin::MetadataPage> metadata_after(Lsn from, std::size_t max_entries) override {
        if (!node_.metadata_enabled()) {
            return std::nullopt;
        }
        return admin::MetadataPage{node_.committed_after(from, max_entries), node_.commit_lsn(),
                                   node_.cores_.log_driver->log().snapshot().lsn};
    }
    // GET /metadata builds its pages here: on the node's reader thread (started at the first
    // use), the answer posted back to the io thread. Nothing but `work`'s own copies is touched
    // there; `done` (which holds the HTTP session) is moved back to the io thread untouched.
    void offload(std::function<admin::AdminResponse()> work, admin::AdminResponder done) override {
        if (!node_.runtime_.reader) {
            node_.runtime_.reader = std::make_unique<boost::asio::thread_pool>(1);
        }
        boost::asio::post(*node_.runtime_.reader, [io = node_.runtime_.io, work = std::move(work),
                                                   done = std::move(done)]() mutable {
            admin::AdminResponse response;
            try {
                response = work();
            } catch (const std::exception& e) {
                response = admin::json_error(500, "internal", e.what());
            }
            boost::asio::post(*io, [done = std::move(done), response = std::move(response)]() {
                done(response);
            });
        });
    }
    void on_leadership_change(std::function<void()> changed) override {
        node_.subscribe([changed = std::move(changed)](const Leadership&) { changed(); });
    }
    std::optional<admin::MembersView> members() override { return node_.members(); }
    admin::BroadcastResult broadcast(std::string topic, nlohmann::json payload) override {
        return node_.broadcast(std::move(topic), std::move(payload));
    }
    void on_broadcast(std::function<void(const admin::BroadcastMessage&)> received) override {
        node_.subscribe(Node::BroadcastCallback(std::move(received)));
    }
    void change_membership(admin::MembershipOp op, replication::Member member,
                           admin::MembershipCallback done) override {
        node_.change_membership(op, std::move(member), std::move(done));
    }
    std::vector<std::string> node_ids() override {
        std::vector<std::string> ids;
        for (const NodeEntry& e : node_.config_.nodes) {
            ids.push_back(e.id);
        }
        return ids;
    }

  private:
    Node& node_;
};

Node::Node(ClusterConfig config, NodeOptions options)
    : Node(std::make_unique<boost::asio::io_context>(), nullptr, std::move(config),
           std::move(options)) {}

Node::Node(boost::asio::io_context& io, ClusterConfig config, NodeOptions options)
    : Node(nullptr, &io, std::move(config), std::move(options)) {}

Node::Node(std::unique_ptr<boost::asio::io_context> owned_io, boost::asio::io_context* io,
           ClusterConfig config, NodeOptions options)
    : runtime_(std::move(owned_io), io),
      config_(std::move(config)),
      options_(std::move(options)),
      peers_(*runtime_.io) {
    logger_ = options_.logger ? options_.logger : make_logger(config_.self_entry().id, config_.log);
    // The mesh and the driver log through the node's logger (its format and level); the driver
    // leaves leadership changes to on_snapshot(), which logs each once with every field.
    // Secret files are read here, once (conclaved has already refused bad ones with exit 2);
    // a file that vanished since throws std::runtime_error naming it.
    // R9 (docs/membership.md §8): a table learnt at run time (or by joining) replaces the
    // config file's `nodes`.
    // The durable state is checked as one identity before any of it is used (identity.hpp).
    const IdentityCheck identity = check_identity(config_);
    peers_.identity = identity.identity;
    log_identity(*logger_, config_, identity);
    const std::optional<StoredTable> stored = adopt_stored_table(config_, *logger_);
    if (stored) {
        peers_.self_removed_stored = stored->marks_removed(config_.self_entry().id);
    }
    create_mesh();
    create_broadcast();
    cores_.driver = std::make_unique<drivers::ElectorDriver>(
        *runtime_.io, *cores_.mesh, config_.elector,
        drivers::DriverOptions{config_.data_dir, options_.seed, logger_, /*log_leadership=*/false,
                               announcing_store_hook(), peers_.identity, options_.elector_trace});
    create_log_driver();
    if (cores_.log_driver) {
        check_vote_record_covers_log(config_, cores_.driver->elector().state().durable().term,
                                     cores_.log_driver->log().last_lsn().term);
    }
    note_log_created();
    if (stored) {
        restore_stored_configuration(*stored);
    }
    if (cores_.log_driver) {
        cores_.mesh->set_join_handler([this](std::string id, net::JoinRequest request,
                                             std::function<void(net::JoinAnswer)> respond) {
            answer_join(std::move(id), std::move(request), std::move(respond));
        });
    }
    register_all_metrics();
    admin_.source = std::make_unique<Admin>(*this);
    if (!peers_.identity.registered) {
        maybe_end_quarantine("nobody yet");  // a single-voter cluster needs nobody's admission
    }
    publication_.snapshot = to_leadership(cores_.driver->snapshot());
    if (config_.backend.is_store()) {
        create_store();
        return;
    }
    cores_.driver->subscribe([this](const elector::LeadershipSnapshot& s) { on_snapshot(s); });
}

void Node::create_mesh() {
    const SecurityMaterial security = load_security_material(config_);
    admin_.token = security.admin_token;
    net::MeshOptions mesh_options = mesh_options_of(config_, options_.seed, security);
    mesh_options.logger = logger_;
    peers_.incarnations = std::make_unique<PeerIncarnations>(config_.data_dir);
    mesh_options.incarnation = peers_.identity.incarnation;
    std::error_code repaired_ec;
    mesh_options.repaired = std::filesystem::exists(
        config_.data_dir / "log" / std::string(replication::FileStorage::kRepairedFileName),
        repaired_ec);
    mesh_options.admit_incarnation = [this](NodeId peer, const std::string& incarnation,
                                            bool repaired) {
        return admit_peer(peer, incarnation, repaired);
    };
    mesh_options.on_state_lost = [this](NodeId peer, const std::string& detail) {
        refused_as_lost(peer, detail);
    };
    mesh_options.on_unknown_to = [this](NodeId peer, const std::string&) {
        if (peers_.unknown_to.insert(peer).second) {
            log_event(*logger_, spdlog::level::warn, "peer does not know this node (unknown_node)",
                      {{"peer", config_.node_name(peer)},
                       {"hint",
                        "removed from the cluster while it was down? stop it, or empty "
                        "its data directory and start it with --join"}});
        }
    };
    mesh_options.durable_term = [this]() -> std::uint64_t {
        return cores_.driver ? cores_.driver->elector().state().durable().term.value : 0;
    };
    mesh_options.on_state_regressed = [this](NodeId peer, const std::string& detail) {
        refused_as_regressed(peer, detail);
    };
    mesh_options.remembered_term = [this](NodeId peer, const std::string& incarnation) {
        return peers_.incarnations->announced_term(config_.node_name(peer), incarnation);
    };
    mesh_options.remember_term = [this](NodeId peer, const std::string& incarnation,
                                        std::uint64_t term) {
        remember_peer_term(peer, incarnation, term);
    };
    mesh_options.quarantined = !peers_.identity.registered;
    mesh_options.on_admitted_by = [this](NodeId peer) { on_admitted_by(peer); };
    cores_.mesh = std::make_unique<net::Mesh>(*runtime_.io, membership_of(config_), config_.self,
                                              std::move(mesh_options));
}

// The driver's store hook: every durable term rise is announced to the up peers once written
// (the hook runs just before the write; the posted work after it), so that they remember it
// (net/README.md).
std::function<void(const std::filesystem::path&, const elector::DurableState&)>
Node::announcing_store_hook() {
    return [this, hook = options_.store_elector_state](const std::filesystem::path& dir,
                                                       const elector::DurableState& state) {
        if (hook) {
            hook(dir, state);
        }
        boost::asio::post(*runtime_.io, [this, alive = std::weak_ptr<int>(runtime_.alive)] {
            if (alive.expired() || cores_.driver->failed()) {
                return;
            }
            const std::uint64_t term = cores_.driver->elector().state().durable().term.value;
            if (term > peers_.announced_term) {
                peers_.announced_term = term;
                cores_.mesh->announce_term();
            }
        });
    };
}

void Node::restore_stored_configuration(const StoredTable& stored) {
    for (std::uint16_t i = 0; i < stored.removed.size(); ++i) {
        if (stored.removed[i] && NodeId{i} != config_.self) {
            cores_.mesh->retire_node(NodeId{i});
        }
    }
    // A joiner's log is empty: its elector starts with the configuration it was accepted
    // with (a learner), not the implicit "every node votes".
    if (stored.version > 0 && cores_.log_driver &&
        !cores_.log_driver->log().active_config().from_entry) {
        NodeSet voters;
        for (const std::string& id : stored.voters) {
            if (auto n = config_.find_node(id)) {
                voters.insert(*n);
            }
        }
        if (auto error = cores_.driver->set_voters(voters, stored.version)) {
            logger_->error("membership: the stored configuration was refused: {}", *error);
        }
    }
}

// Dial requests (net/README.md): a restarted node asks its lower-index peers to dial it at once.
void Node::register_dial_request_metrics() {
    const auto dial_requests = [this](const char* direction) {
        return &admin_.metrics.counter("conclave_dial_requests_total",
                                       "Mesh dial requests: sent to lower-index peers at start, or "
                                       "received from proven peers and served",
                                       {{"direction", direction}});
    };
    Counter* sent = dial_requests("sent");
    Counter* received = dial_requests("received");
    admin_.metrics.on_collect([this, sent, received] {
        const net::MeshCounters& m = cores_.mesh->counters();
        sent->set_total(static_cast<double>(m.dial_requests_sent));
        received->set_total(static_cast<double>(m.dial_requests));
    });
}

void Node::register_all_metrics() {
    admin_.leadership_metrics = std::make_unique<admin::LeadershipMetrics>(admin_.metrics);
    register_metrics();
    register_dial_request_metrics();
    register_security_metrics();
    admin::register_process_metrics(admin_.metrics, conclave_version());
    register_metadata_metrics();
    register_membership_metrics();
    register_peer_metrics();
    register_broadcast_metrics();
    admin::register_hostile_input_metrics(
        admin_.metrics, {[this]() -> const elector::ElectorCounters& {
                             return cores_.driver->elector().counters();
                         },
                         [this]() -> const replication::LogCounters* {
                             return cores_.log_driver ? &cores_.log_driver->log().counters()
                                                      : nullptr;
                         }});
}

bool Node::must_post() const {
    return runtime_.run_threads.load() > 0 && !runtime_.io->get_executor().running_in_this_thread();
}

std::optional<std::string> Node::call_on_io(std::function<std::optional<std::string>()> fn) {
    auto promise = std::make_shared<std::promise<std::optional<std::string>>>();
    auto future = promise->get_future();
    boost::asio::post(*runtime_.io, [promise, fn = std::move(fn)] { promise->set_value(fn()); });
    if (future.wait_for(kCallOnIoTimeout) != std::future_status::ready) {
        return std::string("the node's io_context did not take the request within 5 s");
    }
    return future.get();
}

Node::~Node() {
    // The reader thread first: a page it is building is finished and posted; queued ones are
    // dropped (their HTTP sessions are closed with the server).
    if (runtime_.reader) {
        runtime_.reader->stop();
        runtime_.reader->join();
    }
    // Tear down in dependency order: the server and driver reference the mesh and this.
    admin_.server.reset();
    cores_.store.reset();
    cores_.log_driver.reset();
    cores_.driver.reset();
    if (cores_.mesh) {
        cores_.mesh->stop();
    }
    cores_.mesh.reset();
}

std::optional<std::string> Node::start() {
    CONCLAVE_CHECK(!runtime_.started, "Node::start() is called once");
    if (options_.admin_http) {
        auto made = MakeAdminServer(*runtime_.io, config_, admin_.token);
        if (const auto* error = std::get_if<std::string>(&made)) {
            return *error;
        }
        admin_.server = std::move(std::get<std::unique_ptr<admin::AdminServer>>(made));
        admin::LeadershipRouteLimits leadership_limits;
        leadership_limits.max_watchers = config_.security.admin_max_watchers;
        admin::register_admin_routes(*admin_.server, *admin_.source, leadership_limits);
        const Endpoint& http = config_.self_entry().http;
        if (auto error = admin_.server->listen(http.host, http.port)) {
            admin_.server.reset();
            return "http " + to_string(http) + ": " + *error;
        }
    }
    if (cores_.store) {
        return start_store();
    }
    try {
        cores_.mesh->start();
    } catch (const boost::system::system_error& e) {
        if (admin_.server) {
            admin_.server->stop();
        }
        return "peer " + to_string(config_.self_entry().peer) + ": " + e.code().message();
    }
    runtime_.started = true;
    if (auto banner = insecure_banner(config_)) {
        logger_->warn("{}", *banner);
    }
    if (cores_.log_driver) {
        cores_.log_driver->start();
    }
    cores_.driver->start();
    start_beats();
    if (cores_.log_driver) {
        // Level-triggered: what committed before this start first, then each new one.
        cores_.log_driver->subscribe_committed(
            [this](const replication::Entry& e) { apply_committed_priority(e); },
            std::string(kPriorityKeyPrefix));
    }
    log_event(*logger_, spdlog::level::info, "node started",
              {{"cluster", config_.cluster},
               {"peer", to_string(config_.self_entry().peer)},
               {"http", to_string(config_.self_entry().http)},
               {"profile", config_.profile},
               {"data_dir", config_.data_dir.string()}});
    return std::nullopt;
}

Leadership Node::to_leadership(const elector::LeadershipSnapshot& s) const {
    Leadership l;
    l.role = s.role;
    l.term = s.term.value;
    if (s.leader) {
        l.leader = config_.node_name(*s.leader);
    }
    l.fencing_token = s.fencing_token;
    l.reason = s.reason;
    if (l.is_leader()) {
        l.lease_deadline = cores_.driver->lease_deadline();
    }
    return l;
}

void Node::on_snapshot(const elector::LeadershipSnapshot& snapshot) {
    admin_.leadership_metrics->on_leadership(snapshot, cores_.driver->now());
    if (cores_.driver->failed()) {
        fail_stop("the elector state file could not be written (see the critical line above)");
    }
    publish(to_leadership(snapshot));
}

void Node::publish(const Leadership& l) {
    {
        const std::lock_guard lock(publication_.mutex);
        publication_.snapshot = l;
    }
    if (publication_.last && *publication_.last == l) {
        return;
    }
    publication_.last = l;
    log_event(*logger_, spdlog::level::info, "leadership changed",
              {{"role", std::string(to_string(l.role))},
               {"term", l.term},
               {"leader", l.leader ? nlohmann::json(*l.leader) : nlohmann::json(nullptr)},
               {"fencing_token", l.fencing_token},
               {"reason", std::string(to_string(l.reason))}});
    // Copy: a subscriber may subscribe another one.
    const auto subscribers = publication_.subscribers;
    for (const auto& callback : subscribers) {
        callback(l);
    }
    if (runtime_.handing_over && l.leader && *l.leader != config_.self_entry().id) {
        // The successor won: the hand-over is done.
        runtime_.handing_over = false;
        runtime_.stop_timer.cancel();
    }
}

void Node::subscribe(LeadershipCallback callback) {
    if (must_post()) {
        boost::asio::post(*runtime_.io,
                          [this, cb = std::move(callback)]() mutable { subscribe(std::move(cb)); });
        return;
    }
    callback(current());
    publication_.subscribers.push_back(std::move(callback));
}

Leadership Node::current() const {
    if (must_post()) {
        Leadership l;
        {
            const std::lock_guard lock(publication_.mutex);
            l = publication_.snapshot;  // the last snapshot the io thread published
        }
        if (l.is_leader()) {
            // The current lease (thread-safe).
            l.lease_deadline =
                cores_.store ? cores_.store->lease_deadline() : cores_.driver->lease_deadline();
        }
        return l;
    }
    if (cores_.store) {
        return store_leadership();
    }
    return to_leadership(cores_.driver->snapshot());
}

std::optional<std::string> Node::transfer_leadership(const std::string& node_id) {
    if (must_post()) {
        return call_on_io([this, node_id] { return transfer_leadership(node_id); });
    }
    const std::optional<NodeId> target = config_.find_node(node_id);
    if (!target) {
        return "unknown node id \"" + node_id + "\"";
    }
    if (runtime_.stopping) {
        return std::string("the node is stopping");
    }
    if (cores_.store) {
        return "the " + std::string(to_string(config_.backend.kind)) +
               " backend cannot hand leadership to a chosen node: step down instead (the key "
               "is released and another candidate takes it)";
    }
    auto error = cores_.driver->transfer_leadership(*target);
    if (!error) {
        log_event(*logger_, spdlog::level::info, "leadership transfer requested",
                  {{"to", node_id}});
    }
    return error;
}

std::optional<std::string> Node::set_priority(const std::string& node_id, std::uint32_t priority) {
    if (must_post()) {
        return call_on_io([this, node_id, priority] { return set_priority(node_id, priority); });
    }
    const std::optional<NodeId> target = config_.find_node(node_id);
    if (!target) {
        return "unknown node id \"" + node_id + "\"";
    }
    auto error = cores_.driver->set_priority(*target, priority);
    if (error) {
        return error;
    }
    log_event(*logger_, spdlog::level::info, "priority changed",
              {{"node", node_id}, {"priority", std::to_string(priority)}});
    if (cores_.log_driver && runtime_.started && !runtime_.stopping) {
        // Only the leader's write is appended (a follower's is answered NotLeader).
        propose_entry(std::string(kPriorityKeyPrefix) + node_id, std::to_string(priority), false,
                      {}, [this, node_id](const admin::MetadataProposeResult& r) {
                          if (r.status == admin::MetadataProposeStatus::Committed) {
                              log_event(*logger_, spdlog::level::info,
                                        "priority recorded in the metadata log",
                                        {{"node", node_id}, {"lsn", lsn_text(r.lsn)}});
                          }
                      });
    }
    return std::nullopt;
}

void Node::apply_committed_priority(const replication::Entry& e) {
    const std::string id = e.key.substr(kPriorityKeyPrefix.size());
    const std::optional<NodeId> target = config_.find_node(id);
    const auto value = nlohmann::json::parse(e.value, nullptr, /*allow_exceptions=*/false);
    std::optional<std::string> error;
    if (!target) {
        error = "unknown node id";
    } else if (!value.is_number_unsigned() ||
               value.get<std::uint64_t>() > elector::Config::kMaxPriority) {
        error = "not an integer 0.." + std::to_string(elector::Config::kMaxPriority);
    } else {
        error = cores_.driver->set_priority(*target,
                                            static_cast<std::uint32_t>(value.get<std::uint64_t>()));
    }
    if (error) {
        log_event(*logger_, spdlog::level::warn, "committed priority not applied",
                  {{"key", e.key}, {"lsn", lsn_text(e.lsn)}, {"reason", *error}});
        return;
    }
    log_event(*logger_, spdlog::level::info, "priority applied from the metadata log",
              {{"node", id}, {"priority", e.value}, {"lsn", lsn_text(e.lsn)}});
}

std::optional<NodeId> Node::pick_successor() const {
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        const NodeId peer{i};
        if (peer != config_.self && !cores_.driver->elector().transfer_error(peer)) {
            return peer;
        }
    }
    return std::nullopt;
}

std::optional<std::string> Node::step_down() {
    if (must_post()) {
        return call_on_io([this] { return step_down(); });
    }
    if (runtime_.stopping) {
        return std::string("the node is stopping");
    }
    if (cores_.store) {
        return store_step_down();
    }
    if (cores_.driver->snapshot().role != elector::Role::Leader) {
        return std::string("not the leader");
    }
    const std::optional<NodeId> successor = pick_successor();
    if (!successor) {
        return std::string("no peer is up to take over");
    }
    return transfer_leadership(config_.node_name(*successor));
}

void Node::stop(std::function<void()> done) {
    if (must_post()) {
        boost::asio::post(*runtime_.io,
                          [this, done = std::move(done)]() mutable { stop(std::move(done)); });
        return;
    }
    if (runtime_.stopped) {
        if (done) {
            done();
        }
        return;
    }
    if (done) {
        runtime_.stop_waiters.push_back(std::move(done));
    }
    if (runtime_.stopping) {
        return;
    }
    runtime_.stopping = true;
    if (!runtime_.started) {
        finish_stop();
        return;
    }
    if (cores_.store) {
        // The key is released at once (etcd: the lease revoked; ZooKeeper: the znode deleted).
        cores_.store->stop([this] { finish_stop(); });
        return;
    }
    const auto successor =
        cores_.driver->snapshot().role == elector::Role::Leader ? pick_successor() : std::nullopt;
    if (successor && !cores_.driver->transfer_leadership(*successor)) {
        log_event(*logger_, spdlog::level::info, "stopping: handing leadership over",
                  {{"to", config_.node_name(*successor)}});
        runtime_.handing_over = true;
        // Wait for the successor to win, at most one election round.
        runtime_.stop_timer.expires_after(std::chrono::milliseconds(
            config_.elector.election_result_timeout.count() + kDrainTime.count()));
        runtime_.stop_timer.async_wait([this](const boost::system::error_code&) {
            runtime_.handing_over = false;
            finish_stop();
        });
        return;
    }
    finish_stop();
}

// storage: out of service on a storage failure. Exiting is simpler than rejoining when
// the disk recovers, and safe: the failed log sends no acknowledgement or sync promise any more,
// the elector persists every vote before sending it, and a restart recovers (and re-checks) the
// files from scratch. Posted: called from inside a driver's batch of actions.
void Node::fail_stop(std::string why) {
    if (runtime_.storage_failure) {
        return;
    }
    runtime_.storage_failure = std::move(why);
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    std::array<char, 32> since{};
    runtime_.storage_failure_since.assign(
        since.data(), std::strftime(since.data(), since.size(), "%Y-%m-%dT%H:%M:%SZ", &utc));
    log_event(*logger_, spdlog::level::critical, "storage failure: out of service",
              {{"reason", *runtime_.storage_failure},
               {"action",
                "stepping down (handing over when possible) and exiting with status 1; "
                "fix the disk, then restart the node"}});
    boost::asio::post(*runtime_.io, [this] { stop(); });
}

std::optional<std::string> Node::admit_peer(NodeId peer, const std::string& incarnation,
                                            bool repaired) {
    const std::string& id = config_.node_name(peer);
    const auto known = peers_.incarnations->known().find(id);
    const bool replaced =
        known != peers_.incarnations->known().end() && known->second != incarnation;
    try {
        if (auto why = peers_.incarnations->admit(id, incarnation, repaired)) {
            log_event(*logger_, spdlog::level::err, "peer refused: state lost",
                      {{"peer", id}, {"reason", *why}});
            return why;
        }
    } catch (const drivers::StateFileError& e) {
        log_event(*logger_, spdlog::level::err, "peer refused: cannot remember its incarnation",
                  {{"peer", id}, {"reason", e.what()}});
        return std::string("the peer cannot record this node's incarnation: ") + e.what();
    }
    if (replaced && !incarnation.empty()) {
        log_event(*logger_, spdlog::level::warn, "peer admitted with a new incarnation",
                  {{"peer", id}, {"incarnation", incarnation}, {"why", "it is repaired"}});
    }
    return std::nullopt;
}

void Node::remember_peer_term(NodeId peer, const std::string& incarnation, std::uint64_t term) {
    try {
        peers_.incarnations->remember_term(config_.node_name(peer), incarnation, term);
    } catch (const drivers::StateFileError& e) {
        // Kept in memory by the mesh; only a restart of this node would forget it.
        log_event(*logger_, spdlog::level::err, "cannot record a peer's durable term",
                  {{"peer", config_.node_name(peer)},
                   {"term", std::to_string(term)},
                   {"reason", e.what()}});
    }
}

// A new incarnation leaves quarantine once a majority of the other voters have admitted it: any
// majority that admitted an earlier incarnation of this node shares a member with this one, which
// would have refused it (docs/design.md, "Node identity").
void Node::on_admitted_by(NodeId peer) {
    if (peers_.regressed_by.erase(peer) > 0) {
        log_event(*logger_, spdlog::level::info, "admitted again by a peer that refused it",
                  {{"peer", config_.node_name(peer)}});
    }
    if (peers_.identity.registered) {
        return;
    }
    peers_.admitted_by.insert(peer);
    maybe_end_quarantine(config_.node_name(peer));
}

void Node::maybe_end_quarantine(const std::string& last) {
    const NodeSet& voters = cores_.driver->elector().state().voters;
    std::size_t admitted = 0;
    const std::size_t others = count_others(config_, [&](NodeId v) {
        if (!voters.contains(v)) {
            return false;
        }
        admitted += peers_.admitted_by.contains(v) ? 1U : 0U;
        return true;
    });
    if (others > 0 && admitted < majority(others)) {
        logger_->info("identity: admitted by {} ({} of the {} other voters; {} needed)", last,
                      admitted, others, majority(others));
        return;
    }
    peers_.identity.registered = true;
    try {
        store_identity();
    } catch (const drivers::StateFileError& e) {
        peers_.identity.registered = false;
        fail_stop(std::string("cannot record the end of quarantine: ") + e.what());
        return;
    }
    cores_.mesh->end_quarantine();
    log_event(
        *logger_, spdlog::level::info, "identity: registered, quarantine ended",
        {{"admitted_by", std::to_string(admitted)}, {"other_voters", std::to_string(others)}});
}

// The identity records that it has a metadata log once the log's file exists (the log driver
// creates it), so that a later start without it is refused (check_log_kept). Called before the
// elector driver starts: nothing else writes the vote record yet.
void Node::note_log_created() {
    std::error_code ec;
    if (peers_.identity.log || !cores_.log_driver ||
        !std::filesystem::is_regular_file(metadata_log_file(config_), ec)) {
        return;
    }
    peers_.identity.log = true;
    try {
        store_identity();
    } catch (const drivers::StateFileError& e) {
        throw std::runtime_error(
            std::string("cannot record the metadata log in the vote record: ") + e.what());
    }
}

void Node::store_identity() {
    drivers::store_durable_state(config_.data_dir, cores_.driver->elector().state().durable(),
                                 peers_.identity);
    cores_.driver->set_identity(peers_.identity);
}

// A peer knows this node by an earlier incarnation: this data directory is not the one the
// cluster knows. Stop at once (no hand-over: the node has no standing) and let conclaved exit 3.
void Node::refused_as_lost(NodeId peer, const std::string& detail) {
    if (peers_.state_refused) {
        return;
    }
    peers_.state_refused =
        "node '" + config_.node_name(peer) + "' refuses this node (state_lost): " + detail;
    log_event(*logger_, spdlog::level::critical, "refused by a peer: state lost",
              {{"reason", *peers_.state_refused}, {"action", "stopping; exit status 3"}});
    boost::asio::post(*runtime_.io, [this] { stop(); });
}

std::optional<std::string> Node::removed_by_peers() const {
    std::string names;
    const std::size_t others = count_others(config_, [&](NodeId n) {
        if (cores_.mesh->is_retired(n)) {
            return false;
        }
        if (peers_.unknown_to.contains(n)) {
            names += (names.empty() ? "" : ", ") + config_.node_name(n);
        }
        return true;
    });
    if (others == 0 || peers_.unknown_to.size() < majority(others)) {
        return std::nullopt;
    }
    return "removed from the cluster while it was down? " + names +
           " answer that their tables do not hold this node (unknown_node, not authenticated): "
           "stop it, or empty its data directory and start it with --join";
}

// A peer remembers a higher durable term of this incarnation than the vote record holds: the
// data directory was restored from an older copy. Reported (status, healthz, log); the peer keeps
// refusing it until the node is repaired with a --min-term above the cluster's term.
void Node::refused_as_regressed(NodeId peer, const std::string& detail) {
    const bool first = peers_.regressed_by.empty();
    peers_.regressed_by[peer] = detail;
    if (first) {
        log_event(*logger_, spdlog::level::critical, "refused by a peer: state regressed",
                  {{"peer", config_.node_name(peer)},
                   {"detail", detail},
                   {"action",
                    "stop this node and run conclaved --repair --min-term <the cluster's term>"}});
    }
}

std::optional<std::string> Node::regressed_report() const {
    if (peers_.regressed_by.empty()) {
        return std::nullopt;
    }
    const auto& [peer, detail] = *peers_.regressed_by.begin();
    const bool names_repair = detail.find("--repair --min-term") != std::string::npos;
    return "restored from an older copy? " + config_.node_name(peer) +
           " refuses this node (state_regressed): " + detail +
           (names_repair ? ""
                         : "; stop it and run conclaved --repair --min-term <the cluster's term>");
}

void Node::finish_stop() {
    if (cores_.log_driver) {
        cores_.log_driver->stop();  // pending proposals are answered (outcome unknown)
    }
    // A node that is still leader sends its cession here.
    if (!cores_.store) {
        cores_.driver->stop();
    }
    broadcasts_.beat_timer->cancel();
    runtime_.stop_timer.expires_after(kDrainTime);
    runtime_.stop_timer.async_wait([this](const boost::system::error_code&) {
        if (admin_.server) {
            admin_.server->stop();
        }
        cores_.mesh->stop();
        runtime_.stopped = true;
        log_event(*logger_, spdlog::level::info, "node stopped");
        auto waiters = std::move(runtime_.stop_waiters);
        for (auto& w : waiters) {
            w();
        }
        if (runtime_.owned_io) {
            runtime_.owned_io->stop();
        }
    });
}

void Node::run() {
    runtime_.run_threads += 1;
    struct Leave {
        std::atomic<int>& count;
        ~Leave() { count -= 1; }
    } leave{runtime_.run_threads};
    if (runtime_.owned_io) {
        auto guard = boost::asio::make_work_guard(*runtime_.owned_io);
        runtime_.owned_io->run();
        return;
    }
    runtime_.io->run();
}

std::uint16_t Node::peer_port() const {
    return cores_.mesh->local_port();
}
std::uint16_t Node::http_port() const {
    return admin_.server ? admin_.server->port() : 0;
}

admin::AdminSource& Node::admin_source() {
    return *admin_.source;
}

StatusReport Node::status() {
    if (cores_.store) {
        return store_status();
    }
    const elector::LeadershipSnapshot& s = cores_.driver->snapshot();
    StatusReport r;
    r.id = config_.self_entry().id;
    r.cluster = config_.cluster;
    r.role = s.role;
    r.term = s.term;
    if (s.leader) {
        r.leader = config_.node_name(*s.leader);
    }
    r.fencing_token = s.fencing_token;
    r.lsn = cores_.driver->elector().state().lsn;
    r.priority = cores_.driver->elector().config().priority(config_.self);
    r.log = log_status();
    r.membership = membership_state();
    if (runtime_.storage_failure) {
        r.storage =
            admin::StorageStatus{false, *runtime_.storage_failure, runtime_.storage_failure_since};
    }
    r.incarnation = peers_.identity.incarnation;
    r.refused = peers_.state_refused;
    r.quarantined = !peers_.identity.registered;
    r.unknown_to_peers = removed_by_peers();
    r.state_regressed = regressed_report();
    const auto now = std::chrono::steady_clock::now();
    for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
        const NodeId peer{i};
        if (peer == config_.self || cores_.mesh->is_retired(peer)) {
            continue;  // a removed node is no peer (docs/membership.md §8)
        }
        const net::PeerStatus ps = cores_.mesh->peer_status(peer);
        admin::PeerStatus p;
        p.id = config_.nodes[i].id;
        p.up = ps.up;
        p.priority = cores_.driver->elector().config().priority(peer);
        std::tie(p.last_contact_ms, p.live) = liveness_of(peer, now);
        r.peers.push_back(std::move(p));
    }
    r.liveness_window_ms = liveness_window().count();
    r.last_transition_reason = s.reason;
    r.last_transition_age_ms = (cores_.driver->now() - s.changed_at).count();
    if (s.role == elector::Role::Leader) {
        r.lease = admin::lease_status(cores_.driver->lease_deadline(), now);
    }
    return r;
}

std::string Node::metrics_text() {
    return admin_.metrics.render();
}

admin::HealthReport Node::health() {
    if (cores_.store) {
        return store_health();
    }
    if (peers_.state_refused) {
        return {false, "refused by the cluster: " + *peers_.state_refused};
    }
    if (const auto removed = removed_by_peers()) {
        return {false, *removed};
    }
    if (const auto regressed = regressed_report()) {
        return {false, *regressed};
    }
    if (!peers_.identity.registered) {
        return {false,
                "new node in quarantine: waiting for a majority of the other voters to "
                "admit its incarnation (it neither votes nor acknowledges meanwhile)"};
    }
    if (runtime_.storage_failure) {
        return {false, "storage failure: " + *runtime_.storage_failure +
                           "; the node steps down and exits (fix the disk, then restart it)"};
    }
    if (cores_.driver->failed()) {
        return {false, "the elector stopped after a state write failure; restart the node"};
    }
    if (cores_.log_driver && cores_.log_driver->failed()) {
        return {false, "the metadata log stopped after a storage failure; restart the node"};
    }
    if (!runtime_.started || runtime_.stopped) {
        return {false, "the node is not running"};
    }
    // Running, but not a healthy voter: say so (a load balancer or an operator's probe must not
    // take it for one).
    if (cores_.log_driver) {
        if (const auto r = cores_.log_driver->log().repaired()) {
            return {false,
                    "repaired (conclaved --repair): non-voting until a leader of a term "
                    "above " +
                        std::to_string(r->value) + " has brought it up to date"};
        }
        // A follower's regression is the follower's problem: reported in /status, not here.
        if (const auto& rollback = cores_.log_driver->log().rollback_alarm();
            rollback && rollback->kind != replication::RollbackKind::FollowerRegressed) {
            return {false,
                    "ROLLBACK: " + replication::describe(
                                       *rollback, cores_.log_driver->log().config().node_ids)};
        }
        if (const auto m = membership_state(); m && m->role == "removed") {
            return {false, "removed from the cluster's configuration: stop this node"};
        }
    }
    return {true, ""};
}

void Node::register_metrics() {
    auto messages_in = std::make_shared<std::vector<Counter*>>();
    auto messages_out = std::make_shared<std::vector<Counter*>>();
    for (std::size_t i = 0; i < drivers::kMessageTypeCount; ++i) {
        const std::string type(drivers::message_type_name(i));
        messages_in->push_back(&admin_.metrics.counter("conclave_messages_received_total",
                                                       "Elector messages received, by type",
                                                       {{"type", type}}));
        messages_out->push_back(&admin_.metrics.counter(
            "conclave_messages_sent_total", "Elector messages sent, by type", {{"type", type}}));
    }
    auto bad_frames = std::make_shared<std::vector<Counter*>>();
    for (std::size_t i = 0; i < net::kBadFrameKindCount; ++i) {
        const std::string kind(net::to_string(static_cast<net::BadFrameKind>(i)));
        bad_frames->push_back(&admin_.metrics.counter("conclave_bad_frames_total",
                                                      "Connections closed on a bad frame, by kind",
                                                      {{"kind", kind}}));
    }
    Counter& dropped =
        admin_.metrics.counter("conclave_messages_dropped_total",
                               "Elector messages the mesh refused (peer down, overflow)");
    Counter& reconnects =
        admin_.metrics.counter("conclave_reconnects_total", "Mesh dial attempts after a failure");
    admin::Gauge& peers_up = admin_.metrics.gauge("conclave_peers_up", "Peers connected now");
    admin_.metrics.on_collect(
        [this, messages_in, messages_out, bad_frames, &dropped, &reconnects, &peers_up] {
            admin_.leadership_metrics->update_counters(cores_.driver->elector().counters());
            admin_.leadership_metrics->refresh(cores_.driver->now());
            const drivers::DriverCounters& d = cores_.driver->counters();
            for (std::size_t i = 0; i < drivers::kMessageTypeCount; ++i) {
                (*messages_in)[i]->set_total(static_cast<double>(d.messages_in[i]));
                (*messages_out)[i]->set_total(static_cast<double>(d.messages_out[i]));
            }
            dropped.set_total(static_cast<double>(d.messages_dropped));
            const net::MeshCounters& m = cores_.mesh->counters();
            for (std::size_t i = 0; i < net::kBadFrameKindCount; ++i) {
                (*bad_frames)[i]->set_total(static_cast<double>(m.bad_frames[i]));
            }
            reconnects.set_total(static_cast<double>(m.reconnects));
            int up = 0;
            for (std::uint16_t i = 0; i < config_.nodes.size(); ++i) {
                if (NodeId{i} != config_.self && cores_.mesh->is_up(NodeId{i})) {
                    ++up;
                }
            }
            peers_up.set(up);
        });
}

// Security: handshake refusals by reason, admin requests refused by check.
void Node::register_security_metrics() {
    auto refusals = std::make_shared<std::vector<Counter*>>();
    for (std::size_t i = 0; i < net::kRefusalCount; ++i) {
        const std::string reason(net::to_string(static_cast<net::HandshakeRefusal>(i)));
        refusals->push_back(&admin_.metrics.counter("conclave_handshake_refusals_total",
                                                    "Mesh handshakes refused, by reason",
                                                    {{"reason", reason}}));
    }
    const auto admin_refused = [this](const char* reason) {
        return &admin_.metrics.counter("conclave_admin_refused_total",
                                       "Admin requests or connections refused, by reason",
                                       {{"reason", reason}});
    };
    Counter* forbidden = admin_refused("forbidden");
    Counter* unauthorized = admin_refused("unauthorized");
    Counter* unsupported = admin_refused("unsupported_media_type");
    Counter* connections = admin_refused("connection_limit");
    admin::Gauge& regressed = admin_.metrics.gauge(
        "conclave_state_regressed_peers",
        "Peers refusing this node as state_regressed (its durable term is below one it announced "
        "to them: restored from an older copy)");
    admin_.metrics.on_collect(
        [this, refusals, forbidden, unauthorized, unsupported, connections, &regressed] {
            regressed.set(static_cast<double>(peers_.regressed_by.size()));
            const net::MeshCounters& m = cores_.mesh->counters();
            for (std::size_t i = 0; i < net::kRefusalCount; ++i) {
                (*refusals)[i]->set_total(static_cast<double>(m.handshake_refusals[i]));
            }
            if (admin_.server) {
                const admin::AdminServerStats& s = admin_.server->stats();
                forbidden->set_total(static_cast<double>(s.forbidden));
                unauthorized->set_total(static_cast<double>(s.unauthorized));
                unsupported->set_total(static_cast<double>(s.unsupported_media));
                connections->set_total(static_cast<double>(s.connections_refused));
            }
        });
}

}  // namespace conclave::node
