// SPDX-License-Identifier: Apache-2.0
// Deterministic stand-in for the fuzzer, built always and run by CTest:
//   frame_replay CORPUS_DIR [EXTRA_INPUTS]   replays every file in CORPUS_DIR, then EXTRA_INPUTS
//                                            (default 4000) random and mutated inputs from a
//                                            fixed seed
//   frame_replay --write-corpus DIR          (re)writes the committed seed corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "conclave/codec/json.hpp"
#include "conclave/codec/log_codec.hpp"
#include "conclave/net/frame.hpp"
#include "conclave/net/handshake.hpp"
#include "frame_target.hpp"

namespace fs = std::filesystem;
using namespace conclave;
using namespace conclave::net;
using Bytes = std::vector<std::uint8_t>;

namespace {

Bytes with_chunk(std::uint8_t chunk, const Bytes& stream) {
    Bytes out{chunk};
    out.insert(out.end(), stream.begin(), stream.end());
    return out;
}

std::vector<std::pair<std::string, Bytes>> seed_corpus() {
    const auto msg = [](elector::MessageBody body) {
        return encode_frame(Channel::Elector,
                            codec::encode_cbor(elector::Message{NodeId{1}, Term{3}, body}));
    };
    Bytes all;
    for (const auto& f :
         {encode_frame(Channel::Control, encode_hello(Hello{kProtocolVersion, "demo", "n1"})),
          encode_frame(Channel::Control, encode_ping()), msg(elector::ScoutingRequest{4}),
          msg(elector::ScoutingResponse{4, true}), msg(elector::ElectionProposal{true}),
          msg(elector::ElectionResponse{false, elector::Refusal::AlreadyVoted, Term{5}}),
          msg(elector::LeaderHeartbeat{Lsn{Term{3}, 9}}), msg(elector::HeartbeatAck{}),
          msg(elector::HeartbeatResponse{}), msg(elector::LeadershipCession{NodeId{2}})}) {
        all.insert(all.end(), f.begin(), f.end());
    }
    // Replication channel: every log message type in one stream.
    const auto log = [](replication::LogMessageBody body) {
        return encode_frame(Channel::Replication, codec::encode_log_cbor(replication::LogMessage{
                                                      NodeId{0}, Term{3}, body}));
    };
    const Lsn a{Term{2}, 7};
    const Lsn b{Term{3}, 1};
    const std::vector<replication::Entry> entries = {{Lsn{Term{3}, 0}, "", ""},
                                                     {b, "topic/a", R"({"owner":"n2"})"}};
    Bytes log_all;
    for (const auto& f :
         {log(replication::SyncRequest{}), log(replication::SyncResponse{a, a}),
          log(replication::Append{a, entries, a}), log(replication::AppendAck{true, a, b, a}),
          log(replication::FetchRequest{a, b, 16}), log(replication::FetchResponse{a, entries, b}),
          log(replication::InstallSnapshot{b, 9, 0, {entries[1]}, true, false, 1, 0x1234}),
          log(replication::SnapshotAck{b, 9, 1, false, false})}) {
        log_all.insert(log_all.end(), f.begin(), f.end());
    }
    Hello join_hello{kProtocolVersion, "demo", "n4"};
    join_hello.join = true;
    Bytes join;
    for (const auto& f :
         {encode_frame(Channel::Control, encode_hello(join_hello)),
          encode_frame(Channel::Control,
                       encode_join_request(JoinRequest{"10.0.0.4:7100", "10.0.0.4:8100"})),
          encode_frame(Channel::Control,
                       encode_join_answer(JoinAnswer{JoinStatus::Accepted, std::string(900, 'c')})),
          encode_frame(Channel::Control,
                       encode_join_answer(JoinAnswer{JoinStatus::Refused, "join_refused"}))}) {
        join.insert(join.end(), f.begin(), f.end());
    }
    return {
        {"stream-all-types", with_chunk(255, all)},
        {"stream-log-types", with_chunk(255, log_all)},
        {"stream-log-types-bytewise", with_chunk(0, log_all)},
        // The optional non_voting field of a repaired node's AppendAck.
        {"log-ack-non-voting",
         with_chunk(255, log(replication::AppendAck{true, {}, b, a, /*non_voting=*/true}))},
        {"stream-all-types-bytewise", with_chunk(0, all)},
        {"hello", with_chunk(7, encode_frame(Channel::Control,
                                             encode_hello(Hello{kProtocolVersion, "demo", "n2"})))},
        {"oversized", with_chunk(3, Bytes{0xff, 0xff, 0xff, 0xff, 0x01})},
        {"empty", with_chunk(3, Bytes{0, 0, 0, 0})},
        {"truncated", with_chunk(1, Bytes{0, 0, 0, 0x40, 0x01, 0xa1})},
        {"nested", with_chunk(255, encode_frame(Channel::Elector, Bytes(64, 0x81)))},
        {"unknown-channel", with_chunk(255, encode_frame(static_cast<Channel>(9), Bytes{1, 2}))},
        // The join exchange, and a deep payload above 512 bytes (nesting pre-pass).
        {"join", with_chunk(255, join)},
        {"join-deep", with_chunk(255, encode_frame(Channel::Control, Bytes(3000, 0x81)))},
    };
}

Bytes mutate(Bytes input, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> op(0, 5);
    const int rounds = 1 + static_cast<int>(rng() % 4);
    for (int r = 0; r < rounds && !input.empty(); ++r) {
        const std::size_t at = rng() % input.size();
        switch (op(rng)) {
            case 0:  // flip a bit
                input[at] = static_cast<std::uint8_t>(input[at] ^ (1U << (rng() % 8)));
                break;
            case 1:  // random byte
                input[at] = static_cast<std::uint8_t>(rng());
                break;
            case 2:  // truncate
                input.resize(at + 1);
                break;
            case 3:  // duplicate a slice
                input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), input.begin(),
                             input.begin() + static_cast<std::ptrdiff_t>(at));
                break;
            case 4:  // interesting byte
                input[at] =
                    std::array<std::uint8_t, 6>{0x00, 0xff, 0x7f, 0x80, 0xbf, 0x1b}[rng() % 6];
                break;
            default:  // erase a byte
                input.erase(input.begin() + static_cast<std::ptrdiff_t>(at));
                break;
        }
    }
    return input;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "--write-corpus") {
        fs::create_directories(argv[2]);
        for (const auto& [name, bytes] : seed_corpus()) {
            std::ofstream(fs::path(argv[2]) / name, std::ios::binary)
                .write(reinterpret_cast<const char*>(bytes.data()),
                       static_cast<std::streamsize>(bytes.size()));
        }
        return 0;
    }
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr,
                     "usage: frame_replay CORPUS_DIR [EXTRA_INPUTS] | --write-corpus DIR\n");
        return 2;
    }
    const std::size_t extra = argc == 3 ? std::stoul(argv[2]) : 4000;
    std::vector<Bytes> corpus;
    for (const auto& entry : fs::directory_iterator(argv[1])) {
        std::ifstream in(entry.path(), std::ios::binary);
        corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    for (const auto& [name, bytes] : seed_corpus()) {
        corpus.push_back(bytes);
    }
    for (const auto& input : corpus) {
        conclave::net::fuzz::run_frame_input(input.data(), input.size());
    }
    std::mt19937_64 rng(20240601);
    for (std::size_t i = 0; i < extra; ++i) {
        Bytes input;
        if (i % 4 == 0) {
            input.resize(rng() % 512);
            for (auto& b : input) {
                b = static_cast<std::uint8_t>(rng());
            }
        } else {
            input = mutate(corpus[rng() % corpus.size()], rng);
        }
        conclave::net::fuzz::run_frame_input(input.data(), input.size());
    }
    std::printf("frame_replay: %zu corpus files + %zu generated inputs, no failure\n",
                corpus.size(), extra);
    return 0;
}
