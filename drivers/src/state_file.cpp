#include "conclave/drivers/state_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "conclave/codec/json.hpp"
#include "conclave/core/durable_fs.hpp"

namespace conclave::net {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_errno(const std::string& what, const fs::path& path) {
    throw StateFileError(what + " '" + path.string() + "': " + std::strerror(errno));
}

void fsync_path(const fs::path& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) {
        fail_errno("cannot open for fsync", path);
    }
    if (::fsync(fd) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        fail_errno("fsync failed on", path);
    }
    ::close(fd);
}

}  // namespace

void create_directories_durably(const fs::path& dir) {
    try {
        conclave::create_directories_durably(dir);
    } catch (const std::system_error& e) {
        throw StateFileError(e.what());
    }
}

std::optional<DurableState> load_durable_state(const fs::path& data_dir, std::size_t cluster_size) {
    const fs::path path = data_dir / kStateFileName;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        if (ec) {
            throw StateFileError("cannot stat '" + path.string() + "': " + ec.message());
        }
        return std::nullopt;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw StateFileError("cannot read '" + path.string() + "'");
    }
    std::stringstream text;
    text << in.rdbuf();
    const auto j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
        throw StateFileError("corrupt state file '" + path.string() +
                             "': not a JSON object; refusing to start (restore it or, if this "
                             "node's vote may be forgotten, remove it)");
    }
    try {
        const auto format = get_u64(j, "format");
        if (format != kStateFileFormat) {
            throw DecodeError("format: unsupported state file format " + std::to_string(format));
        }
        const DurableState state = durable_state_from_json(j);
        if (state.voted_for && state.voted_for->value >= cluster_size) {
            throw DecodeError("voted_for: node index " + std::to_string(state.voted_for->value) +
                              " is not below the cluster size " + std::to_string(cluster_size));
        }
        return state;
    } catch (const DecodeError& e) {
        throw StateFileError("corrupt state file '" + path.string() + "': " + e.what() +
                             "; refusing to start (restore it or, if this node's vote may be "
                             "forgotten, remove it)");
    }
}

void store_durable_state(const fs::path& data_dir, const DurableState& state) {
    nlohmann::json j = state;
    j["format"] = kStateFileFormat;
    store_file_durably(data_dir, kStateFileName, j.dump() + "\n");
}

void store_file_durably(const fs::path& data_dir, const std::string& name,
                        const std::string& text) {
    create_directories_durably(data_dir);
    const fs::path path = data_dir / name;
    const fs::path temp = data_dir / (name + ".tmp");
    // A fresh file, never through a symbolic link planted in the directory: a leftover temp file
    // (a crash between write and rename) is removed first, and O_EXCL refuses anything in its way.
    if (::unlink(temp.c_str()) != 0 && errno != ENOENT) {
        fail_errno("cannot remove the leftover", temp);
    }
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        fail_errno("cannot create", temp);
    }
    std::size_t written = 0;
    while (written < text.size()) {
        const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            const int saved = errno;
            ::close(fd);
            errno = saved;
            fail_errno("cannot write", temp);
        }
        written += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        fail_errno("fsync failed on", temp);
    }
    if (::close(fd) != 0) {
        fail_errno("cannot close", temp);
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        fail_errno("cannot rename into", path);
    }
    fsync_path(data_dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace conclave::net
