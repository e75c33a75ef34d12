// Small AVX2 helpers shared by the x86/*_avx2.cc kernels (quant's and
// src/attend/x86's); include only from files compiled with -mavx2 -mfma -mf16c. HSum8 reduces
// exactly like ReduceLanes8 (quant/kernels.h), which keeps float sums bit-identical to the
// references.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace pion::quant::x86 {

// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
inline float HSum8(__m256 v) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// HSum8 of four vectors at once: lane m of the result is HSum8 of the m-th argument,
// with the same additions in the same order.
inline __m128 HSum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
  __m128 ra = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  __m128 rb = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
  __m128 rc = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
  __m128 rd = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1));
  _MM_TRANSPOSE4_PS(ra, rb, rc, rd);  // ra = element 0 of each, rb = element 1, ...
  return _mm_add_ps(_mm_add_ps(ra, rc), _mm_add_ps(rb, rd));
}

inline float HMax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

inline float HMin8(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_min_ss(m, _mm_movehdup_ps(m)));
}

// |v| as int32 bits: for non-negative floats integer order is float order, and every
// inf/NaN (>= 0x7F800000) is above every finite value, so one vpmaxsd gives both the
// absmax and the non-finite check.
inline __m256i AbsBits(__m256 v) {
  return _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
}
inline uint32_t HMaxEpi32(__m256i v) {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
}
inline constexpr uint32_t kInfBits = 0x7F800000u;

// Four vectors of 8 int32 in [0, 255] -> 32 bytes in element order.
inline __m256i PackBytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  __m256i ab = _mm256_packus_epi32(a, b);
  __m256i cd = _mm256_packus_epi32(c, d);
  __m256i x = _mm256_packus_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Stores 8 decoded values at out + at: f32, or f16 by vcvtps2ph with round-to-nearest-even
// (= base/fp16.h's F32ToF16 of the f32 value). `out` may sit at any address.
template <bool kF16>
inline void StoreRow8(void* out, uint32_t at, __m256 v) {
  if constexpr (kF16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + at),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  } else {
    _mm256_storeu_ps(static_cast<float*>(out) + at, v);
  }
}

}  // namespace pion::quant::x86
