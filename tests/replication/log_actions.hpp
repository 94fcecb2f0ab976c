// SPDX-License-Identifier: Apache-2.0
// Test helpers shared by the log core's cell tests: pick actions of one type out of a batch.
#pragma once

#include <variant>
#include <vector>

#include "conclave/replication/actions.hpp"

namespace conclave::replication::testing {

/// The actions of type T in `actions`, in order.
template <class T>
std::vector<T> ActionsOf(const LogActions& actions) {
    std::vector<T> out;
    for (const auto& a : actions) {
        if (const auto* x = std::get_if<T>(&a)) {
            out.push_back(*x);
        }
    }
    return out;
}

/// Bodies of type B sent (SendLog) to `to`, in order.
template <class B>
std::vector<B> SentBodies(const LogActions& actions, NodeId to) {
    std::vector<B> out;
    for (const auto& s : ActionsOf<SendLog>(actions)) {
        if (s.to == to && std::holds_alternative<B>(s.message.body)) {
            out.push_back(std::get<B>(s.message.body));
        }
    }
    return out;
}

}  // namespace conclave::replication::testing
