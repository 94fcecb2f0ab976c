// SPDX-License-Identifier: Apache-2.0
// Exclusive ownership of a data directory: flock(LOCK_EX) on <data_dir>/LOCK, held for as long as
// the DataDirLock lives (normally the process lifetime). The kernel drops the lock when the process
// dies, however it dies, so a crashed daemon never leaves a stale lock behind. The file holds the
// owner's pid (informational: used to name the holder when a second daemon is refused). The file
// is never removed: removing it would let two processes lock two different inodes.
#pragma once

#include <filesystem>
#include <string>
#include <variant>

namespace conclave::node {

class DataDirLock {
  public:
    DataDirLock(DataDirLock&& other) noexcept;
    DataDirLock& operator=(DataDirLock&& other) noexcept;
    DataDirLock(const DataDirLock&) = delete;
    DataDirLock& operator=(const DataDirLock&) = delete;
    /// Releases the lock.
    ~DataDirLock();

    const std::filesystem::path& path() const { return path_; }

    /// Why the lock could not be taken. `held_by_other` distinguishes "another daemon owns it"
    /// from I/O errors (cannot create the directory, permissions, ...).
    struct Error {
        std::string message;
        bool held_by_other = false;
    };

    /// Creates `data_dir` (and parents) if needed, then takes the lock without waiting.
    static std::variant<DataDirLock, Error> acquire(const std::filesystem::path& data_dir);

  private:
    DataDirLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
    int fd_ = -1;
    std::filesystem::path path_;
};

}  // namespace conclave::node
