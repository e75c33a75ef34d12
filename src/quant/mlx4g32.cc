// Scalar reference of mlx4g32 (see mlx4g32.h).
#include "quant/mlx4g32.h"

#include <cmath>

#include "base/fp16.h"
#include "quant/kernels.h"

namespace pion::quant {

void Mlx4g32Params(float mn, float mx, uint16_t* scale, uint16_t* bias) {
  float s = (mx - mn) / 15.0f;
  if (!(s <= kF16Max)) s = kF16Max;  // also inf when max - min overflows
  // + 0.0f turns a -0.0 minimum into +0.0: which zero a min() returns depends on the
  // operand order (vminps returns its second operand), so the sign is canonicalised.
  float b = mn + 0.0f;
  b = b < -kF16Max ? -kF16Max : b;
  b = b > kF16Max ? kF16Max : b;
  *scale = F32ToF16(s);
  *bias = F32ToF16(b);
}

bool EncodeRowMlx4g32Ref(const float* x, uint32_t dim, uint8_t* dst) {
  for (uint32_t i = 0; i < dim; ++i) {
    if (!IsFinite(x[i])) return false;
  }
  uint8_t* scales = dst + Mlx4g32ScalesOffset(dim);
  uint8_t* biases = dst + Mlx4g32BiasesOffset(dim);
  for (uint32_t g = 0; g < dim / 32; ++g) {
    const float* v = x + 32 * g;
    float mn = v[0], mx = v[0];
    for (int i = 1; i < 32; ++i) {
      mn = v[i] < mn ? v[i] : mn;
      mx = v[i] > mx ? v[i] : mx;
    }
    uint16_t sh, bh;
    Mlx4g32Params(mn, mx, &sh, &bh);
    const float s = F16ToF32(sh);
    const float b = F16ToF32(bh);
    uint8_t q[32] = {};
    if (s == 0.0f) {
      sh = 0;
    } else {
      for (int i = 0; i < 32; ++i) {
        float f = std::nearbyint((v[i] - b) / s);
        f = f < 0.0f ? 0.0f : f;
        f = f > 15.0f ? 15.0f : f;
        q[i] = static_cast<uint8_t>(f);
      }
    }
    for (int k = 0; k < 16; ++k)
      dst[16 * g + k] = static_cast<uint8_t>(q[2 * k] | (q[2 * k + 1] << 4));
    StoreU16(scales + 2 * g, sh);
    StoreU16(biases + 2 * g, bh);
  }
  return true;
}

void DecodeRowMlx4g32Ref(const uint8_t* src, uint32_t dim, float* dst) {
  const uint8_t* scales = src + Mlx4g32ScalesOffset(dim);
  const uint8_t* biases = src + Mlx4g32BiasesOffset(dim);
  for (uint32_t g = 0; g < dim / 32; ++g) {
    const float s = F16ToF32(LoadU16(scales + 2 * g));
    const float b = F16ToF32(LoadU16(biases + 2 * g));
    for (int i = 0; i < 32; ++i) {
      const uint32_t q = (src[16 * g + i / 2] >> (4 * (i % 2))) & 0xF;
      dst[32 * g + i] = s * static_cast<float>(q) + b;
    }
  }
}

}  // namespace pion::quant
