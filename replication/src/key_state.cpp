// SPDX-License-Identifier: Apache-2.0
#include "conclave/replication/key_state.hpp"

#include <algorithm>
#include <utility>

namespace conclave::replication {

void KeyState::apply(const Entry& e) {
    apply(Entry(e));
}

void KeyState::apply(Entry&& e) {
    if (is_sync_point(e)) {
        return;
    }
    auto it = by_key_.find(std::string_view(e.key));
    if (it == by_key_.end()) {
        std::string key = e.key;
        by_key_.emplace(std::move(key), std::move(e));
    } else if (it->second.lsn < e.lsn) {
        it->second = std::move(e);
    }
}

const Entry* KeyState::find(std::string_view key) const {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? nullptr : &it->second;
}

void KeyState::for_prefix(std::string_view prefix,
                          const std::function<bool(const Entry&)>& visit) const {
    for (auto it = by_key_.lower_bound(prefix);
         it != by_key_.end() && has_prefix(it->first, prefix); ++it) {
        if (!visit(it->second)) {
            return;
        }
    }
}

std::vector<Entry> KeyState::take_in_lsn_order() {
    std::vector<Entry> out;
    out.reserve(by_key_.size());
    for (auto& [key, e] : by_key_) {
        out.push_back(std::move(e));
    }
    by_key_.clear();
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.lsn < b.lsn; });
    return out;
}

}  // namespace conclave::replication
