// SPDX-License-Identifier: Apache-2.0
#include "conclave/net/handshake.hpp"
#include "conclave/core/enum_names.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "conclave/codec/json.hpp"

namespace conclave::net {

using nlohmann::json;

namespace {

/// Counts nesting as the reader goes and stops it (returns false) one level past the limit, so
/// the binary reader, which recurses once per level, never goes deeper than that.
class NestingLimit {
  public:
    explicit NestingLimit(std::size_t max_depth) : max_depth_(max_depth) {}
    bool null() { return true; }
    bool boolean(bool /*value*/) { return true; }
    bool number_integer(json::number_integer_t /*value*/) { return true; }
    bool number_unsigned(json::number_unsigned_t /*value*/) { return true; }
    bool number_float(json::number_float_t /*value*/, const std::string& /*text*/) { return true; }
    bool string(json::string_t& /*value*/) { return true; }
    bool binary(json::binary_t& /*value*/) { return true; }
    bool start_object(std::size_t /*elements*/) { return enter(); }
    bool key(json::string_t& /*value*/) { return true; }
    bool end_object() { return leave(); }
    bool start_array(std::size_t /*elements*/) { return enter(); }
    bool end_array() { return leave(); }
    bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                     const nlohmann::detail::exception& /*error*/) {
        return false;
    }

  private:
    bool enter() { return ++depth_ <= max_depth_; }
    bool leave() {
        --depth_;
        return true;
    }
    std::size_t max_depth_;
    std::size_t depth_ = 0;
};

json parse_control(std::span<const std::uint8_t> payload,
                   std::size_t max_bytes = kMaxControlPayloadBytes) {
    // Up to kMaxControlPayloadBytes, the size bound also bounds the nesting depth the recursive
    // CBOR parser can reach; above it (join frames), a non-recursive pre-pass bounds the depth.
    if (payload.size() > max_bytes) {
        throw codec::DecodeError("control: payload of " + std::to_string(payload.size()) +
                                 " bytes, above the maximum " + std::to_string(max_bytes));
    }
    if (payload.size() > kMaxControlPayloadBytes &&
        !cbor_nesting_within(payload, kMaxControlNesting)) {
        throw codec::DecodeError("control: malformed CBOR or nested deeper than " +
                                 std::to_string(kMaxControlNesting));
    }
    json j;
    try {
        // allow_exceptions=false covers syntax errors only: a declared array or map size beyond
        // max_size() still throws json::out_of_range (found by fuzz/frame_fuzzer).
        j = json::from_cbor(payload.begin(), payload.end(), /*strict=*/true,
                            /*allow_exceptions=*/false);
    } catch (const json::exception& e) {
        throw codec::DecodeError(std::string("control: malformed CBOR: ") + e.what());
    }
    if (j.is_discarded() || !j.is_object()) {
        throw codec::DecodeError("control: not a CBOR map");
    }
    return j;
}

/// An optional binary field: empty when absent; DecodeError when not binary or too long.
std::vector<std::uint8_t> get_binary(const json& j, const char* key, std::size_t max_bytes) {
    const auto it = j.find(key);
    if (it == j.end()) {
        return {};
    }
    if (!it->is_binary()) {
        throw codec::DecodeError(std::string(key) + ": expected a byte string");
    }
    const auto& bytes = it->get_binary();
    if (bytes.size() > max_bytes) {
        throw codec::DecodeError(std::string(key) + ": longer than " + std::to_string(max_bytes) +
                                 " bytes");
    }
    return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

void append_field(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> bytes) {
    const auto n = static_cast<std::uint32_t>(bytes.size());
    for (int shift = 24; shift >= 0; shift -= 8) {
        out.push_back(static_cast<std::uint8_t>((n >> shift) & 0xFFU));
    }
    out.insert(out.end(), bytes.begin(), bytes.end());
}

std::span<const std::uint8_t> as_bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

bool cbor_nesting_within(std::span<const std::uint8_t> payload, std::size_t max_depth) {
    NestingLimit limit(max_depth);
    try {
        return json::sax_parse(payload.begin(), payload.end(), &limit, json::input_format_t::cbor,
                               /*strict=*/true);
    } catch (const json::exception&) {
        return false;
    }
}

std::vector<std::uint8_t> encode_hello(const Hello& hello) {
    json j{
        {"kind", "hello"}, {"v", hello.version}, {"cluster", hello.cluster}, {"node", hello.node}};
    if (!hello.nonce.empty()) {
        j["nonce"] = json::binary(hello.nonce);
    }
    if (!hello.mac.empty()) {
        j["mac"] = json::binary(hello.mac);
    }
    if (hello.channels) {
        j["channels"] = *hello.channels;
    }
    if (hello.advisory != 0) {
        j["adv"] = hello.advisory;
    }
    if (hello.join) {
        j["join"] = true;
    }
    if (!hello.incarnation.empty()) {
        j["inc"] = hello.incarnation;
    }
    if (hello.repaired) {
        j["rep"] = true;
    }
    if (hello.term) {
        j["term"] = *hello.term;
    }
    return json::to_cbor(j);
}

std::vector<std::uint8_t> encode_confirmation(std::span<const std::uint8_t> mac) {
    json j{{"kind", "ping"}};
    if (!mac.empty()) {
        j["mac"] = json::binary(std::vector<std::uint8_t>(mac.begin(), mac.end()));
    }
    return json::to_cbor(j);
}

std::vector<std::uint8_t> decode_ping_mac(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload);
    if (codec::get_string(j, "kind") != "ping") {
        throw codec::DecodeError("kind: expected 'ping'");
    }
    return get_binary(j, "mac", kMacBytes);
}

std::vector<std::uint8_t> handshake_mac(std::string_view secret, HandshakeRole role,
                                        std::string_view cluster, std::string_view from,
                                        std::string_view to,
                                        std::span<const std::uint8_t> nonce_dialer,
                                        std::span<const std::uint8_t> nonce_acceptor) {
    std::vector<std::uint8_t> input;
    append_field(input, as_bytes(role == HandshakeRole::Dialer ? "conclave-dialer-v1"
                                                               : "conclave-acceptor-v1"));
    append_field(input, as_bytes(cluster));
    append_field(input, as_bytes(from));
    append_field(input, as_bytes(to));
    append_field(input, nonce_dialer);
    append_field(input, nonce_acceptor);
    std::vector<std::uint8_t> mac(EVP_MAX_MD_SIZE);
    unsigned int length = 0;
    if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), input.data(),
             input.size(), mac.data(), &length) == nullptr) {
        throw std::runtime_error("HMAC-SHA256 failed");
    }
    mac.resize(length);
    return mac;
}

bool mac_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
    return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::vector<std::uint8_t> random_nonce() {
    std::vector<std::uint8_t> nonce(kNonceBytes);
    if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
        throw std::runtime_error("RAND_bytes failed");
    }
    return nonce;
}

std::vector<std::uint8_t> encode_ping() {
    return json::to_cbor(json{{"kind", "ping"}});
}

std::vector<std::uint8_t> encode_term_ping(std::uint64_t term) {
    return json::to_cbor(json{{"kind", "ping"}, {"term", term}});
}

std::optional<std::uint64_t> decode_ping_term(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload);
    if (codec::get_string(j, "kind") != "ping") {
        throw codec::DecodeError("kind: expected 'ping'");
    }
    if (!j.contains("term")) {
        return std::nullopt;
    }
    return codec::get_term(j, "term").value;
}

ControlKind decode_control_kind(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload);
    const std::string kind = codec::get_string(j, "kind");
    if (kind == "hello") {
        return ControlKind::Hello;
    }
    if (kind == "ping") {
        return ControlKind::Ping;
    }
    if (kind == "join_request") {
        return ControlKind::JoinRequest;
    }
    if (kind == "join_answer") {
        return ControlKind::JoinAnswer;
    }
    if (kind == "refused") {
        return ControlKind::Refused;
    }
    throw codec::DecodeError("kind: unknown control frame kind '" + kind + "'");
}

namespace {

std::string bounded_string(const json& j, const char* key, std::size_t max_bytes) {
    std::string value = codec::get_string(j, key);
    if (value.size() > max_bytes) {
        throw codec::DecodeError(std::string(key) + ": longer than " + std::to_string(max_bytes) +
                                 " bytes");
    }
    return value;
}

}  // namespace

Hello decode_hello(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload);
    if (codec::get_string(j, "kind") != "hello") {
        throw codec::DecodeError("kind: expected 'hello'");
    }
    Hello h;
    h.version = codec::get_u64(j, "v");
    h.cluster = codec::get_string(j, "cluster");
    h.node = codec::get_string(j, "node");
    h.nonce = get_binary(j, "nonce", kNonceBytes);
    h.mac = get_binary(j, "mac", kMacBytes);
    if (j.contains("channels")) {
        h.channels = codec::get_u64(j, "channels");
    }
    if (j.contains("adv")) {
        h.advisory = codec::get_u64(j, "adv") & kAdvisoryChannels;
    }
    if (j.contains("join")) {
        h.join = codec::get_bool(j, "join");
    }
    if (j.contains("inc")) {
        h.incarnation = bounded_string(j, "inc", kMaxIncarnationBytes);
    }
    if (j.contains("rep")) {
        h.repaired = codec::get_bool(j, "rep");
    }
    if (j.contains("term")) {
        h.term = codec::get_term(j, "term").value;
    }
    return h;
}

std::vector<std::uint8_t> encode_refusal(const PeerRefusal& refusal) {
    json j{{"kind", "refused"},
           {"reason", refusal.reason.substr(0, 64)},
           {"detail", refusal.detail.substr(0, kMaxRefusalDetailBytes)}};
    if (!refusal.mac.empty()) {
        j["mac"] = json::binary(refusal.mac);
    }
    return json::to_cbor(j);
}

PeerRefusal decode_refusal(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload);
    if (codec::get_string(j, "kind") != "refused") {
        throw codec::DecodeError("kind: expected 'refused'");
    }
    PeerRefusal r;
    r.reason = bounded_string(j, "reason", 64);
    r.detail = bounded_string(j, "detail", kMaxRefusalDetailBytes);
    r.mac = get_binary(j, "mac", kMacBytes);
    return r;
}

std::vector<std::uint8_t> encode_join_request(const JoinRequest& request) {
    if (request.peer.size() > kMaxJoinAddressBytes || request.http.size() > kMaxJoinAddressBytes) {
        throw std::invalid_argument("join request: peer and http must be at most " +
                                    std::to_string(kMaxJoinAddressBytes) + " bytes");
    }
    return json::to_cbor(
        json{{"kind", "join_request"}, {"peer", request.peer}, {"http", request.http}});
}

JoinRequest decode_join_request(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload, kMaxJoinRequestBytes);
    if (codec::get_string(j, "kind") != "join_request") {
        throw codec::DecodeError("kind: expected 'join_request'");
    }
    return JoinRequest{bounded_string(j, "peer", kMaxJoinAddressBytes),
                       bounded_string(j, "http", kMaxJoinAddressBytes)};
}

std::string_view to_string(JoinStatus s) {
    return enum_name(s);
}

std::vector<std::uint8_t> encode_join_answer(const JoinAnswer& answer) {
    auto payload = json::to_cbor(json{{"kind", "join_answer"},
                                      {"status", std::string(to_string(answer.status))},
                                      {"detail", answer.detail}});
    if (payload.size() > kMaxJoinAnswerBytes) {
        throw std::invalid_argument("join answer: " + std::to_string(payload.size()) +
                                    " bytes, above the maximum " +
                                    std::to_string(kMaxJoinAnswerBytes));
    }
    return payload;
}

JoinAnswer decode_join_answer(std::span<const std::uint8_t> payload) {
    const json j = parse_control(payload, kMaxJoinAnswerBytes);
    if (codec::get_string(j, "kind") != "join_answer") {
        throw codec::DecodeError("kind: expected 'join_answer'");
    }
    JoinAnswer answer;
    const std::string status = codec::get_string(j, "status");
    const auto parsed = parse_enum<JoinStatus>(status);
    if (!parsed) {
        throw codec::DecodeError("status: unknown join status '" + status + "'");
    }
    answer.status = *parsed;
    answer.detail = codec::get_string(j, "detail");
    return answer;
}

std::string_view to_string(HandshakeRefusal r) {
    return enum_name<NameStyle::Snake>(r);
}

HelloCheck check_seed_hello(const Hello& hello, const std::string& cluster) {
    HelloCheck c;
    if (hello.version != kProtocolVersion) {
        c.refusal = HandshakeRefusal::UnsupportedVersion;
        c.detail = "protocol version " + std::to_string(hello.version) + ", this node speaks " +
                   std::to_string(kProtocolVersion);
        return c;
    }
    if (hello.cluster != cluster) {
        c.refusal = HandshakeRefusal::WrongCluster;
        c.detail = "cluster '" + hello.cluster + "', expected '" + cluster + "'";
        return c;
    }
    return c;
}

HelloCheck check_hello(const Hello& hello, const Membership& membership, NodeId self,
                       std::optional<NodeId> expected) {
    HelloCheck c = check_seed_hello(hello, membership.cluster);
    if (c.refusal) {
        return c;
    }
    const auto index = membership.index_of(hello.node);
    if (hello.join && !expected) {
        // An id of the table may join again (a joiner whose answer was lost): it authenticates
        // like anyone and its connection never becomes a peer; the node layer decides.
        if (hello.node.empty()) {
            c.refusal = HandshakeRefusal::JoinRefused;
            c.detail = "empty node id";
        } else {
            c.joiner = true;
        }
        return c;
    }
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
