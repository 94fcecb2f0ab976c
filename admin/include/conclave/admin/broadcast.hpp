// SPDX-License-Identifier: Apache-2.0
// The documents of the advisory broadcast (docs/design.md, "Liveness and broadcast"): a message
// as delivered (Node::subscribe, GET /broadcast?watch=1) and the answer to a send
// (Node::broadcast, POST /broadcast). The wire form, its validation and the receiver's dedupe are
// the node's (conclave/node/broadcast.hpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace conclave::admin {

/// One broadcast as delivered (Node::subscribe, GET /broadcast?watch=1).
struct BroadcastMessage {
    std::string from;  // the sender's node id
    std::string boot;  // the sender's boot id (16 hex digits)
    std::uint64_t seq = 0;
    std::string topic;
    nlohmann::json payload;
    /// "<from>/<boot>/<seq>"
    std::string id() const;
    /// {"id", "from", "topic", "payload"}
    nlohmann::json to_json() const;
};

/// The answer to Node::broadcast (POST /broadcast).
struct BroadcastResult {
    enum class Outcome : std::uint8_t {
        Sent,         // 200: queued for every member in `sent_to`
        Invalid,      // 400: bad topic or payload
        TooLarge,     // 413: topic or payload above its bound
        NeedsMesh,    // 501: no channel to the members (no source of leadership sends it today)
        Unavailable,  // 503: the node is not running
    };
    Outcome outcome = Outcome::Sent;
    std::string detail;
    std::string id;                     // when sent
    std::vector<std::string> sent_to;   // live members it was queued for
    std::vector<std::string> not_sent;  // members not live (or whose link refused it)
};

}  // namespace conclave::admin
