// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/node_table.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "conclave/drivers/state_file.hpp"

namespace conclave::node {

namespace {

constexpr int kFormat = 1;
constexpr std::size_t kMaxTableFileBytes = 256 * 1024;
const Endpoint kPlaceholder{"removed.invalid", 1};  // RFC 2606: .invalid never resolves

[[noreturn]] void Bad(const std::filesystem::path& file, const std::string& what) {
    throw std::runtime_error(file.string() + ": " + what +
                             " (the node table learnt at run time; docs/membership.md §8)");
}

}  // namespace

void StoredTable::append(const std::string& id, const std::vector<replication::Member>& members) {
    std::optional<Endpoint> peer, http;
    for (const replication::Member& m : members) {
        if (m.id == id) {
            peer = parse_endpoint(m.peer);
            http = parse_endpoint(m.http);
        }
    }
    const bool known = peer && http;
    nodes.push_back(NodeEntry{id, known ? *peer : kPlaceholder, known ? *http : kPlaceholder});
    removed.push_back(!known);
}

bool StoredTable::marks_removed(const std::string& id) const {
    for (std::size_t i = 0; i < nodes.size() && i < removed.size(); ++i) {
        if (nodes[i].id == id) {
            return removed[i];
        }
    }
    return false;
}

bool is_placeholder(const NodeEntry& e) {
    return e.peer == kPlaceholder;
}

std::optional<StoredTable> load_node_table(const std::filesystem::path& data_dir) {
    const auto file = data_dir / kNodeTableFile;
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        return std::nullopt;
    }
    if (std::filesystem::file_size(file, ec) > kMaxTableFileBytes || ec) {
        Bad(file, "unreadable or larger than " + std::to_string(kMaxTableFileBytes) + " bytes");
    }
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
        Bad(file, "not a JSON object");
    }
    StoredTable t;
    try {
        if (j.at("format").get<int>() != kFormat) {
            Bad(file, "unknown format " + j.at("format").dump());
        }
        t.cluster = j.at("cluster").get<std::string>();
        t.version = j.at("version").get<std::uint64_t>();
        t.voters = j.at("voters").get<std::vector<std::string>>();
        const auto& nodes = j.at("nodes");
        if (!nodes.is_array() || nodes.empty() || nodes.size() > kMaxClusterSize) {
            Bad(file, "nodes: expected 1.." + std::to_string(kMaxClusterSize) + " entries");
        }
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            const auto& n = nodes[i];
            const std::string where = "nodes[" + std::to_string(i) + "]";
            const auto peer = parse_endpoint(n.at("peer").get<std::string>());
            const auto http = parse_endpoint(n.at("http").get<std::string>());
            const auto id = n.at("id").get<std::string>();
            if (!peer || !http || id.empty()) {
                Bad(file, where + ": expected a non-empty id and host:port addresses");
            }
            for (const NodeEntry& e : t.nodes) {
                if (e.id == id) {
                    Bad(file, where + ".id: \"" + id + "\" named twice");
                }
            }
            t.nodes.push_back(NodeEntry{id, *peer, *http});
            t.removed.push_back(n.at("removed").get<bool>());
        }
    } catch (const nlohmann::json::exception& e) {
        Bad(file, std::string("malformed: ") + e.what());
    }
    return t;
}

void store_node_table(const std::filesystem::path& data_dir, const StoredTable& table) {
    nlohmann::json nodes = nlohmann::json::array();
    for (std::size_t i = 0; i < table.nodes.size(); ++i) {
        const NodeEntry& e = table.nodes[i];
        nodes.push_back({{"id", e.id},
                         {"peer", to_string(e.peer)},
                         {"http", to_string(e.http)},
                         {"removed", i < table.removed.size() && table.removed[i]}});
    }
    const nlohmann::json j{{"format", kFormat},
                           {"cluster", table.cluster},
                           {"version", table.version},
                           {"voters", table.voters},
                           {"nodes", std::move(nodes)}};
    drivers::store_file_durably(data_dir, kNodeTableFile, j.dump(2) + "\n");
}

std::optional<std::string> apply_stored_table(ClusterConfig& config, const StoredTable& table) {
    if (table.cluster != config.cluster) {
        return "the stored node table is of cluster \"" + table.cluster + "\", the config says \"" +
               config.cluster + "\"";
    }
    const std::string self_id = config.self_entry().id;
    std::optional<NodeId> self;
    for (std::size_t i = 0; i < table.nodes.size(); ++i) {
        if (table.nodes[i].id == self_id) {
            self = NodeId{static_cast<std::uint16_t>(i)};
        }
    }
    if (!self) {
        return "this node's id \"" + self_id + "\" is not in the stored node table";
    }
    config.nodes = table.nodes;
    config.self = *self;
    config.elector.cluster_size = table.nodes.size();
    config.elector.self = *self;
    if (auto error = config.elector.validate()) {
        return "the stored node table does not fit the elector config: " + *error;
    }
    return std::nullopt;
}

}  // namespace conclave::node
