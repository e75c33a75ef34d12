// f32 <-> bf16 conversions with AVX2 (8 lanes of integer arithmetic), bit-identical
// to F32ToBf16 / Bf16ToF32 of quant/bf16.h, which also serve the tails.
#include <immintrin.h>

#include "quant/bf16.h"
#include "quant/kernels.h"
#include "quant/x86/avx2.h"

namespace pion::quant::x86 {

void F32ToBf16Avx2(const float* x, uint32_t n, uint16_t* dst) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i round = _mm256_set1_epi32(0x7FFF);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf = _mm256_set1_epi32(0x7F800000);
  const __m256i quiet = _mm256_set1_epi32(0x0040);
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(b, round), lsb), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs_mask), inf);
    const __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(b, 16), quiet);
    const __m256i r = _mm256_blendv_epi8(rounded, quieted, nan);
    // Each lane holds 0..0xFFFF: an unsigned-saturating pack keeps it; the pack
    // works per 128-bit half, so the two halves are gathered with a permute.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
  uint8_t* db = reinterpret_cast<uint8_t*>(dst);
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(x);
  for (; i < n; ++i) StoreU16(db + 2 * i, F32ToBf16(LoadF32(xb + 4 * i)));
}

void Bf16ToF32Avx2(const uint16_t* x, uint32_t n, float* dst) {
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  uint8_t* db = reinterpret_cast<uint8_t*>(dst);
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(x);
  for (; i < n; ++i) StoreF32(db + 4 * i, Bf16ToF32(LoadU16(xb + 2 * i)));
}

}  // namespace pion::quant::x86
