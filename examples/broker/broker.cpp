// SPDX-License-Identifier: Apache-2.0
#include "broker.hpp"

#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

namespace conclave::examples {

namespace {
constexpr std::string_view kPrefix = "partitions/";
}  // namespace

std::string partition_key(int partition) {
    return std::string(kPrefix) + std::to_string(partition);
}

std::string assignment_value(const std::string& primary, std::uint64_t token) {
    return nlohmann::json{{"primary", primary}, {"token", token}}.dump();
}

std::optional<int> partition_of(const std::string& key) {
    if (key.rfind(kPrefix, 0) != 0) {
        return std::nullopt;
    }
    int p = 0;
    const char* first = key.data() + kPrefix.size();
    const char* last = key.data() + key.size();
    const auto [end, ec] = std::from_chars(first, last, p);
    if (ec != std::errc{} || end != last || first == last || p < 0) {
        return std::nullopt;
    }
    return p;
}

std::optional<Assignment> parse_assignment(const std::string& value) {
    const auto j = nlohmann::json::parse(value, nullptr, false);
    if (!j.is_object() || !j.contains("primary") || !j["primary"].is_string() ||
        !j.contains("token") || !j["token"].is_number_unsigned()) {
        return std::nullopt;
    }
    return Assignment{j["primary"].get<std::string>(), j["token"].get<std::uint64_t>(), {}};
}

Broker::Broker(node::Node& node, BrokerOptions options)
    : node_(node), options_(options), timer_(node.io()) {
    const elector::Config& elector = node_.config().elector;
    if (options_.contact_bound.count() == 0) {
        options_.contact_bound = 3 * elector.heartbeat_period;
    }
    if (options_.settle.count() == 0) {
        options_.settle = 2 * elector.inactivity_interval() + options_.contact_bound;
    }
    node_.subscribe_committed(std::string(kPrefix),
                              [this](const replication::Entry& e) { on_committed(e); });
    node_.subscribe([this](const node::Leadership& l) { on_leadership(l); });
}

Broker::~Broker() {
    *alive_ = false;
    timer_.cancel();
}

void Broker::on_committed(const replication::Entry& entry) {
    const auto p = partition_of(entry.key);
    auto a = parse_assignment(entry.value);
    if (!p || !a) {
        return;  // not an assignment: ignored
    }
    a->lsn = entry.lsn;
    Assignment& held = assignments_[*p];
    if (held.lsn < a->lsn) {  // a snapshot installed later repeats older writes
        held = std::move(*a);
    }
}

void Broker::on_leadership(const node::Leadership& leadership) {
    if (leadership.is_leader()) {
        if (leading_token_ != leadership.fencing_token) {
            leading_token_ = leadership.fencing_token;
            last_token_ = leading_token_;
            leading_since_ = std::chrono::steady_clock::now();
            plan_.clear();  // made at the first assignment, once settled
            node_.logger().info("broker: leader with token {}: assigning {} partitions after {} ms",
                                leading_token_, options_.partition_count, options_.settle.count());
            schedule();
        }
        return;
    }
    if (leading_token_ != 0) {
        node_.logger().info("broker: no longer leader: assignment stopped");
    }
    leading_token_ = 0;
    timer_.cancel();
}

bool Broker::assigning() const {
    return leading_token_ != 0 &&
           std::chrono::steady_clock::now() >= leading_since_ + options_.settle;
}

void Broker::schedule() {
    if (assigning()) {
        assign_all(leading_token_);
    }
    timer_.expires_after(options_.period);
    timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
        if (*alive && !ec && leading_token_ != 0) {
            schedule();
        }
    });
}

void Broker::make_plan() {
    // Itself and the peers up and heard within contact_bound: a paused peer keeps its
    // connections up but is silent, and a partition it cannot serve would stay unserved.
    plan_ = {node_.config().self_entry().id};
    for (const admin::PeerStatus& peer : node_.status().peers) {
        if (peer.up && peer.last_contact_ms &&
            *peer.last_contact_ms < options_.contact_bound.count()) {
            plan_.push_back(peer.id);
        }
    }
    node_.logger().info("broker: token {}: {} partitions over {} brokers", leading_token_,
                        options_.partition_count, plan_.size());
}

int Broker::assign_all(std::uint64_t token) {
    if (plan_.empty()) {
        make_plan();
    }
    int proposed = 0;
    for (int p = 0; p < options_.partition_count && !plan_.empty(); ++p) {
        const std::string& primary = plan_[static_cast<std::size_t>(p) % plan_.size()];
        const auto held = assignments_.find(p);
        if (in_flight_[p] || (held != assignments_.end() && held->second.primary == primary &&
                              held->second.token == token)) {
            continue;
        }
        in_flight_[p] = true;
        admin::MetadataCondition condition;
        condition.fence = token;
        condition.expect_lsn = held == assignments_.end() ? replication::kNoLsn : held->second.lsn;
        std::string value = assignment_value(primary, token);
        node_.propose(partition_key(p), value, condition,
                      [this, p, value, alive = alive_](const admin::MetadataProposeResult& r) {
                          if (!*alive) {
                              return;
                          }
                          in_flight_[p] = false;
                          if (r.ok()) {
                              acknowledged_.push_back({p, r.lsn, value});
                          } else if (r.status == admin::MetadataProposeStatus::ConditionFailed) {
                              ++refused_;
                          }
                      });
        ++proposed;
    }
    return proposed;
}

bool Broker::leader_heard_recently(const std::string& leader) const {
    for (const admin::PeerStatus& peer : node_.status().peers) {
        if (peer.id == leader) {
            return peer.up && peer.last_contact_ms &&
                   *peer.last_contact_ms < options_.contact_bound.count();
        }
    }
    return false;
}

bool Broker::serving(int partition) const {
    const auto held = assignments_.find(partition);
    const node::Leadership now = node_.current();
    if (options_.planted_stale_serving) {
        return held != assignments_.end() && held->second.primary == node_.config().self_entry().id;
    }
    if (held == assignments_.end() || !now.leader ||
        held->second.primary != node_.config().self_entry().id ||
        held->second.token != now.fencing_token) {
        return false;
    }
    return now.is_leader() ? now.valid_now() : leader_heard_recently(*now.leader);
}

}  // namespace conclave::examples
