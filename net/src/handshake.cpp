#include "conclave/net/handshake.hpp"

#include <nlohmann/json.hpp>

#include "conclave/codec/json.hpp"

namespace conclave::net {

using nlohmann::json;

namespace {

json parse_control(std::span<const std::uint8_t> payload) {
    // The size bound also bounds the nesting depth the recursive CBOR parser can reach.
    if (payload.size() > kMaxControlPayloadBytes) {
        throw DecodeError("control: payload of " + std::to_string(payload.size()) +
                          " bytes, above the maximum " + std::to_string(kMaxControlPayloadBytes));
    }
    json j;
    try {
        // allow_exceptions=false covers syntax errors only: a declared array or map size beyond
        // max_size() still throws json::out_of_range (found by fuzz/frame_fuzzer).
        j = json::from_cbor(payload.begin(), payload.end(), /*strict=*/true,
                            /*allow_exceptions=*/false);
    } catch (const json::exception& e) {
        throw DecodeError(std::string("control: malformed CBOR: ") + e.what());
    }
    if (j.is_discarded() || !j.is_object()) {
        throw DecodeError("control: not a CBOR map");
    }
    return j;
}

}  // namespace

std::vector<std::uint8_t> encode_hello(const Hello& hello) {
    return json::to_cbor(json{
        {"kind", "hello"}, {"v", hello.version}, {"cluster", hello.cluster}, {"node", hello.node}});
}

std::vector<std::uint8_t> encode_ping() {
    return json::to_cbor(json{{"kind", "ping"}});
}

ControlKind decode_control_kind(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload);
    const std::string kind = get_string(j, "kind");
    if (kind == "hello") {
        return ControlKind::Hello;
    }
    if (kind == "ping") {
        return ControlKind::Ping;
    }
    throw DecodeError("kind: unknown control frame kind '" + kind + "'");
}

Hello decode_hello(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload);
    if (get_string(j, "kind") != "hello") {
        throw DecodeError("kind: expected 'hello'");
    }
    Hello h;
    h.version = get_u64(j, "v");
    h.cluster = get_string(j, "cluster");
    h.node = get_string(j, "node");
    return h;
}

std::string_view to_string(HandshakeRefusal r) {
    switch (r) {
        case HandshakeRefusal::WrongCluster:
            return "wrong_cluster";
        case HandshakeRefusal::UnknownNode:
            return "unknown_node";
        case HandshakeRefusal::DuplicateNode:
            return "duplicate_node";
        case HandshakeRefusal::UnsupportedVersion:
            return "unsupported_version";
        case HandshakeRefusal::WrongDirection:
            return "wrong_direction";
        case HandshakeRefusal::WrongPeer:
            return "wrong_peer";
        case HandshakeRefusal::CertificateMismatch:
            return "certificate_mismatch";
        case HandshakeRefusal::TlsFailed:
            return "tls_failed";
        case HandshakeRefusal::Timeout:
            return "timeout";
        case HandshakeRefusal::TooManyPending:
            return "too_many_pending";
    }
    return "unknown";
}

HelloCheck check_hello(const Hello& hello, const Membership& membership, NodeId self,
                       std::optional<NodeId> expected) {
    HelloCheck c;
    if (hello.version != kProtocolVersion) {
        c.refusal = HandshakeRefusal::UnsupportedVersion;
        c.detail = "protocol version " + std::to_string(hello.version) + ", this node speaks " +
                   std::to_string(kProtocolVersion);
        return c;
    }
    if (hello.cluster != membership.cluster) {
        c.refusal = HandshakeRefusal::WrongCluster;
        c.detail = "cluster '" + hello.cluster + "', expected '" + membership.cluster + "'";
        return c;
    }
    const auto index = membership.index_of(hello.node);
    if (!index) {
        c.refusal = HandshakeRefusal::UnknownNode;
        c.detail = "node id '" + hello.node + "' is not in the membership table";
        return c;
    }
    if (expected) {
        if (*index != *expected) {
            c.refusal = HandshakeRefusal::WrongPeer;
            c.detail =
                "dialed '" + membership.at(*expected).id + "' but '" + hello.node + "' answered";
            return c;
        }
    } else if (index->value >= self.value) {
        // The lower index dials: an inbound hello must come from a lower index (never from self).
        c.refusal = HandshakeRefusal::WrongDirection;
        c.detail = "node '" + hello.node + "' (index " + std::to_string(index->value) +
                   ") must not dial node index " + std::to_string(self.value);
        return c;
    }
    c.peer = index;
    return c;
}

}  // namespace conclave::net
