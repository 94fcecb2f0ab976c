// SPDX-License-Identifier: Apache-2.0
// Node's reads of the key state (the committed log applied key by key, drivers::LogDriver::keys):
// Node::get (serializable, local) and Node::read at a consistency. A linearizable read is served
// by the leader only: once its log is ACTIVE (its sync point, an entry of its own term, committed:
// before that it may lack entries its predecessor acknowledged), then at once while its lease is
// valid, else once a quorum acknowledged a heartbeat round sent after the read arrived
// (ReadIndex). Reads that must wait are polled on a short timer, bounded by
// metadata.propose_timeout_ms.
#include <algorithm>
#include <boost/asio/post.hpp>

#include "conclave/drivers/driver.hpp"
#include "conclave/drivers/log_driver.hpp"
#include "conclave/node/node.hpp"

namespace conclave::node {

using admin::MetadataProposeStatus;
using admin::MetadataQuery;
using admin::MetadataReadCallback;
using admin::MetadataReadResult;

namespace {

/// How often waiting linearizable reads look again (a heartbeat round is 20 ms and up).
constexpr std::chrono::milliseconds kReadPollPeriod{5};

}  // namespace

struct Node::ReadWaiter {
    MetadataQuery query;
    MetadataReadCallback done;
    std::chrono::steady_clock::time_point arrived;
    std::chrono::steady_clock::time_point deadline;
    std::uint64_t term = 0;
};

MetadataReadResult Node::get(std::string_view key) const {
    MetadataReadResult r;
    if (!cores_.log_driver) {
        r.outcome = proposal_result(MetadataProposeStatus::Disabled, replication::kNoLsn);
        return r;
    }
    r.outcome =
        proposal_result(MetadataProposeStatus::Committed, cores_.log_driver->log().commit_lsn());
    if (const replication::Entry* e = cores_.log_driver->keys().find(key)) {
        r.entries.push_back(*e);
    }
    return r;
}

void Node::serve_read(const MetadataQuery& query, const MetadataReadCallback& done) const {
    if (!query.prefix) {
        return done(get(query.key));
    }
    MetadataReadResult r = get({});
    r.entries.clear();
    cores_.log_driver->keys().for_prefix(query.key, [&](const replication::Entry& e) {
        if (r.entries.size() == query.max) {
            r.more = true;
            return false;
        }
        r.entries.push_back(e);
        return true;
    });
    done(r);
}

bool Node::read_ready(std::chrono::steady_clock::time_point arrived, std::uint64_t term,
                      std::optional<admin::MetadataProposeResult>& refusal) const {
    const elector::LeadershipSnapshot& s = cores_.driver->snapshot();
    if (options_.planted_read_bug == PlantedReadBug::LocalReads) {
        return true;  // planted: every node answers from its own state
    }
    if (runtime_.stopping || !cores_.log_driver->running()) {
        refusal = proposal_result(MetadataProposeStatus::Stopped, replication::kNoLsn);
        return false;
    }
    if (s.role != elector::Role::Leader) {
        refusal = proposal_result(MetadataProposeStatus::NotLeader, replication::kNoLsn);
        return false;
    }
    if (s.term.value != term) {  // a leadership that began after the read arrived
        refusal = proposal_result(MetadataProposeStatus::LeadershipLost, replication::kNoLsn);
        return false;
    }
    if (cores_.log_driver->log().role() != replication::LogRole::LeaderActive &&
        options_.planted_read_bug != PlantedReadBug::SkipSyncPoint) {
        return false;  // before the sync point: wait for it
    }
    if (options_.planted_read_bug == PlantedReadBug::SkipReadIndex) {
        return true;  // planted: no lease check, no quorum round
    }
    const auto lease = cores_.driver->lease_deadline();
    if (!lease) {
        return false;
    }
    // Valid now, or a quorum promised from a round sent at or after the read arrived: the lease
    // ends at (send time of a round a quorum acknowledged) + lease_duration.
    const auto now = std::chrono::steady_clock::now();
    return now < *lease || *lease >= arrived + config_.elector.lease_duration();
}

void Node::read(MetadataQuery query, MetadataReadCallback done) {
    if (must_post()) {
        boost::asio::post(*runtime_.io,
                          [this, query = std::move(query), done = std::move(done)]() mutable {
                              read(std::move(query), std::move(done));
                          });
        return;
    }
    MetadataReadResult r;
    if (!cores_.log_driver || runtime_.stopping || !runtime_.started) {
        r.outcome = proposal_result(
            cores_.log_driver ? MetadataProposeStatus::Stopped : MetadataProposeStatus::Disabled,
            replication::kNoLsn);
        return done(r);
    }
    if (query.consistency == admin::ReadConsistency::Serializable) {
        return serve_read(query, done);
    }
    auto waiter = std::make_shared<ReadWaiter>();
    waiter->arrived = std::chrono::steady_clock::now();
    waiter->deadline =
        waiter->arrived + std::chrono::milliseconds(config_.metadata.propose_timeout_ms);
    waiter->term = cores_.driver->snapshot().term.value;
    waiter->query = std::move(query);
    waiter->done = std::move(done);
    cores_.read_waiters.push_back(std::move(waiter));
    poll_reads();
}

void Node::poll_reads() {
    const auto now = std::chrono::steady_clock::now();
    auto waiters = std::move(cores_.read_waiters);
    cores_.read_waiters.clear();
    for (auto& w : waiters) {
        std::optional<admin::MetadataProposeResult> refusal;
        if (read_ready(w->arrived, w->term, refusal)) {
            serve_read(w->query, w->done);
        } else if (refusal || now >= w->deadline) {
            MetadataReadResult r;
            r.outcome =
                refusal ? *refusal
                        : proposal_result(MetadataProposeStatus::NotActive, replication::kNoLsn);
            if (!refusal) {
                r.outcome.detail =
                    "the leader could not confirm its leadership in time (its sync point did not "
                    "commit or no quorum acknowledged a heartbeat round); retry";
            }
            w->done(r);
        } else {
            cores_.read_waiters.push_back(std::move(w));
        }
    }
    if (cores_.read_waiters.empty()) {
        return;
    }
    if (!cores_.read_timer) {
        cores_.read_timer = std::make_unique<boost::asio::steady_timer>(*runtime_.io);
    }
    cores_.read_timer->expires_after(kReadPollPeriod);
    std::weak_ptr<int> alive = runtime_.alive;
    cores_.read_timer->async_wait([this, alive](const boost::system::error_code& ec) {
        if (!ec && !alive.expired()) {
            poll_reads();
        }
    });
}

}  // namespace conclave::node
