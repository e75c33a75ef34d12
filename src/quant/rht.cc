// Scalar reference of the randomized Hadamard transform (see rht.h).
#include "quant/rht.h"

namespace pion::quant::rht {

void FwhtRef(float* t, uint32_t r) {
  for (uint32_t h = 1; h < r; h *= 2) {
    for (uint32_t i = 0; i < r; i += 2 * h) {
      for (uint32_t j = i; j < i + h; ++j) {
        float a = t[j];
        float b = t[j + h];
        t[j] = a + b;
        t[j + h] = a - b;
      }
    }
  }
}

void ForwardRef(const float* x, uint32_t r, float* y) {
  float t[kMaxBlock];
  for (uint32_t i = 0; i < r; ++i) t[i] = S1Negative(i) ? -x[i] : x[i];
  FwhtRef(t, r);
  const float k = InvSqrt(r);
  for (uint32_t i = 0; i < r; ++i) {
    float v = t[i] * k;
    y[i] = S2Negative(i) ? -v : v;
  }
}

void InverseRef(const float* y, uint32_t r, float* x) {
  float t[kMaxBlock];
  for (uint32_t i = 0; i < r; ++i) t[i] = S2Negative(i) ? -y[i] : y[i];
  FwhtRef(t, r);
  const float k = InvSqrt(r);
  for (uint32_t i = 0; i < r; ++i) {
    float v = t[i] * k;
    x[i] = S1Negative(i) ? -v : v;
  }
}

}  // namespace pion::quant::rht
