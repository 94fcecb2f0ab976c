// SPDX-License-Identifier: Apache-2.0
// Storage for the log: the durable mirror of the core's in-memory log.
//
// The core never touches storage; a driver performs the core's PersistEntries / TruncateEntries /
// PersistMeta actions on a LogStorage, calls flush() once per batch of actions (group commit), and
// reports the result with ReplicatedLog::persisted(). After a restart, recover() gives back the
// log and its meta, plus a report of anything it had to cut off.
#pragma once

#include <atomic>
#include <boost/describe/enum.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "conclave/replication/actions.hpp"
#include "conclave/replication/entry.hpp"
#include "conclave/replication/log.hpp"

namespace conclave::replication {

/// When appended entries become durable.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    FsyncPolicy, std::uint8_t,
    EveryEntry,  // fsync inside every append(): each PersistEntries is durable when performed
    Batched,     // group commit: one fsync in flush() covers every append since the last one
    Never        // no fsync for entries (the OS decides). flush() still reports them "durable":
                 // a machine crash can lose acknowledged entries. For tests and benchmarks only.
)

/// What was wrong with the end of the log file, if anything.
BOOST_DEFINE_FIXED_ENUM_CLASS(
    TailProblem, std::uint8_t, None,
    TornHeader,  // the file (or its magic) ends inside a record header
    TornRecord,  // the file ends inside a record's payload
    BadLength,   // a record length of zero or above the record limit
    BadCrc,      // a record's checksum does not match (corruption or torn write)
    Malformed,   // checksum fine but the payload does not decode (e.g. key longer than payload)
    OutOfOrder   // a record's LSN is not above the previous one
)

/// Returned by recover(): what was kept and what was cut off. Only a torn *last* record (a crash
/// in the middle of an append: short, zero-filled or failing its checksum, with no valid record
/// anywhere after it) is ever cut off; any other damage makes recover() throw CorruptLogError.
struct RecoveryReport {
    std::size_t records = 0;        // entries recovered
    std::uint64_t file_bytes = 0;   // size of the log file found
    std::uint64_t valid_bytes = 0;  // prefix kept (the file is truncated to this)
    TailProblem problem = TailProblem::None;
    std::uint64_t problem_offset = 0;  // where the first bad record starts
    bool meta_found = false;

    bool truncated() const { return valid_bytes < file_bytes; }
    std::string describe() const;
};

/// Thrown by recover() when the log or meta file is damaged in a way a crash cannot explain (a bad
/// record followed by valid data, a bad magic, a bad meta file). The files are left unchanged.
/// what() is one line: the file, the offset, what is wrong and what the operator can do.
class CorruptLogError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct Recovery {
    RecoveredLog log;
    RecoveryReport report;
};

/// `conclaved --repair`: what FileStorage::repair() is given. R, the repaired marker,
/// is the highest term this node may have promised: the largest of the readable meta's term,
/// `elector_term` (the elector state's), the terms in the kept log and `min_term`.
struct RepairOptions {
    std::optional<Term> elector_term;  // nullopt: the elector state is missing or unreadable
    std::optional<Term> min_term;      // the operator's --min-term
    /// Tests only (the crash-ordering test): called after each durable step of repair() with
    /// the step's name ("marker", "dropped-saved", "log-cut", "snapshot-dropped", "meta"); a
    /// throw there leaves the files as a crash at that point would.
    std::function<void(std::string_view step)> after_step;
};

/// What FileStorage::repair() did.
struct RepairReport {
    std::uint64_t file_bytes = 0;   // log.dat as found
    std::uint64_t kept_bytes = 0;   // its valid prefix, kept
    std::size_t kept_records = 0;   // records in that prefix
    std::size_t dropped_valid = 0;  // records with a valid checksum found (and dropped) after it
    TailProblem problem = TailProblem::None;  // the first bad record (None: the log was intact)
    std::uint64_t problem_offset = 0;
    bool bad_magic = false;         // log.dat was not a Conclave log: all of it dropped
    bool meta_readable = false;     // log.meta existed and was intact
    bool snapshot_dropped = false;  // log.snap was damaged: it and all of log.dat dropped
    Lsn last_kept{};                // last entry kept (or the snapshot's LSN)
    Lsn commit_lsn{};               // the meta's commit point after the repair
    Term marker{};                  // R
    std::filesystem::path saved;    // copy of what was dropped (empty if nothing was)
    std::uint64_t dropped_bytes() const { return file_bytes - kept_bytes; }
};

/// Thrown by FileStorage::repair() when R cannot be known: neither log.meta nor the elector state
/// is readable and no --min-term was given. Nothing was changed.
class RepairNeedsMinTerm : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// What one asynchronous group commit covers (LogStorage::begin_sync): the entries stored when it
/// began. Opaque to callers.
struct SyncTicket {
    std::size_t count = 0;  // entries stored at begin_sync()
    bool needed = false;    // some of them were not durable yet
    /// FileStorage: a duplicate of the log file's descriptor, closed with the ticket's last copy.
    /// sync() uses it, so a compaction that replaces log.dat (and closes the storage's own
    /// descriptor) while the sync runs on another thread cannot race with it.
    std::shared_ptr<const int> fd;
};

class LogStorage {
  public:
    virtual ~LogStorage() = default;
    /// Reads back the durable log. Called once, before any other method.
    virtual Recovery recover() = 0;
    /// Appends entries after the last stored one (durable per the fsync policy).
    virtual void append(const std::vector<Entry>& entries) = 0;
    /// Drops every entry after `after_lsn` (which is stored, or kNoLsn). Durable on return.
    virtual void truncate_after(Lsn after_lsn) = 0;
    /// Replaces the meta record. Durable on return (whatever the policy: it is a promise).
    /// `conclaved` calls it on its storage thread too (a leader's deferred commit point,
    /// runtime/log_runtime.hpp), possibly while the owner thread calls it: FileStorage writes
    /// one at a time and never one older than the last written.
    virtual void write_meta(const LogMeta& meta) = 0;
    /// Group commit point: makes appended entries durable per the policy. Returns durable_lsn().
    virtual Lsn flush() = 0;
    /// The last entry known durable (kNoLsn if none).
    virtual Lsn durable_lsn() const = 0;
    /// Compaction (PersistSnapshot): makes `snapshot` durable and drops every stored entry up to
    /// its LSN; when its LSN is not stored (installed from the leader), first drops every entry
    /// after it. Durable on return. recover() then returns the snapshot and the entries after it.
    virtual void persist_snapshot(const Snapshot& snapshot) = 0;

    /// Asynchronous group commit (a storage thread), in three steps, one sync at a time:
    /// begin_sync() on the owner's thread names what the sync covers (every entry appended so
    /// far); sync() may run on another thread, concurrently with append / truncate_after /
    /// write_meta on the owner's thread (it touches nothing but the file and fsync_count());
    /// end_sync() on the owner's thread records the result and returns durable_lsn(). Entries
    /// appended after begin_sync() are not covered; entries truncated meanwhile are not reported.
    /// sync() throws like flush(). The defaults make it one synchronous flush() in end_sync().
    virtual SyncTicket begin_sync() { return SyncTicket{}; }
    virtual void sync(const SyncTicket& /*ticket*/) {}
    virtual Lsn end_sync(const SyncTicket& /*ticket*/) { return flush(); }

    /// fsync calls made so far (0 for storage without files). Safe to call from any thread.
    virtual std::uint64_t fsync_count() const { return 0; }
};

/// Performs `action` if it is a storage action (PersistEntries, TruncateEntries, PersistMeta,
/// PersistSnapshot);
/// returns whether it was one.
bool perform_storage_action(LogStorage& storage, const LogAction& action);

std::string_view to_string(FsyncPolicy p);
std::string_view to_string(TailProblem p);

/// In-memory storage for tests and the simulator. crash() loses what a machine crash would.
class MemoryStorage final : public LogStorage {
  public:
    explicit MemoryStorage(FsyncPolicy policy = FsyncPolicy::Batched) : policy_(policy) {}

    Recovery recover() override;
    void append(const std::vector<Entry>& entries) override;
    void truncate_after(Lsn after_lsn) override;
    void write_meta(const LogMeta& meta) override;
    Lsn flush() override;
    Lsn durable_lsn() const override;
    void persist_snapshot(const Snapshot& snapshot) override;
    SyncTicket begin_sync() override;
    Lsn end_sync(const SyncTicket& ticket) override;

    /// Drops every entry not yet durable, as a power loss would.
    void crash();
    /// The simulator's disk corruption plus `conclaved --repair`, on a stopped node:
    /// drops the last `drop` stored entries (not the snapshot), clamps the meta's commit point to
    /// what is left and sets the repaired marker R = max(meta term, `other_term`, last entry's
    /// term), and the meta's term to R. Returns the number of entries dropped.
    std::size_t corrupt_and_repair(std::size_t drop, Term other_term);
    /// The entries after snapshot().lsn.
    const std::vector<Entry>& entries() const { return entries_; }
    const Snapshot& snapshot() const { return snapshot_; }
    const LogMeta& meta() const { return meta_; }
    std::size_t synced_count() const { return synced_; }

  private:
    FsyncPolicy policy_;
    std::vector<Entry> entries_;
    std::size_t synced_ = 0;      // really durable (survives crash())
    std::size_t reported_ = 0;    // reported durable (differs from synced_ only with Never)
    std::size_t sync_floor_ = 0;  // entries untouched by truncation since begin_sync()
    LogMeta meta_;
    Snapshot snapshot_;
};

/// Append-only file of length-prefixed, CRC32-checked records in `dir`:
///   log.dat   "CNCLLOG1" then records: u32 length, u32 crc32(length bytes + payload), payload =
///             u64 term, u64 counter, u32 key length, key, value (all little-endian)
///   log.meta  "CNCLMET1", u64 term, u64 commit term, u64 commit counter, u32 crc32 (replaced
///             atomically: write log.meta.tmp, fsync, rename, fsync the directory)
///   log.snap  compaction: "CNCLSNP1", u64 term, u64 counter (its LSN), u64 length (entries of
///             the history it replaces), u32 count, count records as in log.dat, u32 crc32 of
///             everything before (replaced atomically like log.meta). log.dat then holds the
///             entries after its LSN; records at or below it (a compaction interrupted between
///             the two renames) are dropped at recovery.
/// I/O errors throw std::system_error naming the file; damage a crash cannot explain (including a
/// foreign file) throws CorruptLogError. recover() fsyncs the file and directory before it reports
/// anything durable; the constructor fsyncs the parent of every directory it creates.
class FileStorage final : public LogStorage {
  public:
    static constexpr std::string_view kLogFileName = "log.dat";
    static constexpr std::string_view kMetaFileName = "log.meta";
    /// Largest record payload accepted on recovery (anything larger is a corrupt length).
    static constexpr std::uint32_t kMaxRecordBytes = (std::uint32_t{64} << 20) + (1U << 17);

    /// Creates `dir` if needed. Call recover() before anything else.
    FileStorage(std::filesystem::path dir, FsyncPolicy policy);
    ~FileStorage() override;
    FileStorage(const FileStorage&) = delete;
    FileStorage& operator=(const FileStorage&) = delete;

    Recovery recover() override;
    void append(const std::vector<Entry>& entries) override;
    void truncate_after(Lsn after_lsn) override;
    /// Thread-safe against itself (a storage thread may write a leader's deferred commit point
    /// while the owner writes a new term): one at a time, and a meta older than the last written
    /// (a lower term, or the same term with a lower commit point) is not written, as the newer
    /// one covers it.
    void write_meta(const LogMeta& meta) override;
    Lsn flush() override;
    Lsn durable_lsn() const override;
    void persist_snapshot(const Snapshot& snapshot) override;

    static constexpr std::string_view kSnapshotFileName = "log.snap";
    /// The repaired marker (LogMeta::repaired): "CNCLREP1", u64 R, u32 crc32. Written by
    /// repair(); removed (unlink + fsync dir) by write_meta() of a meta without `repaired`.
    static constexpr std::string_view kRepairedFileName = "log.repaired";
    std::filesystem::path repaired_path() const { return dir_ / kRepairedFileName; }

    /// `conclaved --repair`, offline (the caller holds the data directory's lock): truncates
    /// log.dat at its first bad record (everything after it is dropped, even valid records: they
    /// may depend on what was lost; a copy is kept in `log.dat.dropped-<offset>`), drops a damaged
    /// log.snap with all of log.dat, rewrites log.meta for what is left and writes the repaired
    /// marker R durably (first, so that a crash in the middle leaves the node marked). Sets the
    /// marker even on an intact log (e.g. one restored from a backup). Throws RepairNeedsMinTerm
    /// (nothing changed) or std::system_error.
    static RepairReport repair(const std::filesystem::path& dir, const RepairOptions& options);
    /// The marker in `dir`, if any (throws CorruptLogError when it is damaged).
    static std::optional<Term> read_repaired_marker(const std::filesystem::path& dir);
    SyncTicket begin_sync() override;
    void sync(const SyncTicket& ticket) override;
    Lsn end_sync(const SyncTicket& ticket) override;

    std::uint64_t fsync_count() const override { return fsync_count_.load(); }
    /// Built once: the paths name files in error messages on every write.
    const std::filesystem::path& log_path() const { return log_path_; }
    std::filesystem::path meta_path() const { return dir_ / kMetaFileName; }
    std::filesystem::path snapshot_path() const { return dir_ / kSnapshotFileName; }
    /// Bytes of log.dat (header and valid records).
    std::uint64_t log_bytes() const { return size_; }

  private:
    struct Indexed {
        Lsn lsn{};
        std::uint64_t end_offset = 0;
    };
    void SyncLog();
    void Write(const std::string& bytes, std::uint64_t offset);
    /// Rewrites log.dat without its first `count` records (write temp, fsync, rename, fsync dir).
    void DropFirstRecords(std::size_t count);
    // Steps of recover(): reading log.dat's records into `result` (returns the end of the valid
    // prefix, 0 for a file without a whole magic), then making the file that prefix, durably.
    std::size_t ReadRecords(const std::string& data, Recovery& result);
    void SettleLogFile(std::size_t valid_end, std::size_t file_bytes, RecoveryReport& report);

    std::filesystem::path dir_;
    std::filesystem::path log_path_;
    FsyncPolicy policy_;
    int fd_ = -1;
    bool recovered_ = false;
    std::uint64_t size_ = 0;       // bytes of valid records (and header) in the file
    std::vector<Indexed> index_;   // one per stored record
    std::size_t synced_ = 0;       // records durable (or reported durable under Never)
    std::size_t sync_floor_ = 0;   // records untouched by truncation since begin_sync()
    bool marker_present_ = false;  // log.repaired exists (recover() / write_meta())
    // write_meta() may run on a storage thread (a leader's deferred commit point) while the owner
    // writes another meta: one at a time, and never one older than the last written.
    std::mutex meta_mutex_;
    std::optional<LogMeta> written_meta_;
    std::atomic<std::uint64_t> fsync_count_{0};  // sync() runs on a storage thread
    std::string buffer_;                         // reused encoding buffer
};

}  // namespace conclave::replication
