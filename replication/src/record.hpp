// SPDX-License-Identifier: Apache-2.0
// Encoding of one log entry as a file record (see FileStorage). Internal to replication/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "conclave/replication/entry.hpp"
#include "conclave/replication/storage.hpp"

namespace conclave::replication {

inline constexpr std::size_t kRecordHeaderBytes = 8;    // u32 length, u32 crc
inline constexpr std::size_t kRecordFixedPayload = 20;  // u64 term, u64 counter, u32 key length

/// Appends the record for `entry` to `out`.
void encode_record(const Entry& entry, std::string& out);

struct DecodedRecord {
    TailProblem problem = TailProblem::None;
    Entry entry;
    std::size_t bytes = 0;  // record size including its header, when problem == None
};

/// Decodes the record at the start of `data` (the rest of the file).
DecodedRecord decode_record(std::string_view data, std::uint32_t max_payload);

void put_u32(std::string& out, std::uint32_t v);
void put_u64(std::string& out, std::uint64_t v);
std::uint32_t get_u32(const char* p);
std::uint64_t get_u64(const char* p);

}  // namespace conclave::replication
