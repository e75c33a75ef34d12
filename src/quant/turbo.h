// turbo4 / turbo3 / turbo2: TurboQuant-MSE in a 32-block envelope
// (docs/quant_formats.md §2.5). A row is rotated block-wise by the RHT (rht.h); every 32
// rotated coordinates v get one fp16 scale and 32 b-bit indices into a Lloyd-Max
// codebook C_b for the 32-dim sphere marginal:
//   n2 = sum v_i^2, u_i = v_i * (sqrt(32) / sqrt(n2)), idx_i = #{thresholds t <= u_i}
//   scale = fp16(min(n2 / <v, C[idx]>, 65504))     ("unbiased" EDEN scale)
//   decode: y_i = scale * C[idx_i], x = inverse RHT of y.
// Row layout: [f32 header][BlockTurbo<b> x D/32]; header = sum of the squared rotated
// decoded values y_i (= ||x_hat||^2 up to float rounding, see the doc).
// Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pion::quant {

template <int kBits>
struct BlockTurbo {
  uint16_t scale;            // fp16
  uint8_t codes[4 * kBits];  // 32 indices, packed as in docs/quant_formats.md §2.5
};
static_assert(sizeof(BlockTurbo<4>) == 18);
static_assert(sizeof(BlockTurbo<3>) == 14);
static_assert(sizeof(BlockTurbo<2>) == 10);

inline constexpr size_t kTurboHeaderBytes = 4;
constexpr size_t TurboRowBytes(int bits, uint32_t dim) {
  return kTurboHeaderBytes + (dim / 32) * (2 + 4 * static_cast<size_t>(bits));
}

// Unit-variance Lloyd-Max codebooks (ascending), floats nearest the decimals printed in
// docs/quant_formats.md §2.5.
inline constexpr float kCodebook2[4] = {-1.48956f, -0.451428f, 0.451428f, 1.48956f};
inline constexpr float kCodebook3[8] = {-2.071926f, -1.314996f, -0.745325f, -0.242405f,
                                        0.242405f,  0.745325f,  1.314996f,  2.071926f};
inline constexpr float kCodebook4[16] = {
    -2.564978f, -1.979473f, -1.564485f, -1.222956f, -0.921613f, -0.644294f, -0.381409f, -0.126314f,
    0.126314f,  0.381409f,  0.644294f,  0.921613f,  1.222956f,  1.564485f,  1.979473f,  2.564978f};

template <int kBits>
constexpr const float* Codebook() {
  if constexpr (kBits == 2) return kCodebook2;
  if constexpr (kBits == 3) return kCodebook3;
  return kCodebook4;
}

// Decision thresholds: t_j = (C[j] + C[j+1]) * 0.5f in float; u == t_j goes up.
template <int kBits>
struct Thresholds {
  float t[(1 << kBits) - 1];
  constexpr Thresholds() : t{} {
    const float* c = Codebook<kBits>();
    for (int j = 0; j + 1 < (1 << kBits); ++j) t[j] = (c[j] + c[j + 1]) * 0.5f;
  }
};

// Index of the codebook cell of u: the number of thresholds t_j <= u (a tie goes to
// the upper cell).
template <int kBits>
inline int TurboIndex(float u) {
  constexpr Thresholds<kBits> kT;
  int q = 0;
  for (int j = 0; j + 1 < (1 << kBits); ++j) q += u >= kT.t[j] ? 1 : 0;
  return q;
}

inline constexpr float kSqrt32 = 5.656854249492381f;
// Rows whose max |x| exceeds this are pre-multiplied by kTurboHugeDown before the
// transform (exact power of two) so that no sum can overflow; their scales are
// multiplied back (and saturate at 65504).
inline constexpr float kTurboHugeAbs = 4294967296.0f;  // 2^32
inline constexpr float kTurboHugeDown = 0x1p-96f;      // 2^-96
inline constexpr float kTurboHugeUp = 0x1p96f;         // 2^96

// fp16 scale of one sub-block from n2 = sum v^2 and dot = <v, c> (both > 0), and the
// post multiplier (1 or 2^96). The AVX2 encoder computes the same for four sub-blocks
// at once.
uint16_t TurboScaleBits(float n2, float dot, float post);

bool EncodeRowTurbo4Ref(const float* x, uint32_t dim, uint8_t* dst);
bool EncodeRowTurbo3Ref(const float* x, uint32_t dim, uint8_t* dst);
bool EncodeRowTurbo2Ref(const float* x, uint32_t dim, uint8_t* dst);
void DecodeRowTurbo4Ref(const uint8_t* src, uint32_t dim, float* dst);
void DecodeRowTurbo3Ref(const uint8_t* src, uint32_t dim, float* dst);
void DecodeRowTurbo2Ref(const uint8_t* src, uint32_t dim, float* dst);

}  // namespace pion::quant
