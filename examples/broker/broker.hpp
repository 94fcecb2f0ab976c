// SPDX-License-Identifier: Apache-2.0
// A broker-like service embedding conclave::node::Node (example), with its partition -> primary
// assignments in Conclave's replicated metadata log (the BlazingMQ cluster-state ledger's role).
//
// Every broker runs a Node. The leader's broker assigns the partitions to the brokers and writes
// each assignment to the log under the key "partitions/<p>" with a fenced, conditional write
// (Node::propose with a MetadataCondition): fenced by the fencing token of its leadership (a
// decision made under one leadership never lands under the next) and conditional on the LSN of
// the assignment it last saw (no lost update). Every broker applies the committed assignments
// (Node::subscribe_committed("partitions/")) and serves a partition only while
//   - the assignment it applied names it, written under the fencing token of the leader its node
//     follows now, and
//   - that leader's lease is valid as this broker sees it: on the leader, Leadership::valid_now();
//     elsewhere, the leader was heard within BrokerOptions::contact_bound.
// The plan of a leadership (which broker is primary of which partition) is made at its first
// assignment, from itself and the peers up and heard within contact_bound (a paused peer keeps its
// connections up but says nothing), and stays fixed until the leadership ends.
// A new leader writes no assignment before BrokerOptions::settle has passed since it became
// leader: by then every primary of the previous leadership has stopped serving (its node follows
// the new leader, or it has not heard its old leader for contact_bound, or it was that leader and
// its lease ended before the new one was elected). Within one leadership the assignment of a
// partition does not change, so no two brokers serve one partition at once.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conclave/node/node.hpp"

namespace conclave::examples {

/// A partition's committed assignment.
struct Assignment {
    std::string primary;      // the broker's node id
    std::uint64_t token = 0;  // the fencing token of the leadership that wrote it
    Lsn lsn{};                // the LSN of the write
};

/// "partitions/<p>", and the value {"primary": ID, "token": T} written under it.
std::string partition_key(int partition);
std::string assignment_value(const std::string& primary, std::uint64_t token);
/// The partition of a key and the assignment of a value; nullopt when malformed.
std::optional<int> partition_of(const std::string& key);
std::optional<Assignment> parse_assignment(const std::string& value);

struct BrokerOptions {
    int partition_count = 8;
    /// How often the leader's broker writes the assignments that differ from its plan.
    std::chrono::milliseconds period{50};
    /// A new leader's wait before its first assignment (see above): above the time a follower
    /// takes to drop a silent leader plus contact_bound. 0: twice the elector's inactivity
    /// interval plus contact_bound.
    std::chrono::milliseconds settle{0};
    /// A follower's broker serves only while its leader was heard within this bound. 0: three
    /// elector heartbeat periods.
    std::chrono::milliseconds contact_bound{0};
    /// Tests only, a planted bug: serve on the applied assignment alone (no token, no lease).
    bool planted_stale_serving = false;
};

class Broker {
  public:
    /// `node` must outlive the broker. Subscribes to the node's leadership and committed entries.
    Broker(node::Node& node, BrokerOptions options);
    /// Cancels the timer; a timer expiry or a write's answer already queued on the io_context
    /// finds the broker gone and does nothing.
    ~Broker();
    Broker(const Broker&) = delete;
    Broker& operator=(const Broker&) = delete;

    /// True while this broker leads, has settled, and so writes assignments.
    bool assigning() const;
    /// The fencing token of the leadership this broker last held (0 if never).
    std::uint64_t last_token() const { return last_token_; }
    /// Whether this broker serves `partition` now (the rule above).
    bool serving(int partition) const;
    /// The committed assignments this broker applied.
    const std::map<int, Assignment>& assignments() const { return assignments_; }
    /// The writes acknowledged to this broker (committed): partition, LSN, value.
    struct Acknowledged {
        int partition = 0;
        Lsn lsn{};
        std::string value;
    };
    const std::vector<Acknowledged>& acknowledged() const { return acknowledged_; }
    /// Writes refused because a condition failed (an older fencing token, a changed LSN).
    std::uint64_t refused_writes() const { return refused_; }
    /// One round of assignment under `token`: a fenced write conditional on the applied LSN for
    /// each partition whose assignment differs from the plan. Returns the writes proposed.
    int assign_all(std::uint64_t token);

  private:
    void on_leadership(const node::Leadership& leadership);
    void on_committed(const replication::Entry& entry);
    void schedule();
    void make_plan();
    bool leader_heard_recently(const std::string& leader) const;

    node::Node& node_;
    BrokerOptions options_;
    boost::asio::steady_timer timer_;
    /// False once the broker is destroyed: the handlers it queued check it before `this`.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    std::uint64_t leading_token_ = 0;
    std::uint64_t last_token_ = 0;
    std::chrono::steady_clock::time_point leading_since_{};
    /// The brokers of this leadership's plan: itself and the peers up and heard within
    /// contact_bound at its first assignment; fixed until the leadership ends.
    std::vector<std::string> plan_;
    std::map<int, Assignment> assignments_;
    std::map<int, bool> in_flight_;  // a write of the partition not answered yet
    std::vector<Acknowledged> acknowledged_;
    std::uint64_t refused_ = 0;
};

}  // namespace conclave::examples
