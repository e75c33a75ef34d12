// fp16: IEEE binary16 per value, round-to-nearest-even (docs/quant_formats.md §2.1).
// Layout D x binary16, little-endian. Overflow -> +-inf, NaN kept: the format never
// refuses a row. Decoding is exact. Any dim is valid. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pion::quant {

constexpr size_t Fp16RowBytes(uint32_t dim) { return 2 * static_cast<size_t>(dim); }

bool EncodeRowFp16Ref(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowFp16Ref(const uint8_t* src, uint32_t dim, float* dst);

}  // namespace pion::quant
