// SPDX-License-Identifier: Apache-2.0
// Secure by default: the checks conclaved runs before it starts, and the secret files.
//
//   - Peers must authenticate: TLS ("tls") or a cluster secret ("secret_file"), unless the config
//     says "insecure": true.
//   - The admin API's mutating endpoints need the bearer token of "admin.token_file" unless
//     insecure; an admin endpoint on a wildcard address (0.0.0.0, ::) needs it too.
//   - A secret or token file must exist, be a regular file on disk owned by the user running
//     conclaved (or root), not be readable or writable by group or others (like ssh's private
//     keys), sit in directories that only that user or root can write (sticky ones like /tmp
//     allowed), and hold at least 32 printable bytes with at least 8 distinct ones (trailing
//     whitespace, e.g. the newline of `echo`, is not part of the secret).
//   - TLS keys likewise; certificates and CAs may be readable by others, not writable.
//   - An existing data directory is not a symbolic link, is owned by the user running conclaved
//     and not writable by group or others (as PostgreSQL checks its data directory).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "conclave/net/mesh.hpp"
#include "conclave/node/cluster_config.hpp"

namespace conclave::node {

inline constexpr std::size_t kMinSecretFileBytes = 32;
inline constexpr std::size_t kMaxSecretFileBytes = 4096;
inline constexpr std::size_t kMinSecretDistinctBytes = 8;

struct SecurityMaterial {
    std::optional<std::string> cluster_secret;
    std::optional<std::string> admin_token;
};

/// The policy errors of a config, naming the fields ("insecure", "secret_file", "tls",
/// "admin.token_file"), or nullopt when it may run.
std::optional<std::string> check_secure_by_default(const ClusterConfig& config);

/// Checks one file that conclaved trusts (header comment): owner, mode (`readable_by_others` for
/// certificates), and the directories above it. The error names `field`, the file and the fix.
std::optional<std::string> check_private_file(const std::string& path, const std::string& field,
                                              bool readable_by_others);

/// The TLS files of the config (peer "tls" and "admin.tls"), by check_private_file.
std::optional<std::string> check_key_files(const ClusterConfig& config);

/// An existing data directory: not a symbolic link, owned by this user, not group/other writable.
std::optional<std::string> check_data_dir(const std::filesystem::path& data_dir);

/// Why `secret` (trimmed file contents) is not a usable secret: control characters, too few
/// distinct characters. nullopt when it is.
std::optional<std::string> check_secret_text(const std::string& secret);

/// Reads one secret file; `field` names it in the error. Returns the secret or the error.
std::optional<std::string> read_secret_file(const std::string& path, const std::string& field,
                                            std::string& secret);

/// Reads the secret and token files named in the config. Throws std::runtime_error naming the
/// field and the file when one is missing, empty, too short or group/world-accessible.
SecurityMaterial load_security_material(const ClusterConfig& config);

/// The mesh's table and options for `config` (the secret, TLS, the jitter seed).
net::Membership membership_of(const ClusterConfig& config);
net::MeshOptions mesh_options_of(const ClusterConfig& config, std::optional<std::uint64_t> seed,
                                 const SecurityMaterial& security);

/// Bytes of a replication frame beyond its key and value (CBOR map, term, LSNs, channel).
inline constexpr std::size_t kEntryFrameOverheadBytes = 1024;

/// Limits that contradict each other: an entry of max_key_bytes + max_value_bytes must fit in a
/// mesh frame, or every replication of it is rejected by the receiver (and the connection
/// reset). The message names both fields; nullopt when consistent.
std::optional<std::string> check_limits(std::size_t max_key_bytes, std::size_t max_value_bytes,
                                        std::size_t max_frame_bytes);

/// The one loud start-up line of an insecure node (nullopt when secure).
std::optional<std::string> insecure_banner(const ClusterConfig& config);

}  // namespace conclave::node
