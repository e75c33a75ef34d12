// bf16 (bfloat16: the top 16 bits of an IEEE binary32) as an input and output
// type of the codecs: EncodeRowsBF16 / DecodeRowsBF16 in format.h. Widening is
// exact; narrowing rounds to nearest even, keeps +-inf, and turns a NaN into a
// quiet NaN of the same sign (never into inf). Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <cstring>

namespace pion::quant {

inline float Bf16ToF32(uint16_t h) {
  const uint32_t b = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline uint16_t F32ToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

}  // namespace pion::quant
