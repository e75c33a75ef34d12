// AVX2 int8 kernels (bit-identical to int8.cc): absmax with vmaxps, codes with
// vcvtps2dq (RNE under the default MXCSR) and saturating packs, decode with
// vpmovsxbd + vcvtdq2ps + vmulps.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/int8.h"
#include "quant/kernels.h"
#include "quant/x86/avx2.h"
#include "quant/x86/avx2_util.h"

namespace pion::quant::x86 {

bool EncodeRowInt8Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  uint32_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    m0 = _mm256_max_epi32(m0, AbsBits(_mm256_loadu_ps(x + i)));
    m1 = _mm256_max_epi32(m1, AbsBits(_mm256_loadu_ps(x + i + 8)));
    m2 = _mm256_max_epi32(m2, AbsBits(_mm256_loadu_ps(x + i + 16)));
    m3 = _mm256_max_epi32(m3, AbsBits(_mm256_loadu_ps(x + i + 24)));
  }
  for (; i + 8 <= dim; i += 8) m0 = _mm256_max_epi32(m0, AbsBits(_mm256_loadu_ps(x + i)));
  uint32_t abits = HMaxEpi32(_mm256_max_epi32(_mm256_max_epi32(m0, m1), _mm256_max_epi32(m2, m3)));
  if (abits >= kInfBits) return false;
  float a;
  std::memcpy(&a, &abits, 4);
  // x may sit at any address (kernels.h): the tails read it through memcpy.
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(x);
  for (; i < dim; ++i) {
    const float xi = LoadF32(xb + 4 * i);
    if (!IsFinite(xi)) return false;
    const float ax = std::fabs(xi);
    a = ax > a ? ax : a;
  }
  int8_t* q = reinterpret_cast<int8_t*>(dst + sizeof(RowHeaderInt8));
  if (a == 0.0f) {
    StoreF32(dst, 0.0f);
    for (uint32_t k = 0; k < dim; ++k) q[k] = 0;
    return true;
  }
  const float inv = 127.0f / a;
  if (!IsFinite(inv)) return EncodeRowInt8Ref(x, dim, dst);  // tiny rows: rare path
  StoreF32(dst, a / 127.0f);
  const __m256 vinv = _mm256_set1_ps(inv);
  // No clamp needed: |x * inv| <= RN(a * RN(127 / a)) <= 127 + 2^-17, which rints to
  // at most 127 (the reference's clamp never fires on this path).
  auto code = [&](const float* p) {
    return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p), vinv));
  };
  i = 0;
  for (; i + 32 <= dim; i += 32) {
    __m256i ab = _mm256_packs_epi32(code(x + i), code(x + i + 8));
    __m256i cd = _mm256_packs_epi32(code(x + i + 16), code(x + i + 24));
    __m256i b = _mm256_packs_epi16(ab, cd);
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), b);
  }
  for (; i < dim; ++i) {
    float v = std::nearbyint(LoadF32(xb + 4 * i) * inv);
    v = v < -127.0f ? -127.0f : v;
    v = v > 127.0f ? 127.0f : v;
    q[i] = static_cast<int8_t>(v);
  }
  return true;
}

void DecodeRowInt8Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  const float scale = LoadF32(src);
  const int8_t* q = reinterpret_cast<const int8_t*>(src + sizeof(RowHeaderInt8));
  const __m256 vs = _mm256_set1_ps(scale);
  uint32_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i + 16));
    __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(a));
    __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(a, 8)));
    __m256 f2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    __m256 f3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(f0, vs));
    _mm256_storeu_ps(dst + i + 8, _mm256_mul_ps(f1, vs));
    _mm256_storeu_ps(dst + i + 16, _mm256_mul_ps(f2, vs));
    _mm256_storeu_ps(dst + i + 24, _mm256_mul_ps(f3, vs));
  }
  for (; i + 8 <= dim; i += 8) {
    __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(a)), vs));
  }
  uint8_t* db = reinterpret_cast<uint8_t*>(dst);  // any address, as x above
  for (; i < dim; ++i) StoreF32(db + 4 * i, static_cast<float>(q[i]) * scale);
}

}  // namespace pion::quant::x86
