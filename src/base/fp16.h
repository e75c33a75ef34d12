// IEEE binary16 <-> binary32 conversions, scalar and exact: round-to-nearest-even,
// overflow to +-inf, NaN kept (quiet), subnormals kept; the same results as x86
// F16C vcvtps2ph(_MM_FROUND_TO_NEAREST_INT) / vcvtph2ps. Used by the scalar
// reference codecs and wherever a single value is converted.
#pragma once

#include <cstdint>
#include <cstring>

namespace pion {

inline float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((man & 0x3FFu) << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13) | (man ? 0x400000u : 0);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) {  // inf or NaN
    if (ax == 0x7F800000u) return sign | 0x7C00u;
    return sign | 0x7E00u | static_cast<uint16_t>((ax >> 13) & 0x3FFu);
  }
  if (ax >= 0x477FF000u) return sign | 0x7C00u;  // rounds to >= 65520 -> inf
  if (ax >= 0x38800000u) {                       // normal half
    uint32_t r = ax - (112u << 23);              // rebias exponent
    uint32_t lsb = (r >> 13) & 1u;
    r += 0xFFFu + lsb;
    return sign | static_cast<uint16_t>(r >> 13);
  }
  if (ax < 0x33000000u) return sign;  // < 2^-25: rounds to zero (ties at 2^-25 go to 0)
  // subnormal half: value = m * 2^-24
  uint32_t e = ax >> 23;
  uint32_t man = (ax & 0x7FFFFFu) | 0x800000u;
  uint32_t shift = 126 - e;  // 14 + (113 - e)... yields m = man >> (shift)
  uint32_t m = man >> shift;
  uint32_t rem = man & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (m & 1u))) ++m;
  return sign | static_cast<uint16_t>(m);
}

}  // namespace pion
