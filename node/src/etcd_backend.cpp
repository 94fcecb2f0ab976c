// SPDX-License-Identifier: Apache-2.0
// The etcd v3 backend: its JSON gateway over HTTP (Boost.Beast), one coroutine on the node's
// io_context. The recipe: a lease granted with the TTL and kept alive; the campaign is a
// transaction "create_revision(key) == 0 ? put key under the lease : range key"; the holder's
// fencing token is the key's create revision; followers poll the key and campaign again once
// it is gone. Releasing revokes the lease (which deletes the key at once).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "conclave/node/broadcast.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/store_backend.hpp"

namespace conclave::node {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

/// An etcd answer larger than this is refused (a range of one key is a few hundred bytes).
constexpr std::size_t kEtcdBodyLimit = 1U << 20;

std::string EtcdBase64(std::string_view text) {
    std::string out(beast::detail::base64::encoded_size(text.size()), '\0');
    out.resize(beast::detail::base64::encode(out.data(), text.data(), text.size()));
    return out;
}

std::optional<std::string> EtcdUnbase64(const std::string& text) {
    std::string out(beast::detail::base64::decoded_size(text.size()), '\0');
    const auto [written, read] =
        beast::detail::base64::decode(out.data(), text.data(), text.size());
    if (read + 2 < text.size()) {  // stopped before the padding: not base64
        return std::nullopt;
    }
    out.resize(written);
    return out;
}

/// etcd's gateway writes 64-bit integers as JSON strings ("123"); absent means 0.
std::uint64_t EtcdNumber(const json& object, const char* key) {
    const auto it = object.find(key);
    if (it == object.end()) {
        return 0;
    }
    if (it->is_number_unsigned()) {
        return it->get<std::uint64_t>();
    }
    if (!it->is_string()) {
        throw std::invalid_argument(std::string("etcd: field ") + key + " is not a number");
    }
    return std::stoull(it->get<std::string>());
}

}  // namespace

class EtcdBackend final : public StoreBackend {
  public:
    EtcdBackend(asio::io_context& io, const ClusterConfig& config,
                std::shared_ptr<spdlog::logger> logger)
        : StoreBackend(io, config.backend, config.cluster, config.self_entry().id,
                       to_string(config.self_entry().http), std::move(logger)),
          key_(settings_.prefix + "/" + cluster_ + "/leader"),
          members_(settings_.prefix + "/" + cluster_ + "/members/"),
          broadcasts_(settings_.prefix + "/" + cluster_ + "/broadcast/"),
          stream_(io),
          resolver_(io),
          wake_(io) {}

    ~EtcdBackend() override {
        *running_ = false;
        beast::error_code ignored;
        stream_.socket().close(ignored);
    }

    void start(Changed changed) override {
        changed_ = std::move(changed);
        asio::co_spawn(io_, Run(running_), asio::detached);
    }

    std::optional<std::string> resign() override {
        if (!view().holding) {
            return std::string("not the leader (this node does not hold the etcd key)");
        }
        resign_ = true;
        update([](StoreView& v) {
            v.holding = false;  // stop acting at once; the revocation follows
            v.reason = elector::Reason::LeadershipTransferred;
        });
        wake_.cancel();
        return std::nullopt;
    }

    void stop(std::function<void()> done) override {
        stop_done_ = std::move(done);
        stopping_ = true;
        update([](StoreView& v) {
            v.holding = false;
            v.reason = elector::Reason::Stopped;
        });
        wake_.cancel();
    }

  private:
    void wake() override {
        asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
            if (!alive.expired()) {
                wake_.cancel();
            }
        });
    }

    struct Answer {
        std::optional<json> body;  // nullopt: no usable answer (detail in `error`)
        std::string error;
    };

    asio::awaitable<void> Run(std::shared_ptr<bool> running);
    asio::awaitable<void> Step();
    asio::awaitable<bool> EnsureLease();
    asio::awaitable<void> Campaign();
    asio::awaitable<void> CheckHeld();
    asio::awaitable<void> Release();
    asio::awaitable<void> Members();
    asio::awaitable<void> Broadcasts();
    asio::awaitable<void> PutBroadcast(const admin::BroadcastMessage& message);
    /// The records under `prefix` (name after the prefix, value), or nullopt when unanswered.
    asio::awaitable<std::optional<json>> RangePrefix(const std::string& prefix, json extra);
    asio::awaitable<Answer> Call(const std::string& path, const json& body);
    asio::awaitable<std::optional<std::string>> Connect();
    asio::awaitable<void> Sleep(std::chrono::milliseconds pause);
    void Failed(const std::string& what, const std::string& error);
    void Answered();

    std::chrono::milliseconds Poll() const {
        return std::clamp(ttl() / 8, std::chrono::milliseconds(50), std::chrono::milliseconds(250));
    }
    std::chrono::milliseconds RequestTimeout() const {
        return std::max(ttl() / 2, std::chrono::milliseconds(200));
    }

    const std::string key_;
    const std::string members_;     // <prefix>/<cluster>/members/<node id>
    const std::string broadcasts_;  // <prefix>/<cluster>/broadcast/<from>/<boot>/<seq>
    Clock::time_point next_beat_{};
    std::int64_t broadcasts_seen_ = 0;  // the store revision read up to (0: not yet)
    beast::tcp_stream stream_;
    bool connected_ = false;
    std::size_t endpoint_index_ = 0;
    asio::ip::tcp::resolver resolver_;
    asio::steady_timer wake_;
    std::shared_ptr<bool> running_ = std::make_shared<bool>(true);
    std::uint64_t lease_id_ = 0;
    std::chrono::milliseconds lease_ttl_{0};
    /// The send time of the last renewal (grant or keepalive) etcd confirmed.
    std::optional<Clock::time_point> confirmed_send_;
    std::uint64_t token_ = 0;  // our key's create revision while holding
    bool resign_ = false;
    bool stopping_ = false;
    Clock::time_point hold_off_until_{};
    std::function<void()> stop_done_;
};

asio::awaitable<void> EtcdBackend::Run(std::shared_ptr<bool> running) {
    while (*running && !stopping_) {
        std::optional<std::string> malformed;
        try {
            co_await Step();
        } catch (const std::exception& e) {
            malformed = e.what();
        }
        if (malformed && *running) {
            Failed("answer", *malformed);
            co_await Sleep(Poll());
        }
        if (!*running) {
            co_return;  // the backend is gone
        }
        if (resign_ || stopping_) {
            co_await Release();
        }
    }
    if (!*running) {
        co_return;
    }
    update([](StoreView& v) { v.session = StoreSession::Stopped; });
    if (auto done = std::move(stop_done_)) {
        done();
    }
}

asio::awaitable<void> EtcdBackend::Step() {
    const bool leased = co_await EnsureLease();
    std::chrono::milliseconds pause = Poll();
    if (leased && view().holding) {
        co_await CheckHeld();
        pause = std::max(ttl() / 4, std::chrono::milliseconds(50));
    } else if (leased && Clock::now() >= hold_off_until_) {
        co_await Campaign();
    }
    if (leased) {
        co_await Members();
        co_await Broadcasts();
    }
    if (!leased || !view().holding || pause != Poll()) {
        co_await Sleep(pause);
    }
}

// Grants a lease when there is none, else keeps it alive; the lease end counts from the send.
asio::awaitable<bool> EtcdBackend::EnsureLease() {
    const Clock::time_point sent = Clock::now();
    const std::int64_t ttl_s = (settings_.ttl_ms + 999) / 1000;
    const bool grant = lease_id_ == 0;
    Answer a;
    if (grant) {
        const json request = {{"TTL", std::to_string(ttl_s)}};
        a = co_await Call("/v3/lease/grant", request);
    } else {
        const json request = {{"ID", std::to_string(lease_id_)}};
        a = co_await Call("/v3/lease/keepalive", request);
    }
    if (!a.body) {
        Failed(grant ? "lease grant" : "lease keepalive", a.error);
        co_return false;
    }
    const json& r = grant ? *a.body : a.body->value("result", json::object());
    const std::uint64_t granted_s = EtcdNumber(r, "TTL");
    if (granted_s == 0) {  // the lease ended in etcd: our key (if any) is gone with it
        lease_id_ = 0;
        update([&](StoreView& v) {
            v.session = StoreSession::Expired;
            v.detail = "etcd: the lease expired (no keepalive confirmed within its TTL)";
            if (v.holding) {
                v.holding = false;
                v.reason = elector::Reason::LeaseExpired;
            }
            v.counters.sessions_lost += 1;
        });
        co_return false;
    }
    if (grant) {
        lease_id_ = EtcdNumber(r, "ID");
        next_beat_ = {};  // the member record went with the old lease
    }
    // The shorter of what was asked and what etcd granted.
    lease_ttl_ = std::min(ttl(), std::chrono::milliseconds(static_cast<std::int64_t>(
                                     std::min<std::uint64_t>(granted_s, 1U << 20) * 1000)));
    confirmed_send_ = sent;
    if (view().holding) {
        set_lease_end(store_lease_end(sent, lease_ttl_, settings_.drift_permille));
    }
    update([](StoreView& v) { v.counters.renewals += 1; });
    Answered();
    co_return true;
}

asio::awaitable<void> EtcdBackend::Campaign() {
    const std::string key = EtcdBase64(key_);
    const json txn = {
        {"compare",
         {{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}}},
        {"success",
         {{{"request_put",
            {{"key", key}, {"value", EtcdBase64(self_)}, {"lease", std::to_string(lease_id_)}}}}}},
        {"failure", {{{"request_range", {{"key", key}}}}}}};
    const Answer a = co_await Call("/v3/kv/txn", txn);
    if (!a.body) {
        Failed("campaign", a.error);
        co_return;
    }
    Answered();
    const json& header = a.body->value("header", json::object());
    if (a.body->value("succeeded", false)) {
        token_ = EtcdNumber(header, "revision");  // the put's revision: the key's create revision
        set_lease_end(store_lease_end(*confirmed_send_, lease_ttl_, settings_.drift_permille));
        update([&](StoreView& v) {
            v.holding = true;
            v.holder = self_;
            v.fencing_token = token_;
            v.reason = elector::Reason::ElectionWon;
            v.counters.campaigns_won += 1;
        });
        log_event(*logger_, spdlog::level::info, "etcd: holds the leader key",
                  {{"key", key_}, {"fencing_token", token_}});
        co_return;
    }
    const json& responses = a.body->value("responses", json::array());
    const json kvs =
        responses.empty()
            ? json::array()
            : responses[0].value("response_range", json::object()).value("kvs", json::array());
    std::optional<std::string> holder;
    std::uint64_t token = 0;
    if (!kvs.empty()) {
        holder = EtcdUnbase64(kvs[0].value("value", ""));
        token = EtcdNumber(kvs[0], "create_revision");
    }
    update([&](StoreView& v) {
        if (v.holder != holder || v.fencing_token != token) {
            v.reason = holder ? elector::Reason::LeaderDiscovered : elector::Reason::LeaderCeded;
        }
        v.holder = holder;
        v.fencing_token = token;
    });
}

// While holding: the key must still be ours (an operator may have deleted it).
asio::awaitable<void> EtcdBackend::CheckHeld() {
    const json range = {{"key", EtcdBase64(key_)}};
    const Answer a = co_await Call("/v3/kv/range", range);
    if (!a.body) {
        Failed("leader key check", a.error);
        co_return;
    }
    Answered();
    const json kvs = a.body->value("kvs", json::array());
    if (!kvs.empty() && EtcdNumber(kvs[0], "create_revision") == token_) {
        co_return;
    }
    log_event(*logger_, spdlog::level::warn, "etcd: the leader key is no longer ours",
              {{"key", key_}, {"fencing_token", token_}});
    update([](StoreView& v) {
        v.holding = false;
        v.holder.reset();
        v.fencing_token = 0;
        v.reason = elector::Reason::LeaderPreempted;
    });
}

// Revokes the lease: etcd deletes the key with it at once.
asio::awaitable<void> EtcdBackend::Release() {
    const bool held = resign_ || token_ != 0;
    resign_ = false;
    token_ = 0;
    if (lease_id_ != 0) {
        const json revoke = {{"ID", std::to_string(lease_id_)}};
        const Answer a = co_await Call("/v3/lease/revoke", revoke);
        if (!a.body) {
            Failed("lease revoke", a.error);
        }
        lease_id_ = 0;
    }
    if (held) {
        update([](StoreView& v) {
            v.holder.reset();
            v.fencing_token = 0;
            v.counters.releases += 1;
        });
    }
    hold_off_until_ = Clock::now() + ttl();
}

// Rewrites this node's member record (under its lease) when a beat is due, then reads them all.
asio::awaitable<void> EtcdBackend::Members() {
    if (Clock::now() >= next_beat_) {
        const json put = {{"key", EtcdBase64(members_ + self_)},
                          {"value", EtcdBase64(next_member_record())},
                          {"lease", std::to_string(lease_id_)}};
        const Answer a = co_await Call("/v3/kv/put", put);
        if (!a.body) {
            Failed("member record", a.error);
            co_return;
        }
        next_beat_ = Clock::now() + beat_period();
    }
    const std::optional<json> kvs = co_await RangePrefix(members_, json::object());
    if (!kvs) {
        co_return;
    }
    std::vector<std::pair<std::string, std::string>> records;
    for (const json& kv : *kvs) {
        const auto key = EtcdUnbase64(kv.value("key", ""));
        const auto value = EtcdUnbase64(kv.value("value", ""));
        if (key && key->size() > members_.size()) {
            records.emplace_back(key->substr(members_.size()), value.value_or(std::string()));
        }
    }
    observe_members(records);
}

// Writes the queued broadcasts, then delivers those written since the last read (by revision).
asio::awaitable<void> EtcdBackend::Broadcasts() {
    for (const admin::BroadcastMessage& m : take_outbox()) {
        co_await PutBroadcast(m);
    }
    if (broadcasts_seen_ == 0) {  // first read: from now on (the older ones were not for us)
        json count;
        count["key"] = EtcdBase64(broadcasts_);
        count["count_only"] = true;
        const Answer a = co_await Call("/v3/kv/range", count);
        if (a.body) {
            broadcasts_seen_ = static_cast<std::int64_t>(
                EtcdNumber(a.body->value("header", json::object()), "revision"));
        }
        co_return;
    }
    json extra;
    extra["min_mod_revision"] = std::to_string(broadcasts_seen_ + 1);
    extra["sort_target"] = "MOD";
    extra["sort_order"] = "ASCEND";
    extra["limit"] = "16";
    const std::optional<json> kvs = co_await RangePrefix(broadcasts_, extra);
    if (!kvs) {
        co_return;
    }
    for (const json& kv : *kvs) {
        const auto key = EtcdUnbase64(kv.value("key", "")).value_or("");
        broadcasts_seen_ =
            std::max(broadcasts_seen_, static_cast<std::int64_t>(EtcdNumber(kv, "mod_revision")));
        const auto value = EtcdUnbase64(kv.value("value", ""));
        receive_broadcast(key, value.value_or(std::string()));
    }
}

// Under a lease of its own, a few liveness windows long: etcd deletes it when that ends.
asio::awaitable<void> EtcdBackend::PutBroadcast(const admin::BroadcastMessage& message) {
    const std::int64_t ttl_s = (3 * settings_.ttl_ms + 999) / 1000;
    json lease;
    lease["TTL"] = std::to_string(ttl_s);
    const Answer grant = co_await Call("/v3/lease/grant", lease);
    if (!grant.body) {
        Failed("broadcast lease grant", grant.error);
        co_return;
    }
    const std::vector<std::uint8_t> bytes = encode_broadcast(message);
    const json put = {{"key", EtcdBase64(broadcasts_ + message.id())},
                      {"value", EtcdBase64(std::string_view(
                                    reinterpret_cast<const char*>(bytes.data()), bytes.size()))},
                      {"lease", std::to_string(EtcdNumber(*grant.body, "ID"))}};
    const Answer a = co_await Call("/v3/kv/put", put);
    if (!a.body) {
        Failed("broadcast", a.error);
    }
}

asio::awaitable<std::optional<json>> EtcdBackend::RangePrefix(const std::string& prefix,
                                                              json extra) {
    std::string end = prefix;
    end.back() = static_cast<char>(end.back() + 1);  // '/' + 1: every key under the prefix
    extra["key"] = EtcdBase64(prefix);
    extra["range_end"] = EtcdBase64(end);
    const Answer a = co_await Call("/v3/kv/range", extra);
    if (!a.body) {
        Failed("range " + prefix, a.error);
        co_return std::nullopt;
    }
    const json kvs = a.body->value("kvs", json::array());
    co_return kvs.is_array() ? kvs : json::array();
}

asio::awaitable<EtcdBackend::Answer> EtcdBackend::Call(const std::string& path, const json& body) {
    const std::optional<std::string> refused = co_await Connect();
    if (refused) {
        co_return Answer{std::nullopt, *refused};
    }
    http::request<http::string_body> request{http::verb::post, path, 11};
    request.set(http::field::host, to_string(settings_.endpoints[endpoint_index_]));
    request.set(http::field::content_type, "application/json");
    request.body() = body.dump();
    request.prepare_payload();
    stream_.expires_after(RequestTimeout());
    beast::error_code ec;
    co_await http::async_write(stream_, request, asio::redirect_error(asio::use_awaitable, ec));
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kEtcdBodyLimit);
    if (!ec) {
        co_await http::async_read(stream_, buffer, parser,
                                  asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec || !parser.get().keep_alive()) {
        beast::error_code ignored;
        stream_.socket().close(ignored);
        connected_ = false;
    }
    if (ec) {
        endpoint_index_ = (endpoint_index_ + 1) % settings_.endpoints.size();
        co_return Answer{std::nullopt, path + ": " + ec.message()};
    }
    json parsed = json::parse(parser.get().body(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object()) {
        co_return Answer{std::nullopt, path + ": not a JSON object"};
    }
    if (parser.get().result() != http::status::ok) {
        co_return Answer{std::nullopt, path + ": HTTP " +
                                           std::to_string(parser.get().result_int()) + " " +
                                           parsed.value("message", std::string())};
    }
    co_return Answer{std::move(parsed), {}};
}

asio::awaitable<std::optional<std::string>> EtcdBackend::Connect() {
    if (connected_) {
        co_return std::nullopt;
    }
    const Endpoint& e = settings_.endpoints[endpoint_index_];
    beast::error_code ec;
    const auto results = co_await resolver_.async_resolve(
        e.host, std::to_string(e.port), asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
        stream_.expires_after(RequestTimeout());
        co_await stream_.async_connect(results, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec) {
        endpoint_index_ = (endpoint_index_ + 1) % settings_.endpoints.size();
        co_return to_string(e) + ": " + ec.message();
    }
    connected_ = true;
    co_return std::nullopt;
}

asio::awaitable<void> EtcdBackend::Sleep(std::chrono::milliseconds pause) {
    if (resign_ || stopping_) {
        co_return;
    }
    wake_.expires_after(pause);
    beast::error_code ec;
    co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

void EtcdBackend::Failed(const std::string& what, const std::string& error) {
    const bool first = view().session != StoreSession::Unreachable;
    update([&](StoreView& v) {
        v.session = StoreSession::Unreachable;
        v.detail = "etcd " + what + ": " + error;
        v.counters.requests_failed += 1;
    });
    if (first) {
        log_event(*logger_, spdlog::level::warn, "etcd: request failed",
                  {{"what", what}, {"error", error}});
    }
}

void EtcdBackend::Answered() {
    update([](StoreView& v) {
        if (v.session != StoreSession::Connected) {
            v.detail.clear();
        }
        v.session = StoreSession::Connected;
        v.last_answer = Clock::now();
    });
}

std::unique_ptr<StoreBackend> make_etcd_backend(asio::io_context& io, const ClusterConfig& config,
                                                std::shared_ptr<spdlog::logger> logger) {
    return std::make_unique<EtcdBackend>(io, config, std::move(logger));
}

}  // namespace conclave::node
