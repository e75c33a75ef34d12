// fp8: OCP E4M3FN with one fp16 scale per 32 values (docs/quant_formats.md §2.2).
// Row layout: [f32 header][BlockFp8 x D/32]; header = sum of squares of the decoded
// row (fixed 8-lane order, kernels.h), informational only. Per block:
//   a = max|x|; s = fp16(min(a / 448, 65504)); a == 0 -> s = 1; s rounded to 0 -> s = 2^-24
//   code_i = E4M3FN(x_i / s): RNE, saturating to +-448 (0x7E/0xFE), never NaN
//   decode: E4M3FN(code) * s
// Needs dim % 32 == 0. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pion::quant {

struct BlockFp8 {
  uint16_t scale;     // fp16
  uint8_t codes[32];  // E4M3FN
};
static_assert(sizeof(BlockFp8) == 34);

inline constexpr size_t kFp8HeaderBytes = 4;
constexpr size_t Fp8RowBytes(uint32_t dim) {
  return kFp8HeaderBytes + (dim / 32) * sizeof(BlockFp8);
}

// fp16 bits of the block scale for block absmax `a` (finite, >= 0).
uint16_t Fp8ScaleBits(float a);

// E4M3FN code of y (finite): round to nearest even, saturate at 448, keep the sign
// (so -0.0f -> 0x80). Subnormal range |y| < 2^-6: m = rint(|y| * 2^9). Normal range:
// round the fp32 mantissa to 3 bits, rebias the exponent 127 -> 7, clamp to 0x7E.
inline uint8_t E4M3FromF32(float y) {
  uint32_t b;
  std::memcpy(&b, &y, 4);
  const uint32_t sign = (b >> 24) & 0x80u;
  const uint32_t ab = b & 0x7FFFFFFFu;
  uint32_t code;
  if (ab < 0x3C800000u) {  // |y| < 2^-6
    float ay;
    std::memcpy(&ay, &ab, 4);
    // ay * 512 < 8 is exact; adding 2^23 rounds it to an integer (RNE).
    float m = (ay * 512.0f + 8388608.0f) - 8388608.0f;
    code = static_cast<uint32_t>(m);
  } else {
    uint32_t r = (ab + 0x7FFFFu + ((ab >> 20) & 1u)) >> 20;
    code = r - (120u << 3);
    code = code > 0x7Eu ? 0x7Eu : code;
  }
  return static_cast<uint8_t>(code | sign);
}

// Exact value of an E4M3FN code (0x7F/0xFF, the NaNs, are never produced; they decode
// as the E4M3 bit pattern would through fp16, i.e. 480 * sign).
float E4M3ToF32(uint8_t c);

bool EncodeRowFp8Ref(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowFp8Ref(const uint8_t* src, uint32_t dim, float* dst);

}  // namespace pion::quant
