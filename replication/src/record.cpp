// SPDX-License-Identifier: Apache-2.0
#include "record.hpp"
#include "crc32.hpp"

namespace conclave::replication {

namespace {

/// `v` little-endian into `out[0..N)`.
template <std::size_t N, class T>
void store_le(char* out, T v) {
    for (std::size_t i = 0; i < N; ++i) {
        out[i] = static_cast<char>((v >> (8 * i)) & 0xFFU);
    }
}

}  // namespace

void put_u32(std::string& out, std::uint32_t v) {
    char bytes[4];
    store_le<4>(bytes, v);
    out.append(bytes, 4);
}

void put_u64(std::string& out, std::uint64_t v) {
    char bytes[8];
    store_le<8>(bytes, v);
    out.append(bytes, 8);
}

std::uint32_t get_u32(const char* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) {
        v = (v << 8) | static_cast<unsigned char>(p[i]);
    }
    return v;
}

std::uint64_t get_u64(const char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) {
        v = (v << 8) | static_cast<unsigned char>(p[i]);
    }
    return v;
}

void encode_record(const Entry& entry, std::string& out) {
    const std::size_t start = out.size();
    const auto payload_bytes =
        static_cast<std::uint32_t>(kRecordFixedPayload + entry.key.size() + entry.value.size());
    put_u32(out, payload_bytes);
    put_u32(out, 0);  // crc, filled below
    put_u64(out, entry.lsn.term.value);
    put_u64(out, entry.lsn.counter);
    put_u32(out, static_cast<std::uint32_t>(entry.key.size()));
    out += entry.key;
    out += entry.value;
    Crc32 crc;  // over the length field and the payload
    crc.process_bytes(out.data() + start, 4);
    crc.process_bytes(out.data() + start + kRecordHeaderBytes, payload_bytes);
    store_le<4>(out.data() + start + 4, crc.checksum());
}

DecodedRecord decode_record(std::string_view data, std::uint32_t max_payload) {
    DecodedRecord r;
    if (data.size() < kRecordHeaderBytes) {
        r.problem = TailProblem::TornHeader;
        return r;
    }
    const std::uint32_t payload_bytes = get_u32(data.data());
    if (payload_bytes < kRecordFixedPayload || payload_bytes > max_payload) {
        r.problem = TailProblem::BadLength;
        return r;
    }
    if (data.size() - kRecordHeaderBytes < payload_bytes) {
        r.problem = TailProblem::TornRecord;
        return r;
    }
    const char* payload = data.data() + kRecordHeaderBytes;
    Crc32 crc;
    crc.process_bytes(data.data(), 4);
    crc.process_bytes(payload, payload_bytes);
    if (crc.checksum() != get_u32(data.data() + 4)) {
        r.problem = TailProblem::BadCrc;
        return r;
    }
    const std::uint32_t key_bytes = get_u32(payload + 16);
    if (key_bytes > payload_bytes - kRecordFixedPayload) {
        r.problem = TailProblem::Malformed;
        return r;
    }
    r.entry.lsn = Lsn{Term{get_u64(payload)}, get_u64(payload + 8)};
    r.entry.key.assign(payload + kRecordFixedPayload, key_bytes);
    r.entry.value.assign(payload + kRecordFixedPayload + key_bytes,
                         payload_bytes - kRecordFixedPayload - key_bytes);
    if (r.entry.lsn.term.value == 0 || is_sync_point(r.entry) != r.entry.key.empty()) {
        r.problem = TailProblem::Malformed;
        return r;
    }
    r.bytes = kRecordHeaderBytes + payload_bytes;
    return r;
}

std::uint32_t snapshot_crc(std::uint32_t crc, const Entry& e) {
    std::string head;
    head.reserve(32);
    put_u32(head, crc);
    put_u64(head, e.lsn.term.value);
    put_u64(head, e.lsn.counter);
    put_u32(head, static_cast<std::uint32_t>(e.key.size()));
    put_u32(head, static_cast<std::uint32_t>(e.value.size()));
    Crc32 next;
    next.process_bytes(head.data(), head.size());
    next.process_bytes(e.key.data(), e.key.size());
    next.process_bytes(e.value.data(), e.value.size());
    return next.checksum();
}

}  // namespace conclave::replication
