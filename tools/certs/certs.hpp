// SPDX-License-Identifier: Apache-2.0
// conclave-certs: a cluster CA and per-node certificates for the mesh's mutual TLS, made with
// OpenSSL's API (EVP_PKEY, X509, X509V3 extensions). Keys are ECDSA P-256, signatures SHA-256.
//   create_ca(dir):   dir/ca.pem (certificate, CA:TRUE) and dir/ca.key (mode 0600)
//   create_node(dir, id, hosts): dir/<id>.pem and dir/<id>.key (0600), signed by dir/ca.*;
//     subject CN = id, subjectAltName DNS:<id> plus each host (IP: for addresses, DNS: else),
//     extendedKeyUsage serverAuth + clientAuth (each node is both ends of TLS).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace conclave::certs {

/// nullopt on success, else what failed (naming the file).
std::optional<std::string> create_ca(const std::filesystem::path& dir, int valid_days = 3650);
std::optional<std::string> create_node(const std::filesystem::path& dir, const std::string& id,
                                       const std::vector<std::string>& hosts, int valid_days = 825);

}  // namespace conclave::certs
