// SPDX-License-Identifier: Apache-2.0
#include "broker.hpp"

#include <utility>

namespace conclave::examples {

bool AssignmentStore::write(std::uint64_t fencing_token, int partition, const std::string& owner) {
    if (!gate_.admit(fencing_token)) {
        ++rejected_;
        return false;
    }
    assignments_[partition] = owner;
    ++accepted_;
    return true;
}

Broker::Broker(node::Node& node, AssignmentStore& store, int partition_count,
               std::chrono::milliseconds period)
    : node_(node),
      store_(store),
      partition_count_(partition_count),
      period_(period),
      timer_(node.io()) {
    node_.subscribe([this](const node::Leadership& l) { on_leadership(l); });
}

void Broker::on_leadership(const node::Leadership& leadership) {
    if (leadership.is_leader()) {
        if (leading_token_ != leadership.fencing_token) {
            leading_token_ = leadership.fencing_token;
            last_token_ = leading_token_;
            node_.logger().info("broker: leader with token {}: assigning partitions",
                                leading_token_);
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

void Broker::schedule() {
    assign_all(leading_token_);
    timer_.expires_after(period_);
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec && leading_token_ != 0) {
            schedule();
        }
    });
}

int Broker::assign_all(std::uint64_t token) {
    const auto& nodes = node_.config().nodes;
    int accepted = 0;
    ++round_;
    for (int p = 0; p < partition_count_; ++p) {
        const auto owner = static_cast<std::size_t>(p + round_) % nodes.size();
        if (store_.write(token, p, nodes[owner].id)) {
            ++accepted;
        }
    }
    return accepted;
}

}  // namespace conclave::examples
