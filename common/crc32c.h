// CRC32C (Castagnoli), the checksum of stored records and index files; and
// the CRC-32 (IEEE 802.3) of version-1 model files, which are still read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hedgedb {

// CRC32C of n bytes, continuing from `crc` (0 to start).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);
// The table-driven fallback used where SSE4.2 is missing (tests compare both).
uint32_t Crc32cPortableForTest(const void* data, size_t n, uint32_t crc = 0);

// CRC-32 (IEEE 802.3, zlib's crc32) of n bytes, continuing from `crc` (0 to
// start). Only old files use it: a byte-wise table walk, no fast path.
uint32_t Crc32Ieee(const void* data, size_t n, uint32_t crc = 0);

}  // namespace hedgedb
