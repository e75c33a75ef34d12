// Internal to src/quant: the per-row kernel signatures every format implements, the
// fixed-order float reduction all formats share, and byte helpers. A row kernel
// works on one row; dispatch.cc loops over rows and turns "false" into the
// "non-finite value in row <i>" Status.
#pragma once

#include <cstdint>
#include <cstring>

namespace pion::quant {

// Alignment: stored rows (`src` / `dst` bytes) have none and are read with the
// Load/Store helpers below. The f32 arrays (`x`, and `dst` of a decode) come from
// callers at any byte offset too. The AVX2 kernels (x86/) accept that: they touch
// the arrays only through unaligned vector loads/stores and memcpy in their tails.
// The scalar references index them as float arrays, so dispatch.cc hands them only
// naturally aligned ones, staging a misaligned row through an aligned scratch row.
//
// Encodes one row of `dim` floats into RowBytes(f, dim) bytes. Returns false (dst
// unspecified) when the row holds a non-finite value and the format refuses them.
using EncodeRowFn = bool (*)(const float* x, uint32_t dim, uint8_t* dst);
// Decodes one stored row into `dim` floats.
using DecodeRowFn = void (*)(const uint8_t* src, uint32_t dim, float* dst);

// Decodes one stored row straight into `dim` f16 values, giving exactly
// F32ToF16 of the DecodeRowFn result (fast kernels that skip the f32 pass; optional).
using DecodeRowF16Fn = void (*)(const uint8_t* src, uint32_t dim, uint16_t* dst);

struct RowKernels {
  EncodeRowFn encode;
  DecodeRowFn decode;
  DecodeRowF16Fn decode_f16 = nullptr;  // null: decode, then convert
};

// The one summation order used for every float sum in this library (norms, dot
// products, the sum-of-squares headers), so that scalar and 8-lane SIMD code give
// the same bits: lane l accumulates the terms i = l, l+8, l+16, ... in increasing i
// (starting from +0.0f), then the 8 lanes are combined as
// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)) -- what a ymm -> xmm -> scalar
// horizontal add does. Lengths are always multiples of 8 here.
inline float ReduceLanes8(const float acc[8]) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void StoreF32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }

inline bool IsFinite(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return (b & 0x7F800000u) != 0x7F800000u;
}

inline constexpr float kF16Max = 65504.0f;

}  // namespace pion::quant
