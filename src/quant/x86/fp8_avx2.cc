// AVX2/F16C fp8 (E4M3FN, per-32 fp16 scale) kernels, bit-identical to fp8.cc. Encode:
// block scales eight at a time, vdivps by the scale, RNE to the E4M3 grid by a
// magic-number add (see pass 3), codes read off an exact fp16 conversion.
// Decode: (c & 0x80) << 8 | (c & 0x7F) << 7 is an fp16 equal to the E4M3 value times
// 2^-8, so one vcvtph2ps and one multiply by 256 * scale (exact) per 8 values.
#include <immintrin.h>

#include "base/fp16.h"
#include "quant/format.h"
#include "quant/fp8.h"
#include "quant/kernels.h"
#include "quant/x86/avx2.h"
#include "quant/x86/avx2_util.h"

namespace pion::quant::x86 {
namespace {

// 16 codes (bytes) -> 16 fp16 words holding E4M3 * 2^-8.
inline __m256i CodesToHalf(__m128i c) {
  const __m256i w = _mm256_cvtepu8_epi16(c);
  const __m256i s = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8);
  const __m256i m = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7F)), 7);
  return _mm256_or_si256(s, m);
}

}  // namespace

bool EncodeRowFp8Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  // Pass 1: block absmax (as bits) and the non-finite check.
  constexpr uint32_t kMaxBlocks = kMaxDim / 32 + 8;
  alignas(32) uint32_t amax[kMaxBlocks];
  alignas(32) uint16_t sbits[kMaxBlocks];
  alignas(32) float sval[kMaxBlocks];
  const uint32_t nb = dim / 32;
  __m256i all = _mm256_setzero_si256();
  for (uint32_t b = 0; b < nb; ++b) {
    const float* p = x + 32 * b;
    const __m256i m = _mm256_max_epi32(
        _mm256_max_epi32(AbsBits(_mm256_loadu_ps(p)), AbsBits(_mm256_loadu_ps(p + 8))),
        _mm256_max_epi32(AbsBits(_mm256_loadu_ps(p + 16)), AbsBits(_mm256_loadu_ps(p + 24))));
    all = _mm256_max_epi32(all, m);
    amax[b] = HMaxEpi32(m);
  }
  if (HMaxEpi32(all) >= kInfBits) return false;
  for (uint32_t b = nb; b % 8 != 0; ++b) amax[b] = 0;
  // Pass 2: eight block scales at a time, exactly Fp8ScaleBits.
  for (uint32_t b = 0; b < nb; b += 8) {
    const __m256 a = _mm256_load_ps(reinterpret_cast<const float*>(amax + b));
    const __m256 s =
        _mm256_min_ps(_mm256_div_ps(a, _mm256_set1_ps(448.0f)), _mm256_set1_ps(kF16Max));
    __m128i h = _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT);
    h = _mm_or_si128(h, _mm_and_si128(_mm_cmpeq_epi16(h, _mm_setzero_si128()), _mm_set1_epi16(1)));
    const __m256i az = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_EQ_OQ));
    const __m128i az16 =
        _mm_packs_epi32(_mm256_castsi256_si128(az), _mm256_extracti128_si256(az, 1));
    h = _mm_blendv_epi8(h, _mm_set1_epi16(0x3C00), az16);
    _mm_store_si128(reinterpret_cast<__m128i*>(sbits + b), h);
    _mm256_store_ps(sval + b, _mm256_cvtph_ps(h));
  }
  // Pass 3: codes and the header. Rounding |y| to the E4M3 grid is one add and one
  // subtract of M = 2^(max(e, -6) + 20) (e = exponent of |y|): the sum's ulp is the grid
  // step 2^(e-3) (2^-9 for subnormals), so the FPU does the RNE. |y| is capped at 1000
  // first (anything >= 464 saturates to 448 anyway, and M must not overflow). The
  // rounded value times 2^-8 is exact in fp16, whose bits are then code << 7.
  __m256 acc = _mm256_setzero_ps();
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  uint8_t* block = dst + kFp8HeaderBytes;
  for (uint32_t b = 0; b < nb; ++b, block += sizeof(BlockFp8)) {
    const float* p = x + 32 * b;
    const __m256 vs = _mm256_set1_ps(sval[b]);
    __m128i h[4];
    for (int q = 0; q < 4; ++q) {
      const __m256 y = _mm256_div_ps(_mm256_loadu_ps(p + 8 * q), vs);
      const __m256 ab = _mm256_min_ps(_mm256_andnot_ps(sign_mask, y), _mm256_set1_ps(1000.0f));
      const __m256i e =
          _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(ab), _mm256_set1_epi32(0x7F800000)),
                           _mm256_set1_epi32(0x3C800000));
      const __m256 m = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(20 << 23)));
      const __m256 yr =
          _mm256_min_ps(_mm256_sub_ps(_mm256_add_ps(ab, m), m), _mm256_set1_ps(448.0f));
      const __m256 d = _mm256_mul_ps(yr, vs);  // |decoded value|
      acc = _mm256_add_ps(acc, _mm256_mul_ps(d, d));
      const __m256 signed_yr = _mm256_or_ps(yr, _mm256_and_ps(y, sign_mask));
      h[q] = _mm256_cvtps_ph(_mm256_mul_ps(signed_yr, _mm256_set1_ps(0x1p-8f)),
                             _MM_FROUND_TO_NEAREST_INT);
    }
    auto to_codes = [](__m128i lo, __m128i hi) {  // 16 fp16 words -> 16 codes (in u16)
      const __m256i w = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
      return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w, 7), _mm256_set1_epi16(0x7F)),
                             _mm256_and_si256(_mm256_srli_epi16(w, 8), _mm256_set1_epi16(0x80)));
    };
    const __m256i codes = _mm256_permute4x64_epi64(
        _mm256_packus_epi16(to_codes(h[0], h[1]), to_codes(h[2], h[3])), 0xD8);
    StoreU16(block, sbits[b]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + 2), codes);
  }
  StoreF32(dst, HSum8(acc));
  return true;
}

namespace {
template <bool kF16>
void DecodeRow(const uint8_t* src, uint32_t dim, void* dst) {
  const uint8_t* block = src + kFp8HeaderBytes;
  for (uint32_t b0 = 0; b0 < dim; b0 += 32, block += sizeof(BlockFp8)) {
    const __m256 m = _mm256_set1_ps(256.0f * _cvtsh_ss(LoadU16(block)));
    const __m256i h0 = CodesToHalf(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
    const __m256i h1 = CodesToHalf(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18)));
    StoreRow8<kF16>(dst, b0, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h0)), m));
    StoreRow8<kF16>(dst, b0 + 8,
                    _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1)), m));
    StoreRow8<kF16>(dst, b0 + 16, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h1)), m));
    StoreRow8<kF16>(dst, b0 + 24,
                    _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1)), m));
  }
}
}  // namespace

void DecodeRowFp8Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<false>(src, dim, dst);
}
void DecodeRowF16Fp8Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  DecodeRow<true>(src, dim, dst);
}

}  // namespace pion::quant::x86
