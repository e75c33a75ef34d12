// Declarations of the AVX2 + F16C row kernels (x86/*_avx2.cc, each compiled with
// -mavx2 -mfma -mf16c). Only call them after dispatch.cc has checked the CPU. Each
// kernel is bit-identical to its scalar reference (quant/<format>.h). The kernels use
// no FMA instructions: the references multiply and add separately.
#pragma once

#include <cstdint>

namespace pion::quant::x86 {

bool EncodeRowFp16Avx2(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowFp16Avx2(const uint8_t* src, uint32_t dim, float* dst);
bool EncodeRowInt8Avx2(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowInt8Avx2(const uint8_t* src, uint32_t dim, float* dst);
bool EncodeRowFp8Avx2(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowFp8Avx2(const uint8_t* src, uint32_t dim, float* dst);
bool EncodeRowMlx4g32Avx2(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowMlx4g32Avx2(const uint8_t* src, uint32_t dim, float* dst);
bool EncodeRowTurbo4Avx2(const float* x, uint32_t dim, uint8_t* dst);
bool EncodeRowTurbo3Avx2(const float* x, uint32_t dim, uint8_t* dst);
bool EncodeRowTurbo2Avx2(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowTurbo4Avx2(const uint8_t* src, uint32_t dim, float* dst);
void DecodeRowTurbo3Avx2(const uint8_t* src, uint32_t dim, float* dst);
void DecodeRowTurbo2Avx2(const uint8_t* src, uint32_t dim, float* dst);
// Decode straight to f16 (= F32ToF16 of the f32 decode, without the f32 pass).
void DecodeRowF16Turbo4Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst);
void DecodeRowF16Turbo3Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst);
void DecodeRowF16Turbo2Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst);
void DecodeRowF16Fp8Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst);
void DecodeRowF16Mlx4g32Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst);

// n-element f32 <-> f16 conversions (F16C, RNE), bit-identical to base/fp16.h.
void F32ToF16Avx2(const float* x, uint32_t n, uint16_t* dst);
void F16ToF32Avx2(const uint16_t* x, uint32_t n, float* dst);
// n-element f32 <-> bf16 conversions, bit-identical to quant/bf16.h (x86/bf16_avx2.cc).
void F32ToBf16Avx2(const float* x, uint32_t n, uint16_t* dst);
void Bf16ToF32Avx2(const uint16_t* x, uint32_t n, float* dst);

}  // namespace pion::quant::x86
