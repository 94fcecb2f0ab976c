// SPDX-License-Identifier: Apache-2.0
// FileStorage and MemoryStorage: round trips, fsync policies, and recovery from torn or corrupt
// files: a torn last record is reported and truncated, any other damage refused (never handed to
// the core, never silently cut).
#include <unistd.h>

#include <boost/crc.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "conclave/replication/storage.hpp"
#include "crc32.hpp"
#include "record.hpp"

using namespace conclave;
using namespace conclave::replication;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    /// `base`: /dev/shm for the exhaustive tests (hundreds of recoveries, each with fsyncs).
    explicit TempDir(fs::path base = fs::temp_directory_path()) {
        static int counter = 0;
        path = base / ("conclave-replication-test-" + std::to_string(::getpid()) + "-" +
                       std::to_string(counter++));
        fs::remove_all(path);
    }
    static fs::path Fast() {
        std::error_code ec;
        return fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
    fs::path path;
};

Entry StE(std::uint64_t term, std::uint64_t counter, std::string value = "v") {
    if (counter == 0) {
        return Entry{Lsn{Term{term}, 0}, {}, {}};
    }
    return Entry{Lsn{Term{term}, counter}, "key/" + std::to_string(counter), std::move(value)};
}

std::vector<Entry> Sample() {
    return {StE(1, 0), StE(1, 1, "{\"owner\":\"n1\"}"), StE(1, 2, std::string("\0binary\xff", 8)),
            StE(2, 0), StE(2, 1)};
}

std::string ReadFile(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const fs::path& p, const std::string& data) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << data;
}

std::uint64_t RecordEnd(std::size_t records) {  // file offset after `records` Sample() records
    std::string bytes = "CNCLLOG1";
    auto entries = Sample();
    for (std::size_t i = 0; i < records; ++i) {
        encode_record(entries[i], bytes);
    }
    return bytes.size();
}

}  // namespace

TEST_CASE("record format: the CRC-32 of the files is the IEEE one, as written before") {
    // The check value of CRC-32/ISO-HDLC, and one piece after another as one.
    CHECK(crc32("123456789", 9) == 0xCBF43926U);
    Crc32 pieces;
    pieces.process_bytes("1234", 4);
    pieces.process_bytes("56789", 5);
    CHECK(pieces.checksum() == 0xCBF43926U);
    // A record as the log has always written it: u32 length 36, u32 crc over the length field
    // and the payload (python3: zlib.crc32(struct.pack("<I", 36) + payload) == 0x4ad9598e),
    // payload u64 term 3, u64 counter 17, u32 key length 9, key, value (little-endian).
    std::string record;
    encode_record(Entry{Lsn{Term{3}, 17}, "svc/owner", R"({"a":1})"}, record);
    REQUIRE(record.size() == kRecordHeaderBytes + 36);
    CHECK(get_u32(record.data()) == 36);
    CHECK(get_u32(record.data() + 4) == 0x4AD9598EU);
    const DecodedRecord decoded = decode_record(record, 1024);
    CHECK(decoded.problem == TailProblem::None);
    record[record.size() - 1] ^= 1;
    CHECK(decode_record(record, 1024).problem == TailProblem::BadCrc);
}

TEST_CASE("record format: the CRC-32 equals Boost's crc_32_type on any input and split") {
    // The files were written with boost::crc_32_type; the CRC now computed by zlib must give the
    // same value on every input: empty, short, long, starting at an odd address, in pieces.
    std::string bytes(5000, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        bytes[i] = static_cast<char>((i * 131 + 7) % 251);
    }
    for (const std::size_t offset : {0U, 1U, 3U, 7U}) {
        for (const std::size_t size :
             {0U, 1U, 2U, 3U, 4U, 5U, 7U, 8U, 15U, 16U, 17U, 31U, 64U, 255U, 4093U}) {
            const char* data = bytes.data() + offset;
            boost::crc_32_type boost_crc;
            boost_crc.process_bytes(data, size);
            CHECK(crc32(data, size) == boost_crc.checksum());
            Crc32 pieces;  // split at a third: the state carries over
            pieces.process_bytes(data, size / 3);
            pieces.process_bytes(data + size / 3, size - size / 3);
            CHECK(pieces.checksum() == boost_crc.checksum());
        }
    }
    CHECK(Crc32().checksum() == 0U);  // nothing processed: the CRC of no bytes
}

TEST_CASE("file storage: a fresh directory recovers empty, then round-trips entries and meta") {
    TempDir dir;
    {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        Recovery r = s.recover();
        CHECK(r.log.entries.empty());
        CHECK(r.log.meta == LogMeta{});
        CHECK_FALSE(r.report.meta_found);
        CHECK(r.report.problem == TailProblem::None);
        s.append(Sample());
        CHECK(s.flush() == Lsn{Term{2}, 1});
        s.write_meta(LogMeta{Term{3}, Lsn{Term{2}, 0}});
    }
    CHECK(ReadFile(dir.path / "log.dat").substr(0, 8) == "CNCLLOG1");
    FileStorage s(dir.path, FsyncPolicy::Batched);
    Recovery r = s.recover();
    CHECK(r.log.entries == Sample());
    CHECK(r.log.meta == LogMeta{Term{3}, Lsn{Term{2}, 0}});
    CHECK(r.report.meta_found);
    CHECK_FALSE(r.report.truncated());
    CHECK(r.report.records == 5);
    CHECK(s.durable_lsn() == Lsn{Term{2}, 1});
}

TEST_CASE("file storage: truncate_after is durable and appends continue after it") {
    TempDir dir;
    {
        FileStorage s(dir.path, FsyncPolicy::EveryEntry);
        s.recover();
        s.append(Sample());
        s.truncate_after(Lsn{Term{1}, 2});
        CHECK(s.durable_lsn() == Lsn{Term{1}, 2});
        s.append({StE(3, 0), StE(3, 1)});
        s.truncate_after(kNoLsn);
        s.append({StE(4, 0)});
    }
    FileStorage s(dir.path, FsyncPolicy::EveryEntry);
    Recovery r = s.recover();
    CHECK(r.log.entries == std::vector<Entry>{StE(4, 0)});
    CHECK(r.report.problem == TailProblem::None);
}

TEST_CASE("file storage: fsync policies") {
    TempDir dir;
    SECTION("every entry: durable at once, one fsync per append") {
        FileStorage s(dir.path, FsyncPolicy::EveryEntry);
        s.recover();
        const auto before = s.fsync_count();
        s.append({StE(1, 0)});
        s.append({StE(1, 1)});
        CHECK(s.durable_lsn() == Lsn{Term{1}, 1});
        CHECK(s.fsync_count() == before + 2);
        CHECK(s.flush() == Lsn{Term{1}, 1});
        CHECK(s.fsync_count() == before + 2);
    }
    SECTION("batched: nothing durable before flush, one fsync for the group") {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        s.recover();
        const auto before = s.fsync_count();
        s.append({StE(1, 0)});
        s.append({StE(1, 1), StE(1, 2)});
        CHECK(s.durable_lsn() == kNoLsn);
        CHECK(s.flush() == Lsn{Term{1}, 2});
        CHECK(s.fsync_count() == before + 1);
        CHECK(s.flush() == Lsn{Term{1}, 2});
        CHECK(s.fsync_count() == before + 1);  // nothing new: no fsync
    }
    SECTION("never: flush reports durability without fsync") {
        FileStorage s(dir.path, FsyncPolicy::Never);
        s.recover();
        const auto before = s.fsync_count();
        s.append({StE(1, 0), StE(1, 1)});
        CHECK(s.flush() == Lsn{Term{1}, 1});
        CHECK(s.fsync_count() == before);
    }
}

TEST_CASE("file storage: a torn last record is reported and truncated, never applied") {
    TempDir dir;
    {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        s.recover();
        s.append(Sample());
        s.flush();
    }
    const fs::path log = dir.path / "log.dat";
    std::string bytes = ReadFile(log);
    REQUIRE(bytes.size() == RecordEnd(5));

    std::size_t expect_records = 0;
    TailProblem expect_problem = TailProblem::None;
    std::uint64_t expect_offset = 0;
    SECTION("torn inside the last record's payload") {
        bytes.resize(bytes.size() - 3);
        expect_records = 4;
        expect_problem = TailProblem::TornRecord;
        expect_offset = RecordEnd(4);
    }
    SECTION("torn inside a record header") {
        bytes.resize(RecordEnd(3) + 5);
        expect_records = 3;
        expect_problem = TailProblem::TornHeader;
        expect_offset = RecordEnd(3);
    }
    SECTION("corrupt checksum in the last record") {
        bytes[bytes.size() - 1] ^= 0x40;
        expect_records = 4;
        expect_problem = TailProblem::BadCrc;
        expect_offset = RecordEnd(4);
    }
    SECTION("the last record zero-filled (a torn write)") {
        std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(RecordEnd(4)) + 3, bytes.end(), '\0');
        expect_records = 4;
        expect_problem = TailProblem::BadCrc;
        expect_offset = RecordEnd(4);
    }
    SECTION("zeroes after the last record (preallocated or torn write)") {
        bytes += std::string(64, '\0');
        expect_records = 5;
        expect_problem = TailProblem::BadLength;
        expect_offset = RecordEnd(5);
    }
    WriteFile(log, bytes);
    {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        Recovery r = s.recover();
        const auto all = Sample();
        CHECK(r.log.entries ==
              std::vector<Entry>(all.begin(),
                                 all.begin() + static_cast<std::ptrdiff_t>(expect_records)));
        CHECK(r.report.problem == expect_problem);
        CHECK(r.report.problem_offset == expect_offset);
        CHECK(r.report.valid_bytes == expect_offset);
        CHECK(r.report.file_bytes == bytes.size());
        CHECK(r.report.truncated());
        CHECK(r.report.describe().find(std::string(to_string(expect_problem))) !=
              std::string::npos);
        CHECK(fs::file_size(log) == expect_offset);
        s.append({StE(9, 0)});  // appends continue cleanly after the cut
        s.flush();
    }
    FileStorage s(dir.path, FsyncPolicy::Batched);
    Recovery r = s.recover();
    CHECK(r.report.problem == TailProblem::None);
    CHECK(r.log.entries.size() == expect_records + 1);
    CHECK(r.log.entries.back() == StE(9, 0));
}

TEST_CASE("file storage: damage a crash cannot explain is refused, the files left unchanged") {
    TempDir dir;
    {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        s.recover();
        s.append(Sample());
        s.flush();
        s.write_meta(LogMeta{Term{2}, Lsn{Term{1}, 2}});
    }
    const fs::path log = dir.path / "log.dat";
    std::string bytes = ReadFile(log);
    std::string expect_what;
    std::uint64_t expect_offset = 0;
    SECTION("corrupt checksum in the middle: valid records follow") {
        bytes[RecordEnd(1) + 12] ^= 0x01;  // a payload byte of the second record
        expect_what =
            "bad_crc record followed by a valid record at offset " + std::to_string(RecordEnd(2));
        expect_offset = RecordEnd(1);
    }
    SECTION("a length made huge in the middle looks torn, but valid records follow") {
        bytes[RecordEnd(1) + 2] = '\x01';
        expect_what = "record followed by a valid record at offset " + std::to_string(RecordEnd(2));
        expect_offset = RecordEnd(1);
    }
    SECTION("an absurd length in the middle") {
        bytes[RecordEnd(2) + 3] = '\x7f';
        expect_what = "bad_length record followed by a valid record";
        expect_offset = RecordEnd(2);
    }
    SECTION("a valid record out of LSN order is not a torn write") {
        encode_record(StE(1, 7), bytes);
        expect_what = "out_of_order record with a valid checksum";
        expect_offset = RecordEnd(5);
    }
    SECTION("a bad magic") {
        bytes[3] = 'X';
        expect_what = "not a Conclave log file (bad magic)";
        expect_offset = 0;
    }
    WriteFile(log, bytes);
    const std::string meta = ReadFile(dir.path / "log.meta");
    FileStorage s(dir.path, FsyncPolicy::Batched);
    try {
        s.recover();
        FAIL("recover() accepted a corrupt log");
    } catch (const CorruptLogError& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find(log.string() + " at offset " + std::to_string(expect_offset) + ": ") !=
              std::string::npos);
        CHECK(what.find(expect_what) != std::string::npos);
        CHECK(what.find("refusing to start") != std::string::npos);
        CHECK(what.find('\n') == std::string::npos);
    }
    CHECK(ReadFile(log) == bytes);
    CHECK(ReadFile(dir.path / "log.meta") == meta);
}

// Recovers a copy of `bytes` as log.dat; returns the entries, or nullopt if refused (then the
// file must be unchanged).
std::optional<std::vector<Entry>> RecoverBytes(const fs::path& dir, const std::string& bytes) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    WriteFile(dir / "log.dat", bytes);
    FileStorage s(dir, FsyncPolicy::Batched);
    try {
        return s.recover().log.entries;
    } catch (const CorruptLogError&) {
        CHECK(ReadFile(dir / "log.dat") == bytes);
        return std::nullopt;
    }
}

TEST_CASE("file storage: a flip at any byte is refused or repaired only in the last record") {
    TempDir dir(TempDir::Fast());
    std::string good = "CNCLLOG1";
    for (const Entry& e : Sample()) {
        encode_record(e, good);
    }
    const auto all = Sample();
    const std::vector<Entry> all_but_last(all.begin(), all.end() - 1);
    std::size_t refused = 0;
    std::size_t repaired = 0;
    for (std::size_t offset = 0; offset < good.size(); ++offset) {
        // Every byte; one bit of it (rotating, so that every bit position of every field is
        // covered across neighbouring bytes), plus the whole byte inverted.
        for (const int mask : {1 << (offset % 8), 0xff}) {
            std::string bytes = good;
            bytes[offset] = static_cast<char>(bytes[offset] ^ mask);
            INFO("mask " << mask << " on byte " << offset);
            const auto recovered = RecoverBytes(dir.path, bytes);
            if (!recovered) {
                ++refused;
                continue;
            }
            // Never a silent loss: only the last record may go, and only a flip inside it.
            ++repaired;
            CHECK(offset >= RecordEnd(4));
            CHECK(*recovered == all_but_last);
        }
    }
    CHECK(refused + repaired == good.size() * 2);
    CHECK(refused > 0);
    CHECK(repaired > 0);
}

TEST_CASE("file storage: a crash between write and fsync (cut or zero-filled at every byte)") {
    TempDir dir(TempDir::Fast());
    std::string good = "CNCLLOG1";
    std::vector<std::size_t> ends;
    for (const Entry& e : Sample()) {
        encode_record(e, good);
        ends.push_back(good.size());
    }
    const auto all = Sample();
    for (std::size_t length = 0; length <= good.size(); ++length) {
        INFO("cut at byte " << length);
        std::size_t whole = 0;  // records entirely before the cut
        while (whole < ends.size() && ends[whole] <= length) {
            ++whole;
        }
        const std::vector<Entry> expect(all.begin(),
                                        all.begin() + static_cast<std::ptrdiff_t>(whole));
        const auto cut = RecoverBytes(dir.path, good.substr(0, length));
        REQUIRE(cut);
        CHECK(*cut == expect);
        CHECK(fs::file_size(dir.path / "log.dat") == (whole == 0 ? 8 : ends[whole - 1]));
        if (length < 8) {
            continue;  // records are appended only after the magic is durable
        }
        // The file size reached the disk but the data did not: zeroes from the cut on.
        const std::string zeroes = good.substr(0, length) + std::string(good.size() - length, '\0');
        std::size_t intact = 0;  // zeroes may rebuild a record exactly (a sync point is mostly 0)
        while (intact < ends.size() &&
               zeroes.compare(0, ends[intact], good, 0, ends[intact]) == 0) {
            ++intact;
        }
        const auto zeroed = RecoverBytes(dir.path, zeroes);
        REQUIRE(zeroed);
        CHECK(*zeroed ==
              std::vector<Entry>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(intact)));
    }
}

TEST_CASE("file storage: empty, torn-at-birth and foreign files") {
    TempDir dir;
    fs::create_directories(dir.path);
    const fs::path log = dir.path / "log.dat";
    SECTION("an empty file is a fresh log") {
        WriteFile(log, "");
        FileStorage s(dir.path, FsyncPolicy::Batched);
        Recovery r = s.recover();
        CHECK(r.log.entries.empty());
        CHECK(r.report.problem == TailProblem::None);
        CHECK(ReadFile(log) == "CNCLLOG1");
    }
    SECTION("a file torn inside its magic is a fresh log, reported") {
        WriteFile(log, "CNCL");
        FileStorage s(dir.path, FsyncPolicy::Batched);
        Recovery r = s.recover();
        CHECK(r.log.entries.empty());
        CHECK(r.report.problem == TailProblem::TornHeader);
        CHECK(r.report.truncated());
        CHECK(ReadFile(log) == "CNCLLOG1");
    }
    SECTION("a foreign file is refused and left alone") {
        WriteFile(log, "hello, world\n");
        FileStorage s(dir.path, FsyncPolicy::Batched);
        CHECK_THROWS_WITH(s.recover(), Catch::Contains("not a Conclave log file (bad magic)"));
        CHECK(ReadFile(log) == "hello, world\n");
    }
}

TEST_CASE("file storage: meta is replaced atomically; a damaged one is refused") {
    TempDir dir;
    {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        s.recover();
        s.write_meta(LogMeta{Term{5}, Lsn{Term{4}, 2}});
        s.write_meta(LogMeta{Term{6}, Lsn{Term{4}, 3}});
        CHECK_FALSE(fs::exists(dir.path / "log.meta.tmp"));
    }
    WriteFile(dir.path / "log.meta.tmp", "half-written");  // a crash between write and rename
    {
        FileStorage s(dir.path, FsyncPolicy::Batched);
        CHECK(s.recover().log.meta == LogMeta{Term{6}, Lsn{Term{4}, 3}});
        CHECK_FALSE(fs::exists(dir.path / "log.meta.tmp"));
    }
    std::string meta = ReadFile(dir.path / "log.meta");
    meta[10] ^= 0x01;
    WriteFile(dir.path / "log.meta", meta);
    FileStorage s(dir.path, FsyncPolicy::Batched);
    CHECK_THROWS_AS(s.recover(), CorruptLogError);
    CHECK(ReadFile(dir.path / "log.meta") == meta);
}

TEST_CASE("memory storage: a crash loses exactly what was not flushed") {
    MemoryStorage s(FsyncPolicy::Batched);
    s.append({StE(1, 0), StE(1, 1)});
    CHECK(s.flush() == Lsn{Term{1}, 1});
    s.append({StE(1, 2)});
    CHECK(s.durable_lsn() == Lsn{Term{1}, 1});
    s.write_meta(LogMeta{Term{2}, Lsn{Term{1}, 1}});
    s.crash();
    Recovery r = s.recover();
    CHECK(r.log.entries == std::vector<Entry>{StE(1, 0), StE(1, 1)});
    CHECK(r.log.meta.term == Term{2});

    MemoryStorage every(FsyncPolicy::EveryEntry);
    every.append({StE(1, 0)});
    every.crash();
    CHECK(every.recover().log.entries.size() == 1);

    MemoryStorage never(FsyncPolicy::Never);
    never.append({StE(1, 0)});
    CHECK(never.flush() == Lsn{Term{1}, 0});  // reported durable...
    never.crash();
    CHECK(never.recover().log.entries.empty());  // ...but lost by a power cut
}

TEST_CASE("file storage: a meta older than the last written is not written (threads may race)") {
    TempDir dir;
    FileStorage s(dir.path, FsyncPolicy::Batched);
    s.recover();
    s.write_meta(LogMeta{Term{3}, Lsn{Term{3}, 9}});
    const std::uint64_t fsyncs = s.fsync_count();
    s.write_meta(LogMeta{Term{3}, Lsn{Term{3}, 5}});  // a deferred commit point, late
    s.write_meta(LogMeta{Term{2}, Lsn{Term{3}, 9}});  // an older term
    CHECK(s.fsync_count() == fsyncs);
    FileStorage again(dir.path, FsyncPolicy::Batched);
    CHECK(again.recover().log.meta == LogMeta{Term{3}, Lsn{Term{3}, 9}});
    s.write_meta(LogMeta{Term{4}, Lsn{Term{3}, 9}});  // newer: written
    FileStorage third(dir.path, FsyncPolicy::Batched);
    CHECK(third.recover().log.meta.term == Term{4});
}
