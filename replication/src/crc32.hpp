// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), table-driven. Internal to replication/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conclave::replication {

/// CRC of `size` bytes at `data`, continuing from `crc` (0 to start).
std::uint32_t crc32(const void* data, std::size_t size, std::uint32_t crc = 0);

}  // namespace conclave::replication
