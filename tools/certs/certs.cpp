// SPDX-License-Identifier: Apache-2.0
#include "certs.hpp"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <boost/asio/ip/address.hpp>
#include <cstdio>
#include <memory>

namespace conclave::certs {

namespace {

struct Free {
    void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
    void operator()(X509* p) const { X509_free(p); }
    void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using File = std::unique_ptr<std::FILE, Free>;

std::string openssl_error(const std::string& what) {
    const unsigned long code = ERR_get_error();
    std::string text = what;
    if (code != 0) {
        char buffer[256];
        ERR_error_string_n(code, buffer, sizeof buffer);
        text += ": ";
        text += buffer;
    }
    return text;
}

Key new_key() {
    return Key(EVP_EC_gen("P-256"));
}

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    std::unique_ptr<X509_EXTENSION, Free> ext(
        X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
    return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

/// A certificate for `key` named CN=`cn`, valid from now for `days`, not yet signed.
Cert new_cert(EVP_PKEY* key, const std::string& cn, int days) {
    Cert cert(X509_new());
    if (!cert) {
        return cert;
    }
    unsigned char serial[16];
    if (RAND_bytes(serial, sizeof serial) != 1) {
        return nullptr;
    }
    serial[0] = static_cast<unsigned char>(serial[0] & 0x7FU);  // positive
    BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
    const bool ok = bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) &&
                    X509_set_version(cert.get(), 2) == 1 &&
                    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60) != nullptr &&
                    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days) != nullptr &&
                    X509_set_pubkey(cert.get(), key) == 1 &&
                    X509_NAME_add_entry_by_txt(
                        X509_get_subject_name(cert.get()), "CN", MBSTRING_UTF8,
                        reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) == 1;
    BN_free(bn);
    if (!ok) {
        return nullptr;
    }
    return cert;
}

std::optional<std::string> write_pem(const std::filesystem::path& path, X509* cert, EVP_PKEY* key) {
    // Keys are created owner-only from the start (no window with wider permissions).
    const mode_t old = ::umask(key != nullptr ? 077 : 022);
    File f(std::fopen(path.c_str(), "wx"));
    ::umask(old);
    if (!f) {
        return "cannot create '" + path.string() + "' (it must not exist yet)";
    }
    const bool ok = key != nullptr ? PEM_write_PrivateKey(f.get(), key, nullptr, nullptr, 0,
                                                          nullptr, nullptr) == 1
                                   : PEM_write_X509(f.get(), cert) == 1;
    if (!ok) {
        return openssl_error("cannot write '" + path.string() + "'");
    }
    return std::nullopt;
}

}  // namespace

std::optional<std::string> create_ca(const std::filesystem::path& dir, int valid_days) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    Key key = new_key();
    if (!key) {
        return openssl_error("cannot generate the CA key");
    }
    Cert cert = new_cert(key.get(), "conclave-cluster-ca", valid_days);
    if (!cert || X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
        !add_ext(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_ext(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_ext(cert.get(), cert.get(), NID_subject_key_identifier, "hash") ||
        X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
        return openssl_error("cannot build the CA certificate");
    }
    if (auto error = write_pem(dir / "ca.key", nullptr, key.get())) {
        return error;
    }
    return write_pem(dir / "ca.pem", cert.get(), nullptr);
}

std::optional<std::string> create_node(const std::filesystem::path& dir, const std::string& id,
                                       const std::vector<std::string>& hosts, int valid_days) {
    File ca_file(std::fopen((dir / "ca.pem").c_str(), "r"));
    File ca_key_file(std::fopen((dir / "ca.key").c_str(), "r"));
    if (!ca_file || !ca_key_file) {
        return "cannot read '" + (dir / "ca.pem").string() + "' and '" + (dir / "ca.key").string() +
               "': run create-ca first";
    }
    Cert ca(PEM_read_X509(ca_file.get(), nullptr, nullptr, nullptr));
    Key ca_key(PEM_read_PrivateKey(ca_key_file.get(), nullptr, nullptr, nullptr));
    if (!ca || !ca_key) {
        return openssl_error("cannot parse the CA in '" + dir.string() + "'");
    }
    if (id.empty() || id.find_first_of(",:= /") != std::string::npos) {
        return "--id: '" + id + "' is not a node id";
    }
    std::string san = "DNS:" + id;
    for (const std::string& host : hosts) {
        boost::system::error_code bad;
        boost::asio::ip::make_address(host, bad);
        if (host.empty() || host.find_first_of(", ") != std::string::npos) {
            return "--host: '" + host + "' is not a host name or address";
        }
        san += (bad ? ",DNS:" : ",IP:") + host;
    }
    Key key = new_key();
    if (!key) {
        return openssl_error("cannot generate the node key");
    }
    Cert cert = new_cert(key.get(), id, valid_days);
    if (!cert || X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get())) != 1 ||
        !add_ext(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(cert.get(), ca.get(), NID_key_usage,
                 "critical,digitalSignature,keyEncipherment") ||
        !add_ext(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth,clientAuth") ||
        !add_ext(cert.get(), ca.get(), NID_subject_alt_name, san) ||
        !add_ext(cert.get(), ca.get(), NID_authority_key_identifier, "keyid") ||
        X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
        return openssl_error("cannot build the certificate of '" + id + "'");
    }
    if (auto error = write_pem(dir / (id + ".key"), nullptr, key.get())) {
        return error;
    }
    return write_pem(dir / (id + ".pem"), cert.get(), nullptr);
}

}  // namespace conclave::certs
