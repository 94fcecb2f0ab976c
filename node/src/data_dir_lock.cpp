// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/data_dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "conclave/drivers/state_file.hpp"

namespace conclave::node {
namespace {

std::string Errno(int error) {
    return std::error_code(error, std::generic_category()).message();
}

/// The pid recorded by the holder, or "unknown" (the holder may not have written it yet).
std::string ReadHolderPid(int fd) {
    char buffer[32] = {};
    const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
    if (n <= 0) {
        return "unknown";
    }
    std::string text(buffer, static_cast<std::size_t>(n));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.pop_back();
    }
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    return digits ? text : "unknown";
}

}  // namespace

DataDirLock::DataDirLock(DataDirLock&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)) {
    other.fd_ = -1;
}

DataDirLock& DataDirLock::operator=(DataDirLock&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = other.fd_;
        path_ = std::move(other.path_);
        other.fd_ = -1;
    }
    return *this;
}

DataDirLock::~DataDirLock() {
    if (fd_ >= 0) {
        ::close(fd_);  // releases the flock
    }
}

std::variant<DataDirLock, DataDirLock::Error> DataDirLock::acquire(
    const std::filesystem::path& data_dir) {
    std::error_code exists_ec;
    const bool created = !std::filesystem::exists(data_dir, exists_ec);
    try {
        drivers::create_directories_durably(data_dir);  // the new entries survive a machine crash
    } catch (const drivers::StateFileError& e) {
        return Error{"data directory " + data_dir.string() + ": cannot create: " + e.what()};
    }
    if (created && ::chmod(data_dir.c_str(), 0700) != 0) {
        return Error{"data directory " + data_dir.string() + ": cannot chmod 700: " + Errno(errno)};
    }
    // Never through a symbolic link planted in the directory.
    const std::filesystem::path path = data_dir / "LOCK";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return Error{path.string() + ": cannot open: " + Errno(errno)};
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        if (error == EWOULDBLOCK) {
            const std::string pid = ReadHolderPid(fd);
            ::close(fd);
            return Error{"data directory " + data_dir.string() +
                             " is in use by another conclaved (pid " + pid + ", lock file " +
                             path.string() + ")",
                         true};
        }
        ::close(fd);
        return Error{path.string() + ": cannot lock: " + Errno(error)};
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        const int error = errno;
        ::close(fd);
        return Error{path.string() + ": cannot write the pid: " + Errno(error)};
    }
    return DataDirLock(fd, path);
}

}  // namespace conclave::node
