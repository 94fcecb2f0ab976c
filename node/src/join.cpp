// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/join.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "conclave/codec/membership_codec.hpp"
#include "conclave/net/mesh.hpp"
#include "conclave/node/identity.hpp"
#include "conclave/node/node_table.hpp"
#include "conclave/node/security.hpp"

namespace conclave::node {

namespace {

constexpr int kMaxRedirects = 5;
constexpr std::chrono::milliseconds kRetryDelay{500};

/// The table and configuration a join was accepted with, or why they cannot be used.
std::optional<std::string> TableOf(const ClusterConfig& config, const std::string& answer,
                                   StoredTable& out) {
    const auto cfg = codec::decode_configuration(answer);
    if (!cfg || cfg->table.empty()) {
        return "the seed's answer is not a configuration with a node table";
    }
    const std::string& self = config.self_entry().id;
    const auto is_self = [&](const replication::Member& m) { return m.id == self; };
    if (std::none_of(cfg->learners.begin(), cfg->learners.end(), is_self) &&
        std::none_of(cfg->voters.begin(), cfg->voters.end(), is_self)) {
        return "the configuration the seed answered with does not name this node";
    }
    out.cluster = config.cluster;
    out.version = cfg->version;
    for (const auto& v : cfg->voters) {
        out.voters.push_back(v.id);
    }
    std::vector<replication::Member> members = cfg->voters;
    members.insert(members.end(), cfg->learners.begin(), cfg->learners.end());
    for (const std::string& id : cfg->table) {
        out.append(id, members);
    }
    return std::nullopt;
}

/// The way forward for a join refused at the handshake, appended to its error.
std::string way_forward(const std::string& error) {
    const auto names = [&](std::string_view refusal) {
        return error.find(refusal) != std::string::npos;
    };
    if (names("auth_failed")) {
        return "; this node and the seed do not share the cluster secret: give this node the "
               "cluster's secret_file";
    }
    if (names("certificate_mismatch") || names("tls_failed")) {
        return "; give this node a certificate of the cluster CA naming its id (conclave-certs)";
    }
    if (names("wrong_cluster")) {
        return "; set this config's \"cluster\" to the seed's cluster name";
    }
    return "";
}

/// Whether a stored node table says this node is in the cluster already. A table that marks it
/// removed (its log says so, and members.json with it) means: ask to be added back; the answer
/// brings the current table, which may name nodes that joined since.
bool AlreadyJoined(const ClusterConfig& config, spdlog::logger& log) {
    const auto stored = load_node_table(config.data_dir);
    if (!stored) {
        return false;
    }
    if (!stored->marks_removed(config.self_entry().id)) {
        log.info("join: a node table is stored in {}: this node is already in the cluster",
                 config.data_dir.string());
        return true;
    }
    log.info("join: this node was removed from cluster '{}' ({}): asking to be added back",
             config.cluster, (config.data_dir / kNodeTableFile).string());
    return false;
}

/// One join request to `target`, run to its answer (or the error that ended it).
std::pair<std::optional<net::JoinAnswer>, std::string> AskToJoin(boost::asio::io_context& io,
                                                                 net::Mesh& mesh,
                                                                 const Endpoint& target,
                                                                 const net::JoinRequest& request) {
    std::optional<net::JoinAnswer> answer;
    std::string error;
    bool done = false;
    mesh.request_join(target.host, target.port, request,
                      [&](std::optional<net::JoinAnswer> a, std::string e) {
                          answer = std::move(a);
                          error = std::move(e);
                          done = true;
                      });
    while (!done) {
        io.run_one();
    }
    io.restart();
    return {std::move(answer), std::move(error)};
}

}  // namespace

std::optional<std::string> join_cluster(const ClusterConfig& config, const Endpoint& seed,
                                        spdlog::logger& log, std::chrono::milliseconds timeout) {
    // The identity first: an empty data directory gets its incarnation before the join writes
    // members.json (identity.hpp: a node table without a vote record is refused).
    check_identity(config);
    if (AlreadyJoined(config, log)) {
        return std::nullopt;
    }
    boost::asio::io_context io;
    const SecurityMaterial security = load_security_material(config);
    net::MeshOptions options = mesh_options_of(config, std::nullopt, security);
    options.logger = std::shared_ptr<spdlog::logger>(&log, [](spdlog::logger*) {});
    net::Membership self;
    self.cluster = config.cluster;
    self.nodes.push_back(net::NodeAddress{config.self_entry().id, config.self_entry().peer.host,
                                          config.self_entry().peer.port});
    net::Mesh mesh(io, self, NodeId{0}, options);
    const net::JoinRequest request{to_string(config.self_entry().peer),
                                   to_string(config.self_entry().http)};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    Endpoint target = seed;
    int redirects = 0;
    std::string last_error = "no answer";
    while (std::chrono::steady_clock::now() < deadline) {
        log.info("join: asking {} to add {} to cluster '{}'", to_string(target),
                 config.self_entry().id, config.cluster);
        auto [answer, error] = AskToJoin(io, mesh, target, request);
        bool retry = true;
        if (answer && answer->status == net::JoinStatus::Accepted) {
            StoredTable table;
            if (auto why = TableOf(config, answer->detail, table)) {
                return *why;
            }
            store_node_table(config.data_dir, table);
            log.info(
                "join: added to cluster '{}' as a learner (configuration version {}, {} "
                "nodes in the table); promote it with POST /members once it caught up",
                config.cluster, table.version, table.nodes.size());
            return std::nullopt;
        }
        if (answer && answer->status == net::JoinStatus::Redirect) {
            const auto leader = parse_endpoint(answer->detail);
            if (leader && redirects < kMaxRedirects) {
                ++redirects;
                target = *leader;
                continue;
            }
            last_error = "redirected too often (last to " + answer->detail + ")";
        } else if (answer) {
            last_error = "refused: " + answer->detail;
            // A cluster whose leadership is moving is worth waiting for; anything else is final.
            retry = answer->detail.rfind(kJoinRetry, 0) == 0 ||
                    answer->detail.find("no leader") != std::string::npos;
        } else {
            retry = error.find("refused") == std::string::npos;
            last_error = error + (retry ? "" : way_forward(error));
        }
        if (!retry) {
            break;
        }
        log.warn("join: {}; retrying", last_error);
        target = seed;
        redirects = 0;
        boost::asio::steady_timer wait(io, kRetryDelay);
        wait.wait();
    }
    return "cannot join cluster '" + config.cluster + "' through " + to_string(seed) + ": " +
           last_error;
}

}  // namespace conclave::node
