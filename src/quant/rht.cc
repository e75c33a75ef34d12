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

namespace {

// out = After · H · Before · in / sqrt(r): the sign flips `before` and `after`
// (S1 then S2 forward, S2 then S1 inverse) around the Walsh-Hadamard transform.
template <bool (*before)(uint32_t), bool (*after)(uint32_t)>
void SignedFwht(const float* in, uint32_t r, float* out) {
  float t[kMaxBlock];
  for (uint32_t i = 0; i < r; ++i) t[i] = before(i) ? -in[i] : in[i];
  FwhtRef(t, r);
  const float k = InvSqrt(r);
  for (uint32_t i = 0; i < r; ++i) {
    float v = t[i] * k;
    out[i] = after(i) ? -v : v;
  }
}

}  // namespace

void ForwardRef(const float* x, uint32_t r, float* y) {
  SignedFwht<S1Negative, S2Negative>(x, r, y);
}

void InverseRef(const float* y, uint32_t r, float* x) {
  SignedFwht<S2Negative, S1Negative>(y, r, x);
}

}  // namespace pion::quant::rht
