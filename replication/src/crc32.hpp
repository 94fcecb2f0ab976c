// SPDX-License-Identifier: Apache-2.0
// CRC-32 of the log's files (IEEE 802.3, reflected polynomial 0xEDB88320, initial and final value
// 0xFFFFFFFF: the zlib/PNG one, the same as boost::crc_32_type): zlib's crc32_z, which works on
// several bytes at a time (Boost.CRC's table goes byte by byte). Internal to replication/.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>

namespace conclave::replication {

/// Accumulates the CRC of several pieces: process_bytes() each, then checksum().
class Crc32 {
  public:
    void process_bytes(const void* data, std::size_t size) {
        crc_ = ::crc32_z(crc_, static_cast<const Bytef*>(data), size);
    }
    std::uint32_t checksum() const { return static_cast<std::uint32_t>(crc_); }

  private:
    uLong crc_ = 0;  // zlib's initial value (it applies the 0xFFFFFFFF itself)
};

/// CRC of `size` bytes at `data`.
inline std::uint32_t crc32(const void* data, std::size_t size) {
    Crc32 crc;
    crc.process_bytes(data, size);
    return crc.checksum();
}

}  // namespace conclave::replication
