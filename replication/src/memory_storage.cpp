// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "conclave/core/check.hpp"
#include "conclave/core/enum_names.hpp"
#include "conclave/replication/storage.hpp"

namespace conclave::replication {

bool perform_storage_action(LogStorage& storage, const LogAction& action) {
    if (const auto* p = std::get_if<PersistEntries>(&action)) {
        storage.append(p->entries);
        return true;
    }
    if (const auto* t = std::get_if<TruncateEntries>(&action)) {
        storage.truncate_after(t->after_lsn);
        return true;
    }
    if (const auto* m = std::get_if<PersistMeta>(&action)) {
        storage.write_meta(m->meta);
        return true;
    }
    if (const auto* snap = std::get_if<PersistSnapshot>(&action)) {
        storage.persist_snapshot(snap->snapshot);
        return true;
    }
    return false;
}

Recovery MemoryStorage::recover() {
    Recovery r;
    r.log.entries = entries_;
    r.log.meta = meta_;
    r.log.snapshot = snapshot_;
    r.report.records = entries_.size();
    r.report.meta_found = true;
    return r;
}

void MemoryStorage::append(const std::vector<Entry>& entries) {
    for (const Entry& e : entries) {
        CONCLAVE_CHECK(entries_.empty() || entries_.back().lsn < e.lsn,
                       "stored entries are strictly increasing");
        entries_.push_back(e);
    }
    if (policy_ == FsyncPolicy::EveryEntry) {
        synced_ = reported_ = entries_.size();
    }
}

void MemoryStorage::truncate_after(Lsn after_lsn) {
    auto keep = std::upper_bound(entries_.begin(), entries_.end(), after_lsn,
                                 [](Lsn l, const Entry& e) { return l < e.lsn; });
    entries_.erase(keep, entries_.end());
    synced_ = std::min(synced_, entries_.size());
    reported_ = std::min(reported_, entries_.size());
    sync_floor_ = std::min(sync_floor_, entries_.size());
}

void MemoryStorage::write_meta(const LogMeta& meta) {
    meta_ = meta;
}

std::size_t MemoryStorage::corrupt_and_repair(std::size_t drop, Term other_term) {
    crash();
    drop = std::min(drop, entries_.size());
    const Term last_term = entries_.empty() ? snapshot_.lsn.term : entries_.back().lsn.term;
    entries_.resize(entries_.size() - drop);
    synced_ = reported_ = sync_floor_ = entries_.size();
    const Lsn last = entries_.empty() ? snapshot_.lsn : entries_.back().lsn;
    meta_.commit_lsn = std::min(meta_.commit_lsn, last);
    meta_.repaired = std::max({meta_.term, other_term, last_term, meta_.repaired.value_or(Term{})});
    meta_.term = *meta_.repaired;  // as FileStorage::repair(): raising a promise is always safe
    return drop;
}

Lsn MemoryStorage::flush() {
    if (policy_ != FsyncPolicy::Never) {
        synced_ = entries_.size();
    }
    reported_ = entries_.size();
    return durable_lsn();
}

SyncTicket MemoryStorage::begin_sync() {
    sync_floor_ = entries_.size();
    return SyncTicket{entries_.size(), reported_ < entries_.size(), nullptr};
}

Lsn MemoryStorage::end_sync(const SyncTicket& ticket) {
    // Only entries stored at begin_sync() and not truncated since are covered (see storage.hpp).
    const std::size_t covered = std::min(ticket.count, sync_floor_);
    if (policy_ != FsyncPolicy::Never) {
        synced_ = std::max(synced_, covered);
    }
    reported_ = std::max(reported_, covered);
    return durable_lsn();
}

Lsn MemoryStorage::durable_lsn() const {
    return reported_ == 0 ? snapshot_.lsn : entries_[reported_ - 1].lsn;
}

void MemoryStorage::persist_snapshot(const Snapshot& snapshot) {
    auto held = std::lower_bound(entries_.begin(), entries_.end(), snapshot.lsn,
                                 [](const Entry& e, Lsn l) { return e.lsn < l; });
    if (held == entries_.end() || held->lsn != snapshot.lsn) {
        truncate_after(snapshot.lsn);  // installed: what follows is not ours to keep
    }
    auto keep = std::upper_bound(entries_.begin(), entries_.end(), snapshot.lsn,
                                 [](Lsn l, const Entry& e) { return l < e.lsn; });
    const auto dropped = static_cast<std::size_t>(keep - entries_.begin());
    entries_.erase(entries_.begin(), keep);
    synced_ = synced_ > dropped ? synced_ - dropped : 0;
    reported_ = reported_ > dropped ? reported_ - dropped : 0;
    sync_floor_ = 0;  // a sync in flight counted entries at their old positions
    snapshot_ = snapshot;
}

void MemoryStorage::crash() {
    entries_.resize(synced_);
    reported_ = synced_;
}

std::string_view to_string(FsyncPolicy p) {
    return enum_name<NameStyle::Snake>(p);
}

std::string_view to_string(TailProblem p) {
    return enum_name<NameStyle::Snake>(p);
}

std::string RecoveryReport::describe() const {
    std::string s = "recovered " + std::to_string(records) + " entries (" +
                    std::to_string(valid_bytes) + " of " + std::to_string(file_bytes) + " bytes)";
    if (problem != TailProblem::None) {
        s += "; " + std::string(to_string(problem)) + " at offset " +
             std::to_string(problem_offset) + ", " + std::to_string(file_bytes - valid_bytes) +
             " bytes truncated";
    }
    if (!meta_found) {
        s += "; no meta file (fresh node)";
    }
    return s;
}

}  // namespace conclave::replication
