// AVX2/F16C fp16 kernels: vcvtps2ph (RNE) / vcvtph2ps, 16 values per iteration; the tail
// uses base/fp16.h, which gives the same bits.
#include <immintrin.h>

#include "base/fp16.h"
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
  for (; i < n; ++i) dst[i] = F32ToF16(x[i]);
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
  for (; i < n; ++i) dst[i] = F16ToF32(x[i]);
}

// Row kernels: a stored row may start at any byte offset, so the scalar tail goes
// through memcpy.
bool EncodeRowFp16Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  uint32_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), a);
  }
  for (; i < dim; ++i) {
    uint16_t h = F32ToF16(x[i]);
    __builtin_memcpy(dst + 2 * i, &h, 2);
  }
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
  for (; i < dim; ++i) {
    uint16_t h;
    __builtin_memcpy(&h, src + 2 * i, 2);
    dst[i] = F16ToF32(h);
  }
}

}  // namespace pion::quant::x86
