// SPDX-License-Identifier: Apache-2.0
#include "conclave/bounce/proposer.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "conclave/bounce/admin_client.hpp"
#include "conclave/core/check.hpp"

namespace conclave::bounce {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::beast::http::verb;

namespace {

/// A redirect chain longer than this (leaders changing under the request) ends as refused.
constexpr int kMaxRedirects = 3;
/// Page size of GET /metadata (the daemon's maximum).
constexpr std::size_t kPageEntries = 10'000;
/// Bounds the pages read per node (10 million entries: far beyond any run).
constexpr std::size_t kMaxPages = 1000;
constexpr std::chrono::milliseconds kReadTimeout{3000};

asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

/// The "error" field of a JSON error body, or "".
std::string error_kind(const std::string& body) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) {
        return j["error"].get<std::string>();
    }
    return "";
}

}  // namespace

Proposer::Proposer(asio::io_context& io, std::vector<tcp::endpoint> http, const Recorder& recorder,
                   ProposerOptions options)
    : io_(io), http_(std::move(http)), recorder_(recorder), options_(options) {
    CONCLAVE_CHECK(!http_.empty(), "the proposer has an HTTP endpoint to propose to");
    CONCLAVE_CHECK(options_.rate_per_s > 0 && options_.window > 0,
                   "the proposer's rate and window are positive (the options check them)");
}

void Proposer::start() {
    next_slot_ = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < options_.window; ++i) {
        workers_running_ += 1;
        asio::co_spawn(io_, worker(), asio::detached);
    }
}

asio::awaitable<void> Proposer::stop() {
    stopping_ = true;
    // Every request ends within its deadline; allow for the backoff and the pacing sleep too.
    const auto deadline = std::chrono::steady_clock::now() + options_.request_timeout * 4 +
                          std::chrono::milliseconds(1000);
    while (workers_running_ > 0 && std::chrono::steady_clock::now() < deadline) {
        co_await sleep_for(std::chrono::milliseconds(10));
    }
}

asio::awaitable<void> Proposer::worker() {
    const auto period = std::chrono::nanoseconds(1'000'000'000LL / options_.rate_per_s);
    while (!stopping_) {
        const auto now = std::chrono::steady_clock::now();
        const auto slot = std::max(next_slot_, now);
        next_slot_ = slot + period;
        if (slot > now) {
            co_await sleep_for(slot - now);
        }
        if (stopping_) {
            break;
        }
        co_await propose(next_seq_++);
    }
    workers_running_ -= 1;
}

tcp::endpoint Proposer::choose_target() {
    if (believed_leader_) {
        return *believed_leader_;
    }
    if (const auto leader = recorder_.tracker().effective()) {
        return http_.at(leader->node);
    }
    round_robin_ = (round_robin_ + 1) % http_.size();
    return http_[round_robin_];
}

void Proposer::record(std::uint64_t seq, ProposalOutcome outcome, std::optional<LogLsn> lsn,
                      std::string detail) {
    records_.push_back(ProposalRecord{seq, recorder_.now_ms(), outcome, lsn, std::move(detail)});
}

asio::awaitable<void> Proposer::propose(std::uint64_t seq) {
    const std::string body =
        nlohmann::json{{"key", proposal_key(seq)}, {"value", proposal_value(seq)}}.dump();
    tcp::endpoint target = choose_target();
    for (int hop = 0; hop <= kMaxRedirects; ++hop) {
        const client::Outcome o =
            co_await admin_call(target, verb::post, "/metadata", body, options_.request_timeout);
        if (o.error && o.error->stage() == client::Stage::Connect) {
            believed_leader_.reset();
            record(seq, ProposalOutcome::Refused, std::nullopt, describe_failure(*o.error));
            co_await sleep_for(options_.refused_backoff);
            co_return;
        }
        if (o.error) {
            // Written (at least partly) and not answered: the daemon may have appended it.
            believed_leader_.reset();
            record(seq, ProposalOutcome::Unknown, std::nullopt, describe_failure(*o.error));
            co_return;
        }
        const client::Response& r = *o.response;
        if (r.status == 200) {
            try {
                const auto j = nlohmann::json::parse(r.body);
                const LogLsn lsn = parse_lsn(j.at("lsn"), "lsn");
                believed_leader_ = target;
                record(seq, ProposalOutcome::Acknowledged, lsn, "");
            } catch (const std::exception& e) {
                record(seq, ProposalOutcome::Unknown, std::nullopt,
                       std::string("200 with a bad body: ") + e.what());
            }
            co_return;
        }
        if (r.status == 307) {
            const auto next = redirect_address(r.location);
            if (!next) {
                believed_leader_.reset();
                record(seq, ProposalOutcome::Refused, std::nullopt,
                       "307 with a bad Location '" + r.location.substr(0, 80) + "'");
                co_return;
            }
            target = *next;
            believed_leader_ = target;
            redirects_followed_ += 1;
            continue;
        }
        const std::string kind = error_kind(r.body);
        const std::string detail = std::to_string(r.status) + (kind.empty() ? "" : " " + kind);
        believed_leader_.reset();
        const bool nothing_appended =
            (r.status == 503 && (kind == "no_leader" || kind == "not_active" ||
                                 kind == "overloaded" || kind == "disabled")) ||
            (r.status >= 400 && r.status < 500);
        if (nothing_appended) {
            record(seq, ProposalOutcome::Refused, std::nullopt, detail);
            co_await sleep_for(options_.refused_backoff);
        } else {
            record(seq, ProposalOutcome::Unknown, std::nullopt, detail);
        }
        co_return;
    }
    believed_leader_.reset();
    record(seq, ProposalOutcome::Refused, std::nullopt, "more than 3 redirects");
}

asio::awaitable<bool> serves_metadata(tcp::endpoint endpoint, std::string& detail) {
    const client::Outcome o =
        co_await admin_call(endpoint, verb::get, "/metadata?max=1", "", kReadTimeout);
    if (o.error) {
        detail = describe_failure(*o.error);
        co_return false;
    }
    const client::Response& r = *o.response;
    if (r.status != 200) {
        detail = "GET /metadata answered " + std::to_string(r.status) + " " + error_kind(r.body);
        co_return false;
    }
    try {
        (void)parse_metadata_page(r.body);
    } catch (const std::exception& e) {
        detail = e.what();
        co_return false;
    }
    co_return true;
}

asio::awaitable<NodeLog> read_committed_log(tcp::endpoint endpoint, NodeIndex node) {
    NodeLog log;
    log.node = node;
    std::optional<LogLsn> from;
    for (std::size_t page = 0; page < kMaxPages; ++page) {
        std::string target = "/metadata?max=" + std::to_string(kPageEntries);
        if (from) {
            target += "&from=" + to_string(*from);
        }
        const client::Outcome o =
            co_await admin_call(endpoint, verb::get, target, "", kReadTimeout);
        if (o.error || o.response->status != 200) {
            log.error = o.error
                            ? describe_failure(*o.error)
                            : "GET " + target + " answered " + std::to_string(o.response->status);
            co_return log;
        }
        const client::Response& r = *o.response;
        MetadataPageBody body;
        try {
            body = parse_metadata_page(r.body);
        } catch (const std::exception& e) {
            log.error = e.what();
            co_return log;
        }
        for (LogEntry& e : body.entries) {
            log.entries.push_back(std::move(e));
        }
        if (from && body.next_from == *from) {
            log.read = true;  // nothing after `from`: the whole committed log is read
            co_return log;
        }
        if (body.next_from < log.end) {
            log.error = "GET /metadata: next_from went backwards";
            co_return log;
        }
        log.end = body.next_from;
        from = body.next_from;
    }
    log.error = "more than " + std::to_string(kMaxPages) + " pages";
    co_return log;
}

}  // namespace conclave::bounce
