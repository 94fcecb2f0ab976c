// SPDX-License-Identifier: Apache-2.0
// The ZooKeeper backend: the C client (libzookeeper_mt), driven by one thread of its own with the
// synchronous API. The recipe: an ephemeral sequential znode under <prefix>/<cluster>/election;
// the lowest sequence leads, every other candidate watches its predecessor. The holder's fencing
// token is its znode's czxid (zxids only grow across the ensemble). Every answered request is a
// renewal: the session cannot expire before `timeout` after the server received it, so the lease
// counts from its send. Releasing deletes the znode (stop also closes the session).
#define THREADED 1  // the synchronous API of the multi-threaded client
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <thread>
#include <vector>

#include "conclave/node/broadcast.hpp"
#include "conclave/node/logging.hpp"
#include "conclave/node/store_backend.hpp"

#include <boost/asio/post.hpp>

namespace conclave::node {

namespace {

using Clock = std::chrono::steady_clock;

/// Largest znode value read (a node id is at most 64 characters).
constexpr int kZkValueLimit = 256;

std::string ZkError(int rc) {
    return std::string(zerror(rc)) + " (" + std::to_string(rc) + ")";
}

}  // namespace

class ZooKeeperBackend final : public StoreBackend {
  public:
    ZooKeeperBackend(boost::asio::io_context& io, const ClusterConfig& config,
                     std::shared_ptr<spdlog::logger> logger)
        : StoreBackend(io, config.backend, config.cluster, config.self_entry().id,
                       to_string(config.self_entry().http), std::move(logger)),
          root_(settings_.prefix + "/" + cluster_),
          election_(root_ + "/election"),
          members_(root_ + "/members"),
          broadcasts_(root_ + "/broadcast") {}

    ~ZooKeeperBackend() override {
        Signal([this] { stop_ = true; });
        if (thread_.joinable()) {
            thread_.join();
        }
    }

    void start(Changed changed) override {
        changed_ = std::move(changed);
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
        thread_ = std::thread([this] { Loop(); });
    }

    std::optional<std::string> resign() override {
        if (!view().holding) {
            return std::string("not the leader (this node's znode is not the lowest)");
        }
        // Before the view changes: the loop's next claim (made under the view's lock) sees it.
        resigning_ = true;
        update([](StoreView& v) {
            v.holding = false;  // stop acting at once; the deletion follows
            v.reason = elector::Reason::LeadershipTransferred;
        });
        Signal([this] { resign_ = true; });
        return std::nullopt;
    }

    void stop(std::function<void()> done) override {
        update([](StoreView& v) {
            v.holding = false;
            v.reason = elector::Reason::Stopped;
        });
        if (!thread_.joinable()) {
            boost::asio::post(io_, std::move(done));
            return;
        }
        Signal([this, done = std::move(done)]() mutable {
            stop_done_ = std::move(done);
            stop_ = true;
        });
    }

  private:
    void wake() override {
        Signal([] {});
    }
    void Signal(const std::function<void()>& change) {
        {
            const std::lock_guard lock(mutex_);
            change();
            wake_ = true;
        }
        cv_.notify_all();
    }
    /// Waits for `pause`, an event (a watch, the session) or a request; true when stopping.
    bool Wait(std::chrono::milliseconds pause) {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, pause, [this] { return wake_ || stop_; });
        wake_ = false;
        return stop_;
    }
    bool Resigning() {
        const std::lock_guard lock(mutex_);
        return std::exchange(resign_, false);
    }
    static void Watch(zhandle_t* zh, int type, int state, const char* path, void* context);
    void Loop();
    void Step();
    bool EnsureSession();
    bool EnsureNode();
    void Evaluate();
    void FollowLeader(const std::vector<std::string>& children, std::size_t index);
    bool EnsureParents();
    void Members();
    void Broadcasts();
    void PutBroadcasts();
    /// The children of `path`, or nullopt (the failure recorded).
    std::optional<std::vector<std::string>> Children(const std::string& path);
    /// The data of `path`, up to kStoreRecordLimit bytes; nullopt when it is gone or unreadable.
    std::optional<std::string> Data(const std::string& path);
    void Release(bool close);
    void LostNode();
    void CloseSession();
    void Failed(const std::string& what, const std::string& error);
    void Answered();
    std::chrono::milliseconds SessionTtl() const {
        const int negotiated = zh_ != nullptr ? zoo_recv_timeout(zh_) : 0;
        return negotiated > 0 ? std::min(ttl(), std::chrono::milliseconds(negotiated)) : ttl();
    }

    const std::string root_;
    const std::string election_;
    const std::string members_;     // ephemeral <members>/<node id>, rewritten every beat
    const std::string broadcasts_;  // ephemeral sequential <broadcast>/m_<seq>
    std::thread thread_;
    std::mutex mutex_;  // guards the flags below
    std::condition_variable cv_;
    bool wake_ = false;
    bool stop_ = false;
    bool resign_ = false;
    std::function<void()> stop_done_;
    std::atomic<int> state_{0};  // the session state the watcher saw last
    /// A step-down is under way: the loop claims nothing until its znode is deleted.
    std::atomic<bool> resigning_{false};
    // The loop thread's own:
    zhandle_t* zh_ = nullptr;
    std::string my_node_;  // full path of this node's znode; empty when none
    std::uint64_t my_czxid_ = 0;
    Clock::time_point hold_off_until_{};
    Clock::time_point next_beat_{};
    bool parents_made_ = false;                   // the members and broadcast paths exist
    std::optional<std::string> broadcasts_seen_;  // the highest child name read (nullopt: none)
    std::deque<std::pair<std::string, Clock::time_point>> sent_;  // own broadcasts, to delete
};

void ZooKeeperBackend::Watch(zhandle_t* zh, int type, int state, const char* path, void* context) {
    (void)zh;
    (void)path;
    auto* self = static_cast<ZooKeeperBackend*>(context);
    if (type == ZOO_SESSION_EVENT) {
        self->state_ = state;
    }
    self->Signal([] {});
}

void ZooKeeperBackend::Loop() {
    bool stopping = false;
    while (!stopping) {
        Step();
        const bool holding = view().holding;
        if (Resigning()) {
            Release(false);
            resigning_ = false;
            continue;
        }
        stopping = Wait(holding ? std::max(SessionTtl() / 4, std::chrono::milliseconds(50))
                                : std::clamp(SessionTtl() / 4, std::chrono::milliseconds(50),
                                             std::chrono::milliseconds(250)));
    }
    Release(true);
    update([](StoreView& v) { v.session = StoreSession::Stopped; });
    std::function<void()> done;
    {
        const std::lock_guard lock(mutex_);
        done = std::move(stop_done_);
    }
    if (done) {
        boost::asio::post(io_, std::move(done));
    }
}

void ZooKeeperBackend::Step() {
    if (!EnsureSession()) {
        return;
    }
    if (!my_node_.empty() || Clock::now() >= hold_off_until_) {
        if (EnsureNode()) {
            Evaluate();
        }
    }
    if (state_ == ZOO_CONNECTED_STATE && EnsureParents()) {
        Members();
        Broadcasts();
    }
}

// Rewrites this node's ephemeral member znode when a beat is due, then reads them all.
void ZooKeeperBackend::Members() {
    if (Clock::now() >= next_beat_) {
        const std::string mine = members_ + "/" + self_;
        const std::string record = next_member_record();
        int rc = zoo_set(zh_, mine.c_str(), record.data(), static_cast<int>(record.size()), -1);
        if (rc == ZNONODE) {
            rc = zoo_create(zh_, mine.c_str(), record.data(), static_cast<int>(record.size()),
                            &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, nullptr, 0);
        }
        if (rc != ZOK) {
            Failed("member record " + mine, ZkError(rc));
            return;
        }
        next_beat_ = Clock::now() + beat_period();
    }
    const auto children = Children(members_);
    if (!children) {
        return;
    }
    std::vector<std::pair<std::string, std::string>> records;
    for (const std::string& child : *children) {
        if (auto data = Data(members_ + "/" + child)) {
            records.emplace_back(child, std::move(*data));
        }
    }
    observe_members(records);
}

// Writes the queued broadcasts, deletes this node's old ones, then delivers the children created
// since the last read (their names end in the parent's growing sequence number).
void ZooKeeperBackend::Broadcasts() {
    PutBroadcasts();
    const auto children = Children(broadcasts_);
    if (!children) {
        return;
    }
    std::vector<std::string> names = *children;
    std::sort(names.begin(), names.end());  // "m_" + 10 zero-padded digits
    const bool first = !broadcasts_seen_;
    for (const std::string& name : names) {
        if (broadcasts_seen_ && name <= *broadcasts_seen_) {
            continue;
        }
        broadcasts_seen_ = name;
        if (first) {
            continue;  // first read: from now on (the older ones were not for us)
        }
        if (auto data = Data(broadcasts_ + "/" + name)) {
            receive_broadcast(name, *data);
        }
    }
    if (first && !broadcasts_seen_) {
        broadcasts_seen_ = std::string();
    }
}

void ZooKeeperBackend::PutBroadcasts() {
    const auto keep = 3 * ttl();
    while (!sent_.empty() && Clock::now() - sent_.front().second > keep) {
        zoo_delete(zh_, sent_.front().first.c_str(), -1);  // gone already is fine too
        sent_.pop_front();
    }
    for (const admin::BroadcastMessage& m : take_outbox()) {
        const std::vector<std::uint8_t> bytes = encode_broadcast(m);
        const std::string prefix = broadcasts_ + "/m_";
        std::vector<char> created(prefix.size() + 64);
        const int rc =
            zoo_create(zh_, prefix.c_str(), reinterpret_cast<const char*>(bytes.data()),
                       static_cast<int>(bytes.size()), &ZOO_OPEN_ACL_UNSAFE,
                       ZOO_EPHEMERAL_SEQUENTIAL, created.data(), static_cast<int>(created.size()));
        if (rc != ZOK) {
            Failed("broadcast " + prefix, ZkError(rc));
            continue;
        }
        sent_.emplace_back(created.data(), Clock::now());
    }
}

bool ZooKeeperBackend::EnsureParents() {
    for (const std::string& parent : {settings_.prefix, root_, members_, broadcasts_}) {
        if (parents_made_) {
            break;
        }
        const int rc =
            zoo_create(zh_, parent.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
        if (rc != ZOK && rc != ZNODEEXISTS) {
            Failed("create " + parent, ZkError(rc));
            return false;
        }
    }
    parents_made_ = true;
    return true;
}

std::optional<std::vector<std::string>> ZooKeeperBackend::Children(const std::string& path) {
    struct String_vector list {};
    const int rc = zoo_get_children(zh_, path.c_str(), 0, &list);
    if (rc != ZOK) {
        Failed("children of " + path, ZkError(rc));
        return std::nullopt;
    }
    std::vector<std::string> children(list.data, list.data + list.count);
    deallocate_String_vector(&list);
    return children;
}

std::optional<std::string> ZooKeeperBackend::Data(const std::string& path) {
    std::string value(kStoreRecordLimit + 1, '\0');
    int length = static_cast<int>(value.size());
    struct Stat stat {};
    const int rc = zoo_get(zh_, path.c_str(), 0, value.data(), &length, &stat);
    if (rc != ZOK || length < 0) {
        return std::nullopt;  // deleted meanwhile (its session ended), or empty
    }
    // A larger one comes truncated to kStoreRecordLimit + 1 bytes: the decoder refuses it.
    value.resize(static_cast<std::size_t>(length));
    return value;
}

// A session that the ensemble expired is closed and replaced (its znode is gone with it).
bool ZooKeeperBackend::EnsureSession() {
    if (zh_ != nullptr && state_ == ZOO_EXPIRED_SESSION_STATE) {
        CloseSession();
        update([](StoreView& v) {
            v.session = StoreSession::Expired;
            v.detail = "zookeeper: the session expired";
            if (v.holding) {
                v.holding = false;
                v.reason = elector::Reason::LeaseExpired;
            }
            v.counters.sessions_lost += 1;
        });
    }
    if (zh_ == nullptr) {
        state_ = 0;
        zh_ = zookeeper_init(settings_.hosts.c_str(), &ZooKeeperBackend::Watch,
                             static_cast<int>(settings_.ttl_ms), nullptr, this, 0);
        if (zh_ == nullptr) {
            Failed("session", std::string("zookeeper_init: ") + std::strerror(errno));
            return false;
        }
    }
    if (state_ != ZOO_CONNECTED_STATE) {
        Wait(std::min(SessionTtl(), std::chrono::milliseconds(500)));
    }
    if (state_ != ZOO_CONNECTED_STATE) {
        Failed("session", "not connected to " + settings_.hosts);
        return false;
    }
    return true;
}

// Creates the election path's parents and this node's ephemeral sequential znode.
bool ZooKeeperBackend::EnsureNode() {
    if (!my_node_.empty()) {
        return true;
    }
    for (const std::string& path : {settings_.prefix, root_, election_}) {
        const int rc =
            zoo_create(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
        if (rc != ZOK && rc != ZNODEEXISTS) {
            Failed("create " + path, ZkError(rc));
            return false;
        }
    }
    std::vector<char> created(election_.size() + 64);
    struct Stat stat {};
    const std::string prefix = election_ + "/n_";
    const int rc = zoo_create2(zh_, prefix.c_str(), self_.data(), static_cast<int>(self_.size()),
                               &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created.data(),
                               static_cast<int>(created.size()), &stat);
    if (rc != ZOK) {
        Failed("create " + prefix, ZkError(rc));
        return false;
    }
    my_node_ = created.data();
    my_czxid_ = static_cast<std::uint64_t>(stat.czxid);
    return true;
}

void ZooKeeperBackend::Evaluate() {
    // The renewal is a write on this node's own znode: the ensemble prepares a write only in a
    // live session (it refuses one that is being expired), so its success proves the session was
    // renewed after the send. An answered read proves nothing: a read queued before the session's
    // expiry is still answered (a paused server that resumes expires the session just after).
    const Clock::time_point sent = Clock::now();
    const int renewed =
        zoo_set(zh_, my_node_.c_str(), self_.data(), static_cast<int>(self_.size()), -1);
    if (renewed == ZNONODE) {
        LostNode();
        return;
    }
    if (renewed != ZOK) {
        Failed("renewal of " + my_node_, ZkError(renewed));
        return;
    }
    struct String_vector list {};
    const int rc = zoo_get_children(zh_, election_.c_str(), 0, &list);
    if (rc != ZOK) {
        Failed("children of " + election_, ZkError(rc));
        return;
    }
    std::vector<std::string> children(list.data, list.data + list.count);
    deallocate_String_vector(&list);
    std::sort(children.begin(), children.end());  // "n_" + 10 zero-padded digits
    Answered();
    const std::string mine = my_node_.substr(election_.size() + 1);
    const auto it = std::find(children.begin(), children.end(), mine);
    if (it == children.end()) {
        LostNode();
        return;
    }
    if (it != children.begin()) {
        FollowLeader(children, static_cast<std::size_t>(it - children.begin()));
        return;
    }
    set_lease_end(store_lease_end(sent, SessionTtl(), settings_.drift_permille));
    update([&](StoreView& v) {
        if (resigning_) {
            return;
        }
        if (!v.holding) {
            v.holding = true;
            v.reason = elector::Reason::ElectionWon;
            v.counters.campaigns_won += 1;
            log_event(*logger_, spdlog::level::info, "zookeeper: holds the lowest znode",
                      {{"znode", my_node_}, {"fencing_token", my_czxid_}});
        }
        v.holder = self_;
        v.fencing_token = my_czxid_;
        v.counters.renewals += 1;
    });
}

// Reads the leader's id and czxid and watches this node's predecessor.
void ZooKeeperBackend::FollowLeader(const std::vector<std::string>& children, std::size_t index) {
    std::array<char, kZkValueLimit> value{};
    int length = static_cast<int>(value.size());
    struct Stat stat {};
    const std::string leader = election_ + "/" + children.front();
    const int rc = zoo_get(zh_, leader.c_str(), 0, value.data(), &length, &stat);
    std::optional<std::string> holder;
    std::uint64_t token = 0;
    if (rc == ZOK && length >= 0) {
        holder = std::string(value.data(), static_cast<std::size_t>(length));
        token = static_cast<std::uint64_t>(stat.czxid);
    }
    update([&](StoreView& v) {
        if (v.holder != holder || v.fencing_token != token || v.holding) {
            v.reason = holder ? elector::Reason::LeaderDiscovered : elector::Reason::LeaderCeded;
        }
        v.holding = false;
        v.holder = holder;
        v.fencing_token = token;
    });
    const std::string predecessor = election_ + "/" + children[index - 1];
    struct Stat ignored {};
    if (const int w = zoo_exists(zh_, predecessor.c_str(), 1, &ignored); w == ZNONODE) {
        Signal([] {});  // gone already: look again at once
    }
}

// This node's znode was deleted under it (an operator, or its session's end): campaign anew.
void ZooKeeperBackend::LostNode() {
    my_node_.clear();
    update([](StoreView& v) {
        v.holding = false;
        v.reason = elector::Reason::LeaderPreempted;
    });
}

void ZooKeeperBackend::Release(bool close) {
    if (!my_node_.empty() && zh_ != nullptr && state_ == ZOO_CONNECTED_STATE) {
        const int rc = zoo_delete(zh_, my_node_.c_str(), -1);
        if (rc != ZOK && rc != ZNONODE) {
            Failed("delete " + my_node_, ZkError(rc));
        }
    }
    const bool had = !my_node_.empty();
    my_node_.clear();
    if (close) {
        CloseSession();  // closing the session deletes the znode too
    }
    hold_off_until_ = Clock::now() + ttl();
    update([&](StoreView& v) {
        v.holding = false;
        if (v.holder == self_) {
            v.holder.reset();
            v.fencing_token = 0;
        }
        v.counters.releases += had ? 1 : 0;
    });
}

void ZooKeeperBackend::CloseSession() {
    if (zh_ != nullptr) {
        zookeeper_close(zh_);
        zh_ = nullptr;
    }
    my_node_.clear();
    next_beat_ = {};  // the member znode went with the session
    parents_made_ = false;
    sent_.clear();
}

void ZooKeeperBackend::Failed(const std::string& what, const std::string& error) {
    const bool first = view().session != StoreSession::Unreachable;
    update([&](StoreView& v) {
        v.session = StoreSession::Unreachable;
        v.detail = "zookeeper " + what + ": " + error;
        v.counters.requests_failed += 1;
    });
    if (first) {
        log_event(*logger_, spdlog::level::warn, "zookeeper: request failed",
                  {{"what", what}, {"error", error}});
    }
}

void ZooKeeperBackend::Answered() {
    update([](StoreView& v) {
        if (v.session != StoreSession::Connected) {
            v.detail.clear();
        }
        v.session = StoreSession::Connected;
        v.last_answer = Clock::now();
    });
}

std::unique_ptr<StoreBackend> make_zookeeper_backend(boost::asio::io_context& io,
                                                     const ClusterConfig& config,
                                                     std::shared_ptr<spdlog::logger> logger) {
    return std::make_unique<ZooKeeperBackend>(io, config, std::move(logger));
}

}  // namespace conclave::node
