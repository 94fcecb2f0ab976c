#include "conclave/node/security.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace conclave::node {

namespace {

bool wildcard_host(const std::string& host) {
    return host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty();
}

}  // namespace

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

std::optional<std::string> read_secret_file(const std::string& path, const std::string& field,
                                            std::string& secret) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return field + ": cannot read '" + path + "': " + std::strerror(errno);
    }
    if (!S_ISREG(st.st_mode)) {
        return field + ": '" + path + "' is not a regular file";
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        return field + ": '" + path +
               "' is accessible by group or others: chmod 600 it (it holds a secret)";
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
    return m;
}

}  // namespace conclave::node
