// SPDX-License-Identifier: Apache-2.0
// A conclaved cluster for the benchmarks, built on leader-bounce's Cluster (processes, configs,
// fault proxy), with the proxy's io_context on its own thread.
#include <signal.h>

#include <fmt/core.h>
#include <boost/asio/post.hpp>
#include <future>
#include <stdexcept>

#include "bench.hpp"
#include "conclave/bounce/poller.hpp"

namespace conclave::bench {

namespace asio = boost::asio;

std::vector<NodeIndex> all_nodes(std::size_t n) {
    std::vector<NodeIndex> out;
    for (NodeIndex i = 0; i < n; ++i) {
        out.push_back(i);
    }
    return out;
}

std::optional<Agreement> agreement(const std::vector<NodeIndex>& members,
                                   const std::vector<StatusView>& views) {
    if (members.empty()) {
        return std::nullopt;
    }
    const StatusView& first = views.at(members.front());
    if (!first.answered || !first.leader) {
        return std::nullopt;
    }
    const Agreement a{*first.leader, first.term};
    bool leader_is_member = false;
    for (NodeIndex m : members) {
        const StatusView& v = views.at(m);
        if (!v.answered || v.leader != a.leader || v.term != a.term) {
            return std::nullopt;
        }
        if (m == a.leader) {
            leader_is_member = v.role == bounce::ObservedRole::Leader;
            if (!leader_is_member) {
                return std::nullopt;
            }
        }
    }
    // The leader must itself be polled and say so: a follower's memory of a leader is not enough.
    return leader_is_member ? std::optional<Agreement>(a) : std::nullopt;
}

Harness::Harness(bounce::ClusterOptions options)
    : keep_(options.keep_dir),
      cluster_(std::make_unique<bounce::Cluster>(io_, std::move(options))) {
    work_.emplace(io_.get_executor());
    thread_ = std::thread([this] { io_.run(); });
    for (NodeIndex i = 0; i < cluster_->size(); ++i) {
        clients_.push_back(std::make_unique<HttpClient>(cluster_->node(i).http));
    }
}

Harness::~Harness() {
    if (keep_) {
        fmt::print("kept {}\n", cluster_->dir().string());
    }
    cluster_->kill_all();
    work_.reset();
    io_.stop();
    thread_.join();
    cluster_.reset();
}

void Harness::start_all() {
    for (NodeIndex i = 0; i < size(); ++i) {
        cluster_->start(i);
    }
}

void Harness::on_proxy_thread(const std::function<void(bounce::FaultProxy&)>& fn) {
    std::promise<void> done;
    asio::post(io_, [&] {
        fn(cluster_->proxy());
        done.set_value();
    });
    done.get_future().get();
}

StatusView Harness::status(NodeIndex i, std::chrono::milliseconds timeout) {
    StatusView v;
    const auto body = clients_.at(i)->get("/status", timeout);
    if (!body) {
        return v;
    }
    try {
        const bounce::Observation o = bounce::parse_status(*body, i, size());
        v.answered = true;
        v.role = o.role;
        v.term = o.term;
        v.leader = o.leader;
    } catch (const std::exception&) {
        v.answered = false;
    }
    return v;
}

std::optional<std::string> Harness::metrics(NodeIndex i) {
    return clients_.at(i)->get("/metrics", std::chrono::milliseconds(1000));
}

std::optional<Agreement> Harness::wait_agreement(const std::vector<NodeIndex>& members,
                                                 double timeout_ms, double period_ms) {
    const auto start = Clock::now();
    std::vector<StatusView> views(size());
    while (ms_since(start) < timeout_ms) {
        const auto round = Clock::now();
        for (NodeIndex m : members) {
            views[m] = status(m, std::chrono::milliseconds(300));
        }
        if (auto a = agreement(members, views)) {
            return a;
        }
        sleep_ms(period_ms - ms_since(round));
    }
    return std::nullopt;
}

std::string Harness::log_tails() {
    std::string out;
    for (NodeIndex i = 0; i < size(); ++i) {
        out += bounce::node_name(i) + ".log:\n" + cluster_->log_tail(i, 8);
    }
    return out;
}

// ---- conclaved as a FailoverTarget -------------------------------------------------------------

namespace {

class ConclaveTarget final : public FailoverTarget {
  public:
    explicit ConclaveTarget(bounce::ClusterOptions options) : harness_(std::move(options)) {
        harness_.start_all();
    }
    std::size_t size() const override { return harness_.size(); }
    std::optional<NodeIndex> poll_agreed(const std::vector<NodeIndex>& members) override {
        std::vector<StatusView> views(harness_.size());
        for (NodeIndex m : members) {
            views[m] = harness_.status(m, std::chrono::milliseconds(300));
        }
        const auto a = agreement(members, views);
        if (!a) {
            return std::nullopt;
        }
        last_term_ = a->term;
        return a->leader;
    }
    std::uint64_t last_term() const override { return last_term_; }
    void send_signal(NodeIndex member, int signal) override {
        if (signal == SIGKILL) {
            harness_.cluster().kill(member);
        } else {
            harness_.cluster().pause(member);
        }
    }
    void restore(NodeIndex member) override {
        if (harness_.cluster().running(member)) {
            harness_.cluster().resume(member);
        } else {
            harness_.cluster().start(member);
        }
    }
    std::string log_tails() override { return harness_.log_tails(); }

  private:
    Harness harness_;
    std::uint64_t last_term_ = 0;
};

}  // namespace

bounce::ClusterOptions cluster_options(const BenchOptions& options, std::size_t nodes,
                                       const std::string& profile) {
    bounce::ClusterOptions c;
    c.node_count = nodes;
    c.profile = profile;
    c.backoff = options.backoff;
    c.conclaved = options.conclaved;
    c.keep_dir = options.keep;
    c.seed = options.seed;
    return c;
}

std::unique_ptr<FailoverTarget> make_conclave_target(const BenchOptions& options,
                                                     const std::string& profile) {
    return std::make_unique<ConclaveTarget>(cluster_options(options, 3, profile));
}

}  // namespace conclave::bench
