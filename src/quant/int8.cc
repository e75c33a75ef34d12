// Scalar reference of int8 (see int8.h).
#include "quant/int8.h"

#include <cmath>

#include "quant/kernels.h"

namespace pion::quant {

bool EncodeRowInt8Ref(const float* x, uint32_t dim, uint8_t* dst) {
  float a = 0.0f;
  for (uint32_t i = 0; i < dim; ++i) {
    if (!IsFinite(x[i])) return false;
    const float ax = std::fabs(x[i]);
    a = ax > a ? ax : a;
  }
  int8_t* q = reinterpret_cast<int8_t*>(dst + sizeof(RowHeaderInt8));
  if (a == 0.0f) {
    StoreF32(dst, 0.0f);
    for (uint32_t i = 0; i < dim; ++i) q[i] = 0;
    return true;
  }
  float inv = 127.0f / a;
  const float scale = a / 127.0f;
  float pre = 1.0f;
  if (!IsFinite(inv)) {
    pre = kInt8TinyUp;
    inv = 127.0f / (a * pre);
  }
  StoreF32(dst, scale);
  for (uint32_t i = 0; i < dim; ++i) {
    float v = std::nearbyint((x[i] * pre) * inv);
    v = v < -127.0f ? -127.0f : v;
    v = v > 127.0f ? 127.0f : v;
    q[i] = static_cast<int8_t>(v);
  }
  return true;
}

void DecodeRowInt8Ref(const uint8_t* src, uint32_t dim, float* dst) {
  const float scale = LoadF32(src);
  const int8_t* q = reinterpret_cast<const int8_t*>(src + sizeof(RowHeaderInt8));
  for (uint32_t i = 0; i < dim; ++i) dst[i] = static_cast<float>(q[i]) * scale;
}

}  // namespace pion::quant
