// SPDX-License-Identifier: Apache-2.0
#include "conclave/drivers/state_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#include <array>
#include <boost/crc.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "conclave/codec/json.hpp"
#include "conclave/core/durable_fs.hpp"

namespace conclave::drivers {

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

namespace {

// The way back named by every refusal of a damaged or lost vote record: never "remove it".
std::string refusal(const fs::path& path, const std::string& what) {
    return "corrupt state file '" + path.string() + "': " + what +
           "; refusing to start: this file holds the node's votes, and a node that forgets a vote "
           "can vote twice in one term. Restore it from a backup taken after the node's last "
           "vote, or run `conclaved --repair --min-term T` with T the cluster's current term "
           "(GET /status on a running node; the node then rejoins as a non-voting member until "
           "it has caught up), or remove the node from the cluster (conclavectl members remove) "
           "and start it with an empty data directory and --join";
}

// CRC-32 of the object without its "crc32" field, as nlohmann dumps it (keys sorted).
std::uint32_t checksum_of(nlohmann::json j) {
    j.erase("crc32");
    const std::string text = j.dump();
    boost::crc_32_type crc;
    crc.process_bytes(text.data(), text.size());
    return crc.checksum();
}

std::string get_string(const nlohmann::json& j, const char* field) {
    const auto it = j.find(field);
    if (it == j.end() || !it->is_string()) {
        throw codec::DecodeError(std::string(field) + ": missing or not a string");
    }
    return it->get<std::string>();
}

NodeIdentity identity_from_json(const nlohmann::json& j) {
    NodeIdentity id{get_string(j, "cluster"), get_string(j, "node"), get_string(j, "incarnation")};
    if (const auto it = j.find("registered"); it != j.end()) {
        if (!it->is_boolean()) {
            throw codec::DecodeError("registered: not a boolean");
        }
        id.registered = it->get<bool>();
    }
    if (const auto it = j.find("log"); it != j.end()) {
        if (!it->is_boolean()) {
            throw codec::DecodeError("log: not a boolean");
        }
        id.log = it->get<bool>();
    }
    if (id.incarnation.empty()) {
        throw codec::DecodeError("incarnation: empty");
    }
    return id;
}

StateFile decode_state_file(const nlohmann::json& j, std::size_t cluster_size) {
    const auto format = codec::get_u64(j, "format");
    if (format != 1 && format != kStateFileFormat) {
        throw codec::DecodeError("format: unsupported state file format " + std::to_string(format));
    }
    StateFile file{codec::durable_state_from_json(j), std::nullopt};
    if (format == kStateFileFormat) {
        if (codec::get_u64(j, "crc32") != checksum_of(j)) {
            throw codec::DecodeError(
                "crc32: the checksum does not match the content (a damaged file)");
        }
        file.identity = identity_from_json(j);
    }
    if (file.state.voted_for && file.state.voted_for->value >= cluster_size) {
        throw codec::DecodeError("voted_for: node index " +
                                 std::to_string(file.state.voted_for->value) +
                                 " is not below the cluster size " + std::to_string(cluster_size));
    }
    return file;
}

}  // namespace

std::optional<StateFile> load_state_file(const fs::path& data_dir, std::size_t cluster_size) {
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
        throw StateFileError(refusal(path, "not a JSON object"));
    }
    try {
        return decode_state_file(j, cluster_size);
    } catch (const codec::DecodeError& e) {
        throw StateFileError(refusal(path, e.what()));
    }
}

std::optional<elector::DurableState> load_durable_state(const fs::path& data_dir,
                                                        std::size_t cluster_size) {
    auto file = load_state_file(data_dir, cluster_size);
    if (!file) {
        return std::nullopt;
    }
    return file->state;
}

std::string state_file_text(const elector::DurableState& state, const NodeIdentity& identity) {
    nlohmann::json j = state;
    j["format"] = kStateFileFormat;
    j["cluster"] = identity.cluster;
    j["node"] = identity.node;
    j["incarnation"] = identity.incarnation.empty() ? std::string("unset") : identity.incarnation;
    if (!identity.registered) {
        j["registered"] = false;
    }
    if (identity.log) {
        j["log"] = true;
    }
    j["crc32"] = checksum_of(j);
    return j.dump() + "\n";
}

void store_durable_state(const fs::path& data_dir, const elector::DurableState& state,
                         const NodeIdentity& identity) {
    store_file_durably(data_dir, kStateFileName, state_file_text(state, identity));
}

std::string new_incarnation() {
    std::array<unsigned char, 16> bytes{};
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
        throw StateFileError("cannot draw a random incarnation id (OpenSSL RAND_bytes failed)");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (const unsigned char b : bytes) {
        out.push_back(kHex[b >> 4]);
        out.push_back(kHex[b & 0xF]);
    }
    return out;
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

}  // namespace conclave::drivers
