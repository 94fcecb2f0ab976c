// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/identity.hpp"

#include <algorithm>
#include <boost/crc.hpp>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <vector>

#include "conclave/node/node_table.hpp"

namespace conclave::node {

namespace fs = std::filesystem;

namespace {

bool non_empty_file(const fs::path& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0 && !ec;
}

drivers::NodeIdentity expected_identity(const ClusterConfig& config) {
    return drivers::NodeIdentity{config.cluster, config.self_entry().id, ""};
}

void check_owner(const ClusterConfig& config, const drivers::NodeIdentity& found) {
    const drivers::NodeIdentity want = expected_identity(config);
    if (found.cluster == want.cluster && found.node == want.node) {
        return;
    }
    throw IdentityError("'" + (config.data_dir / drivers::kStateFileName).string() +
                        "' belongs to node '" + found.node + "' of cluster '" + found.cluster +
                        "', not to node '" + want.node + "' of cluster '" + want.cluster +
                        "': refusing to start (a data directory copied or restored from another "
                        "node would make this node vote with another node's votes); point "
                        "data_dir at this node's own directory");
}

}  // namespace

std::size_t vote_record_cluster_size(const ClusterConfig& config) {
    try {
        if (const auto stored = load_node_table(config.data_dir)) {
            return std::max(stored->nodes.size(), config.nodes.size());
        }
    } catch (const std::exception&) {
        // Refused with its own message where the table is adopted (node.cpp).
    }
    return config.nodes.size();
}

fs::path metadata_log_file(const ClusterConfig& config) {
    return config.data_dir / "log" / "log.dat";
}

void check_log_kept(const ClusterConfig& config, const drivers::NodeIdentity& identity) {
    std::error_code ec;
    if (!identity.log || !config.metadata.enabled ||
        fs::is_regular_file(metadata_log_file(config), ec)) {
        return;
    }
    throw IdentityError(
        "'" + metadata_log_file(config).string() + "' is missing, but '" +
        (config.data_dir / drivers::kStateFileName).string() +
        "' shows that this node created its metadata log: the entries it acknowledged are lost, "
        "and starting it with its old votes on an empty log could let it count in a quorum "
        "without them (a committed entry lost). Refusing to start; " +
        identity_ways_back(config));
}

void check_vote_record_covers_log(const ClusterConfig& config, Term vote_term, Term log_term) {
    if (vote_term >= log_term) {
        return;
    }
    throw IdentityError(
        "'" + (config.data_dir / drivers::kStateFileName).string() + "' is of term " +
        std::to_string(vote_term.value) + ", but the metadata log in '" +
        (config.data_dir / "log").string() + "' holds entries of term " +
        std::to_string(log_term.value) +
        ": the vote record is older than the log (put back from an older copy?), and this node "
        "may have voted in terms it no longer remembers (it could vote twice in one term: two "
        "leaders with one fencing token). Refusing to start; " +
        identity_ways_back(config));
}

std::vector<std::string> state_evidence(const ClusterConfig& config) {
    std::vector<std::string> found;
    const fs::path log = config.data_dir / "log";
    for (const fs::path& p : {config.data_dir / kNodeTableFile, log / "log.meta", log / "log.dat",
                              log / "log.snap", log / "log.repaired"}) {
        if (non_empty_file(p)) {
            found.push_back(p.string());
        }
    }
    return found;
}

std::string identity_ways_back(const ClusterConfig& config) {
    const std::string& id = config.self_entry().id;
    return "the safe ways back: run `conclaved --repair --min-term T --config FILE --node-id " +
           id +
           "` with T the cluster's current term (GET /status on a running node): the node then "
           "rejoins as a non-voting member until it has caught up from a leader of a later term; "
           "or take it out of the cluster (conclavectl members remove " +
           id + "), empty " + config.data_dir.string() + " and start it with --join";
}

IdentityCheck check_identity(const ClusterConfig& config) {
    const auto file = drivers::load_state_file(config.data_dir, vote_record_cluster_size(config));
    if (file && file->identity) {
        check_owner(config, *file->identity);
        check_log_kept(config, *file->identity);
        return IdentityCheck{*file->identity, false, false};
    }
    if (file) {
        // A vote record from before identities: intact (it parsed), so this is the same node; it
        // gets its incarnation now (its peers, of the same earlier version, remember none).
        drivers::NodeIdentity identity = expected_identity(config);
        identity.incarnation = drivers::new_incarnation();
        drivers::store_durable_state(config.data_dir, file->state, identity);
        return IdentityCheck{identity, false, true};
    }
    const std::vector<std::string> evidence = state_evidence(config);
    if (!evidence.empty()) {
        throw IdentityError(
            "'" + (config.data_dir / drivers::kStateFileName).string() + "' is missing, but '" +
            evidence.front() +
            "' shows that this node has taken part in the cluster: its votes are lost, and "
            "starting it as a new node could make it vote twice in one term (two leaders with "
            "the same fencing token) or count in a quorum without the entries it acknowledged. "
            "Refusing to start; " +
            identity_ways_back(config));
    }
    drivers::NodeIdentity identity = expected_identity(config);
    identity.incarnation = drivers::new_incarnation();
    identity.registered = false;
    drivers::store_durable_state(config.data_dir, elector::DurableState{}, identity);
    return IdentityCheck{identity, true, false};
}

namespace {

std::uint32_t crc_of(const std::string& text) {
    boost::crc_32_type crc;
    crc.process_bytes(text.data(), text.size());
    return crc.checksum();
}

}  // namespace

PeerIncarnations::PeerIncarnations(fs::path data_dir) : data_dir_(std::move(data_dir)) {
    const fs::path path = data_dir_ / kFileName;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        return;
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    const auto damaged = [&](const std::string& what) {
        return drivers::StateFileError(
            "damaged '" + path.string() + "' (" + what +
            "): refusing to start. It holds the incarnations this node knows its peers by; "
            "removing it makes this node take any incarnation of each peer once (a peer whose "
            "state was lost is then refused only by the other nodes)");
    };
    if (!in || j.is_discarded() || !j.is_object() || !j.contains("peers") ||
        !j["peers"].is_object() || !j.contains("crc32") || !j["crc32"].is_number_unsigned() ||
        (j.contains("terms") && !j["terms"].is_object())) {
        throw damaged("not a peers file");
    }
    // Format 1 (incarnations only) sums the peers; format 2 the peers and their terms.
    const nlohmann::json terms = j.value("terms", nlohmann::json::object());
    const std::string summed =
        j.contains("terms") ? j["peers"].dump() + terms.dump() : j["peers"].dump();
    if (j["crc32"].get<std::uint32_t>() != crc_of(summed)) {
        throw damaged("checksum mismatch");
    }
    for (const auto& [id, inc] : j["peers"].items()) {
        if (!inc.is_string()) {
            throw damaged("peer '" + id + "': not a string");
        }
        known_[id] = inc.get<std::string>();
    }
    for (const auto& [id, term] : terms.items()) {
        if (!term.is_number_unsigned() || !known_.contains(id)) {
            throw damaged("term of peer '" + id + "': not a term of a known peer");
        }
        terms_[id] = term.get<std::uint64_t>();
    }
}

void PeerIncarnations::store() const {
    nlohmann::json peers = nlohmann::json::object();
    for (const auto& [id, inc] : known_) {
        peers[id] = inc;
    }
    nlohmann::json terms = nlohmann::json::object();
    for (const auto& [id, term] : terms_) {
        terms[id] = term;
    }
    const nlohmann::json j{{"format", 2},
                           {"peers", peers},
                           {"terms", terms},
                           {"crc32", crc_of(peers.dump() + terms.dump())}};
    drivers::store_file_durably(data_dir_, kFileName, j.dump() + "\n");
}

std::optional<std::uint64_t> PeerIncarnations::announced_term(
    const std::string& peer, const std::string& incarnation) const {
    const auto known = known_.find(peer);
    const auto term = terms_.find(peer);
    if (known == known_.end() || known->second != incarnation || term == terms_.end()) {
        return std::nullopt;
    }
    return term->second;
}

void PeerIncarnations::remember_term(const std::string& peer, const std::string& incarnation,
                                     std::uint64_t term) {
    const auto known = known_.find(peer);
    if (known == known_.end() || known->second != incarnation) {
        return;
    }
    auto [it, added] = terms_.try_emplace(peer, term);
    if (!added && it->second >= term) {
        return;
    }
    it->second = term;
    store();
}

std::optional<std::string> PeerIncarnations::admit(const std::string& peer,
                                                   const std::string& incarnation, bool repaired) {
    if (incarnation.empty()) {
        return std::nullopt;
    }
    const auto it = known_.find(peer);
    if (it != known_.end() && it->second == incarnation) {
        return std::nullopt;
    }
    if (it != known_.end() && !repaired) {
        // Told to the peer in a Refused frame (at most net::kMaxRefusalDetailBytes).
        return "'" + peer + "' is known by incarnation " + it->second.substr(0, 8) + "..., not " +
               incarnation.substr(0, 8) +
               "...: its data directory was lost or replaced. Ways back: conclaved --repair "
               "--min-term T (T: the cluster's term), or members remove + --join";
    }
    known_[peer] = incarnation;
    terms_.erase(peer);  // a new incarnation announces its own terms
    store();
    return std::nullopt;
}

void PeerIncarnations::forget(const std::string& peer) {
    terms_.erase(peer);
    if (known_.erase(peer) > 0) {
        store();
    }
}

}  // namespace conclave::node
