// int8: symmetric per-row int8 (docs/quant_formats.md §2.3). Layout [f32 scale][D x int8].
//   a = max|x|; a == 0 -> scale 0, codes 0
//   inv = 127.0f / a; scale = a / 127.0f                  (fp32, in this order)
//   q_i = clamp(rint(x_i * inv), -127, 127)               (RNE), decode q_i * scale
// If 127/a overflows (a < ~3.7e-37) the row is pre-multiplied by 2^64 (exact) for code
// selection: inv = 127 / (a * 2^64), q_i = rint((x_i * 2^64) * inv); scale stays a/127.
// Any dim is valid. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pion::quant {

struct RowHeaderInt8 {
  float scale;
};
static_assert(sizeof(RowHeaderInt8) == 4);

constexpr size_t Int8RowBytes(uint32_t dim) { return sizeof(RowHeaderInt8) + dim; }

inline constexpr float kInt8TinyUp = 0x1p64f;

bool EncodeRowInt8Ref(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowInt8Ref(const uint8_t* src, uint32_t dim, float* dst);

}  // namespace pion::quant
