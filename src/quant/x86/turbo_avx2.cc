// AVX2 turbo4/3/2 kernels, bit-identical to turbo.cc.
//
// The RHT of a block of R <= 128 floats lives in R/8 ymm registers. Butterfly stages
// h = 1, 2, 4 stay inside a register (vpermilps / vperm2f128, then one add with the
// sign of the lower/upper lane flipped by an XOR: b + (-a) is bit-identical to b - a,
// and IEEE addition is commutative). Stages h = 8, 16 are one radix-4 pass over the 4
// registers of a 32-value sub-block, done right after the sub-block is produced; stages
// 32 and 64 are a second pass over a 128-float stack buffer. Every element sees the
// same sequence of float operations as FwhtRef, so the results match bit for bit.
//
// Codebook lookup: vpermps with the 8-entry table (turbo3), a duplicated 4-entry table
// (turbo2), or two tables and a blend on bit 3 (turbo4). Encoding finds the index by a
// b-level binary search over the 2^b - 1 thresholds (CodeIndex), which equals the
// reference's count of thresholds <= u (ties go up). The per-sub-block norms, dot
// products and scales of a block are computed four at a time in xmm lanes.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/kernels.h"
#include "quant/rht.h"
#include "quant/turbo.h"
#include "quant/x86/avx2.h"
#include "quant/x86/avx2_util.h"

// GCC -O2 leaves these 4-trip loops rolled, which keeps the 4 registers of a sub-block
// in stack arrays; unrolled, decode runs ~25% faster.
#define PION_UNROLL4 _Pragma("GCC unroll 4")

namespace pion::quant::x86 {
namespace {

struct SignMasks {
  alignas(32) uint32_t s1[rht::kMaxBlock];
  alignas(32) uint32_t s2[rht::kMaxBlock];
  constexpr SignMasks() : s1{}, s2{} {
    for (uint32_t i = 0; i < rht::kMaxBlock; ++i) {
      s1[i] = rht::S1Negative(i) ? 0x80000000u : 0u;
      s2[i] = rht::S2Negative(i) ? 0x80000000u : 0u;
    }
  }
};
constexpr SignMasks kSigns;

inline __m256 SignS1(uint32_t reg) {
  return _mm256_load_ps(reinterpret_cast<const float*>(kSigns.s1 + 8 * reg));
}
inline __m256 SignS2(uint32_t reg) {
  return _mm256_load_ps(reinterpret_cast<const float*>(kSigns.s2 + 8 * reg));
}

// Stages h = 1, 2, 4 on one register.
inline __m256 Fwht8(__m256 x) {
  const __m256 m1 = _mm256_castsi256_ps(
      _mm256_setr_epi32(0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN));
  const __m256 m2 = _mm256_castsi256_ps(
      _mm256_setr_epi32(0, 0, INT32_MIN, INT32_MIN, 0, 0, INT32_MIN, INT32_MIN));
  const __m256 m4 = _mm256_castsi256_ps(
      _mm256_setr_epi32(0, 0, 0, 0, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN));
  x = _mm256_add_ps(_mm256_permute_ps(x, 0xB1), _mm256_xor_ps(x, m1));
  x = _mm256_add_ps(_mm256_permute_ps(x, 0x4E), _mm256_xor_ps(x, m2));
  x = _mm256_add_ps(_mm256_permute2f128_ps(x, x, 0x01), _mm256_xor_ps(x, m4));
  return x;
}

// Two butterfly stages over registers (a, b, c, d): distance 1 then distance 2.
inline void Radix4(__m256& a, __m256& b, __m256& c, __m256& d) {
  const __m256 s0 = _mm256_add_ps(a, b), d0 = _mm256_sub_ps(a, b);
  const __m256 s1 = _mm256_add_ps(c, d), d1 = _mm256_sub_ps(c, d);
  a = _mm256_add_ps(s0, s1);
  c = _mm256_sub_ps(s0, s1);
  b = _mm256_add_ps(d0, d1);
  d = _mm256_sub_ps(d0, d1);
}

// Finishes the transform of a block whose sub-blocks (stages 1..16 done) are in t[0..r):
// remaining stages, then out_j = sign_j(t_j * k) with `sign` S1 or S2 masks.
template <bool kS1>
inline void FinishBlock(float* t, uint32_t r, float k, float* out) {
  const __m256 vk = _mm256_set1_ps(k);
  auto emit = [&](uint32_t reg, __m256 v) {
    const __m256 m = kS1 ? SignS1(reg) : SignS2(reg);
    _mm256_storeu_ps(out + 8 * reg, _mm256_xor_ps(_mm256_mul_ps(v, vk), m));
  };
  if (r == 128) {
    PION_UNROLL4 for (uint32_t j = 0; j < 4; ++j) {
      __m256 a = _mm256_load_ps(t + 8 * j), b = _mm256_load_ps(t + 8 * (j + 4));
      __m256 c = _mm256_load_ps(t + 8 * (j + 8)), d = _mm256_load_ps(t + 8 * (j + 12));
      Radix4(a, b, c, d);
      emit(j, a);
      emit(j + 4, b);
      emit(j + 8, c);
      emit(j + 12, d);
    }
  } else if (r == 64) {
    PION_UNROLL4 for (uint32_t j = 0; j < 4; ++j) {
      const __m256 a = _mm256_load_ps(t + 8 * j), b = _mm256_load_ps(t + 8 * (j + 4));
      emit(j, _mm256_add_ps(a, b));
      emit(j + 4, _mm256_sub_ps(a, b));
    }
  } else {
    PION_UNROLL4 for (uint32_t j = 0; j < 4; ++j) emit(j, _mm256_load_ps(t + 8 * j));
  }
}

template <int kBits>
struct Tables {
  __m256 lo, hi;  // hi only for 4 bits
  Tables() {
    const float* c = Codebook<kBits>();
    if constexpr (kBits == 4) {
      lo = _mm256_loadu_ps(c);
      hi = _mm256_loadu_ps(c + 8);
    } else if constexpr (kBits == 3) {
      lo = hi = _mm256_loadu_ps(c);
    } else {
      lo = hi = _mm256_setr_ps(c[0], c[1], c[2], c[3], c[0], c[1], c[2], c[3]);
    }
  }
  // idx: indices in the low bits (4 bits: bit 3 selects hi; only bits 0..2 otherwise
  // matter). sel: bit 31 set where the 4-bit index has bit 3 set.
  __m256 Lookup(__m256i idx, __m256i sel) const {
    if constexpr (kBits == 4) {
      return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                              _mm256_castsi256_ps(sel));
    } else {
      (void)sel;
      return _mm256_permutevar8x32_ps(lo, idx);
    }
  }
  __m256 Lookup(__m256i idx) const { return Lookup(idx, _mm256_slli_epi32(idx, 28)); }
};

// Threshold tables of a binary search over the 2^b - 1 thresholds: level k (bit 2^k)
// compares u with T[(p << (k + 1)) + 2^k - 1], p = the index bits above k found so far.
// Equivalent to counting thresholds <= u (they increase strictly), ties going up.
template <int kBits>
struct SearchTables {
  float level[kBits][8];
  float dup[kBits][8];  // level[k][p % 4]: for vpermilps, which indexes within 128 bits
  constexpr SearchTables() : level{}, dup{} {
    constexpr Thresholds<kBits> kT;
    for (int k = 0; k < kBits; ++k) {
      for (int p = 0; p < (1 << (kBits - 1 - k)); ++p) {
        level[k][p] = kT.t[(p << (k + 1)) + (1 << k) - 1];
      }
      for (int p = 0; p < 8; ++p) dup[k][p] = level[k][p % 4];
    }
  }
};

template <int kBits>
inline __m256i CodeIndex(__m256 u) {
  static constexpr SearchTables<kBits> kS;
  const __m256i top = _mm256_set1_epi32(1 << (kBits - 1));
  __m256i idx = _mm256_and_si256(
      _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_set1_ps(kS.level[kBits - 1][0]), _CMP_GE_OQ)),
      top);
  PION_UNROLL4 for (int k = kBits - 2; k >= 0; --k) {
    // Levels of <= 4 thresholds use the in-lane vpermilps (1 uop; vpermps is the
    // bottleneck of this loop on Zen 3) with the table repeated in both halves.
    const __m256i p = _mm256_srli_epi32(idx, k + 1);
    const __m256 t = k >= kBits - 3 ? _mm256_permutevar_ps(_mm256_loadu_ps(kS.dup[k]), p)
                                    : _mm256_permutevar8x32_ps(_mm256_loadu_ps(kS.level[k]), p);
    idx =
        _mm256_or_si256(idx, _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(u, t, _CMP_GE_OQ)),
                                              _mm256_set1_epi32(1 << k)));
  }
  return idx;
}

// ---- decode (docs/quant_formats.md §6, the turbo decode kernel)
//
// y = scale * C[idx] comes from tables of the products (scale * C[j], 2 vmulps per
// 32-value sub-block instead of one per 8 values): the same single float
// multiplication as the reference. The S2 signs are folded into the codes (see
// S2CodeMasks) and the final out = sign_S1(t * k) is t * (+-k): negating a factor
// negates the product exactly. So every output is bit-identical to the reference
// except where the reference gives NaN (only from a stored scale that is inf or NaN,
// which the encoder never writes): the kernel gives NaN there too, possibly with
// another sign or payload (quant_test QuantFastPath.TurboDecodeOfArbitraryBytes).
// llvm-mca (znver3) of the 32-value step: ~28 cycles, bound by the shuffle pipe
// (vpermps x 8, vperm2f128 x 4); an FMA form of the butterflies measured slower.
// +-1/sqrt(R) with the sign of S1, per element, for R = 32, 64, 128.
struct InverseScales {
  alignas(32) float k[3][rht::kMaxBlock];
  constexpr InverseScales() : k{} {
    const uint32_t rs[3] = {32, 64, 128};
    for (int j = 0; j < 3; ++j) {
      for (uint32_t i = 0; i < rht::kMaxBlock; ++i) {
        const float v = rht::InvSqrt(rs[j]);
        k[j][i] = rht::S1Negative(i) ? -v : v;
      }
    }
  }
};
constexpr InverseScales kInvScales;

// Codebook products of one sub-block: lo/hi = scale * C[0..7] / C[8..15] (4 bits),
// scale * C (3 bits), scale * C repeated twice (2 bits).
template <int kBits>
struct Products {
  __m256 lo, hi;
  Products(const Tables<kBits>& tb, __m256 vs) {
    lo = _mm256_mul_ps(vs, tb.lo);
    if constexpr (kBits == 4) hi = _mm256_mul_ps(vs, tb.hi);
  }
};

// The codebooks are symmetric, C[2^b - 1 - j] = -C[j], so the S2 sign of element i is
// folded into its code: flipping all b bits of the index negates the value, and
// scale * (-c) = -(scale * c) exactly. Word q of sub-block j (the bits LookupProducts
// reads for its register q) is XORed with kS2Codes.m[j][q] first.
template <int kBits>
struct S2CodeMasks {
  uint32_t m[4][4];
  constexpr S2CodeMasks() : m{} {
    for (uint32_t j = 0; j < 4; ++j) {
      for (uint32_t q = 0; q < 4; ++q) {
        uint32_t w = 0;
        for (uint32_t i = 0; i < 8; ++i) {
          if (!rht::S2Negative(32 * j + 8 * q + i)) continue;
          if constexpr (kBits == 4) w |= 0xFu << (4 * i);
          if constexpr (kBits == 2) w |= 0x3u << (2 * i);
          if constexpr (kBits == 3) w |= (0x3u << (2 * i)) | (1u << (16 + i));
        }
        m[j][q] = w;
      }
    }
  }
};
template <int kBits>
constexpr bool SymmetricCodebook() {
  const float* c = Codebook<kBits>();
  for (int j = 0; j < (1 << kBits); ++j) {
    if (c[(1 << kBits) - 1 - j] != -c[j]) return false;
  }
  return true;
}
static_assert(SymmetricCodebook<2>() && SymmetricCodebook<3>() && SymmetricCodebook<4>());

// y of register q (elements 8q..8q+7) of a packed sub-block, S2 sign applied:
// sign_S2 * scale * C[idx]. `flip` is the sub-block's row of S2CodeMasks.
template <int kBits>
inline __m256 LookupProducts(const Products<kBits>& pr, const uint8_t* codes, int q,
                             const uint32_t* flip) {
  if constexpr (kBits == 4) {
    uint32_t w;
    std::memcpy(&w, codes + 4 * q, 4);
    const __m256i v = _mm256_set1_epi32(static_cast<int>(w ^ flip[q]));
    const __m256i idx = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i sel = _mm256_sllv_epi32(v, _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0));
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(pr.lo, idx),
                            _mm256_permutevar8x32_ps(pr.hi, idx), _mm256_castsi256_ps(sel));
  } else if constexpr (kBits == 2) {
    uint16_t w;
    std::memcpy(&w, codes + 2 * q, 2);
    const __m256i v = _mm256_set1_epi32(static_cast<int>(w ^ flip[q]));
    return _mm256_permutevar8x32_ps(
        pr.lo, _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)));
  } else {
    uint16_t w;
    std::memcpy(&w, codes + 2 * q, 2);
    const uint32_t u = (w | (static_cast<uint32_t>(codes[8 + q]) << 16)) ^ flip[q];
    const __m256i v = _mm256_set1_epi32(static_cast<int>(u));
    const __m256i lo2 = _mm256_and_si256(
        _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), _mm256_set1_epi32(3));
    const __m256i hi1 =
        _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(14, 15, 16, 17, 18, 19, 20, 21)),
                         _mm256_set1_epi32(4));
    return _mm256_permutevar8x32_ps(pr.lo, _mm256_or_si256(lo2, hi1));
  }
}

// Inverse RHT of the sub-blocks of one block, each after stages 1..16 (in t, or for
// R = 32 in v): stages 32 and 64 across registers, then out = t * (+-k).
template <bool kF16>
__attribute__((always_inline)) inline void FinishInverse(const float* t, uint32_t r, void* out,
                                                         uint32_t b0) {
  if (r == 128) {
    const float* ks = kInvScales.k[2];
    PION_UNROLL4 for (uint32_t j = 0; j < 4; ++j) {
      __m256 a = _mm256_load_ps(t + 8 * j), b = _mm256_load_ps(t + 8 * (j + 4));
      __m256 c = _mm256_load_ps(t + 8 * (j + 8)), d = _mm256_load_ps(t + 8 * (j + 12));
      Radix4(a, b, c, d);
      StoreRow8<kF16>(out, b0 + 8 * j, _mm256_mul_ps(a, _mm256_load_ps(ks + 8 * j)));
      StoreRow8<kF16>(out, b0 + 8 * (j + 4), _mm256_mul_ps(b, _mm256_load_ps(ks + 8 * (j + 4))));
      StoreRow8<kF16>(out, b0 + 8 * (j + 8), _mm256_mul_ps(c, _mm256_load_ps(ks + 8 * (j + 8))));
      StoreRow8<kF16>(out, b0 + 8 * (j + 12), _mm256_mul_ps(d, _mm256_load_ps(ks + 8 * (j + 12))));
    }
  } else {  // r == 64
    const float* ks = kInvScales.k[1];
    PION_UNROLL4 for (uint32_t j = 0; j < 4; ++j) {
      const __m256 a = _mm256_load_ps(t + 8 * j), b = _mm256_load_ps(t + 8 * (j + 4));
      StoreRow8<kF16>(out, b0 + 8 * j,
                      _mm256_mul_ps(_mm256_add_ps(a, b), _mm256_load_ps(ks + 8 * j)));
      StoreRow8<kF16>(out, b0 + 8 * (j + 4),
                      _mm256_mul_ps(_mm256_sub_ps(a, b), _mm256_load_ps(ks + 8 * (j + 4))));
    }
  }
}

template <int kBits, bool kF16>
void DecodeRow(const uint8_t* src, uint32_t dim, void* dst) {
  static constexpr S2CodeMasks<kBits> kFlip;
  const Tables<kBits> tb;
  constexpr size_t kBlockBytes = sizeof(BlockTurbo<kBits>);
  const uint32_t r = rht::BlockSize(dim);
  const uint8_t* block = src + kTurboHeaderBytes;
  alignas(32) float t[rht::kMaxBlock];
  for (uint32_t b0 = 0; b0 < dim; b0 += r) {
    for (uint32_t j = 0; j < r / 32; ++j, block += kBlockBytes) {
      const Products<kBits> pr(tb, _mm256_set1_ps(_cvtsh_ss(LoadU16(block))));
      const uint8_t* codes = block + 2;
      __m256 v[4];
      PION_UNROLL4 for (int q = 0; q < 4; ++q) {
        v[q] = Fwht8(LookupProducts<kBits>(pr, codes, q, kFlip.m[j]));
      }
      Radix4(v[0], v[1], v[2], v[3]);
      if (r == 32) {
        const float* ks = kInvScales.k[0];
        PION_UNROLL4 for (int q = 0; q < 4; ++q) {
          StoreRow8<kF16>(dst, b0 + 8 * q, _mm256_mul_ps(v[q], _mm256_load_ps(ks + 8 * q)));
        }
      } else {
        PION_UNROLL4 for (int q = 0; q < 4; ++q) _mm256_store_ps(t + 32 * j + 8 * q, v[q]);
      }
    }
    if (r != 32) FinishInverse<kF16>(t, r, dst, b0);
  }
}

// Packs the 32 indices (4 x 8 int32, element order) of one sub-block.
template <int kBits>
inline void PackIdx(const __m256i idx[4], uint8_t* out) {
  const __m256i bytes = PackBytes(idx[0], idx[1], idx[2], idx[3]);
  auto pack2 = [](__m256i b, uint8_t* o) {  // 2-bit fields, 4 per byte -> 8 bytes
    const __m256i p = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x0401));
    const __m256i q = _mm256_madd_epi16(p, _mm256_set1_epi32(0x00100001));
    const __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(q, q), q);
    const uint32_t lo = static_cast<uint32_t>(_mm256_cvtsi256_si32(w));
    const uint32_t hi = static_cast<uint32_t>(_mm256_extract_epi32(w, 4));
    std::memcpy(o, &lo, 4);
    std::memcpy(o + 4, &hi, 4);
  };
  if constexpr (kBits == 4) {
    const __m256i p = _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001));
    const __m256i n = _mm256_permute4x64_epi64(_mm256_packus_epi16(p, p), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(n));
  } else if constexpr (kBits == 2) {
    pack2(bytes, out);
  } else {
    pack2(_mm256_and_si256(bytes, _mm256_set1_epi8(3)), out);
    const uint32_t plane = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(bytes, 5)));
    std::memcpy(out + 8, &plane, 4);
  }
}

template <int kBits>
bool EncodeRow(const float* x, uint32_t dim, uint8_t* dst) {
  constexpr size_t kBlockBytes = sizeof(BlockTurbo<kBits>);
  const Tables<kBits> tb;

  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;  // dim % 32 == 0
  for (uint32_t i = 0; i < dim; i += 32) {
    m0 = _mm256_max_epi32(m0, AbsBits(_mm256_loadu_ps(x + i)));
    m1 = _mm256_max_epi32(m1, AbsBits(_mm256_loadu_ps(x + i + 8)));
    m2 = _mm256_max_epi32(m2, AbsBits(_mm256_loadu_ps(x + i + 16)));
    m3 = _mm256_max_epi32(m3, AbsBits(_mm256_loadu_ps(x + i + 24)));
  }
  const __m256i mx = _mm256_max_epi32(_mm256_max_epi32(m0, m1), _mm256_max_epi32(m2, m3));
  const uint32_t abits = HMaxEpi32(mx);
  if (abits >= kInfBits) return false;
  float absmax;
  std::memcpy(&absmax, &abits, 4);
  const bool huge = absmax > kTurboHugeAbs;
  const __m256 pre = _mm256_set1_ps(huge ? kTurboHugeDown : 1.0f);
  const float post = huge ? kTurboHugeUp : 1.0f;

  const uint32_t r = rht::BlockSize(dim);
  const float k = rht::InvSqrt(r);
  __m256 acc_hdr = _mm256_setzero_ps();
  uint8_t* block = dst + kTurboHeaderBytes;
  alignas(32) float t[rht::kMaxBlock];
  alignas(32) float y[rht::kMaxBlock];
  for (uint32_t b0 = 0; b0 < dim; b0 += r) {
    // Forward RHT of the block into y.
    for (uint32_t j = 0; j < r / 32; ++j) {
      __m256 v[4];
      PION_UNROLL4 for (int q = 0; q < 4; ++q) {
        const __m256 in = _mm256_mul_ps(_mm256_loadu_ps(x + b0 + 32 * j + 8 * q), pre);
        v[q] = Fwht8(_mm256_xor_ps(in, SignS1(4 * j + q)));
      }
      Radix4(v[0], v[1], v[2], v[3]);
      PION_UNROLL4 for (int q = 0; q < 4; ++q) _mm256_store_ps(t + 32 * j + 8 * q, v[q]);
    }
    FinishBlock<false>(t, r, k, y);
    // Quantize the sub-blocks of 32 rotated values, phase by phase over the (up to 4)
    // sub-blocks of the block: their norms, dot products and scales are computed four
    // at a time in xmm lanes (same operations and order as the scalar reference), so
    // the long scalar dependency chains of the reference become short vector ones.
    const uint32_t nsub = r / 32;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (uint32_t j = 0; j < nsub; ++j) {
      PION_UNROLL4 for (int q = 0; q < 4; ++q) {
        const __m256 v = _mm256_load_ps(y + 32 * j + 8 * q);
        acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(v, v));
      }
    }
    const __m128 n2v = HSum8x4(acc[0], acc[1], acc[2], acc[3]);
    alignas(16) float n2[4], kk[4], dot[4];
    _mm_store_ps(n2, n2v);
    _mm_store_ps(kk, _mm_div_ps(_mm_set1_ps(kSqrt32), _mm_sqrt_ps(n2v)));
    __m256i idx[4][4];
    __m256 c[4][4];
    const __m256 c0 = tb.Lookup(_mm256_setzero_si256());
    __m256 dacc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()};
    for (uint32_t j = 0; j < nsub; ++j) {
      if (n2[j] > 0.0f) {
        const __m256 vk = _mm256_broadcast_ss(kk + j);
        PION_UNROLL4 for (int q = 0; q < 4; ++q) {
          const __m256 v = _mm256_load_ps(y + 32 * j + 8 * q);
          idx[j][q] = CodeIndex<kBits>(_mm256_mul_ps(v, vk));
          c[j][q] = tb.Lookup(idx[j][q]);
          dacc[j] = _mm256_add_ps(dacc[j], _mm256_mul_ps(v, c[j][q]));
        }
      }
    }
    const __m128 dotv = HSum8x4(dacc[0], dacc[1], dacc[2], dacc[3]);
    _mm_store_ps(dot, dotv);
    // scale = fp16(min((n2 / dot) * post, 65504)) where dot > 0, else 0 (min_ps also
    // maps inf and the NaN of unused lanes to 65504, as the reference's !(s <= max)).
    const __m128 sc =
        _mm_min_ps(_mm_mul_ps(_mm_div_ps(n2v, dotv), _mm_set1_ps(post)), _mm_set1_ps(kF16Max));
    const __m128i pos = _mm_castps_si128(_mm_cmpgt_ps(dotv, _mm_setzero_ps()));
    const __m128i sbits =
        _mm_and_si128(_mm_cvtps_ph(sc, _MM_FROUND_TO_NEAREST_INT), _mm_packs_epi32(pos, pos));
    alignas(16) uint16_t scale[8];
    alignas(16) float sval[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(scale), sbits);
    _mm_store_ps(sval, _mm_cvtph_ps(sbits));
    for (uint32_t j = 0; j < nsub; ++j, block += kBlockBytes) {
      if (!(dot[j] > 0.0f)) {  // zero sub-block (or <v, c> underflowed): scale 0, codes 0
        PION_UNROLL4 for (int q = 0; q < 4; ++q) {
          idx[j][q] = _mm256_setzero_si256();
          c[j][q] = c0;
        }
      }
      StoreU16(block, scale[j]);
      PackIdx<kBits>(idx[j], block + 2);
      const __m256 vs = _mm256_broadcast_ss(sval + j);
      PION_UNROLL4 for (int q = 0; q < 4; ++q) {
        const __m256 w = _mm256_mul_ps(vs, c[j][q]);
        acc_hdr = _mm256_add_ps(acc_hdr, _mm256_mul_ps(w, w));
      }
    }
  }
  StoreF32(dst, HSum8(acc_hdr));
  return true;
}

}  // namespace

bool EncodeRowTurbo4Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  return EncodeRow<4>(x, dim, dst);
}
bool EncodeRowTurbo3Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  return EncodeRow<3>(x, dim, dst);
}
bool EncodeRowTurbo2Avx2(const float* x, uint32_t dim, uint8_t* dst) {
  return EncodeRow<2>(x, dim, dst);
}
void DecodeRowTurbo4Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<4, false>(src, dim, dst);
}
void DecodeRowTurbo3Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<3, false>(src, dim, dst);
}
void DecodeRowTurbo2Avx2(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<2, false>(src, dim, dst);
}
void DecodeRowF16Turbo4Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  DecodeRow<4, true>(src, dim, dst);
}
void DecodeRowF16Turbo3Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  DecodeRow<3, true>(src, dim, dst);
}
void DecodeRowF16Turbo2Avx2(const uint8_t* src, uint32_t dim, uint16_t* dst) {
  DecodeRow<2, true>(src, dim, dst);
}

}  // namespace pion::quant::x86
