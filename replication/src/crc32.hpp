// SPDX-License-Identifier: Apache-2.0
// CRC-32 of the log's files (IEEE 802.3, reflected polynomial 0xEDB88320, initial and final value
// 0xFFFFFFFF: the zlib/PNG one): Boost.CRC. Internal to replication/.
#pragma once

#include <boost/crc.hpp>
#include <cstddef>
#include <cstdint>

namespace conclave::replication {

/// Accumulates the CRC of several pieces: process_bytes() each, then checksum().
using Crc32 = boost::crc_32_type;

/// CRC of `size` bytes at `data`.
inline std::uint32_t crc32(const void* data, std::size_t size) {
    Crc32 crc;
    crc.process_bytes(data, size);
    return crc.checksum();
}

}  // namespace conclave::replication
