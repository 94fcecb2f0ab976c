// SPDX-License-Identifier: Apache-2.0
// conclave-certs (part 2): a cluster started from its files elects a leader; a
// certificate for n2 cannot log in as n1; a certificate from another CA is refused.
#include "certs.hpp"
#include "net/fixture.hpp"

using namespace conclave;
using namespace conclave::net;
using namespace conclave::net::test;

namespace {

MeshOptions tls_options(const std::filesystem::path& dir, const std::string& id) {
    auto o = test_mesh_options();
    o.tls = TlsOptions{(dir / "ca.pem").string(), (dir / (id + ".pem")).string(),
                       (dir / (id + ".key")).string(), true};
    return o;
}

}  // namespace

TEST_CASE("conclave-certs: a cluster from its files elects; wrong names and CAs are refused") {
    TempDir certs;
    const auto ca = certs.path / "ca";
    const auto other = certs.path / "other";
    REQUIRE_FALSE(certs::create_ca(ca));
    REQUIRE_FALSE(certs::create_ca(other));
    for (const char* id : {"n1", "n2", "n3"}) {
        REQUIRE_FALSE(certs::create_node(ca, id, {"127.0.0.1", "localhost"}));
    }
    REQUIRE_FALSE(certs::create_node(other, "n1", {}));
    CHECK(certs::create_node(ca, "n1", {}).has_value());  // never overwrites
    CHECK((std::filesystem::status(ca / "n1.key").permissions() &
           (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
          std::filesystem::perms::none);

    SECTION("a cluster started from the files elects a leader") {
        TestCluster cluster(
            3, [&](NodeId id) { return tls_options(ca, "n" + std::to_string(id.value + 1)); });
        cluster.start_all();
        CHECK(cluster.wait_for_leader());
    }
    SECTION("n2's certificate cannot log in as n1") {
        TestCluster cluster(3, [&](NodeId id) {
            return tls_options(ca, id.value == 0 ? "n2" : "n" + std::to_string(id.value + 1));
        });
        cluster.start_all();
        REQUIRE(run_until(
            cluster.io,
            [&] {
                return cluster.nodes[2]->mesh->counters().refusal(
                           HandshakeRefusal::CertificateMismatch) > 0 &&
                       cluster.nodes[2]->mesh->is_up(NodeId{1});
            },
            5000ms));
        CHECK_FALSE(cluster.nodes[2]->mesh->is_up(NodeId{0}));
        CHECK_FALSE(cluster.nodes[1]->mesh->is_up(NodeId{0}));
    }
    SECTION("a certificate from another CA is refused") {
        TestCluster cluster(3, [&](NodeId id) {
            return id.value == 0 ? tls_options(other, "n1")
                                 : tls_options(ca, "n" + std::to_string(id.value + 1));
        });
        cluster.start_all();
        REQUIRE(run_until(
            cluster.io,
            [&] {
                return cluster.nodes[2]->mesh->counters().refusal(HandshakeRefusal::TlsFailed) >
                           0 &&
                       cluster.nodes[2]->mesh->is_up(NodeId{1});
            },
            5000ms));
        CHECK_FALSE(cluster.nodes[2]->mesh->is_up(NodeId{0}));
    }
}
