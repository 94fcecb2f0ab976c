// SPDX-License-Identifier: Apache-2.0
// POST /metadata, GET /metadata (pages, prefix listings, watches) and GET /metadata/<key> on the
// admin server (see node/README.md for the contract).
#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <limits>
#include <memory>
#include <variant>

#include "conclave/admin/admin_routes.hpp"
#include "conclave/admin/metadata.hpp"
#include "conclave/admin/status.hpp"
#include "conclave/replication/membership.hpp"

#include "query_params.hpp"
#include "request_target.hpp"

namespace conclave::admin {
namespace {

using nlohmann::json;

std::optional<AdminResponse> RejectParameters(const AdminRequest& request,
                                              std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : request.query) {
        (void)value;
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            std::string names;
            for (std::string_view name : allowed) {
                names += (names.empty() ? "" : ", ") + std::string(name);
            }
            return json_error(400, "bad_request",
                              "query: unknown parameter \"" + key.substr(0, 64) + "\"" +
                                  (allowed.size() == 0 ? " (this endpoint takes none)"
                                                       : " (allowed: " + names + ")"));
        }
    }
    return std::nullopt;
}

}  // namespace

AdminResponse propose_response(const MetadataProposeResult& r, const std::string& scheme,
                               const std::string& path) {
    switch (r.status) {
        case MetadataProposeStatus::Committed: {
            // json_response(200, {{"lsn", lsn_to_json(r.lsn)}}) without a document: one per
            // write of a batch, on the io thread.
            AdminResponse response;
            response.body = "{\"lsn\":{\"counter\":" + std::to_string(r.lsn.counter) +
                            ",\"term\":" + std::to_string(r.lsn.term.value) + "}}\n";
            return response;
        }
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
        case MetadataProposeStatus::ConditionFailed:
            return json_response(409, {{"error", "condition_failed"},
                                       {"detail", r.detail},
                                       {"lsn", lsn_text(r.current_lsn)},
                                       {"fencing_token", r.term}});
    }
    return json_error(500, "internal", "unknown proposal status");
}

std::string lsn_text(const Lsn& lsn) {
    return std::to_string(lsn.term.value) + "." + std::to_string(lsn.counter);
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

/// ?max=, 1..limit (default kDefaultMetadataPage); or the error naming it.
std::variant<std::size_t, AdminResponse> MaxOf(const AdminRequest& request, std::size_t limit) {
    auto it = request.query.find("max");
    if (it == request.query.end()) {
        return kDefaultMetadataPage;
    }
    auto parsed = ParseU64(it->second);
    if (!parsed || *parsed == 0 || *parsed > limit) {
        return json_error(400, "bad_request",
                          "max: expected an integer in 1.." + std::to_string(limit) + ", got \"" +
                              it->second.substr(0, 64) + "\"");
    }
    return static_cast<std::size_t>(*parsed);
}

constexpr std::string_view kWriteShape =
    "{\"key\": \"...\", \"value\": <any JSON>, \"expect_lsn\": \"T.C\" (optional), "
    "\"fence\": TOKEN (optional)}";

/// The conditions of one write (expect_lsn, fence) of a POST /metadata body, or the error naming
/// the field; `where` names the write ("body", "body.entries[3]").
std::variant<MetadataCondition, AdminResponse> ParseCondition(const json& body,
                                                              const std::string& where) {
    MetadataCondition condition;
    if (auto it = body.find("expect_lsn"); it != body.end()) {
        const auto lsn = it->is_string() ? parse_lsn_text(it->get<std::string>()) : std::nullopt;
        if (!lsn) {
            return json_error(400, "bad_request",
                              where +
                                  ".expect_lsn: expected \"TERM.COUNTER\" (the LSN of the key's "
                                  "last write; \"0.0\": the key must not exist)");
        }
        condition.expect_lsn = *lsn;
    }
    if (auto it = body.find("fence"); it != body.end()) {
        if (!it->is_number_unsigned()) {
            return json_error(400, "bad_request",
                              where +
                                  ".fence: expected a fencing token (a non-negative integer: the "
                                  "leader's term the write was decided under)");
        }
        condition.fence = it->get<std::uint64_t>();
    }
    return condition;
}

/// The checks of one write of a POST /metadata body (`where`: "body", "body.entries[3]"): an
/// object of known fields with a usable key and a value.
std::optional<AdminResponse> CheckWrite(const json& body, const std::string& where) {
    if (!body.is_object()) {
        return json_error(400, "bad_request",
                          where + ": expected a JSON object " + std::string(kWriteShape));
    }
    for (const auto& [field, unused] : body.items()) {
        (void)unused;
        if (field != "key" && field != "value" && field != "expect_lsn" && field != "fence") {
            return json_error(400, "bad_request",
                              where + "." + field.substr(0, 64) +
                                  ": unknown field (expected key, value, expect_lsn, fence)");
        }
    }
    const auto key = body.find("key");
    if (key == body.end() || !key->is_string() || key->get<std::string>().empty()) {
        return json_error(400, "bad_request", where + ".key: expected a non-empty string");
    }
    if (replication::is_reserved_key(key->get<std::string>())) {
        return json_error(400, "bad_request",
                          where +
                              ".key: the key space _conclave/ is reserved to "
                              "membership (docs/membership.md)");
    }
    if (body.find("value") == body.end()) {
        return json_error(400, "bad_request", where + ".value: missing");
    }
    return std::nullopt;
}

/// One checked write of a POST /metadata body.
struct Write {
    std::string key;
    std::string value;  // JSON text
    MetadataCondition condition;
};

/// The write of `body` (`where` names it), or the error naming its problem.
std::variant<Write, AdminResponse> WriteOf(json& body, const std::string& where) {
    if (auto error = CheckWrite(body, where)) {
        return *error;
    }
    auto condition = ParseCondition(body, where);
    if (auto* error = std::get_if<AdminResponse>(&condition)) {
        return *error;
    }
    return Write{std::move(body["key"].get_ref<std::string&>()), body["value"].dump(),
                 std::get<MetadataCondition>(condition)};
}

/// The writes of a batch body {"entries": [...]}, 1..kMaxMetadataBatch of them, or the error
/// naming the first problem (then nothing is proposed).
std::variant<std::vector<Write>, AdminResponse> BatchOf(json& body) {
    if (body.size() != 1) {
        return json_error(400, "bad_request",
                          "body: a batch {\"entries\": [...]} has no other field");
    }
    json& entries = body["entries"];
    if (!entries.is_array() || entries.empty() || entries.size() > kMaxMetadataBatch) {
        return json_error(400, "bad_request",
                          "body.entries: expected an array of 1.." +
                              std::to_string(kMaxMetadataBatch) + " writes " +
                              std::string(kWriteShape));
    }
    std::vector<Write> writes;
    writes.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        auto write = WriteOf(entries[i], "body.entries[" + std::to_string(i) + "]");
        if (auto* error = std::get_if<AdminResponse>(&write)) {
            return *error;
        }
        writes.push_back(std::move(std::get<Write>(write)));
    }
    return writes;
}

/// The answer of a batch once every write has its outcome: {"results": [each write's own
/// answer body, in request order]}, with status 200 when all committed, else the status and
/// headers (a 307's Location) of the first write that did not.
class BatchAnswer {
  public:
    BatchAnswer(std::size_t writes, AdminResponder respond, std::string scheme, std::string path)
        : answers_(writes),
          left_(writes),
          respond_(std::move(respond)),
          scheme_(std::move(scheme)),
          path_(std::move(path)) {}

    void on_result(std::size_t index, const MetadataProposeResult& r) {
        answers_[index] = propose_response(r, scheme_, path_);
        if (--left_ == 0) {
            respond_(Combined());
        }
    }

  private:
    AdminResponse Combined() {
        AdminResponse response;
        std::string body = "{\"results\":[";
        for (std::size_t i = 0; i < answers_.size(); ++i) {
            AdminResponse& a = answers_[i];
            if (a.status != 200 && response.status == 200) {
                response.status = a.status;
                response.headers = std::move(a.headers);
            }
            while (!a.body.empty() && a.body.back() == '\n') {
                a.body.pop_back();
            }
            body += i == 0 ? "" : ",";
            body += a.body;
        }
        body += "]}\n";
        response.body = std::move(body);
        return response;
    }

    std::vector<AdminResponse> answers_;
    std::size_t left_;
    AdminResponder respond_;
    std::string scheme_;
    std::string path_;
};

void PostBatch(AdminSource& source, const AdminRequest& request, AdminResponder respond,
               json& body) {
    auto batch = BatchOf(body);
    if (auto* error = std::get_if<AdminResponse>(&batch)) {
        return respond(*error);
    }
    auto& writes = std::get<std::vector<Write>>(batch);
    auto answer = std::make_shared<BatchAnswer>(writes.size(), std::move(respond), request.scheme,
                                                request.path);
    // Proposed one after the other on this thread, so in request order.
    for (std::size_t i = 0; i < writes.size(); ++i) {
        source.propose_metadata_if(
            std::move(writes[i].key), std::move(writes[i].value), writes[i].condition,
            [answer, i](const MetadataProposeResult& r) { answer->on_result(i, r); });
    }
}

// POST /metadata: {"key": "...", "value": <any JSON>[, "expect_lsn": "T.C"][, "fence": N]},
// proposed through the log (conditional and fenced writes: MetadataCondition); or a batch
// {"entries": [such writes]}, each proposed as its own entry, in order.
void PostMetadata(AdminSource& source, const AdminRequest& request, AdminResponder respond) {
    if (auto error = RejectParameters(request, {})) {
        return respond(*error);
    }
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
        return respond(json_error(400, "bad_request",
                                  "body: expected a JSON object " + std::string(kWriteShape) +
                                      " or {\"entries\": [such objects]}, got malformed JSON"));
    }
    if (body.is_object() && body.contains("entries")) {
        return PostBatch(source, request, std::move(respond), body);
    }
    auto write = WriteOf(body, "body");
    if (auto* error = std::get_if<AdminResponse>(&write)) {
        return respond(*error);
    }
    Write& w = std::get<Write>(write);
    source.propose_metadata_if(
        std::move(w.key), std::move(w.value), w.condition,
        [respond, scheme = request.scheme, path = request.path](const MetadataProposeResult& r) {
            respond(propose_response(r, scheme, path));
        });
}

// GET /metadata?from=TERM.COUNTER&max=N: a page of committed entries after `from`.
void GetPage(AdminSource& source, const AdminRequest& request, AdminResponder respond) {
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
    auto max_or_error = MaxOf(request, kMaxMetadataPage);
    if (auto* error = std::get_if<AdminResponse>(&max_or_error)) {
        return respond(*error);
    }
    const std::size_t max = std::get<std::size_t>(max_or_error);
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

// ---- The key state: GET /metadata/<key>, GET /metadata?prefix=, GET /metadata?watch=1 ---------

constexpr std::string_view kKeyRoute = "/metadata/";

/// A stored value as JSON text: itself when it is JSON, else (opaque bytes proposed through the
/// embedding API) a string.
void AppendValue(std::string& body, const std::string& value) {
    if (json::accept(value)) {
        body += value;
    } else {
        body += json(value).dump(-1, ' ', false, json::error_handler_t::replace);
    }
}

/// {"key": K, "value": V, "lsn": "T.C" (, "snapshot": true)} without the closing brace.
std::string KeyObjectOpen(const replication::Entry& e) {
    std::string out = "{\"key\":";
    out += json(e.key).dump(-1, ' ', false, json::error_handler_t::replace);
    out += ",\"value\":";
    AppendValue(out, e.value);
    out += ",\"lsn\":\"" + lsn_text(e.lsn) + "\"";
    return out;
}

/// ?consistency=, default linearizable; or the error naming it.
std::variant<ReadConsistency, AdminResponse> ConsistencyOf(const AdminRequest& request) {
    auto it = request.query.find("consistency");
    if (it == request.query.end()) {
        return ReadConsistency::Linearizable;
    }
    if (auto c = parse_read_consistency(it->second)) {
        return *c;
    }
    return json_error(400, "bad_request",
                      "consistency: expected linearizable or serializable, got \"" +
                          it->second.substr(0, 64) + "\"");
}

/// Not served (redirect, no leader, not active, ...): as a proposal that did not commit; the
/// redirect keeps the query.
AdminResponse ReadRefused(const MetadataReadResult& r, const AdminRequest& request) {
    return propose_response(r.outcome, request.scheme,
                            encode_request_target(request.path, request.query));
}

// GET /metadata/<key>[?consistency=linearizable|serializable]
void GetKey(AdminSource& source, const AdminRequest& request, AdminResponder respond) {
    if (auto error = RejectParameters(request, {"consistency"})) {
        return respond(*error);
    }
    const auto key = decode_path_part(std::string_view(request.path).substr(kKeyRoute.size()));
    if (!key || key->empty()) {
        return respond(json_error(400, "bad_request",
                                  "path: expected /metadata/<key> (the key percent-encoded)"));
    }
    auto consistency = ConsistencyOf(request);
    if (auto* error = std::get_if<AdminResponse>(&consistency)) {
        return respond(*error);
    }
    MetadataQuery query{*key, false, 1, std::get<ReadConsistency>(consistency)};
    source.read_metadata(std::move(query), [respond, request](const MetadataReadResult& r) {
        if (!r.outcome.ok()) {
            return respond(ReadRefused(r, request));
        }
        if (r.entries.empty()) {
            AdminResponse response = json_response(
                404, {{"error", "not_found"},
                      {"detail", "no such key (as of commit " + lsn_text(r.outcome.lsn) + ")"},
                      {"commit_lsn", lsn_text(r.outcome.lsn)}});
            return respond(std::move(response));
        }
        AdminResponse response;
        response.body = KeyObjectOpen(r.entries.front()) + ",\"commit_lsn\":\"" +
                        lsn_text(r.outcome.lsn) + "\"}\n";
        respond(std::move(response));
    });
}

// GET /metadata?prefix=P[&max=N][&consistency=...]: the keys under P, in key order.
void ListMetadata(AdminSource& source, const AdminRequest& request, AdminResponder respond) {
    if (auto error = RejectParameters(request, {"prefix", "max", "consistency"})) {
        return respond(*error);
    }
    auto consistency = ConsistencyOf(request);
    if (auto* error = std::get_if<AdminResponse>(&consistency)) {
        return respond(*error);
    }
    auto max_or_error = MaxOf(request, kMaxMetadataList);
    if (auto* error = std::get_if<AdminResponse>(&max_or_error)) {
        return respond(*error);
    }
    const std::size_t max = std::get<std::size_t>(max_or_error);
    MetadataQuery query{request.query.at("prefix"), true, max,
                        std::get<ReadConsistency>(consistency)};
    source.read_metadata(
        std::move(query), [&source, respond, request](const MetadataReadResult& r) mutable {
            if (!r.outcome.ok()) {
                return respond(ReadRefused(r, request));
            }
            // Encoding the values (the heavy part) off the io thread, from the read's copies.
            source.offload(
                [r, prefix = request.query.at("prefix")]() {
                    std::string body =
                        "{\"prefix\":" +
                        json(prefix).dump(-1, ' ', false, json::error_handler_t::replace) +
                        ",\"keys\":[";
                    for (std::size_t i = 0; i < r.entries.size(); ++i) {
                        body += (i == 0 ? "" : ",") + KeyObjectOpen(r.entries[i]) + "}";
                    }
                    body += std::string("],\"more\":") + (r.more ? "true" : "false") +
                            ",\"commit_lsn\":\"" + lsn_text(r.outcome.lsn) + "\"}\n";
                    AdminResponse response;
                    response.body = std::move(body);
                    return response;
                },
                std::move(respond));
        });
}

constexpr std::chrono::seconds kWatchKeepalive{15};

/// The watches of GET /metadata?watch=1 open at once.
struct MetadataWatchers {
    explicit MetadataWatchers(boost::asio::io_context& io_context) : io(io_context) {}
    boost::asio::io_context& io;
    std::size_t open = 0;
    /// Subscriptions of closed streams, ended at the next watch request (a stream may close after
    /// the server and its source are gone: its close must not reach the source).
    std::vector<std::uint64_t> closed;

    void EndClosed(AdminSource& source) {
        for (std::uint64_t id : closed) {
            source.unwatch_committed(id);
        }
        closed.clear();
    }
};

/// Writes a blank line now and then: a client gone without a word is found out.
void KeepWatchAlive(const std::shared_ptr<boost::asio::steady_timer>& timer,
                    const std::weak_ptr<AdminStream>& weak) {
    timer->expires_after(kWatchKeepalive);
    timer->async_wait([timer, weak](boost::system::error_code ec) {
        auto stream = weak.lock();
        if (ec || !stream || !stream->write("\n")) {
            return;
        }
        KeepWatchAlive(timer, weak);
    });
}

/// Starts a watch on an open stream: committed entries under `prefix` after `from` (the commit
/// point when unset), those from the last compaction's snapshot marked "snapshot": true.
void StartWatch(AdminSource& source, const std::shared_ptr<MetadataWatchers>& watchers,
                const std::string& prefix, std::optional<Lsn> from,
                const std::shared_ptr<AdminStream>& stream) {
    const std::optional<MetadataPage> now = source.metadata_after(replication::kNoLsn, 0);
    if (!now) {
        return stream->close();
    }
    const Lsn after = from.value_or(now->commit_lsn);
    const Lsn snapshot_lsn = after < now->snapshot_lsn ? now->snapshot_lsn : replication::kNoLsn;
    auto last = std::make_shared<Lsn>(after);
    auto own_id = std::make_shared<std::optional<std::uint64_t>>();
    std::weak_ptr<AdminStream> weak = stream;
    // The callback runs only while the node (the source) lives: it ends its own subscription
    // once the stream is gone.
    const std::optional<std::uint64_t> id = source.watch_committed(
        prefix, after, [&source, weak, last, own_id, snapshot_lsn](const replication::Entry& e) {
            auto s = weak.lock();
            if (!s || s->closed()) {
                if (*own_id) {
                    source.unwatch_committed(**own_id);
                }
                return;
            }
            // A snapshot installed later repeats older writes: each LSN once, in order.
            if (e.lsn <= *last || replication::is_sync_point(e)) {
                return;
            }
            *last = e.lsn;
            s->write(KeyObjectOpen(e) + (e.lsn <= snapshot_lsn ? ",\"snapshot\":true}\n" : "}\n"));
        });
    if (!id) {
        return stream->close();
    }
    *own_id = id;
    if (stream->closed()) {  // the replay did not fit in the stream's buffer
        return source.unwatch_committed(*id);
    }
    ++watchers->open;
    auto timer = std::make_shared<boost::asio::steady_timer>(watchers->io);
    stream->on_close([watchers, id, timer] {
        --watchers->open;
        timer->cancel();
        watchers->closed.push_back(*id);
    });
    KeepWatchAlive(timer, weak);
}

// GET /metadata?watch=1[&prefix=P][&from=T.C]: NDJSON, one line per committed change under P.
void WatchMetadata(AdminSource& source, const std::shared_ptr<MetadataWatchers>& watchers,
                   const AdminRequest& request, AdminResponder respond) {
    if (auto error = RejectParameters(request, {"watch", "prefix", "from"})) {
        return respond(*error);
    }
    if (request.query.at("watch") != "1") {
        return respond(json_error(
            400, "bad_request",
            "watch: expected 1, got \"" + request.query.at("watch").substr(0, 64) + "\""));
    }
    std::optional<Lsn> from;
    if (auto it = request.query.find("from"); it != request.query.end()) {
        from = parse_lsn_text(it->second);
        if (!from) {
            return respond(json_error(400, "bad_request",
                                      "from: expected TERM.COUNTER (e.g. 3.17), got \"" +
                                          it->second.substr(0, 64) + "\""));
        }
    }
    if (!source.metadata_after(replication::kNoLsn, 0)) {
        return respond(json_error(503, "disabled", "this node runs no metadata log"));
    }
    watchers->EndClosed(source);
    if (!request.authenticated && watchers->open >= kMaxMetadataWatchers) {
        return respond(json_error(503, "too_many_watchers",
                                  "too many metadata watches at once (limit " +
                                      std::to_string(kMaxMetadataWatchers) + "); retry later"));
    }
    const auto prefix_it = request.query.find("prefix");
    std::string prefix = prefix_it == request.query.end() ? std::string() : prefix_it->second;
    AdminResponse response;
    response.content_type = "application/x-ndjson";
    response.stream = [&source, watchers, prefix = std::move(prefix),
                       from](std::shared_ptr<AdminStream> stream) {
        StartWatch(source, watchers, prefix, from, stream);
    };
    respond(std::move(response));
}
}  // namespace

void register_metadata_routes(AdminServer& server, AdminSource& source) {
    server.route_async("POST", "/metadata",
                       [&source](const AdminRequest& request, AdminResponder respond) {
                           PostMetadata(source, request, std::move(respond));
                       });
    auto watchers = std::make_shared<MetadataWatchers>(server.io());
    server.route_async("GET", "/metadata",
                       [&source, watchers](const AdminRequest& request, AdminResponder respond) {
                           if (request.query.contains("watch")) {
                               return WatchMetadata(source, watchers, request, std::move(respond));
                           }
                           if (request.query.contains("prefix")) {
                               return ListMetadata(source, request, std::move(respond));
                           }
                           GetPage(source, request, std::move(respond));
                       });
    server.route_async(std::string("GET"), std::string(kKeyRoute),
                       [&source](const AdminRequest& request, AdminResponder respond) {
                           GetKey(source, request, std::move(respond));
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
        AppendValue(body, e.value);
        body += '}';
    }
    body += "],\"commit_lsn\":" + lsn_to_json(page.commit_lsn).dump() + ",\"next_from\":\"" +
            std::to_string(last.term.value) + "." + std::to_string(last.counter) + "\"}\n";
    AdminResponse response;
    response.body = std::move(body);
    return response;
}

std::string_view to_string(MetadataProposeStatus s) {
    switch (s) {
        case MetadataProposeStatus::Committed:
            return "committed";
        case MetadataProposeStatus::NotLeader:
            return "not_leader";
        case MetadataProposeStatus::NoLeader:
            return "no_leader";
        case MetadataProposeStatus::NotActive:
            return "not_active";
        case MetadataProposeStatus::InvalidEntry:
            return "invalid_entry";
        case MetadataProposeStatus::TimedOut:
            return "timed_out";
        case MetadataProposeStatus::LeadershipLost:
            return "leadership_lost";
        case MetadataProposeStatus::Stopped:
            return "stopped";
        case MetadataProposeStatus::Disabled:
            return "disabled";
        case MetadataProposeStatus::Failed:
            return "failed";
        case MetadataProposeStatus::NoSpace:
            return "nospace";
        case MetadataProposeStatus::Refused:
            return "refused";
        case MetadataProposeStatus::ConditionFailed:
            return "condition_failed";
    }
    return "unknown";
}

bool MetadataProposeResult::outcome_unknown() const {
    return status == MetadataProposeStatus::TimedOut ||
           status == MetadataProposeStatus::LeadershipLost ||
           status == MetadataProposeStatus::Failed;
}

std::string_view to_string(ReadConsistency c) {
    return c == ReadConsistency::Linearizable ? "linearizable" : "serializable";
}

std::optional<ReadConsistency> parse_read_consistency(std::string_view text) {
    if (text == "linearizable") {
        return ReadConsistency::Linearizable;
    }
    if (text == "serializable") {
        return ReadConsistency::Serializable;
    }
    return std::nullopt;
}

}  // namespace conclave::admin
