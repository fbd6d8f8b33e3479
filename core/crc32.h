#pragma once
// CRC-32 (the IEEE polynomial of zlib, PNG and gzip), for files that must notice corruption.
#include <cstddef>
#include <cstdint>

namespace kiln {

// Extends `crc` (the checksum of the bytes before, 0 for none) over n more bytes:
// crc32(crc32(0, a, n), b, m) == crc32 of a followed by b.
uint32_t crc32(uint32_t crc, const void* data, size_t n);

}  // namespace kiln
