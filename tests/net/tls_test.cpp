// SPDX-License-Identifier: Apache-2.0
// Mutual TLS with a cluster CA. Certificates are generated at run time with the openssl command.
#include <boost/asio/ssl.hpp>
#include <cstdlib>

#include "fixture.hpp"

using namespace conclave;
using namespace conclave::net;
using namespace conclave::net::test;
namespace ssl = boost::asio::ssl;

namespace {

void run(const std::string& command) {
    INFO(command);
    REQUIRE(std::system((command + " >/dev/null 2>&1").c_str()) == 0);
}

/// A CA (`ca_name`.pem) and one certificate per common name, signed by it, in `dir`.
void make_pki(const std::filesystem::path& dir, const std::string& ca_name,
              const std::vector<std::string>& common_names) {
    const std::string d = dir.string() + "/";
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    run("openssl req -x509 " + ec + " -keyout " + d + ca_name + ".key -out " + d + ca_name +
        ".pem -subj /CN=" + ca_name + " -days 2");
    for (const auto& cn : common_names) {
        const std::string base = d + ca_name + "-" + cn;
        run("openssl req " + ec + " -keyout " + base + ".key -out " + base +
            ".csr -subj /CN=" + cn);
        run("openssl x509 -req -in " + base + ".csr -CA " + d + ca_name + ".pem -CAkey " + d +
            ca_name + ".key -CAcreateserial -out " + base + ".pem -days 2");
    }
}

TlsOptions tls(const std::filesystem::path& dir, const std::string& ca, const std::string& cert) {
    const std::string d = dir.string() + "/";
    return TlsOptions{d + ca + ".pem", d + cert + ".pem", d + cert + ".key", true};
}

}  // namespace

TEST_CASE("TLS: a 3-node cluster elects; a foreign CA and a borrowed certificate are refused") {
    TempDir pki;
    make_pki(pki.path, "ca", {"n1", "n2", "n3"});
    make_pki(pki.path, "rogue", {"n3"});

    SECTION("all nodes with certificates from the cluster CA") {
        TestCluster cluster(3, [&](NodeId n) {
            auto o = test_mesh_options();
            o.tls = tls(pki.path, "ca", "ca-n" + std::to_string(n.value + 1));
            return o;
        });
        cluster.start_all();
        REQUIRE(cluster.wait_for_leader());
        CHECK(cluster.leader_count() == 1);
        for (const auto& n : cluster.nodes) {
            CHECK(n->mesh->counters().peer_ups == 2);
        }
        // The dial requests of n2 and n3 at start pass the TLS handshake and are served.
        REQUIRE(run_until(
            cluster.io,
            [&] {
                return cluster.nodes[0]->mesh->counters().dial_requests == 2 &&
                       cluster.nodes[1]->mesh->counters().dial_requests == 1;
            },
            2000ms));
    }

    SECTION("n3 presents a certificate from another CA") {
        TestCluster cluster(3, [&](NodeId n) {
            auto o = test_mesh_options();
            o.tls = n.value == 2 ? tls(pki.path, "ca", "rogue-n3")
                                 : tls(pki.path, "ca", "ca-n" + std::to_string(n.value + 1));
            return o;
        });
        cluster.start_all();
        // n1 and n2 elect among themselves; n3 never gets a connection up.
        REQUIRE(run_until(
            cluster.io,
            [&] {
                return cluster.nodes[0]->leader() &&
                       cluster.nodes[0]->leader() == cluster.nodes[1]->leader() &&
                       cluster.nodes[2]->mesh->counters().refusal(HandshakeRefusal::TlsFailed) >= 1;
            },
            5000ms));
        CHECK(cluster.nodes[2]->mesh->counters().peer_ups == 0);
        CHECK_FALSE(cluster.nodes[0]->mesh->is_up(NodeId{2}));
        CHECK_FALSE(cluster.nodes[1]->mesh->is_up(NodeId{2}));
    }

    SECTION("n3 presents n2's certificate (right CA, wrong name)") {
        TestCluster cluster(3, [&](NodeId n) {
            auto o = test_mesh_options();
            o.tls =
                tls(pki.path, "ca", n.value == 2 ? "ca-n2" : "ca-n" + std::to_string(n.value + 1));
            return o;
        });
        cluster.start_all();
        REQUIRE(run_until(
            cluster.io,
            [&] {
                return cluster.nodes[0]->mesh->counters().refusal(
                           HandshakeRefusal::CertificateMismatch) >= 1;
            },
            5000ms));
        CHECK_FALSE(cluster.nodes[0]->mesh->is_up(NodeId{2}));
        CHECK(cluster.nodes[2]->mesh->counters().peer_ups == 0);
        // n3's dial requests prove nothing (the certificate names n2): neither peer serves them;
        // n1 serves n2's only.
        CHECK(run_until(
            cluster.io,
            [&] {
                return cluster.nodes[2]->mesh->counters().dial_requests_sent == 2 &&
                       cluster.nodes[0]->mesh->counters().dial_requests == 1;
            },
            5000ms));
        run_for(cluster.io, 300ms);
        CHECK(cluster.nodes[2]->mesh->counters().dial_requests_sent == 2);
        CHECK(cluster.nodes[0]->mesh->counters().dial_requests == 1);
        CHECK(cluster.nodes[1]->mesh->counters().dial_requests == 0);
    }
}

TEST_CASE("TLS: a joiner's certificate must name the id it claims, and the seed's too") {
    TempDir pki;
    make_pki(pki.path, "ca", {"n2", "n4", "n5"});
    // The seed (n2) accepts every join; each side presents the certificate named.
    const auto join_with = [&pki](const std::string& seed_cert, const std::string& joiner_cert) {
        auto s = std::make_unique<JoinSetup>("n4", [&](MeshOptions& seed, MeshOptions& joiner) {
            seed.tls = tls(pki.path, "ca", seed_cert);
            joiner.tls = tls(pki.path, "ca", joiner_cert);
        });
        s->seed->set_join_handler([](std::string, JoinRequest, std::function<void(JoinAnswer)> r) {
            r(JoinAnswer{JoinStatus::Accepted, "{}"});
        });
        s->join();
        return s;
    };

    SECTION("both certificates name their ids: accepted") {
        const auto s = join_with("ca-n2", "ca-n4");
        CHECK(s->error.empty());
        REQUIRE(s->answer.has_value());
        CHECK(s->answer->status == JoinStatus::Accepted);
        CHECK(s->seed->counters().join_requests == 1);
    }
    SECTION("the joiner claims n4 with n5's certificate: the seed refuses") {
        const auto s = join_with("ca-n2", "ca-n5");
        CHECK_FALSE(s->answer.has_value());
        CHECK(s->seed->counters().refusal(HandshakeRefusal::CertificateMismatch) == 1);
        CHECK(s->seed->counters().join_requests == 0);
    }
    SECTION("the seed claims n2 with n5's certificate: the joiner refuses") {
        const auto s = join_with("ca-n5", "ca-n4");
        CHECK_THAT(s->error, Catch::Contains("certificate_mismatch"));
        CHECK(s->joiner->counters().refusal(HandshakeRefusal::CertificateMismatch) == 1);
        CHECK(s->seed->counters().join_requests == 0);
    }
}

TEST_CASE("TLS: silent sockets from the peers' own address never keep a peer out") {
    TempDir pki;
    make_pki(pki.path, "ca", {"n1", "n2", "n3"});
    TestCluster cluster(3, [&](NodeId n) {
        auto o = test_mesh_options();
        o.tls = tls(pki.path, "ca", "ca-n" + std::to_string(n.value + 1));
        o.handshake_timeout = std::chrono::milliseconds(10'000);  // no help from the deadline
        return o;
    });
    cluster.nodes[1]->start();
    cluster.nodes[2]->start();
    REQUIRE(cluster.wait_for_leader());
    // 8 silent connections (the per-source limit) to each node from 127.0.0.1, reopened when
    // closed: the address n1 dials from.
    std::vector<std::unique_ptr<SilentHolder>> holders;
    for (std::size_t target : {std::size_t{1}, std::size_t{2}}) {
        holders.push_back(std::make_unique<SilentHolder>(
            cluster.io, "127.0.0.1", cluster.nodes[target]->mesh->local_port(), 8));
    }
    run_for(cluster.io, std::chrono::milliseconds(300));
    cluster.nodes[0]->start();
    CHECK(run_until(
        cluster.io,
        [&] {
            return cluster.nodes[1]->mesh->is_up(NodeId{0}) &&
                   cluster.nodes[2]->mesh->is_up(NodeId{0});
        },
        std::chrono::milliseconds(2000)));
}

TEST_CASE("TLS 1.2: only AEAD cipher suites are accepted (no CBC, no SHA-1 MAC)") {
    TempDir pki;
    make_pki(pki.path, "ca", {"n1", "n2"});
    TestCluster cluster(2, [&](NodeId n) {
        auto o = test_mesh_options();
        o.tls = tls(pki.path, "ca", "ca-n" + std::to_string(n.value + 1));
        return o;
    });
    cluster.start_all();
    const auto handshake = [&](const char* ciphers) {
        ssl::context context(ssl::context::tlsv12_client);
        REQUIRE(SSL_CTX_set_cipher_list(context.native_handle(), ciphers) == 1);
        const std::string d = pki.path.string() + "/";
        context.use_certificate_chain_file(d + "ca-n2.pem");
        context.use_private_key_file(d + "ca-n2.key", ssl::context::pem);
        ssl::stream<tcp::socket> stream(cluster.io, context);
        stream.lowest_layer().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                                    cluster.nodes[0]->mesh->local_port()));
        bool done = false;
        boost::system::error_code result;
        stream.async_handshake(ssl::stream_base::client, [&](boost::system::error_code ec) {
            result = ec;
            done = true;
        });
        REQUIRE(run_until(
            cluster.io, [&] { return done; }, std::chrono::milliseconds(3000)));
        return !result;
    };
    CHECK_FALSE(handshake("ECDHE-ECDSA-AES128-SHA"));     // CBC with HMAC-SHA1
    CHECK_FALSE(handshake("ECDHE-ECDSA-AES128-SHA256"));  // CBC
    CHECK(handshake("ECDHE-ECDSA-AES128-GCM-SHA256"));    // AEAD: the canary
}
