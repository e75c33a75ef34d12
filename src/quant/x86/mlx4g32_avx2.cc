// AVX2/F16C mlx4g32 kernels, bit-identical to mlx4g32.cc. Encode: min/max per group,
// scale/bias rounded to fp16 by the shared scalar Mlx4g32Params, codes by vdivps +
// vroundps (RNE) + clamp, nibbles packed with vpmaddubsw. Decode: nibbles split with
// and/shift, re-interleaved with punpck{l,h}bw, then scale * q + bias (mul, add).
#include <immintrin.h>

#include "base/fp16.h"
#include "quant/kernels.h"
#include "quant/mlx4g32.h"
#include "quant/x86/avx2.h"
#include "quant/x86/avx2_util.h"

namespace pion::quant::x86 {

bool EncodeRowMlx4g32Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  uint8_t* scales = dst + Mlx4g32ScalesOffset(dim);
  uint8_t* biases = dst + Mlx4g32BiasesOffset(dim);
  __m256 bad = _mm256_setzero_ps();
  const __m256 zero = _mm256_setzero_ps(), fifteen = _mm256_set1_ps(15.0f);
  for (uint32_t g = 0; g < dim / 32; ++g) {
    const float* p = x + 32 * g;
    const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
    const __m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
    bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_or_ps(NonFiniteMask(v0), NonFiniteMask(v1)),
                                         _mm256_or_ps(NonFiniteMask(v2), NonFiniteMask(v3))));
    const float mn = HMin8(_mm256_min_ps(_mm256_min_ps(v0, v1), _mm256_min_ps(v2, v3)));
    const float mx = HMax8(_mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3)));
    uint16_t sh, bh;
    Mlx4g32Params(mn, mx, &sh, &bh);
    const float s = F16ToF32(sh);
    __m128i packed = _mm_setzero_si128();
    if (s == 0.0f) {
      sh = 0;
    } else {
      const __m256 vs = _mm256_set1_ps(s), vb = _mm256_set1_ps(F16ToF32(bh));
      auto code = [&](__m256 v) {
        __m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_sub_ps(v, vb), vs),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q = _mm256_min_ps(_mm256_max_ps(q, zero), fifteen);
        return _mm256_cvttps_epi32(q);
      };
      const __m256i bytes = PackBytes(code(v0), code(v1), code(v2), code(v3));
      const __m256i pairs = _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001));
      const __m256i nib = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0x08);
      packed = _mm256_castsi256_si128(nib);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * g), packed);
    StoreU16(scales + 2 * g, sh);
    StoreU16(biases + 2 * g, bh);
  }
  return _mm256_testz_ps(bad, bad);
}

void DecodeRowMlx4g32Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  const uint8_t* scales = src + Mlx4g32ScalesOffset(dim);
  const uint8_t* biases = src + Mlx4g32BiasesOffset(dim);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (uint32_t g = 0; g < dim / 32; ++g) {
    const __m256 vs = _mm256_set1_ps(F16ToF32(LoadU16(scales + 2 * g)));
    const __m256 vb = _mm256_set1_ps(F16ToF32(LoadU16(biases + 2 * g)));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * g));
    const __m128i lo = _mm_and_si128(b, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    const __m128i e0 = _mm_unpacklo_epi8(lo, hi);  // elements 0..15
    const __m128i e1 = _mm_unpackhi_epi8(lo, hi);  // elements 16..31
    float* o = dst + 32 * g;
    auto out = [&](__m128i q8, float* p) {
      __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8));
      _mm256_storeu_ps(p, _mm256_add_ps(_mm256_mul_ps(vs, q), vb));
    };
    out(e0, o);
    out(_mm_srli_si128(e0, 8), o + 8);
    out(e1, o + 16);
    out(_mm_srli_si128(e1, 8), o + 24);
  }
}

}  // namespace pion::quant::x86
