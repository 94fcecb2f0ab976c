// SPDX-License-Identifier: Apache-2.0
// Pure pieces of net/: frame decoder, handshake checks, state file.
#include <stdlib.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "conclave/codec/json.hpp"
#include "conclave/drivers/state_file.hpp"
#include "conclave/net/frame.hpp"
#include "conclave/net/handshake.hpp"

using namespace conclave;
using namespace conclave::net;
using namespace conclave::drivers;

namespace {

std::vector<std::uint8_t> bytes(std::initializer_list<int> list) {
    std::vector<std::uint8_t> out;
    for (int b : list) {
        out.push_back(static_cast<std::uint8_t>(b));
    }
    return out;
}

Membership three() {
    return Membership{"demo",
                      {{"n1", "127.0.0.1", 1}, {"n2", "127.0.0.1", 2}, {"n3", "127.0.0.1", 3}}};
}

}  // namespace

TEST_CASE("frames round-trip through the decoder, fed byte by byte") {
    std::vector<std::uint8_t> stream;
    encode_frame(Channel::Elector, bytes({1, 2, 3}), stream);
    encode_frame(Channel::Control, {}, stream);
    FrameDecoder d;
    std::vector<Frame> frames;
    for (auto b : stream) {
        d.feed(std::span<const std::uint8_t>(&b, 1));
        while (auto f = d.next()) {
            frames.push_back(*f);
        }
    }
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].channel == Channel::Elector);
    CHECK(frames[0].payload == bytes({1, 2, 3}));
    CHECK(frames[1].channel == Channel::Control);
    CHECK(frames[1].payload.empty());
    CHECK_FALSE(d.mid_frame());
    CHECK_FALSE(d.error());
}

TEST_CASE("the decoder rejects an oversized length before buffering the payload") {
    FrameDecoder d(1024);
    d.feed(bytes({0xff, 0xff, 0xff, 0xff, 1}));
    CHECK_FALSE(d.next());
    CHECK(d.error() == BadFrameKind::Oversized);
    CHECK(d.error_length() == 0xffffffffULL);
    d.feed(bytes({0, 0, 0, 1, 1}));  // broken for good
    CHECK_FALSE(d.next());
}

TEST_CASE("the decoder rejects an empty frame and reports a partial one") {
    FrameDecoder empty;
    empty.feed(bytes({0, 0, 0, 0}));
    CHECK_FALSE(empty.next());
    CHECK(empty.error() == BadFrameKind::Empty);

    FrameDecoder partial;
    partial.feed(bytes({0, 0, 0, 9, 1, 2}));
    CHECK_FALSE(partial.next());
    CHECK_FALSE(partial.error());
    CHECK(partial.mid_frame());
}

TEST_CASE("hello carries the incarnation; a refusal frame round-trips within its bounds") {
    Hello h{kProtocolVersion, "demo", "n1"};
    CHECK(decode_hello(encode_hello(h)).incarnation.empty());
    h.incarnation = "00112233445566778899aabbccddeeff";
    h.repaired = true;
    const Hello back = decode_hello(encode_hello(h));
    CHECK(back.incarnation == h.incarnation);
    CHECK(back.repaired);
    h.incarnation = std::string(kMaxIncarnationBytes + 1, 'a');
    CHECK_THROWS_AS(decode_hello(encode_hello(h)), codec::DecodeError);

    const PeerRefusal r{"state_lost", std::string(1000, 'd'), std::vector<std::uint8_t>(32, 7)};
    const auto payload = encode_refusal(r);
    CHECK(payload.size() <= kMaxControlPayloadBytes);
    CHECK(decode_control_kind(payload) == ControlKind::Refused);
    const PeerRefusal got = decode_refusal(payload);
    CHECK(got.reason == "state_lost");
    CHECK(got.detail.size() == kMaxRefusalDetailBytes);
    CHECK(got.mac == r.mac);
    CHECK_THROWS_AS(decode_refusal(encode_ping()), codec::DecodeError);
}

TEST_CASE("hello round-trips and is checked against the membership") {
    const Hello h{kProtocolVersion, "demo", "n1"};
    const Hello back = decode_hello(encode_hello(h));
    CHECK(back.cluster == "demo");
    CHECK(back.node == "n1");
    CHECK(decode_control_kind(encode_ping()) == ControlKind::Ping);
    CHECK_THROWS_AS(decode_hello(bytes({0xff, 0x00})), codec::DecodeError);
    CHECK_THROWS_AS(decode_hello(encode_ping()), codec::DecodeError);
    // Regression (fuzz/frame_fuzzer): an array whose declared size exceeds max_size() made
    // nlohmann throw out_of_range despite allow_exceptions=false, escaping the decoder.
    CHECK_THROWS_AS(decode_control_kind(bytes(
                        {0xa1, 0x61, 0x6b, 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})),
                    codec::DecodeError);
    CHECK_THROWS_AS(decode_control_kind(std::vector<std::uint8_t>(600, 0x81)), codec::DecodeError);

    const auto m = three();
    CHECK(check_hello(h, m, NodeId{1}, std::nullopt).peer == NodeId{0});
    CHECK(check_hello({kProtocolVersion, "other", "n1"}, m, NodeId{1}, std::nullopt).refusal ==
          HandshakeRefusal::WrongCluster);
    CHECK(check_hello({kProtocolVersion, "demo", "n9"}, m, NodeId{1}, std::nullopt).refusal ==
          HandshakeRefusal::UnknownNode);
    CHECK(check_hello({kProtocolVersion + 1, "demo", "n1"}, m, NodeId{1}, std::nullopt).refusal ==
          HandshakeRefusal::UnsupportedVersion);
    // The higher index never dials the lower one, and nobody dials itself.
    CHECK(check_hello({kProtocolVersion, "demo", "n3"}, m, NodeId{1}, std::nullopt).refusal ==
          HandshakeRefusal::WrongDirection);
    CHECK(check_hello({kProtocolVersion, "demo", "n2"}, m, NodeId{1}, std::nullopt).refusal ==
          HandshakeRefusal::WrongDirection);
    // Outbound: the answer must come from the node dialed.
    CHECK(check_hello({kProtocolVersion, "demo", "n3"}, m, NodeId{0}, NodeId{1}).refusal ==
          HandshakeRefusal::WrongPeer);
    CHECK(check_hello({kProtocolVersion, "demo", "n2"}, m, NodeId{0}, NodeId{1}).peer == NodeId{1});
}

TEST_CASE("a joiner's hello carries join only when set, and is checked without the table") {
    Hello h{kProtocolVersion, "demo", "n4"};
    CHECK_FALSE(decode_hello(encode_hello(h)).join);
    // Absent when false: nothing changes on the wire for members.
    const auto plain = nlohmann::json::from_cbor(encode_hello(h));
    CHECK_FALSE(plain.contains("join"));
    h.join = true;
    CHECK(nlohmann::json::from_cbor(encode_hello(h)).at("join") == true);
    CHECK(decode_hello(encode_hello(h)).join);
    auto wrong = nlohmann::json::from_cbor(encode_hello(h));
    wrong["join"] = 1;
    CHECK_THROWS_AS(decode_hello(nlohmann::json::to_cbor(wrong)), codec::DecodeError);

    const auto m = three();
    const auto joiner = check_hello(h, m, NodeId{0}, std::nullopt);
    CHECK(joiner.joiner);
    CHECK_FALSE(joiner.peer);
    CHECK_FALSE(joiner.refusal);
    // Any index may be the seed (no direction rule for a joiner).
    CHECK(check_hello(h, m, NodeId{2}, std::nullopt).joiner);
    const auto member =
        check_hello({kProtocolVersion, "demo", "n2", {}, {}, {}, true}, m, NodeId{0}, std::nullopt);
    CHECK(member.joiner);  // may ask again (a lost answer); the node layer decides
    CHECK_FALSE(member.peer);
    CHECK_FALSE(member.refusal);
    CHECK(
        check_hello({kProtocolVersion, "other", "n4", {}, {}, {}, true}, m, NodeId{0}, std::nullopt)
            .refusal == HandshakeRefusal::WrongCluster);
    CHECK(check_hello({kProtocolVersion, "demo", "", {}, {}, {}, true}, m, NodeId{0}, std::nullopt)
              .refusal == HandshakeRefusal::JoinRefused);
    CHECK(to_string(HandshakeRefusal::JoinRefused) == "join_refused");
    CHECK(check_seed_hello({kProtocolVersion, "demo", "anyone"}, "demo").refusal == std::nullopt);
    CHECK(check_seed_hello({kProtocolVersion, "x", "n1"}, "demo").refusal ==
          HandshakeRefusal::WrongCluster);
}

TEST_CASE("join request and answer round-trip; oversized or garbled ones throw DecodeError") {
    const JoinRequest request{"10.0.0.4:7100", "10.0.0.4:8100"};
    CHECK(decode_control_kind(encode_join_request(request)) == ControlKind::JoinRequest);
    const JoinRequest back = decode_join_request(encode_join_request(request));
    CHECK(back.peer == request.peer);
    CHECK(back.http == request.http);
    // Both strings at their bound: above kMaxControlPayloadBytes, still decoded.
    const JoinRequest longest{std::string(kMaxJoinAddressBytes, 'p'),
                              std::string(kMaxJoinAddressBytes, 'h')};
    CHECK(encode_join_request(longest).size() > kMaxControlPayloadBytes);
    CHECK(decode_join_request(encode_join_request(longest)).http == longest.http);
    CHECK_THROWS_AS(encode_join_request({std::string(kMaxJoinAddressBytes + 1, 'p'), "h"}),
                    std::invalid_argument);
    auto too_long = nlohmann::json{{"kind", "join_request"},
                                   {"peer", std::string(kMaxJoinAddressBytes + 1, 'p')},
                                   {"http", "h"}};
    CHECK_THROWS_AS(decode_join_request(nlohmann::json::to_cbor(too_long)), codec::DecodeError);
    CHECK_THROWS_AS(decode_join_request(nlohmann::json::to_cbor(
                        nlohmann::json{{"kind", "join_request"}, {"peer", "p"}})),
                    codec::DecodeError);
    CHECK_THROWS_AS(decode_join_request(encode_ping()), codec::DecodeError);
    CHECK_THROWS_AS(decode_join_request(std::vector<std::uint8_t>(kMaxJoinRequestBytes + 1, 0x60)),
                    codec::DecodeError);

    for (const auto status : {JoinStatus::Accepted, JoinStatus::Redirect, JoinStatus::Refused}) {
        const JoinAnswer answer{status, "detail"};
        const auto payload = encode_join_answer(answer);
        CHECK(decode_control_kind(payload) == ControlKind::JoinAnswer);
        const JoinAnswer a = decode_join_answer(payload);
        CHECK(a.status == status);
        CHECK(a.detail == "detail");
    }
    // A configuration of ~40 KiB fits; one above the bound does not, on either side.
    const JoinAnswer config{JoinStatus::Accepted, std::string(40 << 10, 'c')};
    CHECK(decode_join_answer(encode_join_answer(config)).detail == config.detail);
    CHECK_THROWS_AS(
        encode_join_answer({JoinStatus::Accepted, std::string(kMaxJoinAnswerBytes, 'c')}),
        std::invalid_argument);
    const auto oversized = nlohmann::json::to_cbor(nlohmann::json{
        {"kind", "join_answer"}, {"status", "accepted"}, {"detail", std::string(70000, 'c')}});
    CHECK_THROWS_AS(decode_join_answer(oversized), codec::DecodeError);
    // Only the join decoders take payloads above 512 bytes.
    CHECK_THROWS_AS(decode_control_kind(encode_join_answer(config)), codec::DecodeError);
    CHECK_THROWS_AS(decode_join_answer(nlohmann::json::to_cbor(nlohmann::json{
                        {"kind", "join_answer"}, {"status", "maybe"}, {"detail", ""}})),
                    codec::DecodeError);
    CHECK_THROWS_AS(decode_join_answer(bytes({0xa1, 0x61})), codec::DecodeError);
    auto truncated = encode_join_answer(config);
    truncated.resize(truncated.size() - 1);
    CHECK_THROWS_AS(decode_join_answer(truncated), codec::DecodeError);
}

TEST_CASE("a 60,000-deep CBOR payload is refused without recursing into it") {
    // 60,000 one-element arrays, then 0: the recursive parser would need 60,000 frames.
    std::vector<std::uint8_t> deep(60000, 0x81);
    deep.push_back(0x00);
    CHECK_FALSE(cbor_nesting_within(deep, kMaxControlNesting));
    CHECK_THROWS_AS(decode_join_answer(deep), codec::DecodeError);
    // Same, as the value of a map's detail (depth counted through maps too).
    std::vector<std::uint8_t> in_map = bytes({0xa1, 0x66, 'd', 'e', 't', 'a', 'i', 'l'});
    in_map.insert(in_map.end(), deep.begin(), deep.end());
    CHECK_THROWS_AS(decode_join_answer(in_map), codec::DecodeError);
    // Indefinite-length maps, 600 deep, padded above 512 bytes.
    std::vector<std::uint8_t> indefinite(600, 0xbf);
    CHECK_THROWS_AS(decode_join_request(indefinite), codec::DecodeError);
    // Within the bound: a map holding a map.
    CHECK(cbor_nesting_within(nlohmann::json::to_cbor(nlohmann::json{{"a", {{"b", 1}}}}), 2));
    CHECK_FALSE(
        cbor_nesting_within(nlohmann::json::to_cbor(nlohmann::json{{"a", {{"b", {1}}}}}), 2));
    CHECK_FALSE(cbor_nesting_within(bytes({0xff, 0x00}), 2));
}

TEST_CASE("membership validation names the field") {
    Membership m = three();
    CHECK_FALSE(m.validate());
    m.nodes[2].id = "n1";
    REQUIRE(m.validate());
    CHECK(m.validate()->find("nodes[2].id") != std::string::npos);
    m.cluster.clear();
    CHECK(m.validate()->find("cluster") != std::string::npos);
}

TEST_CASE("the state file round-trips and refuses corrupt content") {
    std::string pattern = (std::filesystem::temp_directory_path() / "conclave-sf-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    const std::filesystem::path dir = pattern;
    CHECK_FALSE(load_durable_state(dir, 3).has_value());
    store_durable_state(dir / "sub", elector::DurableState{Term{7}, NodeId{2}});
    const auto back = load_durable_state(dir / "sub", 3);
    REQUIRE(back);
    CHECK(back->term == Term{7});
    CHECK(back->voted_for == NodeId{2});
    CHECK_FALSE(std::filesystem::exists(dir / "sub" / "elector-state.json.tmp"));
    // A vote for a node outside the cluster is corrupt.
    CHECK_THROWS_AS(load_durable_state(dir / "sub", 2), StateFileError);

    const auto write = [&](const std::string& text) {
        std::ofstream(dir / kStateFileName, std::ios::trunc) << text;
    };
    write("");
    CHECK_THROWS_AS(load_durable_state(dir, 3), StateFileError);
    write("{\"format\": 1, \"term\": 3");
    CHECK_THROWS_AS(load_durable_state(dir, 3), StateFileError);
    write("{\"format\": 2, \"term\": 3, \"voted_for\": null}");
    CHECK_THROWS_AS(load_durable_state(dir, 3), StateFileError);
    write("{\"format\": 1, \"voted_for\": null}");
    try {
        load_durable_state(dir, 3);
        FAIL("missing term accepted");
    } catch (const StateFileError& e) {
        CHECK(std::string(e.what()).find("term") != std::string::npos);
    }
    std::filesystem::remove_all(dir);
}
