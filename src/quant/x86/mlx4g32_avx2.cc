// AVX2/F16C mlx4g32 kernels, bit-identical to mlx4g32.cc. Encode: min/max per group,
// scale/bias rounded to fp16 by the shared scalar Mlx4g32Params, codes by vdivps +
// clamp + vcvtps2dq (RNE), nibbles packed with vpmaddubsw. Decode: nibbles split with
// and/shift, re-interleaved with punpck{l,h}bw, then scale * q + bias (mul, add).
#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "quant/format.h"
#include "quant/kernels.h"
#include "quant/mlx4g32.h"
#include "quant/x86/avx2.h"
#include "quant/x86/avx2_util.h"

namespace pion::quant::x86 {

bool EncodeRowMlx4g32Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  constexpr uint32_t kMaxGroups = kMaxDim / 32 + 8;
  alignas(32) float gmin[kMaxGroups], gmax[kMaxGroups], sval[kMaxGroups], bval[kMaxGroups];
  alignas(32) uint16_t sbits[kMaxGroups], bbits[kMaxGroups];
  const uint32_t ng = dim / 32;
  // Pass 1: group min/max and the non-finite check.
  __m256i all = _mm256_setzero_si256();
  for (uint32_t g = 0; g < ng; ++g) {
    const float* p = x + 32 * g;
    const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
    const __m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
    all = _mm256_max_epi32(all, _mm256_max_epi32(_mm256_max_epi32(AbsBits(v0), AbsBits(v1)),
                                                 _mm256_max_epi32(AbsBits(v2), AbsBits(v3))));
    gmin[g] = HMin8(_mm256_min_ps(_mm256_min_ps(v0, v1), _mm256_min_ps(v2, v3)));
    gmax[g] = HMax8(_mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3)));
  }
  if (HMaxEpi32(all) >= kInfBits) return false;
  for (uint32_t g = ng; g % 8 != 0; ++g) gmin[g] = gmax[g] = 0.0f;
  // Pass 2: eight groups' (scale, bias) at a time, exactly Mlx4g32Params.
  const __m256 fmax = _mm256_set1_ps(kF16Max), fmin = _mm256_set1_ps(-kF16Max);
  for (uint32_t g = 0; g < ng; g += 8) {
    const __m256 mn = _mm256_load_ps(gmin + g), mx = _mm256_load_ps(gmax + g);
    const __m256 s =
        _mm256_min_ps(_mm256_div_ps(_mm256_sub_ps(mx, mn), _mm256_set1_ps(15.0f)), fmax);
    const __m256 b =
        _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(mn, _mm256_setzero_ps()), fmin), fmax);
    __m128i sh = _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT);
    const __m128i bh = _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT);
    const __m256 sf = _mm256_cvtph_ps(sh);
    const __m256i z = _mm256_castps_si256(_mm256_cmp_ps(sf, _mm256_setzero_ps(), _CMP_EQ_OQ));
    sh = _mm_andnot_si128(
        _mm_packs_epi32(_mm256_castsi256_si128(z), _mm256_extracti128_si256(z, 1)), sh);
    _mm_store_si128(reinterpret_cast<__m128i*>(sbits + g), sh);
    _mm_store_si128(reinterpret_cast<__m128i*>(bbits + g), bh);
    _mm256_store_ps(sval + g, sf);
    _mm256_store_ps(bval + g, _mm256_cvtph_ps(bh));
  }
  std::memcpy(dst + Mlx4g32ScalesOffset(dim), sbits, 2 * ng);
  std::memcpy(dst + Mlx4g32BiasesOffset(dim), bbits, 2 * ng);
  // Pass 3: codes.
  const __m256 zero = _mm256_setzero_ps(), fifteen = _mm256_set1_ps(15.0f);
  for (uint32_t g = 0; g < ng; ++g) {
    const float* p = x + 32 * g;
    __m128i packed = _mm_setzero_si128();
    if (sval[g] != 0.0f) {
      const __m256 vs = _mm256_set1_ps(sval[g]), vb = _mm256_set1_ps(bval[g]);
      // clamp(rint(v), 0, 15) == rint(clamp(v, 0, 15)) for integer bounds, and
      // vcvtps2dq rounds to nearest even, so no separate vroundps.
      auto code = [&](const float* q) {
        const __m256 v = _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(q), vb), vs);
        return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, zero), fifteen));
      };
      const __m256i bytes = PackBytes(code(p), code(p + 8), code(p + 16), code(p + 24));
      const __m256i pairs = _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001));
      packed =
          _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0x08));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * g), packed);
  }
  return true;
}

namespace {
template <bool kF16>
void DecodeRow(const uint8_t* src, uint32_t dim, void* dst) {
  const uint8_t* scales = src + Mlx4g32ScalesOffset(dim);
  const uint8_t* biases = src + Mlx4g32BiasesOffset(dim);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (uint32_t g = 0; g < dim / 32; ++g) {
    const __m256 vs = _mm256_set1_ps(_cvtsh_ss(LoadU16(scales + 2 * g)));
    const __m256 vb = _mm256_set1_ps(_cvtsh_ss(LoadU16(biases + 2 * g)));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * g));
    const __m128i lo = _mm_and_si128(b, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    const __m128i e0 = _mm_unpacklo_epi8(lo, hi);  // elements 0..15
    const __m128i e1 = _mm_unpackhi_epi8(lo, hi);  // elements 16..31
    const uint32_t o = 32 * g;
    auto out = [&](__m128i q8, uint32_t at) {
      __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8));
      StoreRow8<kF16>(dst, at, _mm256_add_ps(_mm256_mul_ps(vs, q), vb));
    };
    out(e0, o);
    out(_mm_srli_si128(e0, 8), o + 8);
    out(e1, o + 16);
    out(_mm_srli_si128(e1, 8), o + 24);
  }
}
}  // namespace

void DecodeRowMlx4g32Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<false>(src, dim, dst);
}
void DecodeRowF16Mlx4g32Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  DecodeRow<true>(src, dim, dst);
}

}  // namespace pion::quant::x86
