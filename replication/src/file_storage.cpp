// SPDX-License-Identifier: Apache-2.0
// FileStorage: append-only record file plus an atomically replaced meta file. POSIX only.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "conclave/core/check.hpp"
#include "conclave/core/durable_fs.hpp"
#include "conclave/replication/storage.hpp"
#include "crc32.hpp"
#include "record.hpp"

namespace conclave::replication {

namespace {

constexpr std::string_view kLogMagic = "CNCLLOG1";
constexpr std::string_view kMetaMagic = "CNCLMET1";
constexpr std::size_t kMetaBytes = 8 + 24 + 4;

[[noreturn]] void ThrowErrno(const std::string& what, const std::filesystem::path& path) {
    throw std::system_error(errno, std::generic_category(), what + " " + path.string());
}

void FsyncOrThrow(int fd, const std::filesystem::path& path) {
    while (::fsync(fd) != 0) {
        if (errno != EINTR) {
            ThrowErrno("fsync", path);
        }
    }
}

void WriteAll(int fd, const char* data, std::size_t size, std::uint64_t offset,
              const std::filesystem::path& path) {
    while (size > 0) {
        const ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            ThrowErrno("write", path);
        }
        data += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
}

std::string ReadAll(int fd, const std::filesystem::path& path) {
    std::string data;
    char chunk[1 << 16];
    std::uint64_t offset = 0;
    for (;;) {
        const ssize_t n = ::pread(fd, chunk, sizeof chunk, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            ThrowErrno("read", path);
        }
        if (n == 0) {
            return data;
        }
        data.append(chunk, static_cast<std::size_t>(n));
        offset += static_cast<std::uint64_t>(n);
    }
}

// The whole file at `path`; nullopt when it does not exist.
std::optional<std::string> ReadWholeFile(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            return std::nullopt;
        }
        ThrowErrno("open", path);
    }
    std::string data;
    try {
        data = ReadAll(fd, path);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    return data;
}

// The one-line refusal: file, offset, what is wrong, what the operator can do.
std::string Refusal(const std::filesystem::path& path, std::uint64_t offset,
                    const std::string& what) {
    return "corrupt metadata log file " + path.string() + " at offset " + std::to_string(offset) +
           ": " + what +
           "; refusing to start, the files are left unchanged (keep a copy of the directory, then "
           "restore it from a backup, or repair it with conclaved --repair: see \"Corrupt log\" in "
           "node/README.md)";
}

// A small file of `size` bytes: an 8-byte magic, its fields, and the crc32 of everything before
// it; nullopt when it does not exist. Such files are replaced atomically, so one with another
// size, magic or checksum means the disk lies: CorruptLogError naming it as `what`.
std::optional<std::string> ReadCheckedFile(const std::filesystem::path& path, std::size_t size,
                                           std::string_view magic, const std::string& what) {
    std::optional<std::string> file = ReadWholeFile(path);
    if (!file) {
        return std::nullopt;
    }
    const std::string& data = *file;
    if (data.size() != size || std::string_view(data).substr(0, 8) != magic ||
        crc32(data.data(), size - 4) != get_u32(data.data() + size - 4)) {
        throw CorruptLogError(Refusal(path, 0,
                                      "corrupt " + what + " (" + std::to_string(data.size()) +
                                          " bytes: bad magic, size or checksum)"));
    }
    return file;
}

// Reads log.meta; nullopt when it does not exist. A damaged meta file is not guessed around: it is
// replaced atomically, so damage means the disk lies, and the node must not start on a guess.
std::optional<LogMeta> ReadMeta(const std::filesystem::path& path) {
    const std::optional<std::string> file =
        ReadCheckedFile(path, kMetaBytes, kMetaMagic, "meta file");
    if (!file) {
        return std::nullopt;
    }
    const std::string& data = *file;
    LogMeta meta;
    meta.term = Term{get_u64(data.data() + 8)};
    meta.commit_lsn = Lsn{Term{get_u64(data.data() + 16)}, get_u64(data.data() + 24)};
    return meta;
}

// Whether a record that passes its checksum and follows `prev` starts at `at`. Cheap checks
// first, so that scanning a garbage tail byte by byte does not checksum at every offset.
bool ValidRecordAt(std::string_view data, std::size_t at, Lsn prev) {
    const std::string_view rest = data.substr(at);
    if (rest.size() < kRecordHeaderBytes + kRecordFixedPayload) {
        return false;
    }
    const std::uint32_t length = get_u32(rest.data());
    if (length < kRecordFixedPayload || length > rest.size() - kRecordHeaderBytes) {
        return false;
    }
    const std::uint64_t term = get_u64(rest.data() + kRecordHeaderBytes);
    if (term == 0 || term < prev.term.value) {
        return false;
    }
    const DecodedRecord r = decode_record(rest, FileStorage::kMaxRecordBytes);
    return r.problem == TailProblem::None;
}

// A bad record at `offset` is a torn last record only if a crash in the middle of an append can
// explain it: the checksum never passed (a checksummed but malformed or out-of-order record was
// written that way: a bug or a lying disk), and no valid record starts anywhere after it.
// Anything else throws CorruptLogError: cutting there would silently drop valid records.
void CheckTornTail(const std::filesystem::path& path, std::string_view data, std::size_t offset,
                   TailProblem problem, Lsn prev) {
    const std::string what = std::string(to_string(problem));
    if (problem == TailProblem::Malformed || problem == TailProblem::OutOfOrder) {
        throw CorruptLogError(
            Refusal(path, offset, what + " record with a valid checksum (not a torn write)"));
    }
    for (std::size_t at = offset + 1; at < data.size(); ++at) {
        if (ValidRecordAt(data, at, prev)) {
            throw CorruptLogError(Refusal(
                path, offset,
                what + " record followed by a valid record at offset " + std::to_string(at) + " (" +
                    std::to_string(data.size() - offset) + " bytes would be lost)"));
        }
    }
}

// Where a scan of log.dat's records stopped: the end of the last good record, the problem of the
// record there (None: the end of the data) and the LSN of the last good record.
struct ScanEnd {
    std::size_t offset = 0;
    TailProblem problem = TailProblem::None;
    Lsn prev = kNoLsn;
};

// Decodes the records of `data` from `offset` (just after the magic), calling on_record(entry,
// end offset) for each, up to the first that fails its checks or does not follow the one before.
template <typename OnRecord>
ScanEnd ScanRecords(const std::string& data, std::size_t offset, OnRecord&& on_record) {
    Lsn prev = kNoLsn;
    while (offset < data.size()) {
        DecodedRecord r =
            decode_record(std::string_view(data).substr(offset), FileStorage::kMaxRecordBytes);
        if (r.problem == TailProblem::None && !(r.entry.lsn > prev)) {
            r.problem = TailProblem::OutOfOrder;
        }
        if (r.problem != TailProblem::None) {
            return ScanEnd{offset, r.problem, prev};
        }
        offset += r.bytes;
        prev = r.entry.lsn;
        on_record(std::move(r.entry), offset);
    }
    return ScanEnd{offset, TailProblem::None, prev};
}

// Writes `data` to dir/name durably and atomically: name.tmp, fsync, rename, fsync the directory.
void ReplaceFileDurably(const std::filesystem::path& dir, std::string_view name,
                        const std::string& data) {
    const auto final_path = dir / std::string(name);
    const auto temp_path = dir / (std::string(name) + ".tmp");
    // A fresh file, never through a symbolic link planted in the directory: a leftover temp file
    // (a crash between write and rename) is removed first, and O_EXCL refuses anything in its way.
    if (::unlink(temp_path.c_str()) != 0 && errno != ENOENT) {
        ThrowErrno("unlink", temp_path);
    }
    const int fd =
        ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        ThrowErrno("open", temp_path);
    }
    try {
        WriteAll(fd, data.data(), data.size(), 0, temp_path);
        FsyncOrThrow(fd, temp_path);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
        ThrowErrno("rename to " + final_path.string() + " from", temp_path);
    }
    fsync_directory(dir);
}

}  // namespace

// Compaction: the snapshot file (defined at the end of this file).
namespace {
std::optional<Snapshot> ReadSnapshotFile(const std::filesystem::path& path);
void WriteSnapshotFile(const std::filesystem::path& dir, const Snapshot& snapshot);

// The repaired marker (`conclaved --repair`): "CNCLREP1", u64 R, u32 crc32.
constexpr std::string_view kRepairedMagic = "CNCLREP1";
constexpr std::size_t kRepairedBytes = 8 + 8 + 4;

std::string EncodeRepairedMarker(Term r) {
    std::string data(kRepairedMagic);
    put_u64(data, r.value);
    put_u32(data, crc32(data.data(), data.size()));
    return data;
}
}  // namespace

std::optional<Term> FileStorage::read_repaired_marker(const std::filesystem::path& dir) {
    // Never guessed around: without it the node would count towards quorums again.
    const std::optional<std::string> file =
        ReadCheckedFile(dir / kRepairedFileName, kRepairedBytes, kRepairedMagic, "repaired marker");
    if (!file) {
        return std::nullopt;
    }
    return Term{get_u64(file->data() + 8)};
}

FileStorage::FileStorage(std::filesystem::path dir, FsyncPolicy policy)
    : dir_(std::move(dir)), log_path_(dir_ / kLogFileName), policy_(policy) {
    create_directories_durably(dir_);  // throws std::system_error, as every step here
    const auto path = log_path();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) {
        ThrowErrno("open", path);
    }
}

FileStorage::~FileStorage() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

Recovery FileStorage::recover() {
    CONCLAVE_CHECK(!recovered_, "recover() is called once");
    recovered_ = true;
    Recovery result;
    RecoveryReport& report = result.report;
    const std::string data = ReadAll(fd_, log_path());
    report.file_bytes = data.size();
    // Everything is checked before anything is changed: a refusal leaves the files as found.
    if (auto meta = ReadMeta(meta_path())) {
        result.log.meta = *meta;
        report.meta_found = true;
    }
    result.log.meta.repaired = read_repaired_marker(dir_);
    marker_present_ = result.log.meta.repaired.has_value();
    if (auto snapshot = ReadSnapshotFile(snapshot_path())) {
        result.log.snapshot = std::move(*snapshot);
    }
    const std::size_t offset = ReadRecords(data, result);
    report.records = result.log.entries.size();
    SettleLogFile(offset, data.size(), report);

    std::error_code ignored;
    std::filesystem::remove(dir_ / (std::string(kMetaFileName) + ".tmp"), ignored);
    std::filesystem::remove(dir_ / (std::string(kSnapshotFileName) + ".tmp"), ignored);
    std::filesystem::remove(dir_ / (std::string(kLogFileName) + ".tmp"), ignored);
    // A compaction interrupted between its two renames leaves records the snapshot replaces.
    const Lsn snapshot_lsn = result.log.snapshot.lsn;
    auto& entries = result.log.entries;
    const auto covered =
        static_cast<std::size_t>(std::upper_bound(entries.begin(), entries.end(), snapshot_lsn,
                                                  [](Lsn l, const Entry& e) { return l < e.lsn; }) -
                                 entries.begin());
    if (covered > 0) {
        DropFirstRecords(covered);
        entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(covered));
    }
    return result;
}

std::size_t FileStorage::ReadRecords(const std::string& data, Recovery& result) {
    const auto path = log_path();
    RecoveryReport& report = result.report;
    if (data.size() < kLogMagic.size()) {
        if (kLogMagic.substr(0, data.size()) != data) {
            throw CorruptLogError(Refusal(path, 0, "not a Conclave log file (bad magic)"));
        }
        if (!data.empty()) {  // torn while writing the magic of a fresh file
            report.problem = TailProblem::TornHeader;
        }
        return 0;
    }
    if (std::string_view(data).substr(0, kLogMagic.size()) != kLogMagic) {
        throw CorruptLogError(Refusal(path, 0, "not a Conclave log file (bad magic)"));
    }
    const ScanEnd end = ScanRecords(data, kLogMagic.size(), [&](Entry entry, std::size_t at) {
        index_.push_back(Indexed{entry.lsn, at});
        result.log.entries.push_back(std::move(entry));
    });
    if (end.problem != TailProblem::None) {
        report.problem = end.problem;
        report.problem_offset = end.offset;
        CheckTornTail(path, data, end.offset, end.problem, end.prev);
    }
    return end.offset;
}

void FileStorage::SettleLogFile(std::size_t valid_end, std::size_t file_bytes,
                                RecoveryReport& report) {
    const auto path = log_path();
    if (valid_end == 0) {
        // Fresh (or torn-at-birth) file: write the magic durably.
        std::string magic(kLogMagic);
        WriteAll(fd_, magic.data(), magic.size(), 0, path);
        if (::ftruncate(fd_, static_cast<off_t>(magic.size())) != 0) {
            ThrowErrno("truncate", path);
        }
        size_ = magic.size();
        report.valid_bytes = 0;
    } else {
        size_ = valid_end;
        report.valid_bytes = valid_end;
        if (valid_end < file_bytes) {  // cut the torn tail off before anything is appended
            if (::ftruncate(fd_, static_cast<off_t>(valid_end)) != 0) {
                ThrowErrno("truncate", path);
            }
        }
    }
    // What was read back may never have reached the disk (a crash of this process after write()
    // but before fsync leaves it in the page cache only): make it durable before reporting it so.
    FsyncOrThrow(fd_, path);
    fsync_directory(dir_);
    fsync_count_ += 2;
    synced_ = index_.size();
}

void FileStorage::append(const std::vector<Entry>& entries) {
    CONCLAVE_CHECK(recovered_, "recover() before append()");
    if (entries.empty()) {
        return;
    }
    buffer_.clear();
    std::uint64_t end = size_;
    const std::size_t first = index_.size();
    for (const Entry& e : entries) {
        CONCLAVE_CHECK(index_.empty() || index_.back().lsn < e.lsn,
                       "stored entries are strictly increasing");
        const std::size_t before = buffer_.size();
        encode_record(e, buffer_);
        end += buffer_.size() - before;
        index_.push_back(Indexed{e.lsn, end});
    }
    try {
        Write(buffer_, size_);
    } catch (...) {
        index_.resize(first);
        throw;
    }
    size_ = end;
    if (policy_ == FsyncPolicy::EveryEntry) {
        SyncLog();
    }
}

void FileStorage::truncate_after(Lsn after_lsn) {
    CONCLAVE_CHECK(recovered_, "recover() before truncate_after()");
    auto keep = std::upper_bound(index_.begin(), index_.end(), after_lsn,
                                 [](Lsn l, const Indexed& i) { return l < i.lsn; });
    const std::uint64_t new_size =
        keep == index_.begin() ? kLogMagic.size() : (keep - 1)->end_offset;
    index_.erase(keep, index_.end());
    synced_ = std::min(synced_, index_.size());
    sync_floor_ = std::min(sync_floor_, index_.size());
    if (new_size == size_) {
        return;
    }
    if (::ftruncate(fd_, static_cast<off_t>(new_size)) != 0) {
        ThrowErrno("truncate", log_path());
    }
    size_ = new_size;
    // Durable before anything is appended in its place, so that recovery never sees old records
    // after new ones.
    FsyncOrThrow(fd_, log_path());
    ++fsync_count_;
}

void FileStorage::write_meta(const LogMeta& meta) {
    const std::lock_guard<std::mutex> lock(meta_mutex_);
    if (written_meta_ &&
        (meta.term < written_meta_->term ||
         (meta.term == written_meta_->term && meta.commit_lsn < written_meta_->commit_lsn))) {
        return;  // covered by the newer meta already written
    }
    std::string data(kMetaMagic);
    put_u64(data, meta.term.value);
    put_u64(data, meta.commit_lsn.term.value);
    put_u64(data, meta.commit_lsn.counter);
    put_u32(data, crc32(data.data(), data.size()));
    if (meta.repaired && !marker_present_) {
        // Only repair() sets the marker; kept here so that any meta can be written back.
        ReplaceFileDurably(dir_, kRepairedFileName, EncodeRepairedMarker(*meta.repaired));
        marker_present_ = true;
        fsync_count_ += 2;
    }
    ReplaceFileDurably(dir_, kMetaFileName, data);
    fsync_count_ += 2;
    if (!meta.repaired && marker_present_) {
        // The repair is over (ReplicatedLog::MaybeClearRepaired): the new meta first, then the
        // marker goes, durably.
        const auto path = repaired_path();
        if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
            ThrowErrno("unlink", path);
        }
        fsync_directory(dir_);
        ++fsync_count_;
        marker_present_ = false;
    }
    written_meta_ = meta;
}

Lsn FileStorage::flush() {
    if (synced_ < index_.size()) {
        if (policy_ == FsyncPolicy::Never) {
            synced_ = index_.size();
        } else {
            SyncLog();
        }
    }
    return durable_lsn();
}

SyncTicket FileStorage::begin_sync() {
    sync_floor_ = index_.size();
    SyncTicket ticket{index_.size(), synced_ < index_.size(), nullptr};
    if (ticket.needed && policy_ != FsyncPolicy::Never) {
        const int fd = ::dup(fd_);
        if (fd >= 0) {  // else sync() reports the failure (begin_sync() may not throw)
            ticket.fd = std::shared_ptr<const int>(new int(fd), [](const int* p) {
                ::close(*p);
                delete p;
            });
        }
    }
    return ticket;
}

void FileStorage::sync(const SyncTicket& ticket) {
    // May run on a storage thread while the owner appends: touches only fd_ and fsync_count_.
    // fdatasync covers every write() that returned before it was called, hence every record
    // counted by begin_sync().
    if (!ticket.needed || policy_ == FsyncPolicy::Never) {
        return;
    }
    if (!ticket.fd) {
        throw std::system_error(EMFILE, std::generic_category(),
                                "dup (for the storage thread's fdatasync) " + log_path().string());
    }
    while (::fdatasync(*ticket.fd) != 0) {
        if (errno != EINTR) {
            ThrowErrno("fdatasync", log_path());
        }
    }
    ++fsync_count_;
}

Lsn FileStorage::end_sync(const SyncTicket& ticket) {
    synced_ = std::max(synced_, std::min(ticket.count, sync_floor_));
    return durable_lsn();
}

Lsn FileStorage::durable_lsn() const {
    return synced_ == 0 ? kNoLsn : index_[synced_ - 1].lsn;
}

void FileStorage::SyncLog() {
    // fdatasync is enough: the file size is data for it, and no other metadata matters.
    while (::fdatasync(fd_) != 0) {
        if (errno != EINTR) {
            ThrowErrno("fdatasync", log_path());
        }
    }
    ++fsync_count_;
    synced_ = index_.size();
}

void FileStorage::Write(const std::string& bytes, std::uint64_t offset) {
    WriteAll(fd_, bytes.data(), bytes.size(), offset, log_path());
}

}  // namespace conclave::replication

// ---- Compaction ------------------------------------------------------------------------------

namespace conclave::replication {
namespace {

constexpr std::string_view kSnapshotMagic = "CNCLSNP1";
constexpr std::size_t kSnapshotFixedBytes = 8 + 24 + 4;  // magic, lsn, len, count

std::optional<Snapshot> ReadSnapshotFile(const std::filesystem::path& path) {
    const std::optional<std::string> file = ReadWholeFile(path);
    if (!file) {
        return std::nullopt;
    }
    const std::string& data = *file;
    // Replaced atomically: any damage means the disk lies. Refuse, naming what is wrong.
    if (data.size() < kSnapshotFixedBytes + 4 ||
        std::string_view(data).substr(0, 8) != kSnapshotMagic) {
        throw CorruptLogError(Refusal(path, 0, "corrupt snapshot file (bad magic or size)"));
    }
    const std::size_t body = data.size() - 4;
    if (crc32(data.data(), body) != get_u32(data.data() + body)) {
        throw CorruptLogError(Refusal(path, body, "corrupt snapshot file (bad checksum)"));
    }
    Snapshot s;
    s.lsn = Lsn{Term{get_u64(data.data() + 8)}, get_u64(data.data() + 16)};
    const std::uint64_t len = get_u64(data.data() + 24);
    const std::uint32_t count = get_u32(data.data() + 32);
    std::size_t offset = kSnapshotFixedBytes;
    const std::string_view records = std::string_view(data).substr(0, body);
    Lsn prev = kNoLsn;
    for (std::uint32_t i = 0; i < count; ++i) {
        DecodedRecord r = decode_record(records.substr(offset), FileStorage::kMaxRecordBytes);
        if (r.problem != TailProblem::None || !(r.entry.lsn > prev) || r.entry.lsn > s.lsn ||
            r.entry.key.empty()) {
            throw CorruptLogError(Refusal(
                path, offset,
                "snapshot record " + std::to_string(i) + ": " +
                    std::string(to_string(r.problem == TailProblem::None ? TailProblem::Malformed
                                                                         : r.problem))));
        }
        prev = r.entry.lsn;
        offset += r.bytes;
        s.entries.push_back(std::move(r.entry));
    }
    if (offset != body || len < count || len > (std::uint64_t{1} << 48) ||
        (len == 0) != (s.lsn == kNoLsn)) {
        throw CorruptLogError(Refusal(path, offset, "corrupt snapshot file (inconsistent header)"));
    }
    s.len = static_cast<std::size_t>(len);
    return s;
}

void WriteSnapshotFile(const std::filesystem::path& dir, const Snapshot& snapshot) {
    std::string data(kSnapshotMagic);
    put_u64(data, snapshot.lsn.term.value);
    put_u64(data, snapshot.lsn.counter);
    put_u64(data, snapshot.len);
    put_u32(data, static_cast<std::uint32_t>(snapshot.entries.size()));
    for (const Entry& e : snapshot.entries) {
        encode_record(e, data);
    }
    put_u32(data, crc32(data.data(), data.size()));
    ReplaceFileDurably(dir, FileStorage::kSnapshotFileName, data);
}

}  // namespace

void FileStorage::persist_snapshot(const Snapshot& snapshot) {
    CONCLAVE_CHECK(recovered_, "recover() before persist_snapshot()");
    auto held = std::lower_bound(index_.begin(), index_.end(), snapshot.lsn,
                                 [](const Indexed& i, Lsn l) { return i.lsn < l; });
    if (held == index_.end() || held->lsn != snapshot.lsn) {
        // Installed from the leader: what follows its LSN here is not committed (README); cut it
        // first, so that recovery may take every record above the snapshot's LSN as following it.
        truncate_after(snapshot.lsn);
    }
    WriteSnapshotFile(dir_, snapshot);
    fsync_count_ += 2;
    const auto covered = static_cast<std::size_t>(
        std::upper_bound(index_.begin(), index_.end(), snapshot.lsn,
                         [](Lsn l, const Indexed& i) { return l < i.lsn; }) -
        index_.begin());
    if (covered > 0) {
        DropFirstRecords(covered);
    }
}

void FileStorage::DropFirstRecords(std::size_t count) {
    CONCLAVE_CHECK(count <= index_.size(), "dropping stored records");
    const std::uint64_t from = count == 0 ? kLogMagic.size() : index_[count - 1].end_offset;
    std::string data(kLogMagic);
    data.resize(kLogMagic.size() + (size_ - from));
    std::uint64_t done = 0;
    while (done < size_ - from) {
        const ssize_t n =
            ::pread(fd_, data.data() + kLogMagic.size() + done,
                    static_cast<std::size_t>(size_ - from - done), static_cast<off_t>(from + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            ThrowErrno("read", log_path());
        }
        done += static_cast<std::uint64_t>(n);
    }
    ReplaceFileDurably(dir_, kLogFileName, data);
    fsync_count_ += 2;
    const int fd = ::open(log_path().c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        ThrowErrno("open", log_path());
    }
    ::close(fd_);
    fd_ = fd;
    const std::uint64_t shift = from - kLogMagic.size();
    index_.erase(index_.begin(), index_.begin() + static_cast<std::ptrdiff_t>(count));
    for (Indexed& i : index_) {
        i.end_offset -= shift;
    }
    size_ -= shift;
    synced_ = index_.size();  // the new file was fsynced whole
    sync_floor_ = 0;          // a sync in flight counted records at their old positions
}

}  // namespace conclave::replication

// ---- Repair (`conclaved --repair`) -------------------------------------------------------------

namespace conclave::replication {

namespace {

// What repair() reads before it changes anything.
struct RepairInput {
    std::optional<LogMeta> meta;
    std::optional<Term> old_marker;
    std::optional<Snapshot> snapshot;
    std::string data;  // log.dat
};

RepairInput ReadForRepair(const std::filesystem::path& dir, RepairReport& report) {
    RepairInput in;
    try {
        in.meta = ReadMeta(dir / FileStorage::kMetaFileName);
        report.meta_readable = in.meta.has_value();
    } catch (const CorruptLogError&) {
        in.meta.reset();
    }
    try {
        in.old_marker = FileStorage::read_repaired_marker(dir);
    } catch (const CorruptLogError&) {
        in.old_marker.reset();  // rewritten below
    }
    try {
        in.snapshot = ReadSnapshotFile(dir / FileStorage::kSnapshotFileName);
    } catch (const CorruptLogError&) {
        report.snapshot_dropped = true;
    }
    in.data = ReadWholeFile(dir / FileStorage::kLogFileName).value_or(std::string());
    report.file_bytes = in.data.size();
    return in;
}

// The valid prefix of log.dat that repair() keeps.
struct KeptPrefix {
    std::size_t end = kLogMagic.size();  // bytes kept
    Lsn last = kNoLsn;                   // last entry kept (or the snapshot's LSN)
    Term highest{};                      // highest term in what is kept
};

KeptPrefix ScanForRepair(const RepairInput& in, RepairReport& report) {
    KeptPrefix kept;
    kept.last = in.snapshot ? in.snapshot->lsn : kNoLsn;
    kept.highest = kept.last.term;
    const std::string& data = in.data;
    if (report.snapshot_dropped) {
        report.kept_bytes = 0;  // entries after a lost snapshot have no known position
        return kept;
    }
    if (data.size() < kLogMagic.size() ||
        std::string_view(data).substr(0, kLogMagic.size()) != kLogMagic) {
        report.bad_magic = !data.empty();
        if (report.bad_magic) {
            report.problem = TailProblem::TornHeader;
        }
        return kept;
    }
    const ScanEnd end = ScanRecords(data, kLogMagic.size(), [&](const Entry& e, std::size_t) {
        kept.highest = std::max(kept.highest, e.lsn.term);
        ++report.kept_records;
        kept.last = std::max(kept.last, e.lsn);
    });
    if (end.problem != TailProblem::None) {
        report.problem = end.problem;
        report.problem_offset = end.offset;
    }
    kept.end = end.offset;
    report.kept_bytes = kept.end;
    // For the report: records that still pass their checksum in what is dropped.
    for (std::size_t at = kept.end + 1; at < data.size();) {
        if (ValidRecordAt(data, at, kNoLsn)) {
            ++report.dropped_valid;
            at += kRecordHeaderBytes + get_u32(data.data() + at);
        } else {
            ++at;
        }
    }
    return kept;
}

// R: the highest term this node may have promised (or voted in).
Term RepairPromise(const std::filesystem::path& dir, const RepairInput& in, Term highest,
                   const RepairOptions& options, bool meta_readable) {
    if (!meta_readable && !options.elector_term && !options.min_term) {
        throw RepairNeedsMinTerm(
            "neither " + (dir / FileStorage::kMetaFileName).string() +
            " nor the elector state is readable: the highest term this node may have promised is "
            "unknown; pass --min-term T with T the cluster's current term (GET /status on any "
            "running node)");
    }
    Term r = highest;
    for (const auto& t : {in.meta ? std::optional<Term>(in.meta->term) : std::nullopt,
                          options.elector_term, options.min_term, in.old_marker}) {
        if (t) {
            r = std::max(r, *t);
        }
    }
    return r;
}

void RepairStepDone(const RepairOptions& options, std::string_view step) {
    if (options.after_step) {
        options.after_step(step);
    }
}

// Truncates the file at `path` to `size` bytes, durably.
void TruncateDurably(const std::filesystem::path& path, std::size_t size) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        ThrowErrno("open", path);
    }
    const bool ok = ::ftruncate(fd, static_cast<off_t>(size)) == 0;
    const int saved_errno = errno;
    if (ok) {
        try {
            FsyncOrThrow(fd, path);
        } catch (...) {
            ::close(fd);
            throw;
        }
    }
    ::close(fd);
    if (!ok) {
        errno = saved_errno;
        ThrowErrno("truncate", path);
    }
}

// Step 2 of repair(): keeps a copy of what is dropped, then cuts (or rewrites) log.dat; a damaged
// log.snap is set aside as log.snap.corrupt.
void CutLog(const std::filesystem::path& dir, const std::string& data, std::size_t keep,
            RepairReport& report, const RepairOptions& options) {
    const bool cut = report.snapshot_dropped || report.bad_magic || keep < data.size();
    if (cut && report.file_bytes > report.kept_bytes) {
        report.saved = dir / (std::string(FileStorage::kLogFileName) + ".dropped-" +
                              std::to_string(report.kept_bytes));
        const std::string dropped = data.substr(static_cast<std::size_t>(report.kept_bytes));
        ReplaceFileDurably(dir, report.saved.filename().string(), dropped);
        RepairStepDone(options, "dropped-saved");
    }
    if (report.snapshot_dropped || report.bad_magic || data.size() < kLogMagic.size()) {
        ReplaceFileDurably(dir, FileStorage::kLogFileName, std::string(kLogMagic));
        RepairStepDone(options, "log-cut");
        if (report.snapshot_dropped) {
            const auto snap = dir / FileStorage::kSnapshotFileName;
            const auto saved = dir / (std::string(FileStorage::kSnapshotFileName) + ".corrupt");
            if (::rename(snap.c_str(), saved.c_str()) != 0) {
                ThrowErrno("rename to " + saved.string() + " from", snap);
            }
            fsync_directory(dir);
            RepairStepDone(options, "snapshot-dropped");
        }
    } else if (keep < data.size()) {
        TruncateDurably(dir / FileStorage::kLogFileName, keep);
        RepairStepDone(options, "log-cut");
    }
}

}  // namespace

RepairReport FileStorage::repair(const std::filesystem::path& dir, const RepairOptions& options) {
    RepairReport report;
    // Everything is read and decided before anything is changed.
    const RepairInput in = ReadForRepair(dir, report);
    const KeptPrefix kept = ScanForRepair(in, report);
    const Term r = RepairPromise(dir, in, kept.highest, options, report.meta_readable);
    report.marker = r;
    report.last_kept = report.snapshot_dropped ? kNoLsn : kept.last;
    const Lsn recorded_commit = in.meta ? in.meta->commit_lsn : kNoLsn;
    const Lsn snapshot_lsn = in.snapshot && !report.snapshot_dropped ? in.snapshot->lsn : kNoLsn;
    report.commit_lsn = std::max(std::min(recorded_commit, report.last_kept), snapshot_lsn);

    // Each step below is durable before the next starts (fsync of the file and of the
    // directory); the crash-ordering test stops after each one (replication/README.md, "Repair
    // gates"). 1. The marker first: a crash anywhere below leaves the node marked (the safe side).
    create_directories_durably(dir);
    ReplaceFileDurably(dir, kRepairedFileName, EncodeRepairedMarker(r));
    RepairStepDone(options, "marker");
    // 2. Keep a copy of what is dropped, then cut (or rewrite) log.dat.
    CutLog(dir, in.data, kept.end, report, options);
    // 3. The meta for what is left: the promise R (raising a promise is always safe), a commit
    // point inside the kept log.
    std::string meta_data(kMetaMagic);
    put_u64(meta_data, r.value);
    put_u64(meta_data, report.commit_lsn.term.value);
    put_u64(meta_data, report.commit_lsn.counter);
    put_u32(meta_data, crc32(meta_data.data(), meta_data.size()));
    ReplaceFileDurably(dir, kMetaFileName, meta_data);
    RepairStepDone(options, "meta");
    return report;
}

}  // namespace conclave::replication
