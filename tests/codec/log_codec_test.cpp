// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <random>
#include <span>

#include "conclave/codec/log_codec.hpp"

using namespace conclave;
using namespace conclave::codec;
using namespace conclave::replication;
using nlohmann::json;

namespace {

Lsn L(std::uint64_t t, std::uint64_t c) {
    return Lsn{Term{t}, c};
}

std::vector<LogMessage> log_samples() {
    const std::vector<Entry> entries = {
        Entry{L(3, 0), "", ""}, Entry{L(3, 1), "topic/a", R"({"owner":"n2"})"},
        Entry{L(3, 2), std::string("k\0\xff", 3), "\x80\x81 bytes"}};
    return {
        LogMessage{NodeId{0}, Term{3}, SyncRequest{}},
        LogMessage{NodeId{1}, Term{3}, SyncResponse{L(2, 7), L(2, 5)}},
        LogMessage{NodeId{0}, Term{3}, Append{L(2, 7), entries, L(2, 5)}},
        LogMessage{NodeId{0}, Term{3}, Append{L(3, 2), {}, L(3, 2)}},
        LogMessage{NodeId{2}, Term{3}, AppendAck{true, L(2, 7), L(3, 2), L(3, 1)}},
        LogMessage{NodeId{2}, Term{4}, AppendAck{false, L(2, 7), L(1, 1), L(1, 0)}},
        LogMessage{NodeId{0}, Term{3}, FetchRequest{L(1, 0), L(2, 7), 256}},
        LogMessage{NodeId{1}, Term{3}, FetchResponse{L(1, 0), entries, L(3, 2)}},
        LogMessage{NodeId{1}, Term{3}, FetchResponse{L(1, 0), {}, L(1, 0)}},
        LogMessage{
            NodeId{0}, Term{3},
            InstallSnapshot{L(3, 2), 40, 0, {entries[1], entries[2]}, false, false, 9, 0xDEADBEEF}},
        LogMessage{NodeId{1}, Term{3}, InstallSnapshot{L(2, 9), 17, 5, {}, true, true, 5, 7}},
        LogMessage{NodeId{1}, Term{3}, SnapshotAck{L(2, 9), 17, 5, false, true}},
        LogMessage{NodeId{0}, Term{3}, SnapshotAck{L(2, 9), 17, 0, true, false}},
        // A repaired node's ack (the optional non_voting field).
        LogMessage{NodeId{2}, Term{5}, AppendAck{true, {}, L(3, 2), L(3, 1), true}},
    };
}

std::string decode_bytes_error(std::span<const std::uint8_t> bytes) {
    try {
        (void)decode_log_cbor(bytes);
    } catch (const DecodeError& e) {
        return e.what();
    }
    return "";
}

std::string decode_error(const json& j) {
    return decode_bytes_error(json::to_cbor(j));
}

json wire_json(const LogMessage& m) {
    return json::from_cbor(encode_log_cbor(m));
}

}  // namespace

TEST_CASE("every log message survives a CBOR and a JSON round trip") {
    for (const LogMessage& m : log_samples()) {
        INFO(to_string(m));
        CHECK(decode_log_cbor(encode_log_cbor(m)) == m);
        // The JSON form is for logs; it round-trips for messages whose bytes are valid UTF-8.
        const json j = log_message_to_json(m, NodeId{2});
        CHECK(j.at("to") == 2);
        CHECK(j.at("type") == std::string(message_name(m.body)));
        CHECK_NOTHROW(j.dump(-1, ' ', false, json::error_handler_t::replace));
    }
    const LogMessage text = log_samples()[2];
    LogMessage utf8 = text;
    std::get<Append>(utf8.body).entries.pop_back();
    CHECK(log_message_from_json(log_message_to_json(utf8)) == utf8);
}

TEST_CASE("key and value travel as CBOR byte strings") {
    const json j = wire_json(log_samples()[2]);
    CHECK(j.at("entries")[1].at("key").is_binary());
    CHECK(j.at("entries")[1].at("value").is_binary());
    CHECK(j.at("v") == kLogMessageFormatVersion);
}

/// The bytes json::to_cbor writes for the message's wire document: what the encoder, which
/// writes entries without a document, must reproduce (nodes of any build read each other).
std::vector<std::uint8_t> document_cbor(const LogMessage& m) {
    json j = log_message_to_json(m);
    for (const char* field : {"entries"}) {
        if (!j.contains(field)) {
            continue;
        }
        for (json& e : j[field]) {
            for (const char* bytes : {"key", "value"}) {
                const std::string text = e[bytes].get<std::string>();
                e[bytes] = json::binary(std::vector<std::uint8_t>(text.begin(), text.end()));
            }
        }
    }
    j["v"] = kLogMessageFormatVersion;
    return json::to_cbor(j);
}

/// Where the encoder's bytes first differ from the document's ("" when equal): a message of
/// megabytes is not printed whole on a failure.
std::string first_difference(const LogMessage& m) {
    const std::vector<std::uint8_t> ours = encode_log_cbor(m);
    const std::vector<std::uint8_t> theirs = document_cbor(m);
    const auto [a, b] = std::mismatch(ours.begin(), ours.end(), theirs.begin(), theirs.end());
    if (a == ours.end() && b == theirs.end()) {
        return "";
    }
    return "at byte " + std::to_string(a - ours.begin()) + " of " + std::to_string(ours.size()) +
           " (document: " + std::to_string(theirs.size()) + " bytes)";
}

TEST_CASE("the encoder writes the bytes of the JSON document's CBOR, at every head size") {
    for (const LogMessage& m : log_samples()) {
        INFO(to_string(m));
        CHECK(first_difference(m) == "");
    }
    // Heads of 0, 1, 2, 4 and 8 bytes: LSN parts, lengths of keys and values, entry counts.
    std::mt19937_64 rng(11);
    const std::vector<std::uint64_t> numbers = {
        0, 23, 24, 255, 256, 65535, 65536, 0xFFFFFFFF, 1ULL << 32, ~0ULL >> 1, ~0ULL};
    const std::vector<std::size_t> sizes = {0, 1, 23, 24, 255, 256, 65535, 65536, 70000};
    for (int round = 0; round < 40; ++round) {
        std::vector<Entry> entries(round == 0 ? 300 : rng() % 30);
        for (Entry& e : entries) {
            e.lsn = L(numbers[rng() % numbers.size()], numbers[rng() % numbers.size()]);
            e.key = std::string(sizes[rng() % 5], 'k');
            e.value = std::string(sizes[rng() % sizes.size()], 'v');
        }
        const LogMessage append{
            NodeId{1}, Term{~0ULL},
            Append{L(numbers[static_cast<std::size_t>(round) % numbers.size()], 3), entries,
                   L(2, 1)}};
        const LogMessage snapshot{
            NodeId{2}, Term{7},
            InstallSnapshot{L(3, 2), 1ULL << 40, 5, entries, false, round % 2 == 0, 1ULL << 41, 9}};
        CHECK(first_difference(append) == "");
        CHECK(first_difference(snapshot) == "");
    }
}

TEST_CASE("truncated log messages are refused, never crash") {
    for (const LogMessage& m : log_samples()) {
        const auto bytes = encode_log_cbor(m);
        for (std::size_t len = 0; len < bytes.size(); ++len) {
            INFO(to_string(m) << " cut at " << len);
            CHECK_THROWS_AS(decode_log_cbor(std::span(bytes.data(), len)), DecodeError);
        }
    }
}

TEST_CASE("garbled log messages decode or fail with DecodeError") {
    std::mt19937_64 rng(7);
    std::size_t decoded = 0;
    for (int round = 0; round < 3000; ++round) {
        const auto samples = log_samples();
        auto bytes = encode_log_cbor(samples[rng() % samples.size()]);
        const int flips = 1 + static_cast<int>(rng() % 3);
        for (int f = 0; f < flips; ++f) {
            bytes[rng() % bytes.size()] = static_cast<std::uint8_t>(rng());
        }
        try {
            const LogMessage m = decode_log_cbor(bytes);
            CHECK(decode_log_cbor(encode_log_cbor(m)) == m);
            ++decoded;
        } catch (const DecodeError&) {
        }
    }
    CHECK(decoded < 3000);
}

/// The decoder's outcome on `bytes` against the document's (the whole frame read as one JSON
/// document): the same message, or the same error.
void CheckDecodesAsDocument(std::span<const std::uint8_t> bytes) {
    std::optional<LogMessage> ours;
    std::optional<LogMessage> theirs;
    std::string our_error;
    std::string their_error;
    try {
        ours = decode_log_cbor(bytes);
    } catch (const DecodeError& e) {
        our_error = e.what();
    }
    try {
        theirs =
            log_message_from_json(cbor_document(bytes, kLogMessageFormatVersion, "log message"));
    } catch (const DecodeError& e) {
        their_error = e.what();
    }
    CHECK(ours == theirs);
    CHECK(our_error == their_error);
}

TEST_CASE("frames decode as the whole document would: entries read apart change nothing") {
    std::mt19937_64 rng(13);
    std::size_t decoded = 0;
    const auto samples = log_samples();
    for (const LogMessage& m : samples) {
        CheckDecodesAsDocument(encode_log_cbor(m));
    }
    for (int round = 0; round < 20000; ++round) {
        auto bytes = encode_log_cbor(samples[rng() % samples.size()]);
        const int flips = 1 + static_cast<int>(rng() % 3);
        for (int f = 0; f < flips; ++f) {
            bytes[rng() % bytes.size()] = static_cast<std::uint8_t>(rng());
        }
        if (rng() % 4 == 0) {
            bytes.resize(rng() % bytes.size());
        }
        CheckDecodesAsDocument(bytes);
        try {
            (void)decode_log_cbor(bytes);
            ++decoded;
        } catch (const DecodeError&) {
        }
    }
    // Frames the document reads but the encoder would not write: keys in another order, text
    // keys and values, an extra field, an entry LSN above the message's term.
    json base = wire_json(log_samples()[2]);
    for (const auto& change : std::vector<std::function<void(json&)>>{
             [](json& j) { j["entries"][1]["key"] = "text"; },
             [](json& j) { j["entries"][0]["extra"] = 1; },
             [](json& j) { j["entries"][2]["lsn"]["term"] = 9; },
             [](json& j) { j["entries"][2]["lsn"]["term"] = ~0ULL; },
             [](json& j) {
                 j["entries"][2]["value"] =
                     json::binary(std::vector<std::uint8_t>(kMaxLogValueBytes + 1));
             },
             [](json& j) {
                 j["entries"][1]["key"] =
                     json::binary(std::vector<std::uint8_t>(kMaxLogKeyBytes + 1));
             },
             [](json& j) { j["type"] = "AppendAck"; },
             [](json& j) { j["done"] = true; },
         }) {
        json j = base;
        change(j);
        CheckDecodesAsDocument(json::to_cbor(j));
    }
    // The document path was taken for some of the garbled frames and the fast one for others.
    CHECK(decoded > 0);
    CHECK(decoded < 20000);
}

TEST_CASE("decode errors name the field") {
    json base = wire_json(log_samples()[2]);
    SECTION("version") {
        base["v"] = 2;
        CHECK_THAT(decode_error(base), Catch::Contains("v: unsupported"));
    }
    SECTION("type") {
        base["type"] = "Vote";
        CHECK_THAT(decode_error(base), Catch::Contains("type: unknown log message type 'Vote'"));
    }
    SECTION("sender") {
        base["from"] = 70000;
        CHECK_THAT(decode_error(base), Catch::Contains("from: node index 70000 out of range"));
    }
    SECTION("lsn") {
        base["prev_lsn"]["counter"] = -1;
        CHECK_THAT(decode_error(base), Catch::Contains("prev_lsn.counter"));
    }
    SECTION("entries not an array") {
        base["entries"] = 3;
        CHECK_THAT(decode_error(base), Catch::Contains("entries: expected an array"));
    }
    SECTION("entry lsn") {
        base["entries"][1].erase("lsn");
        CHECK_THAT(decode_error(base), Catch::Contains("entries[1].lsn: missing"));
    }
    SECTION("entry key type") {
        base["entries"][2]["key"] = 5;
        CHECK_THAT(decode_error(base), Catch::Contains("entries[2].key: expected a byte string"));
    }
    SECTION("oversized value") {
        base["entries"][0]["value"] =
            json::binary(std::vector<std::uint8_t>(kMaxLogValueBytes + 1));
        CHECK_THAT(decode_error(base), Catch::Contains("entries[0].value:"));
    }
    SECTION("too many entries") {
        base["entries"] = json::array();
        for (std::size_t i = 0; i <= kMaxLogEntriesPerMessage; ++i) {
            base["entries"].push_back(0);
        }
        CHECK_THAT(decode_error(base), Catch::Contains("entries: 65537 entries"));
    }
    SECTION("max_entries beyond 32 bits") {
        json fetch = wire_json(log_samples()[6]);
        fetch["max_entries"] = std::uint64_t{1} << 40;
        CHECK_THAT(decode_error(fetch), Catch::Contains("max_entries: "));
    }
    SECTION("ack without ok") {
        json ack = wire_json(log_samples()[4]);
        ack.erase("ok");
        CHECK_THAT(decode_error(ack), Catch::Contains("ok: missing"));
    }
}

TEST_CASE("deeply nested CBOR is refused before parsing") {
    std::vector<std::uint8_t> bytes(100000, 0x81);
    bytes.push_back(0x00);
    CHECK_THAT(decode_bytes_error(bytes), Catch::Contains("nested deeper"));
}

TEST_CASE("log decoding refuses terms >= 2^63 and LSNs above the message term") {
    auto refused = [](const LogMessage& m, const std::string& field) {
        try {
            decode_log_cbor(encode_log_cbor(m));
        } catch (const DecodeError& e) {
            return std::string(e.what()).rfind(field, 0) == 0;
        }
        return false;
    };
    // A term of 2^64 - 1: refused at decoding, it must never reach the log core.
    CHECK(refused(LogMessage{NodeId{1}, Term{~std::uint64_t{0}}, AppendAck{true, {}, {}, {}}},
                  "term"));
    CHECK(refused(LogMessage{NodeId{1}, Term{kTermLimit}, SyncRequest{}}, "term"));
    CHECK(refused(LogMessage{NodeId{0}, Term{3}, Append{L(4, 1), {}, {}}}, "prev_lsn"));
    CHECK(refused(LogMessage{NodeId{0}, Term{3}, Append{L(3, 1), {}, L(5, 0)}}, "commit_lsn"));
    CHECK(refused(
        LogMessage{NodeId{0}, Term{3}, Append{L(3, 0), {Entry{L(4, 1), "k", "v"}}, L(3, 0)}},
        "entries[].lsn"));
    CHECK(refused(LogMessage{NodeId{1}, Term{3}, SyncResponse{L(4, 0), L(1, 0)}}, "last_lsn"));
    CHECK(refused(LogMessage{NodeId{1}, Term{3}, AppendAck{true, L(1, 1), L(9, 9), L(1, 1)}},
                  "last_lsn"));
    CHECK(refused(LogMessage{NodeId{0}, Term{3}, FetchRequest{L(1, 0), L(4, 0), 1}}, "up_to_lsn"));
    CHECK(refused(
        LogMessage{NodeId{1}, Term{3}, FetchResponse{L(1, 0), {Entry{L(7, 1), "k", "v"}}, L(3, 0)}},
        "entries[].lsn"));
    CHECK(refused(LogMessage{NodeId{1}, Term{3}, FetchResponse{L(1, 0), {}, L(kTermLimit, 0)}},
                  "last_lsn"));
    // Compaction: a snapshot chunk names LSNs within its term, and its offset and
    // entries fit its length.
    CHECK(refused(LogMessage{NodeId{0}, Term{3}, InstallSnapshot{L(4, 1), 9, 0, {}, true, false}},
                  "lsn"));
    CHECK(refused(
        LogMessage{NodeId{0}, Term{3},
                   InstallSnapshot{L(3, 1), 9, 0, {Entry{L(5, 1), "k", "v"}}, true, false, 1, 0}},
        "entries[].lsn"));
    // Streaming: the chunk fits the snapshot's count (the last one ends at it), the count fits
    // the length; an acknowledgement's offset fits the length.
    CHECK(refused(
        LogMessage{NodeId{0}, Term{3}, InstallSnapshot{L(3, 1), 9, 3, {}, true, false, 2, 0}},
        "len/count/offset"));
    CHECK(refused(
        LogMessage{NodeId{0}, Term{3}, InstallSnapshot{L(3, 1), 2, 0, {}, false, false, 3, 0}},
        "len/count/offset"));
    CHECK(refused(LogMessage{NodeId{0}, Term{3},
                             InstallSnapshot{L(3, 1), ~std::uint64_t{0}, 0, {}, true, false}},
                  "len/count/offset"));
    CHECK(refused(
        LogMessage{NodeId{0}, Term{3},
                   InstallSnapshot{L(3, 1), 9, 0, {Entry{L(3, 1), "k", "v"}}, true, false, 2, 0}},
        "done"));
    CHECK(refused(LogMessage{NodeId{1}, Term{3}, SnapshotAck{L(3, 1), 9, 10, false, false}},
                  "len/offset"));
    CHECK(refused(LogMessage{NodeId{1}, Term{3}, SnapshotAck{L(4, 1), 9, 1, false, false}}, "lsn"));
}

TEST_CASE("AppendAck's non_voting is optional on the wire and only on ok acks") {
    // A node that is not repaired sends the frame of before: no field at all.
    const LogMessage plain{NodeId{2}, Term{3}, AppendAck{true, L(2, 7), L(3, 2), L(3, 1)}};
    CHECK_FALSE(wire_json(plain).contains("non_voting"));
    const LogMessage repaired{NodeId{2}, Term{3}, AppendAck{true, {}, L(3, 2), L(3, 1), true}};
    json j = wire_json(repaired);
    CHECK(j.at("non_voting") == true);
    CHECK(decode_log_cbor(json::to_cbor(j)) == repaired);
    j["non_voting"] = 1;
    CHECK_THAT(decode_error(j), Catch::StartsWith("non_voting: expected a boolean"));
    j["non_voting"] = true;
    j["ok"] = false;
    CHECK_THAT(decode_error(j), Catch::StartsWith("non_voting: only an ok AppendAck"));
    j["non_voting"] = false;
    CHECK(std::get<AppendAck>(decode_log_cbor(json::to_cbor(j)).body).non_voting == false);
}
