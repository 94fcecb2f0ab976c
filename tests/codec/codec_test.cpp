// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "conclave/codec/json.hpp"

using namespace conclave;
using namespace conclave::codec;
using namespace conclave::elector;

namespace {

std::vector<Message> samples() {
    return {
        Message{NodeId{1}, Term{4}, ScoutingRequest{7}},
        Message{NodeId{2}, Term{4}, ScoutingResponse{7, true}},
        Message{NodeId{0}, Term{5}, ElectionProposal{true}},
        Message{NodeId{3}, Term{5}, ElectionResponse{false, Refusal::HasLeader, Term{6}}},
        Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 42}}},
        Message{NodeId{1}, Term{5}, HeartbeatAck{}},
        Message{NodeId{1}, Term{9}, HeartbeatResponse{}},
        Message{NodeId{0}, Term{5}, LeadershipCession{NodeId{2}}},
        Message{NodeId{0}, Term{5}, LeadershipCession{}},
        // Membership: configuration versions and the membership refusals.
        Message{NodeId{1}, Term{4}, ScoutingRequest{7, 3}},
        Message{NodeId{2}, Term{4}, ScoutingResponse{7, false, Refusal::StaleConfig, 4}},
        Message{NodeId{2}, Term{4}, ScoutingResponse{7, false, Refusal::NotAVoter, 2}},
        Message{NodeId{2}, Term{4}, ScoutingResponse{7, true, Refusal::None, 2}},
        Message{NodeId{0}, Term{5}, ElectionProposal{false, kConfigVersionLimit - 1}},
        Message{NodeId{3}, Term{5}, ElectionResponse{false, Refusal::StaleConfig, Term{5}, 9}},
        Message{NodeId{3}, Term{5}, ElectionResponse{false, Refusal::NotAVoter, Term{5}, 1}},
        Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 42}, 6}},
        // The leader lease: heartbeat rounds, echoed by the ack.
        Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 42}, 6, 17}},
        Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 42}, 0, ~std::uint64_t{0}}},
        Message{NodeId{1}, Term{5}, HeartbeatAck{17}},
    };
}

/// True when the decoder refuses `m`'s encoding with an error naming `field` first.
bool decode_refuses(const Message& m, const std::string& field) {
    try {
        decode_cbor(encode_cbor(m));
    } catch (const DecodeError& e) {
        return std::string(e.what()).rfind(field, 0) == 0;
    }
    return false;
}

}  // namespace

TEST_CASE("every message survives a JSON and a CBOR round trip") {
    for (const Message& m : samples()) {
        INFO(to_string(m));
        CHECK(message_from_json(message_to_json(m)) == m);
        CHECK(decode_cbor(encode_cbor(m)) == m);
    }
}

TEST_CASE("heartbeat rounds: absent means 0, a malformed one is refused naming the field") {
    auto j = message_to_json(Message{NodeId{1}, Term{5}, HeartbeatAck{17}});
    CHECK(j.at("round") == 17);
    j.erase("round");  // a peer from before the leader lease
    CHECK(message_from_json(j) == Message{NodeId{1}, Term{5}, HeartbeatAck{0}});
    j["round"] = "seventeen";
    CHECK_THROWS_WITH(message_from_json(j), Catch::StartsWith("round"));
    auto h = message_to_json(Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 1}, 0, 3}});
    h["round"] = -1;
    CHECK_THROWS_WITH(message_from_json(h), Catch::StartsWith("round"));
}

TEST_CASE("decoding names the offending field") {
    auto j = message_to_json(Message{NodeId{1}, Term{4}, ScoutingResponse{7, true}});
    SECTION("missing field") {
        j.erase("will_vote");
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("will_vote"));
    }
    SECTION("wrong type") {
        j["term"] = "four";
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("term"));
    }
    SECTION("negative number") {
        j["round"] = -1;
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("round"));
    }
    SECTION("unknown type") {
        j["type"] = "Nonsense";
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("type"));
    }
    SECTION("node out of range") {
        j["from"] = 100000;
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("from"));
    }
    SECTION("not an object") {
        CHECK_THROWS_AS(message_from_json(nlohmann::json::array()), DecodeError);
    }
}

TEST_CASE("CBOR decoding rejects garbage, truncation and other versions") {
    const auto good = encode_cbor(Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 1}}});
    for (std::size_t n = 0; n < good.size(); ++n) {
        std::vector<std::uint8_t> truncated(good.begin(),
                                            good.begin() + static_cast<std::ptrdiff_t>(n));
        CHECK_THROWS_AS(decode_cbor(truncated), DecodeError);
    }
    std::vector<std::uint8_t> garbage{0xff, 0x00, 0x13, 0x37};
    CHECK_THROWS_AS(decode_cbor(garbage), DecodeError);
    auto j = message_to_json(Message{NodeId{0}, Term{5}, HeartbeatAck{}});
    j["v"] = 99;
    CHECK_THROWS_WITH(decode_cbor(nlohmann::json::to_cbor(j)), Catch::Contains("version"));
}

TEST_CASE("CBOR decoding rejects deep nesting without recursing") {
    std::vector<std::uint8_t> deep(1'000'000, 0x81);  // [[[[...]]]]
    deep.push_back(0x00);
    CHECK_THROWS_WITH(decode_cbor(deep), Catch::Contains("nested"));
    std::vector<std::uint8_t> indefinite(100'000, 0x9f);  // indefinite arrays, never closed
    CHECK_THROWS_AS(decode_cbor(indefinite), DecodeError);
}

TEST_CASE("decoding refuses values no node can produce") {
    // Terms at or above 2^63: in the envelope, as voter_term, as an LSN term.
    CHECK(decode_refuses(Message{NodeId{0}, Term{kTermLimit}, LeaderHeartbeat{}}, "term"));
    CHECK(decode_refuses(Message{NodeId{0}, Term{~std::uint64_t{0}}, HeartbeatAck{}}, "term"));
    CHECK(decode_refuses(
        Message{NodeId{0}, Term{5}, ElectionResponse{false, Refusal::StaleTerm, Term{kTermLimit}}},
        "voter_term"));
    CHECK(decode_refuses(Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{kTermLimit}, 1}}},
                         "term"));
    // A vote both granted and refused, or neither.
    CHECK(decode_refuses(
        Message{NodeId{0}, Term{5}, ElectionResponse{true, Refusal::HasLeader, Term{5}}},
        "refusal"));
    CHECK(decode_refuses(
        Message{NodeId{0}, Term{5}, ElectionResponse{false, Refusal::None, Term{5}}}, "refusal"));
    // The largest term the protocol can reach still decodes.
    const Message top{NodeId{0}, Term{kTermLimit - 1},
                      LeaderHeartbeat{Lsn{Term{kTermLimit - 1}, 1}}};
    CHECK(decode_cbor(encode_cbor(top)) == top);
    CHECK_THROWS_AS(
        durable_state_from_json(nlohmann::json{{"term", kTermLimit}, {"voted_for", nullptr}}),
        DecodeError);
}

TEST_CASE("configuration versions: absent means 0, hostile values are refused") {
    using nlohmann::json;
    SECTION("frames from before membership decode as version 0") {
        // As an older node writes them (and as they arrive: CBOR integers are unsigned).
        const json old_request =
            json::parse(R"({"type": "ScoutingRequest", "from": 1, "term": 4, "round": 7})");
        CHECK(message_from_json(old_request) == Message{NodeId{1}, Term{4}, ScoutingRequest{7, 0}});
        const json old_response = json::parse(
            R"({"type": "ScoutingResponse", "from": 1, "term": 4, "round": 7, "will_vote": false})");
        CHECK(message_from_json(old_response) ==
              Message{NodeId{1}, Term{4}, ScoutingResponse{7, false, Refusal::None, 0}});
        const json old_proposal =
            json::parse(R"({"type": "ElectionProposal", "from": 0, "term": 5, "transfer": false})");
        CHECK(std::get<ElectionProposal>(message_from_json(old_proposal).body).config_version == 0);
        const json old_heartbeat = json::parse(
            R"({"type": "LeaderHeartbeat", "from": 0, "term": 5, "lsn": {"term": 5, "counter": 1}})");
        CHECK(std::get<LeaderHeartbeat>(message_from_json(old_heartbeat).body).config_version == 0);
        const json old_response_vote = json::parse(
            R"({"type": "ElectionResponse", "from": 0, "term": 5, "granted": false,
                "refusal": "stale-term", "voter_term": 6})");
        CHECK(
            std::get<ElectionResponse>(message_from_json(old_response_vote).body).config_version ==
            0);
    }
    SECTION("version 0 is not written, so frames of the default configuration are unchanged") {
        const json j = message_to_json(Message{NodeId{0}, Term{5}, ElectionProposal{true, 0}});
        CHECK_FALSE(j.contains("config_version"));
        CHECK(message_to_json(Message{NodeId{0}, Term{5}, ElectionProposal{true, 2}})
                  .at("config_version") == 2);
    }
    SECTION("versions at or above 2^63 are refused in every message that carries one") {
        for (std::uint64_t v : {kConfigVersionLimit, ~std::uint64_t{0}}) {
            CHECK(decode_refuses(Message{NodeId{0}, Term{5}, ScoutingRequest{1, v}},
                                 "config_version"));
            CHECK(decode_refuses(
                Message{NodeId{0}, Term{5}, ScoutingResponse{1, false, Refusal::None, v}},
                "config_version"));
            CHECK(decode_refuses(Message{NodeId{0}, Term{5}, ElectionProposal{false, v}},
                                 "config_version"));
            CHECK(decode_refuses(Message{NodeId{0}, Term{5},
                                         ElectionResponse{false, Refusal::StaleConfig, Term{5}, v}},
                                 "config_version"));
            CHECK(decode_refuses(Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 1}, v}},
                                 "config_version"));
        }
    }
    SECTION("wrong types and negative versions are refused") {
        json j = message_to_json(Message{NodeId{0}, Term{5}, ScoutingRequest{1, 2}});
        j["config_version"] = "two";
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("config_version"));
        j["config_version"] = -2;
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("config_version"));
        j["config_version"] = 2.5;
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("config_version"));
    }
    SECTION("scouting names only the membership refusals, and only when it says no") {
        CHECK(decode_refuses(
            Message{NodeId{0}, Term{5}, ScoutingResponse{1, true, Refusal::NotAVoter, 0}},
            "refusal"));
        CHECK(decode_refuses(
            Message{NodeId{0}, Term{5}, ScoutingResponse{1, false, Refusal::HasLeader, 0}},
            "refusal"));
        json j = message_to_json(
            Message{NodeId{0}, Term{5}, ScoutingResponse{1, false, Refusal::StaleConfig, 3}});
        j["refusal"] = "whatever";
        CHECK_THROWS_WITH(message_from_json(j), Catch::Contains("refusal"));
    }
    SECTION("a granted vote with a membership refusal is refused") {
        CHECK(decode_refuses(
            Message{NodeId{0}, Term{5}, ElectionResponse{true, Refusal::StaleConfig, Term{5}, 1}},
            "refusal"));
    }
}
