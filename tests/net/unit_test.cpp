// Pure pieces of net/: frame decoder, handshake checks, state file.
#include <stdlib.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "conclave/codec/json.hpp"
#include "conclave/drivers/state_file.hpp"
#include "conclave/net/frame.hpp"
#include "conclave/net/handshake.hpp"

using namespace conclave;
using namespace conclave::net;

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

TEST_CASE("hello round-trips and is checked against the membership") {
    const Hello h{kProtocolVersion, "demo", "n1"};
    const Hello back = decode_hello(encode_hello(h));
    CHECK(back.cluster == "demo");
    CHECK(back.node == "n1");
    CHECK(decode_control_kind(encode_ping()) == ControlKind::Ping);
    CHECK_THROWS_AS(decode_hello(bytes({0xff, 0x00})), DecodeError);
    CHECK_THROWS_AS(decode_hello(encode_ping()), DecodeError);
    // Regression (fuzz/frame_fuzzer): an array whose declared size exceeds max_size() made
    // nlohmann throw out_of_range despite allow_exceptions=false, escaping the decoder.
    CHECK_THROWS_AS(decode_control_kind(bytes(
                        {0xa1, 0x61, 0x6b, 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})),
                    DecodeError);
    CHECK_THROWS_AS(decode_control_kind(std::vector<std::uint8_t>(600, 0x81)), DecodeError);

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
    store_durable_state(dir / "sub", DurableState{Term{7}, NodeId{2}});
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
