// SPDX-License-Identifier: Apache-2.0
// The metadata proposer: while a scenario runs, a steady stream of small entries
// (key "bounce/<seq>", value {"seq": seq}) to the node believed to lead, recording every outcome;
// afterwards, every live node's committed log read back through GET /metadata.
//
// Each key is proposed exactly once (never retried), so the check can demand that it appears at
// most once. A 307 is followed (a redirect means nothing was appended). The target is the node
// that last acknowledged or redirected, else the poller's effective leader, else the nodes in turn.
//
// Outcomes: 200 -> acknowledged (key -> LSN); refused when nothing was appended (could not
// connect, 503 no_leader / not_active / overloaded / disabled, 4xx, too many redirects);
// unknown otherwise (504, 503 leadership_lost / failed / unavailable, the connection dropped or
// the client deadline passed after the request was written).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conclave/bounce/log_check.hpp"
#include "conclave/bounce/recorder.hpp"

namespace conclave::bounce {

struct ProposerOptions {
    std::uint32_t rate_per_s = 100;  // proposals started per second, at most
    std::size_t window = 4;          // outstanding requests, at most
    /// Client deadline per request; a request written but not answered by then is "unknown".
    std::chrono::milliseconds request_timeout{1000};
    /// Pause of a worker after a refusal (no leader, not active), so an election is not flooded.
    std::chrono::milliseconds refused_backoff{50};
};

class Proposer {
  public:
    Proposer(boost::asio::io_context& io, std::vector<boost::asio::ip::tcp::endpoint> http,
             const Recorder& recorder, ProposerOptions options);

    void start();
    /// Stops starting proposals and waits (bounded) until the outstanding ones have finished.
    boost::asio::awaitable<void> stop();

    const std::vector<ProposalRecord>& records() const { return records_; }
    /// 307 answers followed to the leader they named.
    std::size_t redirects_followed() const { return redirects_followed_; }

  private:
    boost::asio::awaitable<void> worker();
    boost::asio::awaitable<void> propose(std::uint64_t seq);
    boost::asio::ip::tcp::endpoint choose_target();
    void record(std::uint64_t seq, ProposalOutcome outcome, std::optional<LogLsn> lsn,
                std::string detail);

    boost::asio::io_context& io_;
    std::vector<boost::asio::ip::tcp::endpoint> http_;
    const Recorder& recorder_;
    ProposerOptions options_;
    bool stopping_ = false;
    std::size_t workers_running_ = 0;
    std::uint64_t next_seq_ = 1;
    std::chrono::steady_clock::time_point next_slot_;
    std::optional<boost::asio::ip::tcp::endpoint> believed_leader_;
    std::size_t round_robin_ = 0;
    std::vector<ProposalRecord> records_;
    std::size_t redirects_followed_ = 0;
};

/// Whether the daemon at `endpoint` serves the metadata log (GET /metadata answers a page).
/// `detail` says why not.
boost::asio::awaitable<bool> serves_metadata(boost::asio::ip::tcp::endpoint endpoint,
                                             std::string& detail);

/// Reads one node's whole committed log through GET /metadata, page by page.
boost::asio::awaitable<NodeLog> read_committed_log(boost::asio::ip::tcp::endpoint endpoint,
                                                   NodeIndex node);

}  // namespace conclave::bounce
