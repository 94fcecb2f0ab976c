// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/poller.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "conclave/bounce/admin_client.hpp"

namespace conclave::bounce {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {

/// The "lease" field: null or absent (not a leader, or a daemon without the lease), or
/// {"valid": bool, "remaining_ms": 0..kMaxLeaseMs}. The remaining time of a valid lease.
std::optional<std::int64_t> parse_lease(const nlohmann::json& j) {
    constexpr std::int64_t kMaxLeaseMs = 86'400'000;  // far above any profile's lease
    const auto it = j.find("lease");
    if (it == j.end() || it->is_null()) {
        return std::nullopt;
    }
    const nlohmann::json& lease = *it;
    if (!lease.is_object() || !lease.contains("valid") || !lease["valid"].is_boolean() ||
        !lease.contains("remaining_ms") || !lease["remaining_ms"].is_number_integer()) {
        throw std::runtime_error("/status: field 'lease' is not {valid, remaining_ms}: " +
                                 lease.dump());
    }
    const auto remaining = lease["remaining_ms"].get<std::int64_t>();
    if (remaining < 0 || remaining > kMaxLeaseMs) {
        throw std::runtime_error("/status: lease remaining_ms out of range: " +
                                 std::to_string(remaining));
    }
    if (!lease["valid"].get<bool>()) {
        return std::nullopt;
    }
    return remaining;
}

}  // namespace

Observation parse_status(const std::string& body, NodeIndex node, std::size_t node_count) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        throw std::runtime_error("/status: body is not a JSON object");
    }
    Observation o;
    o.node = node;
    if (!j.contains("role") || !j["role"].is_string()) {
        throw std::runtime_error("/status: field 'role' missing or not a string");
    }
    const auto role = role_from_string(j["role"].get<std::string>());
    if (!role) {
        throw std::runtime_error("/status: field 'role' has unknown value " + j["role"].dump());
    }
    o.role = *role;
    if (!j.contains("term") || !j["term"].is_number_unsigned()) {
        throw std::runtime_error("/status: field 'term' missing or not an unsigned integer");
    }
    o.term = j["term"].get<std::uint64_t>();
    if (j.contains("leader") && !j["leader"].is_null()) {
        if (!j["leader"].is_string()) {
            throw std::runtime_error("/status: field 'leader' is neither null nor a string");
        }
        o.leader = node_index(j["leader"].get<std::string>(), node_count);
        if (!o.leader) {
            throw std::runtime_error("/status: field 'leader' names an unknown node " +
                                     j["leader"].dump());
        }
    }
    o.lease_remaining_ms = parse_lease(j);
    return o;
}

asio::awaitable<Observation> fetch_status(asio::ip::tcp::endpoint endpoint, NodeIndex node,
                                          std::size_t node_count, std::chrono::milliseconds timeout,
                                          std::string& error) {
    Observation unreachable;
    unreachable.node = node;
    unreachable.role = ObservedRole::Unreachable;
    const client::Outcome o =
        co_await admin_call(endpoint, boost::beast::http::verb::get, "/status", "", timeout);
    if (o.error) {
        error = describe_failure(*o.error);
        co_return unreachable;
    }
    if (o.response->status != 200) {
        error = "HTTP " + std::to_string(o.response->status);
        co_return unreachable;
    }
    try {
        Observation observed = parse_status(o.response->body, node, node_count);
        error.clear();
        co_return observed;
    } catch (const std::exception& e) {
        error = e.what();
        co_return unreachable;
    }
}

Poller::Poller(asio::io_context& io, std::vector<asio::ip::tcp::endpoint> endpoints,
               Recorder& recorder)
    : io_(io),
      endpoints_(std::move(endpoints)),
      recorder_(recorder),
      stopped_(std::make_shared<bool>(false)),
      last_error_(endpoints_.size()) {}

void Poller::start() {
    for (NodeIndex i = 0; i < endpoints_.size(); ++i) {
        asio::co_spawn(io_, loop(i), asio::detached);
    }
}

void Poller::stop() {
    *stopped_ = true;
}

asio::awaitable<void> Poller::loop(NodeIndex node) {
    auto stopped = stopped_;  // outlives the poller if the loop is resumed late
    asio::steady_timer timer(io_);
    while (!*stopped) {
        const auto next = std::chrono::steady_clock::now() + kPeriod;
        const std::int64_t at_ms = recorder_.now_ms();
        std::string error;
        Observation o =
            co_await fetch_status(endpoints_[node], node, endpoints_.size(), kTimeout, error);
        if (*stopped) {
            break;
        }
        o.at_ms = at_ms;
        o.answered_ms = recorder_.now_ms();
        // Report only errors that say something beyond "the node is down".
        const bool interesting =
            !error.empty() && error.rfind("connect:", 0) != 0 && error.rfind("read:", 0) != 0;
        if (interesting && error != last_error_[node]) {
            recorder_.note(node_name(node) + ": bad /status answer: " + error);
        }
        last_error_[node] = error;
        recorder_.observe(o);
        timer.expires_at(next);
        beast::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
}

}  // namespace conclave::bounce
