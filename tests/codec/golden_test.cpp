// SPDX-License-Identifier: Apache-2.0
// The encoders' output, pinned byte for byte: every body of both message families, once with a
// non-default value in every field and once with the defaults, as JSON text and as CBOR (hex).
// A change in how any field is written (a key, an omission, a type) changes the wire and fails
// here.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "conclave/codec/log_codec.hpp"

using namespace conclave;
using namespace conclave::codec;
using namespace conclave::elector;
using nlohmann::json;

namespace golden {

std::string hex(const std::vector<std::uint8_t>& bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (std::uint8_t b : bytes) {
        out += kDigits[b >> 4];
        out += kDigits[b & 0xf];
    }
    return out;
}

std::string text(const json& j) {
    return j.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
}

std::vector<std::string> elector_lines() {
    const std::vector<Message> messages = {
        Message{NodeId{1}, Term{4}, ScoutingRequest{7, 3}},
        Message{NodeId{0}, Term{0}, ScoutingRequest{}},
        Message{NodeId{2}, Term{4}, ScoutingResponse{7, true, Refusal::NotAVoter, 4}},
        Message{NodeId{2}, Term{4}, ScoutingResponse{7, false, Refusal::StaleConfig, 4}},
        Message{NodeId{0}, Term{0}, ScoutingResponse{}},
        Message{NodeId{3}, Term{5}, ElectionProposal{true, 5}},
        Message{NodeId{0}, Term{0}, ElectionProposal{}},
        Message{NodeId{3}, Term{5}, ElectionResponse{true, Refusal::IAmLeader, Term{8}, 6}},
        Message{NodeId{0}, Term{0}, ElectionResponse{}},
        Message{NodeId{0}, Term{5}, LeaderHeartbeat{Lsn{Term{5}, 42}, 6, 17}},
        Message{NodeId{0}, Term{0}, LeaderHeartbeat{}},
        Message{NodeId{1}, Term{5}, HeartbeatAck{17}},
        Message{NodeId{0}, Term{0}, HeartbeatAck{}},
        Message{NodeId{1}, Term{9}, HeartbeatResponse{}},
        Message{NodeId{0}, Term{5}, LeadershipCession{NodeId{2}}},
        Message{NodeId{0}, Term{0}, LeadershipCession{}},
    };
    std::vector<std::string> lines;
    for (const Message& m : messages) {
        lines.push_back(text(message_to_json(m)) + " " + hex(encode_cbor(m)));
    }
    lines.push_back(text(message_to_json(messages[0], NodeId{4})));
    return lines;
}

Lsn lsn(std::uint64_t t, std::uint64_t c) {
    return Lsn{Term{t}, c};
}

std::vector<std::string> log_lines() {
    using namespace conclave::replication;
    const std::vector<Entry> entries = {
        Entry{lsn(3, 0), "", ""}, Entry{lsn(3, 1), "topic/a", R"({"owner":"n2"})"},
        Entry{lsn(3, 2), std::string("k\0\xff", 3), "\x80\x81 bytes"}};
    const std::vector<LogMessage> messages = {
        LogMessage{NodeId{0}, Term{3}, SyncRequest{}},
        LogMessage{NodeId{1}, Term{3}, SyncResponse{lsn(2, 7), lsn(2, 5)}},
        LogMessage{NodeId{0}, Term{0}, SyncResponse{}},
        LogMessage{NodeId{0}, Term{3}, Append{lsn(2, 7), entries, lsn(2, 5)}},
        LogMessage{NodeId{0}, Term{0}, Append{}},
        LogMessage{NodeId{2}, Term{3}, AppendAck{true, lsn(2, 7), lsn(3, 2), lsn(3, 1), true}},
        LogMessage{NodeId{0}, Term{0}, AppendAck{}},
        LogMessage{NodeId{0}, Term{3}, FetchRequest{lsn(1, 0), lsn(2, 7), 256}},
        LogMessage{NodeId{0}, Term{0}, FetchRequest{}},
        LogMessage{NodeId{1}, Term{3}, FetchResponse{lsn(1, 0), entries, lsn(3, 2)}},
        LogMessage{NodeId{0}, Term{0}, FetchResponse{}},
        LogMessage{NodeId{1}, Term{3},
                   InstallSnapshot{lsn(3, 2), 40, 5, entries, true, true, 8, 0x89ABCDEF}},
        LogMessage{NodeId{0}, Term{0}, InstallSnapshot{}},
        LogMessage{NodeId{2}, Term{3}, SnapshotAck{lsn(3, 2), 40, 5, true, true}},
        LogMessage{NodeId{0}, Term{0}, SnapshotAck{}},
    };
    std::vector<std::string> lines;
    for (const LogMessage& m : messages) {
        lines.push_back(text(log_message_to_json(m)) + " " + hex(encode_log_cbor(m)));
    }
    lines.push_back(text(log_message_to_json(messages[1], NodeId{4})));
    return lines;
}

// Taken from the encoders as they were when each field was written by hand.
// clang-format off
const std::vector<std::string> kElectorGolden = {
    R"({"config_version":3,"from":1,"round":7,"term":4,"type":"ScoutingRequest"} a66e636f6e6669675f76657273696f6e036466726f6d0165726f756e6407647465726d0464747970656f53636f7574696e6752657175657374617601)",
    R"({"from":0,"round":0,"term":0,"type":"ScoutingRequest"} a56466726f6d0065726f756e6400647465726d0064747970656f53636f7574696e6752657175657374617601)",
    R"({"config_version":4,"from":2,"refusal":"not-a-voter","round":7,"term":4,"type":"ScoutingResponse","will_vote":true} a86e636f6e6669675f76657273696f6e046466726f6d02677265667573616c6b6e6f742d612d766f74657265726f756e6407647465726d0464747970657053636f7574696e67526573706f6e73656176016977696c6c5f766f7465f5)",
    R"({"config_version":4,"from":2,"refusal":"stale-config","round":7,"term":4,"type":"ScoutingResponse","will_vote":false} a86e636f6e6669675f76657273696f6e046466726f6d02677265667573616c6c7374616c652d636f6e66696765726f756e6407647465726d0464747970657053636f7574696e67526573706f6e73656176016977696c6c5f766f7465f4)",
    R"({"from":0,"round":0,"term":0,"type":"ScoutingResponse","will_vote":false} a66466726f6d0065726f756e6400647465726d0064747970657053636f7574696e67526573706f6e73656176016977696c6c5f766f7465f4)",
    R"({"config_version":5,"from":3,"term":5,"transfer":true,"type":"ElectionProposal"} a66e636f6e6669675f76657273696f6e056466726f6d03647465726d05687472616e73666572f5647479706570456c656374696f6e50726f706f73616c617601)",
    R"({"from":0,"term":0,"transfer":false,"type":"ElectionProposal"} a56466726f6d00647465726d00687472616e73666572f4647479706570456c656374696f6e50726f706f73616c617601)",
    R"({"config_version":6,"from":3,"granted":true,"refusal":"i-am-leader","term":5,"type":"ElectionResponse","voter_term":8} a86e636f6e6669675f76657273696f6e066466726f6d03676772616e746564f5677265667573616c6b692d616d2d6c6561646572647465726d05647479706570456c656374696f6e526573706f6e73656176016a766f7465725f7465726d08)",
    R"({"from":0,"granted":false,"refusal":"none","term":0,"type":"ElectionResponse","voter_term":0} a76466726f6d00676772616e746564f4677265667573616c646e6f6e65647465726d00647479706570456c656374696f6e526573706f6e73656176016a766f7465725f7465726d00)",
    R"({"config_version":6,"from":0,"lsn":{"counter":42,"term":5},"round":17,"term":5,"type":"LeaderHeartbeat"} a76e636f6e6669675f76657273696f6e066466726f6d00636c736ea267636f756e746572182a647465726d0565726f756e6411647465726d0564747970656f4c6561646572486561727462656174617601)",
    R"({"from":0,"lsn":{"counter":0,"term":0},"term":0,"type":"LeaderHeartbeat"} a56466726f6d00636c736ea267636f756e74657200647465726d00647465726d0064747970656f4c6561646572486561727462656174617601)",
    R"({"from":1,"round":17,"term":5,"type":"HeartbeatAck"} a56466726f6d0165726f756e6411647465726d0564747970656c48656172746265617441636b617601)",
    R"({"from":0,"term":0,"type":"HeartbeatAck"} a46466726f6d00647465726d0064747970656c48656172746265617441636b617601)",
    R"({"from":1,"term":9,"type":"HeartbeatResponse"} a46466726f6d01647465726d09647479706571486561727462656174526573706f6e7365617601)",
    R"({"from":0,"successor":2,"term":5,"type":"LeadershipCession"} a56466726f6d0069737563636573736f7202647465726d056474797065714c65616465727368697043657373696f6e617601)",
    R"({"from":0,"successor":null,"term":0,"type":"LeadershipCession"} a56466726f6d0069737563636573736f72f6647465726d006474797065714c65616465727368697043657373696f6e617601)",
    R"({"config_version":3,"from":1,"round":7,"term":4,"to":4,"type":"ScoutingRequest"})",
};

const std::vector<std::string> kLogGolden = {
    R"({"from":0,"term":3,"type":"SyncRequest"} a46466726f6d00647465726d0364747970656b53796e6352657175657374617601)",
    R"({"commit_lsn":{"counter":5,"term":2},"from":1,"last_lsn":{"counter":7,"term":2},"term":3,"type":"SyncResponse"} a66a636f6d6d69745f6c736ea267636f756e74657205647465726d026466726f6d01686c6173745f6c736ea267636f756e74657207647465726d02647465726d0364747970656c53796e63526573706f6e7365617601)",
    R"({"commit_lsn":{"counter":0,"term":0},"from":0,"last_lsn":{"counter":0,"term":0},"term":0,"type":"SyncResponse"} a66a636f6d6d69745f6c736ea267636f756e74657200647465726d006466726f6d00686c6173745f6c736ea267636f756e74657200647465726d00647465726d0064747970656c53796e63526573706f6e7365617601)",
    R"({"commit_lsn":{"counter":5,"term":2},"entries":[{"key":"","lsn":{"counter":0,"term":3},"value":""},{"key":"topic/a","lsn":{"counter":1,"term":3},"value":"{\"owner\":\"n2\"}"},{"key":"k\u0000\ufffd","lsn":{"counter":2,"term":3},"value":"\ufffd\ufffd bytes"}],"from":0,"prev_lsn":{"counter":7,"term":2},"term":3,"type":"Append"} a76a636f6d6d69745f6c736ea267636f756e74657205647465726d0267656e747269657383a3636b657940636c736ea267636f756e74657200647465726d036576616c756540a3636b657947746f7069632f61636c736ea267636f756e74657201647465726d036576616c75654e7b226f776e6572223a226e32227da3636b6579436b00ff636c736ea267636f756e74657202647465726d036576616c75654880812062797465736466726f6d0068707265765f6c736ea267636f756e74657207647465726d02647465726d03647479706566417070656e64617601)",
    R"({"commit_lsn":{"counter":0,"term":0},"entries":[],"from":0,"prev_lsn":{"counter":0,"term":0},"term":0,"type":"Append"} a76a636f6d6d69745f6c736ea267636f756e74657200647465726d0067656e7472696573806466726f6d0068707265765f6c736ea267636f756e74657200647465726d00647465726d00647479706566417070656e64617601)",
    R"({"commit_lsn":{"counter":1,"term":3},"from":2,"last_lsn":{"counter":2,"term":3},"non_voting":true,"ok":true,"prev_lsn":{"counter":7,"term":2},"term":3,"type":"AppendAck"} a96a636f6d6d69745f6c736ea267636f756e74657201647465726d036466726f6d02686c6173745f6c736ea267636f756e74657202647465726d036a6e6f6e5f766f74696e67f5626f6bf568707265765f6c736ea267636f756e74657207647465726d02647465726d03647479706569417070656e6441636b617601)",
    R"({"commit_lsn":{"counter":0,"term":0},"from":0,"last_lsn":{"counter":0,"term":0},"ok":false,"prev_lsn":{"counter":0,"term":0},"term":0,"type":"AppendAck"} a86a636f6d6d69745f6c736ea267636f756e74657200647465726d006466726f6d00686c6173745f6c736ea267636f756e74657200647465726d00626f6bf468707265765f6c736ea267636f756e74657200647465726d00647465726d00647479706569417070656e6441636b617601)",
    R"({"after_lsn":{"counter":0,"term":1},"from":0,"max_entries":256,"term":3,"type":"FetchRequest","up_to_lsn":{"counter":7,"term":2}} a76961667465725f6c736ea267636f756e74657200647465726d016466726f6d006b6d61785f656e7472696573190100647465726d0364747970656c4665746368526571756573746975705f746f5f6c736ea267636f756e74657207647465726d02617601)",
    R"({"after_lsn":{"counter":0,"term":0},"from":0,"max_entries":0,"term":0,"type":"FetchRequest","up_to_lsn":{"counter":0,"term":0}} a76961667465725f6c736ea267636f756e74657200647465726d006466726f6d006b6d61785f656e747269657300647465726d0064747970656c4665746368526571756573746975705f746f5f6c736ea267636f756e74657200647465726d00617601)",
    R"({"after_lsn":{"counter":0,"term":1},"entries":[{"key":"","lsn":{"counter":0,"term":3},"value":""},{"key":"topic/a","lsn":{"counter":1,"term":3},"value":"{\"owner\":\"n2\"}"},{"key":"k\u0000\ufffd","lsn":{"counter":2,"term":3},"value":"\ufffd\ufffd bytes"}],"from":1,"last_lsn":{"counter":2,"term":3},"term":3,"type":"FetchResponse"} a76961667465725f6c736ea267636f756e74657200647465726d0167656e747269657383a3636b657940636c736ea267636f756e74657200647465726d036576616c756540a3636b657947746f7069632f61636c736ea267636f756e74657201647465726d036576616c75654e7b226f776e6572223a226e32227da3636b6579436b00ff636c736ea267636f756e74657202647465726d036576616c75654880812062797465736466726f6d01686c6173745f6c736ea267636f756e74657202647465726d03647465726d0364747970656d4665746368526573706f6e7365617601)",
    R"({"after_lsn":{"counter":0,"term":0},"entries":[],"from":0,"last_lsn":{"counter":0,"term":0},"term":0,"type":"FetchResponse"} a76961667465725f6c736ea267636f756e74657200647465726d0067656e7472696573806466726f6d00686c6173745f6c736ea267636f756e74657200647465726d00647465726d0064747970656d4665746368526573706f6e7365617601)",
    R"({"count":8,"crc":2309737967,"done":true,"entries":[{"key":"","lsn":{"counter":0,"term":3},"value":""},{"key":"topic/a","lsn":{"counter":1,"term":3},"value":"{\"owner\":\"n2\"}"},{"key":"k\u0000\ufffd","lsn":{"counter":2,"term":3},"value":"\ufffd\ufffd bytes"}],"fetch":true,"from":1,"len":40,"lsn":{"counter":2,"term":3},"offset":5,"term":3,"type":"InstallSnapshot"} ac65636f756e7408636372631a89abcdef64646f6e65f567656e747269657383a3636b657940636c736ea267636f756e74657200647465726d036576616c756540a3636b657947746f7069632f61636c736ea267636f756e74657201647465726d036576616c75654e7b226f776e6572223a226e32227da3636b6579436b00ff636c736ea267636f756e74657202647465726d036576616c7565488081206279746573656665746368f56466726f6d01636c656e1828636c736ea267636f756e74657202647465726d03666f666673657405647465726d0364747970656f496e7374616c6c536e617073686f74617601)",
    R"({"count":0,"crc":0,"done":false,"entries":[],"fetch":false,"from":0,"len":0,"lsn":{"counter":0,"term":0},"offset":0,"term":0,"type":"InstallSnapshot"} ac65636f756e7400636372630064646f6e65f467656e747269657380656665746368f46466726f6d00636c656e00636c736ea267636f756e74657200647465726d00666f666673657400647465726d0064747970656f496e7374616c6c536e617073686f74617601)",
    R"({"fetch":true,"from":2,"len":40,"lsn":{"counter":2,"term":3},"offset":5,"resend":true,"term":3,"type":"SnapshotAck"} a9656665746368f56466726f6d02636c656e1828636c736ea267636f756e74657202647465726d03666f66667365740566726573656e64f5647465726d0364747970656b536e617073686f7441636b617601)",
    R"({"fetch":false,"from":0,"len":0,"lsn":{"counter":0,"term":0},"offset":0,"resend":false,"term":0,"type":"SnapshotAck"} a9656665746368f46466726f6d00636c656e00636c736ea267636f756e74657200647465726d00666f66667365740066726573656e64f4647465726d0064747970656b536e617073686f7441636b617601)",
    R"({"commit_lsn":{"counter":5,"term":2},"from":1,"last_lsn":{"counter":7,"term":2},"term":3,"to":4,"type":"SyncResponse"})",
};
// clang-format on

}  // namespace golden

TEST_CASE("golden: every elector body encodes byte for byte as pinned") {
    const std::vector<std::string> lines = golden::elector_lines();
    REQUIRE(lines.size() == golden::kElectorGolden.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
        CHECK(lines[i] == golden::kElectorGolden[i]);
    }
}

TEST_CASE("golden: every log body encodes byte for byte as pinned") {
    const std::vector<std::string> lines = golden::log_lines();
    REQUIRE(lines.size() == golden::kLogGolden.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
        CHECK(lines[i] == golden::kLogGolden[i]);
    }
}
