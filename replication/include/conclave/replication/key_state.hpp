// SPDX-License-Identifier: Apache-2.0
// KeyState: what a committed prefix of the log stands for, key by key: the last entry that wrote
// each key (sync points dropped). Compaction builds a snapshot's entries with it
// (ReplicatedLog::Compact), and every node's LogDriver keeps one for the committed log it applied
// (Node::get, GET /metadata/<key>, conditional writes).
//
// No key is ever deleted (the log has no delete), so applying the entries of a snapshot taken at
// or after the state's own point over it gives the snapshot's state: every key the state holds is
// in the snapshot, with the same or a later write.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/replication/entry.hpp"

namespace conclave::replication {

class KeyState {
  public:
    /// `e` becomes the value of its key; sync points (no key) are skipped. An entry older than the
    /// key's stored write (a snapshot's entry already applied) changes nothing.
    void apply(const Entry& e);
    void apply(Entry&& e);
    /// The last write of `key`, nullptr when the key was never written.
    const Entry* find(std::string_view key) const;
    /// Calls `visit` with the last write of every key that starts with `prefix`, in key order,
    /// until it returns false.
    void for_prefix(std::string_view prefix, const std::function<bool(const Entry&)>& visit) const;
    /// Keys held.
    std::size_t size() const { return by_key_.size(); }
    /// The last write of every key in LSN order (a snapshot's entries); empties the state.
    std::vector<Entry> take_in_lsn_order();

  private:
    std::map<std::string, Entry, std::less<>> by_key_;
};

/// Whether `key` lies under `prefix` (the empty prefix holds every key).
inline bool has_prefix(std::string_view key, std::string_view prefix) {
    return key.substr(0, prefix.size()) == prefix;
}

}  // namespace conclave::replication
