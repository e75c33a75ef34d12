// Scalar reference of fp8 E4M3FN with per-32 fp16 scales (see fp8.h).
#include "quant/fp8.h"

#include <cmath>

#include "base/fp16.h"
#include "quant/kernels.h"

namespace pion::quant {

uint16_t Fp8ScaleBits(float a) {
  if (a == 0.0f) return 0x3C00;  // 1.0
  float s = a / 448.0f;
  if (s > kF16Max) s = kF16Max;
  uint16_t h = F32ToF16(s);
  return h == 0 ? uint16_t{1} : h;  // underflow -> smallest subnormal 2^-24
}

float E4M3ToF32(uint8_t c) {
  // fp16 word (c & 0x80) << 8 | (c & 0x7F) << 7 is the E4M3 value times 2^-8.
  const uint16_t h = static_cast<uint16_t>(((c & 0x80u) << 8) | ((c & 0x7Fu) << 7));
  return F16ToF32(h) * 256.0f;
}

bool EncodeRowFp8Ref(const float* x, uint32_t dim, uint8_t* dst) {
  for (uint32_t i = 0; i < dim; ++i) {
    if (!IsFinite(x[i])) return false;
  }
  float acc[8] = {};
  uint8_t* block = dst + kFp8HeaderBytes;
  for (uint32_t b0 = 0; b0 < dim; b0 += 32, block += sizeof(BlockFp8)) {
    float a = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float ax = std::fabs(x[b0 + i]);
      a = ax > a ? ax : a;
    }
    const uint16_t sh = Fp8ScaleBits(a);
    const float s = F16ToF32(sh);
    StoreU16(block, sh);
    for (int i = 0; i < 32; ++i) {
      const uint8_t c = E4M3FromF32(x[b0 + i] / s);
      block[2 + i] = c;
      const float d = E4M3ToF32(c) * s;
      acc[i % 8] += d * d;
    }
  }
  StoreF32(dst, ReduceLanes8(acc));
  return true;
}

void DecodeRowFp8Ref(const uint8_t* src, uint32_t dim, float* dst) {
  const uint8_t* block = src + kFp8HeaderBytes;
  for (uint32_t b0 = 0; b0 < dim; b0 += 32, block += sizeof(BlockFp8)) {
    const float s = F16ToF32(LoadU16(block));
    for (int i = 0; i < 32; ++i) dst[b0 + i] = E4M3ToF32(block[2 + i]) * s;
  }
}

}  // namespace pion::quant
