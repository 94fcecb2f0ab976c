// SPDX-License-Identifier: Apache-2.0
// A broker-like service embedding conclave::node::Node (example).
//
// Every broker runs a Node. Only the leader does the leader-only work: it assigns the partitions
// to the brokers (round robin over the configured ids) and writes the assignment to a downstream
// store. Each write carries the fencing token of the leadership it was made under; the store
// admits it through a FencingGate, so a deposed leader's late writes (a slow thread, a paused
// process) are rejected once a newer leader has written.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "conclave/node/node.hpp"

namespace conclave::examples {

/// The downstream store (in a real system: a database or object store shared by the brokers).
class AssignmentStore {
  public:
    /// Writes `partition -> owner` made under leadership `fencing_token`. False when fenced off.
    bool write(std::uint64_t fencing_token, int partition, const std::string& owner);
    const std::map<int, std::string>& assignments() const { return assignments_; }
    std::uint64_t accepted_writes() const { return accepted_; }
    std::uint64_t rejected_writes() const { return rejected_; }
    std::uint64_t highest_token() const { return gate_.highest(); }

  private:
    elector::FencingGate gate_;
    std::map<int, std::string> assignments_;
    std::uint64_t accepted_ = 0;
    std::uint64_t rejected_ = 0;
};

class Broker {
  public:
    /// `node` and `store` must outlive the broker. Subscribes to the node's leadership.
    Broker(node::Node& node, AssignmentStore& store, int partition_count,
           std::chrono::milliseconds period);

    /// True while this broker believes it is the leader (and so runs the assigner).
    bool assigning() const { return leading_token_ != 0; }
    /// The fencing token of the leadership this broker last held (0 if never).
    std::uint64_t last_token() const { return last_token_; }
    /// One round of assignment under `token` (the periodic work; public so that tests can replay
    /// a late write). Returns how many writes the store accepted.
    int assign_all(std::uint64_t token);

  private:
    void on_leadership(const node::Leadership& leadership);
    void schedule();

    node::Node& node_;
    AssignmentStore& store_;
    int partition_count_;
    std::chrono::milliseconds period_;
    boost::asio::steady_timer timer_;
    std::uint64_t leading_token_ = 0;
    std::uint64_t last_token_ = 0;
    int round_ = 0;
};

}  // namespace conclave::examples
