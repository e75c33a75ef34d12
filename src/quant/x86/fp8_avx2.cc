// AVX2/F16C fp8 (E4M3FN, per-32 fp16 scale) kernels, bit-identical to fp8.cc. Encode:
// vdivps by the block scale, then the integer RNE/saturation of E4M3FromF32 on 8 lanes.
// Decode: (c & 0x80) << 8 | (c & 0x7F) << 7 is an fp16 equal to the E4M3 value times
// 2^-8, so one vcvtph2ps and one multiply by 256 * scale (exact) per 8 values.
#include <immintrin.h>

#include "base/fp16.h"
#include "quant/fp8.h"
#include "quant/kernels.h"
#include "quant/x86/avx2.h"
#include "quant/x86/avx2_util.h"

namespace pion::quant::x86 {
namespace {

inline __m256i E4M3Codes(__m256 y) {
  const __m256i yi = _mm256_castps_si256(y);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(yi, 24), _mm256_set1_epi32(0x80));
  const __m256i ab = _mm256_and_si256(yi, _mm256_set1_epi32(0x7FFFFFFF));
  // Subnormal range: rint(|y| * 512).
  const __m256i sub =
      _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(ab), _mm256_set1_ps(512.0f)));
  // Normal range: round the mantissa to 3 bits, rebias, saturate at 0x7E.
  __m256i r = _mm256_add_epi32(
      ab, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF),
                           _mm256_and_si256(_mm256_srli_epi32(ab, 20), _mm256_set1_epi32(1))));
  r = _mm256_sub_epi32(_mm256_srli_epi32(r, 20), _mm256_set1_epi32(120 << 3));
  r = _mm256_min_epi32(r, _mm256_set1_epi32(0x7E));
  const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3C800000), ab);
  return _mm256_or_si256(_mm256_blendv_epi8(r, sub, is_sub), sign);
}

// 16 codes (bytes) -> 16 fp16 words holding E4M3 * 2^-8.
inline __m256i CodesToHalf(__m128i c) {
  const __m256i w = _mm256_cvtepu8_epi16(c);
  const __m256i s = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8);
  const __m256i m = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7F)), 7);
  return _mm256_or_si256(s, m);
}

}  // namespace

bool EncodeRowFp8Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  __m256 acc = _mm256_setzero_ps();
  __m256 bad = _mm256_setzero_ps();
  uint8_t* block = dst + kFp8HeaderBytes;
  for (uint32_t b0 = 0; b0 < dim; b0 += 32, block += sizeof(BlockFp8)) {
    const __m256 v0 = _mm256_loadu_ps(x + b0), v1 = _mm256_loadu_ps(x + b0 + 8);
    const __m256 v2 = _mm256_loadu_ps(x + b0 + 16), v3 = _mm256_loadu_ps(x + b0 + 24);
    bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_or_ps(NonFiniteMask(v0), NonFiniteMask(v1)),
                                         _mm256_or_ps(NonFiniteMask(v2), NonFiniteMask(v3))));
    const float a =
        HMax8(_mm256_max_ps(_mm256_max_ps(Abs(v0), Abs(v1)), _mm256_max_ps(Abs(v2), Abs(v3))));
    const uint16_t sh = Fp8ScaleBits(a);
    const float s = F16ToF32(sh);
    const __m256 vs = _mm256_set1_ps(s);
    const __m256i codes =
        PackBytes(E4M3Codes(_mm256_div_ps(v0, vs)), E4M3Codes(_mm256_div_ps(v1, vs)),
                  E4M3Codes(_mm256_div_ps(v2, vs)), E4M3Codes(_mm256_div_ps(v3, vs)));
    StoreU16(block, sh);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + 2), codes);
    // Decoded values for the header, in element order.
    const __m256 m = _mm256_set1_ps(256.0f * s);
    const __m256i h0 = CodesToHalf(_mm256_castsi256_si128(codes));
    const __m256i h1 = CodesToHalf(_mm256_extracti128_si256(codes, 1));
    const __m256 d0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h0)), m);
    const __m256 d1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1)), m);
    const __m256 d2 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h1)), m);
    const __m256 d3 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1)), m);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(d0, d0));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(d1, d1));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(d2, d2));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(d3, d3));
  }
  if (!_mm256_testz_ps(bad, bad)) return false;
  StoreF32(dst, HSum8(acc));
  return true;
}

void DecodeRowFp8Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  const uint8_t* block = src + kFp8HeaderBytes;
  for (uint32_t b0 = 0; b0 < dim; b0 += 32, block += sizeof(BlockFp8)) {
    const __m256 m = _mm256_set1_ps(256.0f * F16ToF32(LoadU16(block)));
    const __m256i h0 = CodesToHalf(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
    const __m256i h1 = CodesToHalf(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18)));
    _mm256_storeu_ps(dst + b0, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h0)), m));
    _mm256_storeu_ps(dst + b0 + 8,
                     _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1)), m));
    _mm256_storeu_ps(dst + b0 + 16, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h1)), m));
    _mm256_storeu_ps(dst + b0 + 24,
                     _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1)), m));
  }
}

}  // namespace pion::quant::x86
