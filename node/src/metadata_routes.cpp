// SPDX-License-Identifier: Apache-2.0
// POST /metadata and GET /metadata on the admin server (see node/README.md for the contract).
#include <algorithm>
#include <charconv>
#include <limits>

#include "conclave/node/admin_routes.hpp"
#include "conclave/node/metadata.hpp"
#include "conclave/node/status.hpp"
#include "conclave/replication/membership.hpp"

#include "query_params.hpp"

namespace conclave::node {
namespace {

using nlohmann::json;

std::optional<AdminResponse> RejectParameters(const AdminRequest& request,
                                              std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : request.query) {
        (void)value;
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            return json_error(400, "bad_request",
                              "query: unknown parameter \"" + key.substr(0, 64) + "\"" +
                                  (allowed.size() == 0 ? " (this endpoint takes none)"
                                                       : " (allowed: from, max)"));
        }
    }
    return std::nullopt;
}

}  // namespace

AdminResponse propose_response(const MetadataProposeResult& r, const std::string& scheme,
                               const std::string& path) {
    switch (r.status) {
        case MetadataProposeStatus::Committed:
            return json_response(200, {{"lsn", lsn_to_json(r.lsn)}});
        case MetadataProposeStatus::NotLeader:
            if (r.leader_http) {
                json body = {{"error", "not_leader"},
                             {"detail", "this node is not the leader; send the request to " +
                                            *r.leader + " at " + *r.leader_http},
                             {"leader", *r.leader},
                             {"leader_http", *r.leader_http}};
                AdminResponse response = json_response(307, body);
                // Every node of a cluster serves the admin API alike (HTTP or HTTPS).
                response.headers.emplace_back("Location", scheme + "://" + *r.leader_http + path);
                return response;
            }
            return json_error(503, "no_leader", r.detail);
        case MetadataProposeStatus::NoLeader:
            return json_error(503, "no_leader", r.detail);
        case MetadataProposeStatus::NotActive:
            return json_error(503, "not_active", r.detail);
        case MetadataProposeStatus::InvalidEntry:
            return json_error(400, "bad_request", r.detail);
        case MetadataProposeStatus::TimedOut: {
            AdminResponse response = json_error(504, "timeout", r.detail);
            return response;
        }
        case MetadataProposeStatus::LeadershipLost:
            return json_error(503, "leadership_lost", r.detail);
        case MetadataProposeStatus::Stopped:
            return json_error(503, "unavailable", r.detail);
        case MetadataProposeStatus::Disabled:
            return json_error(503, "disabled", r.detail);
        case MetadataProposeStatus::Failed:
            return json_error(503, "failed", r.detail);
        case MetadataProposeStatus::NoSpace:
            return json_error(507, "nospace", r.detail);
        case MetadataProposeStatus::Refused:
            return json_error(409, "refused", r.detail);
    }
    return json_error(500, "internal", "unknown proposal status");
}

std::optional<Lsn> parse_lsn_text(std::string_view text) {
    const std::size_t dot = text.find('.');
    if (dot == std::string_view::npos) {
        return std::nullopt;
    }
    const auto term = ParseU64(text.substr(0, dot));
    const auto counter = ParseU64(text.substr(dot + 1));
    if (!term || !counter) {
        return std::nullopt;
    }
    return Lsn{Term{*term}, *counter};
}

namespace {

// POST /metadata: {"key": "...", "value": <any JSON>}, proposed through the log.
void PostMetadata(AdminSource& source, const AdminRequest& request, AdminResponder respond) {
    if (auto error = RejectParameters(request, {})) {
        return respond(*error);
    }
    const json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
        return respond(json_error(400, "bad_request",
                                  "body: expected a JSON object {\"key\": \"...\", "
                                  "\"value\": <any JSON>}, got malformed JSON"));
    }
    if (!body.is_object()) {
        return respond(json_error(400, "bad_request",
                                  "body: expected a JSON object {\"key\": \"...\", "
                                  "\"value\": <any JSON>}"));
    }
    for (const auto& [field, unused] : body.items()) {
        (void)unused;
        if (field != "key" && field != "value") {
            return respond(json_error(
                400, "bad_request",
                "body." + field.substr(0, 64) + ": unknown field (expected key, value)"));
        }
    }
    const auto key = body.find("key");
    if (key == body.end() || !key->is_string() || key->get<std::string>().empty()) {
        return respond(json_error(400, "bad_request", "body.key: expected a non-empty string"));
    }
    if (replication::is_reserved_key(key->get<std::string>())) {
        return respond(json_error(400, "bad_request",
                                  "body.key: the key space _conclave/ is reserved to "
                                  "membership (docs/membership.md)"));
    }
    const auto value = body.find("value");
    if (value == body.end()) {
        return respond(json_error(400, "bad_request", "body.value: missing"));
    }
    source.propose_metadata(
        key->get<std::string>(), value->dump(),
        [respond, scheme = request.scheme, path = request.path](const MetadataProposeResult& r) {
            respond(propose_response(r, scheme, path));
        });
}

// GET /metadata?from=TERM.COUNTER&max=N: a page of committed entries after `from`.
void GetMetadata(AdminSource& source, const AdminRequest& request, AdminResponder respond) {
    if (auto error = RejectParameters(request, {"from", "max"})) {
        return respond(*error);
    }
    Lsn from{};
    if (auto it = request.query.find("from"); it != request.query.end()) {
        auto parsed = parse_lsn_text(it->second);
        if (!parsed) {
            return respond(json_error(400, "bad_request",
                                      "from: expected TERM.COUNTER (e.g. 3.17), got \"" +
                                          it->second.substr(0, 64) + "\""));
        }
        from = *parsed;
    }
    std::size_t max = kDefaultMetadataPage;
    if (auto it = request.query.find("max"); it != request.query.end()) {
        auto parsed = ParseU64(it->second);
        if (!parsed || *parsed == 0 || *parsed > kMaxMetadataPage) {
            return respond(json_error(400, "bad_request",
                                      "max: expected an integer in 1.." +
                                          std::to_string(kMaxMetadataPage) + ", got \"" +
                                          it->second.substr(0, 64) + "\""));
        }
        max = static_cast<std::size_t>(*parsed);
    }
    // On the io thread: a copy of only the page's range (storage), in small
    // chunks, until its raw bytes reach the page's bound; the body encodes each entry in at
    // least its raw bytes, so the builder stops at the same entry or before.
    MetadataPage page;
    std::size_t raw_bytes = 0;
    Lsn last = from;
    while (page.entries.size() < max && raw_bytes < kMetadataPageBytes) {
        constexpr std::size_t kChunk = 16;
        std::optional<MetadataPage> chunk =
            source.metadata_after(last, std::min(max - page.entries.size(), kChunk));
        if (!chunk) {
            return respond(json_error(503, "disabled", "this node runs no metadata log"));
        }
        page.commit_lsn = chunk->commit_lsn;
        if (chunk->entries.empty()) {
            break;
        }
        for (replication::Entry& e : chunk->entries) {
            if (raw_bytes >= kMetadataPageBytes) {
                break;
            }
            raw_bytes += e.key.size() + e.value.size();
            last = e.lsn;
            page.entries.push_back(std::move(e));
        }
    }
    // Off the io thread: checking and encoding the values (the heavy part) from that copy.
    source.offload([page = std::move(page), from]() { return metadata_page_body(page, from); },
                   std::move(respond));
}

}  // namespace

void register_metadata_routes(AdminServer& server, AdminSource& source) {
    server.route_async("POST", "/metadata",
                       [&source](const AdminRequest& request, AdminResponder respond) {
                           PostMetadata(source, request, std::move(respond));
                       });
    server.route_async("GET", "/metadata",
                       [&source](const AdminRequest& request, AdminResponder respond) {
                           GetMetadata(source, request, std::move(respond));
                       });
}

AdminResponse metadata_page_body(const MetadataPage& page, Lsn from) {
    // Built as text, bounded in bytes: stored values are JSON text already (checked by
    // json::accept, which builds no tree), so none is re-parsed into a tree.
    std::string body = "{\"entries\":[";
    bool first = true;
    Lsn last = from;
    for (const replication::Entry& e : page.entries) {
        if (body.size() >= kMetadataPageBytes) {
            break;
        }
        last = e.lsn;
        if (replication::is_sync_point(e)) {
            continue;  // the leader's sync points carry no data
        }
        body += first ? "{\"lsn\":" : ",{\"lsn\":";
        first = false;
        body += lsn_to_json(e.lsn).dump();
        body += ",\"key\":";
        body += json(e.key).dump(-1, ' ', false, json::error_handler_t::replace);
        body += ",\"value\":";
        if (json::accept(e.value)) {
            body += e.value;
        } else {  // opaque bytes proposed through the embedding API: served as a string
            body += json(e.value).dump(-1, ' ', false, json::error_handler_t::replace);
        }
        body += '}';
    }
    body += "],\"commit_lsn\":" + lsn_to_json(page.commit_lsn).dump() + ",\"next_from\":\"" +
            std::to_string(last.term.value) + "." + std::to_string(last.counter) + "\"}\n";
    AdminResponse response;
    response.body = std::move(body);
    return response;
}

}  // namespace conclave::node
