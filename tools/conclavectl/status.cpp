// SPDX-License-Identifier: Apache-2.0
// conclavectl status: one line per node.
#include <iostream>
#include <map>

#include "conclavectl.hpp"

namespace conclave::conclavectl {

namespace {

/// Last contact of node X: the smallest peers[].last_contact_ms another node reports for X.
std::map<std::string, std::int64_t> LastContacts(const std::vector<NodeView>& views) {
    std::map<std::string, std::int64_t> contact;
    for (const NodeView& view : views) {
        if (!view.status) {
            continue;
        }
        for (const json& peer : view.status->value("peers", json::array())) {
            if (!peer.is_object() || !peer.contains("id") || !peer["id"].is_string() ||
                !peer.contains("last_contact_ms") || !peer["last_contact_ms"].is_number_integer()) {
                continue;
            }
            const std::string id = peer["id"].get<std::string>();
            const auto ms = peer["last_contact_ms"].get<std::int64_t>();
            auto [it, inserted] = contact.emplace(id, ms);
            if (!inserted && ms < it->second) {
                it->second = ms;
            }
        }
    }
    return contact;
}

/// The JSON rows of `status -o json`, which the table prints too.
json StatusRows(const Options& options, const std::vector<NodeView>& views) {
    std::map<std::string, std::int64_t> contact = LastContacts(views);
    json out = json::array();
    for (std::size_t i = 0; i < views.size(); ++i) {
        const NodeView& view = views[i];
        json row = {{"endpoint", client::to_string(view.endpoint)}, {"health", view.health}};
        if (view.status) {
            const json& s = *view.status;
            for (const char* key : {"id", "role", "priority", "term", "leader", "fencing_token",
                                    "lease", "commit_lsn", "storage"}) {
                row[key] = s.contains(key) ? s[key] : json(nullptr);
            }
        } else {
            row["id"] = i < options.ids.size() ? json(options.ids[i]) : json(nullptr);
            row["error"] = view.error;
        }
        const std::string id = row["id"].is_string() ? row["id"].get<std::string>() : "";
        row["last_contact_ms"] = contact.count(id) ? json(contact[id]) : json(nullptr);
        out.push_back(std::move(row));
    }
    return out;
}

void PrintStatusTable(const json& rows) {
    const std::vector<std::pair<const char*, const char*>> columns = {
        {"ID", "id"},
        {"ENDPOINT", "endpoint"},
        {"ROLE", "role"},
        {"PRIORITY", "priority"},
        {"TERM", "term"},
        {"LEADER", "leader"},
        {"TOKEN", "fencing_token"},
        {"LEASE", "lease"},
        {"COMMIT", "commit_lsn"},
        {"HEALTH", "health"},
        {"STORAGE", "storage"},
        {"LAST-CONTACT-MS", "last_contact_ms"}};
    std::vector<std::vector<std::string>> cells(1);
    for (const auto& column : columns) {
        cells[0].push_back(column.first);
    }
    for (const json& row : rows) {
        cells.emplace_back();
        for (const auto& column : columns) {
            cells.back().push_back(cell(row, column.second));
        }
    }
    print_table(cells);
    for (const json& row : rows) {
        if (row.contains("error")) {
            std::cerr << "conclavectl: " << row["error"].get<std::string>() << "\n";
        }
    }
}

}  // namespace

int status_command(const Options& options) {
    const std::vector<NodeView> views = survey(options, true);
    bool all_ok = true;
    for (const NodeView& view : views) {
        all_ok = all_ok && view.status && view.health == "ok";
    }
    const json rows = StatusRows(options, views);
    if (options.output == "json") {
        std::cout << rows.dump(2) << std::endl;
    } else {
        PrintStatusTable(rows);
    }
    return all_ok ? kExitOk : kExitUnreachable;
}

}  // namespace conclave::conclavectl
