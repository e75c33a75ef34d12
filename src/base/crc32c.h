// CRC32C (Castagnoli), the checksum of every WAL record and snapshot section.
// Runs of 512 bytes or more fold with VPCLMULQDQ on CPUs that have it (AVX-512;
// about 40 GB/s from L2 here, twice the crc32 loop); otherwise, and for the
// rest, the SSE4.2 crc32 instruction in three interleaved streams when the CPU
// has it (checked once), else a slicing-by-8 table (the reference both are
// tested against). Extend(0, data, n) == Value(data, n).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pion::crc32c {

uint32_t Extend(uint32_t crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

// Portable reference (table), exposed for tests.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace pion::crc32c
