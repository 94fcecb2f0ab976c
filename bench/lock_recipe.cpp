// SPDX-License-Identifier: Apache-2.0
// lock-recipe: one candidate of the lock recipes most services elect a leader with, written the
// naive way the election survey (seed 003) gives them, for `bench/run.sh stores` to measure
// beside Conclave on the same store.
//
//   lock-recipe zookeeper --hosts H:P[,H:P] --ttl-ms T [--path /naive-election]
//     An EPHEMERAL|SEQUENTIAL znode <path>/n_; the lowest sequence leads; every other candidate
//     watches its predecessor. The leader believes it leads until its session is expired
//     (ZOO_EXPIRED_SESSION_STATE), then opens a new session and stands again.
//   lock-recipe etcd --endpoint H:P --ttl-ms T [--key /naive-election/leader]
//     A lease of T (whole seconds), then put-if-absent of the key under it (a Txn comparing the
//     key's create_revision to 0); the leader keeps the lease alive every TTL/3 and believes it
//     leads until a keepalive answers that the lease is gone (TTL 0). A candidate that lost waits
//     for the key to be gone (a range every 50 ms stands in for the recipe's watch), then tries.
//
// Every change of belief is one line on stdout, flushed at once:
//   <CLOCK_MONOTONIC in microseconds> start|lead|follow|lost [detail]
// (bounce/lease.hpp, parse_belief_line). Nothing else is printed on stdout.
#define THREADED 1  // the synchronous API of the multi-threaded ZooKeeper client
#include <openssl/evp.h>
#include <zookeeper/zookeeper.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "conclave/client/client.hpp"

namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

/// One line per change of belief, on the monotonic clock every process on the host shares.
void say(const std::string& state, const std::string& detail = {}) {
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now().time_since_epoch())
            .count();
    std::fputs(fmt::format("{} {}{}{}\n", us, state, detail.empty() ? "" : " ", detail).c_str(),
               stdout);
    std::fflush(stdout);
}

// ---- ZooKeeper ---------------------------------------------------------------------------------

struct ZkEvents {
    std::mutex mutex;
    std::condition_variable cv;
    bool woken = false;
    int state = 0;  // the last session state

    void wake(int new_state, bool session) {
        {
            const std::lock_guard lock(mutex);
            if (session) {
                state = new_state;
            }
            woken = true;
        }
        cv.notify_all();
    }
    /// Waits for any event, at most `limit`; returns the session state.
    int wait(std::chrono::milliseconds limit) {
        std::unique_lock lock(mutex);
        cv.wait_for(lock, limit, [this] { return woken; });
        woken = false;
        return state;
    }
};

void zk_watch(zhandle_t*, int type, int state, const char*, void* context) {
    static_cast<ZkEvents*>(context)->wake(state, type == ZOO_SESSION_EVENT);
}

/// Creates the znode and waits until it is the lowest (true), or the session ends (false).
bool zk_campaign(zhandle_t* zh, ZkEvents& events, const std::string& path, bool& said_follow) {
    std::vector<char> created(512);
    const std::string prefix = path + "/n_";
    int rc =
        zoo_create(zh, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE,
                   created.data(), static_cast<int>(created.size()));
    if (rc != ZOK) {
        return false;
    }
    const std::string mine = std::string(created.data()).substr(path.size() + 1);
    for (;;) {
        String_vector children{};
        rc = zoo_get_children(zh, path.c_str(), 0, &children);
        if (rc != ZOK) {
            return false;
        }
        std::vector<std::string> names(children.data, children.data + children.count);
        deallocate_String_vector(&children);
        std::sort(names.begin(), names.end());
        const auto it = std::find(names.begin(), names.end(), mine);
        if (it == names.end()) {
            return false;  // our znode is gone: the session expired
        }
        if (it == names.begin()) {
            return true;
        }
        if (!said_follow) {
            say("follow", "watches " + *(it - 1));
            said_follow = true;
        }
        const std::string predecessor = path + "/" + *(it - 1);
        Stat stat{};
        rc = zoo_exists(zh, predecessor.c_str(), 1, &stat);
        if (rc == ZOK) {
            if (events.wait(std::chrono::hours(1)) == ZOO_EXPIRED_SESSION_STATE) {
                return false;
            }
        } else if (rc != ZNONODE) {
            return false;
        }
    }
}

/// One session: connect, stand, lead until the session is expired.
void zk_session(const std::string& hosts, int ttl_ms, const std::string& path) {
    ZkEvents events;
    zhandle_t* zh = zookeeper_init(hosts.c_str(), zk_watch, ttl_ms, nullptr, &events, 0);
    if (zh == nullptr) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        return;
    }
    while (events.wait(std::chrono::seconds(1)) != ZOO_CONNECTED_STATE) {
    }
    zoo_create(zh, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);  // may exist
    bool said_follow = false;
    if (zk_campaign(zh, events, path, said_follow)) {
        say("lead", fmt::format("session timeout {} ms", zoo_recv_timeout(zh)));
        while (events.wait(std::chrono::hours(1)) != ZOO_EXPIRED_SESSION_STATE) {
        }
        say("lost", "session expired");
    } else if (said_follow) {
        say("lost", "session ended while following");
    }
    zookeeper_close(zh);
}

// ---- etcd --------------------------------------------------------------------------------------

std::string base64(const std::string& in) {
    std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()),
                                  static_cast<int>(in.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

/// etcd's v3 JSON gateway; nullopt when it does not answer 200 (the caller retries).
std::optional<json> etcd_call(const conclave::client::Endpoint& endpoint, const std::string& path,
                              const json& body) {
    conclave::client::Settings settings;
    settings.user_agent = "lock-recipe";
    settings.timeout = std::chrono::milliseconds(1000);
    settings.detect_https = false;
    try {
        const auto r = conclave::client::request(
            settings, endpoint, {boost::beast::http::verb::post, path, body.dump(), {}});
        if (r.status != 200) {
            return std::nullopt;
        }
        auto j = json::parse(r.body, nullptr, false);
        return j.is_discarded() ? std::nullopt : std::optional<json>(std::move(j));
    } catch (const conclave::client::Error&) {
        return std::nullopt;
    }
}

std::uint64_t etcd_number(const json& j, const char* name) {
    const json v = j.value(name, json());
    try {
        return v.is_string() ? std::stoull(v.get<std::string>()) : v.get<std::uint64_t>();
    } catch (const std::exception&) {
        return 0;
    }
}

/// The leader's loop: keepalive every TTL/3 until etcd answers that the lease is gone.
void etcd_lead(const conclave::client::Endpoint& endpoint, std::uint64_t lease, int ttl_ms) {
    say("lead", fmt::format("lease {} ttl {} s", lease, (ttl_ms + 999) / 1000));
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ttl_ms / 3));
        const auto a = etcd_call(endpoint, "/v3/lease/keepalive", {{"ID", std::to_string(lease)}});
        if (a && etcd_number(a->value("result", json::object()), "TTL") == 0) {
            say("lost", "keepalive: the lease is gone");
            return;
        }
    }
}

/// Put-if-absent under a fresh lease; leads while the lease lives; else waits for the key.
void etcd_round(const conclave::client::Endpoint& endpoint, int ttl_ms, const std::string& key,
                bool& said_follow) {
    const std::string k = base64(key);
    const auto range = etcd_call(endpoint, "/v3/kv/range", {{"key", k}});
    if (!range || !range->value("kvs", json::array()).empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return;
    }
    const auto grant =
        etcd_call(endpoint, "/v3/lease/grant", {{"TTL", std::to_string((ttl_ms + 999) / 1000)}});
    const std::uint64_t lease = grant ? etcd_number(*grant, "ID") : 0;
    if (lease == 0) {
        return;
    }
    const json txn = {
        {"compare",
         {{{"key", k}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}}},
        {"success",
         {{{"request_put",
            {{"key", k}, {"value", base64("x")}, {"lease", std::to_string(lease)}}}}}},
        {"failure", json::array()}};
    const auto put = etcd_call(endpoint, "/v3/kv/txn", txn);
    if (put && put->value("succeeded", false)) {
        said_follow = false;
        etcd_lead(endpoint, lease, ttl_ms);
        return;
    }
    etcd_call(endpoint, "/v3/lease/revoke", {{"ID", std::to_string(lease)}});
    if (!said_follow) {
        say("follow", "the key is held");
        said_follow = true;
    }
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"One candidate of a naive lock recipe (bench/README.md, \"stores\")"};
    std::string store;
    std::string hosts;
    std::string endpoint;
    std::string path = "/naive-election";
    int ttl_ms = 2000;
    app.add_option("store", store, "zookeeper or etcd")
        ->required()
        ->check(CLI::IsMember({"zookeeper", "etcd"}));
    app.add_option("--hosts", hosts, "zookeeper: the connect string");
    app.add_option("--endpoint", endpoint, "etcd: host:port of the v3 JSON gateway");
    app.add_option("--ttl-ms", ttl_ms, "session timeout (zookeeper) or lease TTL (etcd)")
        ->check(CLI::Range(1000, 600'000));
    app.add_option("--path", path, "zookeeper: election znode; etcd: key prefix");
    CLI11_PARSE(app, argc, argv);
    say("start", store);
    if (store == "zookeeper") {
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
        for (;;) {
            zk_session(hosts, ttl_ms, path);
        }
    }
    const auto colon = endpoint.rfind(':');
    if (colon == std::string::npos) {
        std::fputs("lock-recipe: --endpoint host:port is required for etcd\n", stderr);
        return 2;
    }
    const conclave::client::Endpoint e{
        endpoint.substr(0, colon),
        static_cast<std::uint16_t>(std::stoi(endpoint.substr(colon + 1)))};
    bool said_follow = false;
    for (;;) {
        etcd_round(e, ttl_ms, path + "/leader", said_follow);
    }
}
