// SPDX-License-Identifier: Apache-2.0
#include "conclave/core/durable_fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace conclave {
namespace {

[[noreturn]] void throw_errno(int error, const std::string& what, const std::filesystem::path& p) {
    throw std::system_error(error, std::generic_category(), what + " " + p.string());
}

}  // namespace

void fsync_directory(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        throw_errno(errno, "open directory", dir);
    }
    while (::fsync(fd) != 0) {
        if (errno != EINTR) {
            const int saved = errno;
            ::close(fd);
            throw_errno(saved, "fsync directory", dir);
        }
    }
    ::close(fd);
}

void create_directories_durably(const std::filesystem::path& dir) {
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec)) {
        return;
    }
    const std::filesystem::path parent = dir.parent_path();
    if (!parent.empty() && parent != dir) {
        create_directories_durably(parent);
    }
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        throw_errno(errno, "create directory", dir);
    }
    fsync_directory(parent.empty() ? std::filesystem::path(".") : parent);
}

}  // namespace conclave
