// mlx4g32: MLX's affine 4-bit layout with groups of 32 (docs/quant_formats.md §2.4).
// Row layout (MLX quantize(bits=4, group_size=32) of one row):
//   [D/8 x u32 codes][D/32 x fp16 scale][D/32 x fp16 bias]
// element j of group g = bits [4*(j%8), 4*(j%8)+4) of word 4g + j/8 (byte k holds
// element 2k in its low nibble). Min-bias encoder, per group:
//   scale = fp16(min((max - min) / 15, 65504)); bias = fp16(clamp(min + 0.0f, -65504, 65504))
//   scale == 0 -> codes 0 (group decodes to bias); else
//   q = clamp(rint((x - bias) / scale), 0, 15)   with scale, bias as rounded to fp16
//   decode: scale * q + bias                      (multiply, then add; no FMA)
// Needs dim % 32 == 0. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pion::quant {

struct GroupCodesMlx4g32 {
  uint32_t words[4];  // the 32 codes of one group
};
static_assert(sizeof(GroupCodesMlx4g32) == 16);

constexpr size_t Mlx4g32RowBytes(uint32_t dim) {
  return (dim / 32) * (sizeof(GroupCodesMlx4g32) + 2 * sizeof(uint16_t));
}
constexpr size_t Mlx4g32ScalesOffset(uint32_t dim) { return dim / 2; }
constexpr size_t Mlx4g32BiasesOffset(uint32_t dim) { return dim / 2 + dim / 16; }

// fp16 bits of (scale, bias) for a group with the given min and max (finite).
void Mlx4g32Params(float mn, float mx, uint16_t* scale, uint16_t* bias);

bool EncodeRowMlx4g32Ref(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowMlx4g32Ref(const uint8_t* src, uint32_t dim, float* dst);

}  // namespace pion::quant
