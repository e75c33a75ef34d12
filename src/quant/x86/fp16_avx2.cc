// AVX2/F16C fp16 kernels: vcvtps2ph (RNE) / vcvtph2ps, 16 values per iteration; the tail
// uses base/fp16.h, which gives the same bits. Every array may start at any address
// (kernels.h): unaligned vector loads/stores, memcpy in the tails.
#include <immintrin.h>

#include "base/fp16.h"
#include "quant/kernels.h"
#include "quant/x86/avx2.h"

namespace pion::quant::x86 {

void F32ToF16Avx2(const float* x, uint32_t n, uint16_t* dst) {
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(x + i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), b);
  }
  for (; i + 8 <= n; i += 8) {
    __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
  }
  uint8_t* db = reinterpret_cast<uint8_t*>(dst);
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(x);
  for (; i < n; ++i) StoreU16(db + 2 * i, F32ToF16(LoadF32(xb + 4 * i)));
}

void F16ToF32Avx2(const uint16_t* x, uint32_t n, float* dst) {
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8)));
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
  }
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  uint8_t* db = reinterpret_cast<uint8_t*>(dst);
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(x);
  for (; i < n; ++i) StoreF32(db + 4 * i, F16ToF32(LoadU16(xb + 2 * i)));
}

// Row kernels: the stored row and the f32 array may start at any byte offset, so the
// scalar tails go through memcpy.
bool EncodeRowFp16Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  uint32_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), a);
  }
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(x);
  for (; i < dim; ++i) StoreU16(dst + 2 * i, F32ToF16(LoadF32(xb + 4 * i)));
  return true;
}

void DecodeRowFp16Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  uint32_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i + 16)));
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
  }
  for (; i + 8 <= dim; i += 8) {
    _mm256_storeu_ps(
        dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  }
  uint8_t* db = reinterpret_cast<uint8_t*>(dst);
  for (; i < dim; ++i) StoreF32(db + 4 * i, F16ToF32(LoadU16(src + 2 * i)));
}

}  // namespace pion::quant::x86
