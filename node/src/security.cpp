// SPDX-License-Identifier: Apache-2.0
#include "conclave/node/security.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace conclave::node {

namespace {

bool wildcard_host(const std::string& host) {
    return host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty();
}

std::string octal_mode(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

/// Owned by the user running conclaved or by root (who could read the file anyway).
bool trusted_owner(uid_t uid) {
    return uid == ::geteuid() || uid == 0;
}

/// `dir` and every directory above it: owned by this user or root, and not writable by group or
/// others unless sticky (like /tmp: others cannot rename or replace what is not theirs).
std::optional<std::string> check_directories(const std::string& field, const std::string& path,
                                             std::filesystem::path dir) {
    while (true) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0) {
            return field + ": cannot check the directory '" + dir.string() + "' of '" + path +
                   "': " + std::strerror(errno);
        }
        if (!trusted_owner(st.st_uid)) {
            return field + ": '" + path + "' is in '" + dir.string() + "', owned by uid " +
                   std::to_string(st.st_uid) +
                   " (another user could replace it): move it to a directory of your own";
        }
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
            return field + ": '" + path + "' is in '" + dir.string() + "', which group or others " +
                   "can write (mode " + octal_mode(st.st_mode) +
                   "): move it to a directory only you can write (mkdir -m 700)";
        }
        if (!dir.has_relative_path()) {
            return std::nullopt;
        }
        dir = dir.parent_path();
    }
}

}  // namespace

std::optional<std::string> check_private_file(const std::string& path, const std::string& field,
                                              bool readable_by_others) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return field + ": cannot read '" + path + "': " + std::strerror(errno);
    }
    if (!S_ISREG(st.st_mode)) {
        return field + ": '" + path + "' is not a regular file";
    }
    if (!trusted_owner(st.st_uid)) {
        return field + ": '" + path + "' is owned by uid " + std::to_string(st.st_uid) +
               ", not by the user running conclaved (uid " + std::to_string(::geteuid()) +
               ") or root: write a new one as this user";
    }
    const mode_t forbidden =
        readable_by_others ? (S_IWGRP | S_IWOTH) : static_cast<mode_t>(S_IRWXG | S_IRWXO);
    if ((st.st_mode & forbidden) != 0) {
        return field + ": '" + path + "' is " + (readable_by_others ? "writable" : "accessible") +
               " by group or others (mode " + octal_mode(st.st_mode) + "): chmod " +
               (readable_by_others ? "644" : "600") + " it" +
               (readable_by_others ? "" : " (it holds a secret)");
    }
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    const std::filesystem::path real = std::filesystem::canonical(path, ec);
    if (ec) {
        return field + ": cannot resolve '" + path + "': " + ec.message();
    }
    // The directory holding the name given (a symbolic link may sit there) and the real one.
    if (auto error = check_directories(field, path, absolute.parent_path())) {
        return error;
    }
    return check_directories(field, path, real.parent_path());
}

std::optional<std::string> check_data_dir(const std::filesystem::path& data_dir) {
    struct stat st {};
    if (::lstat(data_dir.c_str(), &st) != 0) {
        if (errno == ENOENT) {
            return std::nullopt;  // conclaved creates it, mode 0700
        }
        return "data_dir: cannot check '" + data_dir.string() + "': " + std::strerror(errno);
    }
    if (S_ISLNK(st.st_mode)) {
        return "data_dir: '" + data_dir.string() +
               "' is a symbolic link: give the directory it points to";
    }
    if (!S_ISDIR(st.st_mode)) {
        return "data_dir: '" + data_dir.string() + "' is not a directory";
    }
    if (st.st_uid != ::geteuid()) {
        return "data_dir: '" + data_dir.string() + "' is owned by uid " +
               std::to_string(st.st_uid) + ", not by the user running conclaved (uid " +
               std::to_string(::geteuid()) + "): chown it, or use a directory of your own";
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        return "data_dir: '" + data_dir.string() + "' is writable by group or others (mode " +
               octal_mode(st.st_mode) + "): chmod 700 it";
    }
    return std::nullopt;
}

std::optional<std::string> check_key_files(const ClusterConfig& config) {
    std::vector<std::tuple<std::string, std::string, bool>> files;  // path, field, public
    if (config.tls) {
        files.emplace_back(config.tls->ca_path, "tls.ca", true);
        files.emplace_back(config.tls->cert_path, "tls.cert", true);
        files.emplace_back(config.tls->key_path, "tls.key", false);
    }
    if (config.security.admin_tls != SecuritySettings::AdminTls::Off) {
        files.emplace_back(config.security.admin_tls_cert, "admin.tls.cert", true);
        files.emplace_back(config.security.admin_tls_key, "admin.tls.key", false);
    }
    for (const auto& [path, field, readable] : files) {
        if (path.empty()) {
            continue;
        }
        if (auto error = check_private_file(path, field, readable)) {
            return error;
        }
    }
    return std::nullopt;
}

std::optional<std::string> check_secure_by_default(const ClusterConfig& config) {
    const SecuritySettings& s = config.security;
    if (s.insecure) {
        return std::nullopt;
    }
    if (!config.tls && s.secret_file.empty()) {
        return std::string(
            "insecure: peers would not authenticate: set \"secret_file\" (a cluster secret) or "
            "\"tls\" (certificates, see conclave-certs), or \"insecure\": true for a loopback "
            "demo (see SECURITY.md)");
    }
    if (s.admin_token_file.empty()) {
        return std::string(
            "admin.token_file: the admin API's mutating endpoints need a bearer token: set "
            "\"admin\": {\"token_file\": ...}, or \"insecure\": true for a loopback demo");
    }
    return std::nullopt;
}

std::optional<std::string> check_secret_text(const std::string& secret) {
    for (const char c : secret) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) {
            return std::string(
                "holds control characters (NUL, newline, ...): not a secret written for "
                "conclaved; generate one with: openssl rand -hex 32");
        }
    }
    const std::set<char> distinct(secret.begin(), secret.end());
    if (!secret.empty() && distinct.size() < kMinSecretDistinctBytes) {
        return "uses " + std::to_string(distinct.size()) + " distinct characters, fewer than " +
               std::to_string(kMinSecretDistinctBytes) +
               ": generate one with: openssl rand -hex 32";
    }
    return std::nullopt;
}

std::optional<std::string> read_secret_file(const std::string& path, const std::string& field,
                                            std::string& secret) {
    if (auto error = check_private_file(path, field, /*readable_by_others=*/false)) {
        return error;
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return field + ": cannot read '" + path + "': " + std::strerror(errno);
    }
    if (st.st_size > static_cast<off_t>(kMaxSecretFileBytes)) {
        return field + ": '" + path + "' is larger than " + std::to_string(kMaxSecretFileBytes) +
               " bytes: wrong file?";
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return field + ": cannot read '" + path + "': " + std::strerror(errno);
    }
    // Read and trim in place (GCC 12 reports a false -Warray-bounds on copying or swapping a
    // short std::string out of a local here).
    secret.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (secret.size() != static_cast<std::size_t>(st.st_size)) {
        secret.clear();  // e.g. /proc/self/environ: stat says 0 bytes, reading gives more
        return field + ": '" + path + "' is not a file on disk (its size changes as it is read)";
    }
    const std::size_t last = secret.find_last_not_of("\r\n \t");
    secret.erase(last == std::string::npos ? 0 : last + 1);
    if (secret.empty()) {
        return field + ": '" + path + "' is empty";
    }
    if (secret.size() < kMinSecretFileBytes) {
        const std::size_t size = secret.size();
        secret.clear();
        return field + ": '" + path + "' holds " + std::to_string(size) + " bytes, fewer than " +
               std::to_string(kMinSecretFileBytes) + " (generate one with: openssl rand -hex 32)";
    }
    if (auto error = check_secret_text(secret)) {
        secret.clear();
        return field + ": '" + path + "' " + *error;
    }
    return std::nullopt;
}

SecurityMaterial load_security_material(const ClusterConfig& config) {
    SecurityMaterial m;
    const SecuritySettings& s = config.security;
    if (!s.secret_file.empty()) {
        std::string secret;
        if (auto error = read_secret_file(s.secret_file, "secret_file", secret)) {
            throw std::runtime_error(*error);
        }
        m.cluster_secret = std::move(secret);
    }
    if (!s.admin_token_file.empty()) {
        std::string token;
        if (auto error = read_secret_file(s.admin_token_file, "admin.token_file", token)) {
            throw std::runtime_error(*error);
        }
        m.admin_token = std::move(token);
    }
    return m;
}

std::optional<std::string> check_limits(std::size_t max_key_bytes, std::size_t max_value_bytes,
                                        std::size_t max_frame_bytes) {
    if (max_key_bytes + max_value_bytes + kEntryFrameOverheadBytes > max_frame_bytes) {
        return "metadata max_value_bytes (" + std::to_string(max_value_bytes) +
               ") + max_key_bytes (" + std::to_string(max_key_bytes) + ") + " +
               std::to_string(kEntryFrameOverheadBytes) +
               " bytes of framing do not fit in net max_frame_bytes (" +
               std::to_string(max_frame_bytes) + ")";
    }
    return std::nullopt;
}

std::optional<std::string> insecure_banner(const ClusterConfig& config) {
    if (!config.security.insecure) {
        return std::nullopt;
    }
    std::string line = "INSECURE MODE (\"insecure\": true): peers are not authenticated";
    if (!config.tls && config.security.secret_file.empty()) {
        line += " (no TLS, no secret_file): anyone who reaches " +
                to_string(config.self_entry().peer) + " can join as any node";
    }
    if (config.security.admin_token_file.empty()) {
        line += "; the admin API on " + to_string(config.self_entry().http) +
                " accepts writes without a token";
        if (wildcard_host(config.self_entry().http.host)) {
            line += " FROM ANY HOST (wildcard address)";
        }
    }
    return line + ". For loopback demos and tests only.";
}

net::Membership membership_of(const ClusterConfig& config) {
    net::Membership m;
    m.cluster = config.cluster;
    for (const NodeEntry& entry : config.nodes) {
        m.nodes.push_back(net::NodeAddress{entry.id, entry.peer.host, entry.peer.port});
    }
    return m;
}

net::MeshOptions mesh_options_of(const ClusterConfig& config, std::optional<std::uint64_t> seed,
                                 const SecurityMaterial& security) {
    net::MeshOptions m;
    m.secret = security.cluster_secret;
    if (config.tls) {
        m.tls =
            net::TlsOptions{config.tls->ca_path, config.tls->cert_path, config.tls->key_path, true};
    }
    m.seed = seed;
    // A follower's kernel must not give up on its leader's silent connection before the
    // follower's promise has run out (docs/design.md, the leader lease, assumption 3): the
    // keepalive budget (idle + interval x probes, also TCP_USER_TIMEOUT) exceeds the promise.
    const auto promise = std::chrono::ceil<std::chrono::seconds>(config.elector.promise_duration());
    m.keepalive_idle = std::max(m.keepalive_idle, promise + std::chrono::seconds{1});
    return m;
}

}  // namespace conclave::node
