#include "base/crc32c.h"

#include <immintrin.h>
#include <nmmintrin.h>

#include <array>
#include <cstring>

#include "base/cpu.h"

namespace pion::crc32c {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

struct Tables {
  uint32_t t[8][256];
  constexpr Tables() : t() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};
constexpr Tables kTables;

// Three interleaved streams: the crc32 instruction has a latency of 3 cycles
// and a throughput of 1, so one dependent chain runs at a third of the speed.
// A run of 3 * kStripe bytes is checksummed as three independent stripes (the
// first continuing the running value, the others from 0) and recombined:
// crc(A || B || C) = Shift(Shift(a) ^ b) ^ c, where Shift advances a raw CRC
// register over kStripe zero bytes. Shift is linear over GF(2), so it is a table
// lookup per byte of the register (the images of each byte value, computed once
// by running the instruction itself over zeros).
constexpr size_t kStripe = 4096;

struct ShiftTable {
  uint32_t t[4][256];
};

__attribute__((target("sse4.2"))) uint32_t ShiftSlow(uint32_t x) {
  uint64_t c = x;
  for (size_t i = 0; i < kStripe / 8; ++i) c = _mm_crc32_u64(c, 0);
  return static_cast<uint32_t>(c);
}

const ShiftTable& Shifts() {
  static const ShiftTable* table = [] {
    auto* st = new ShiftTable();
    uint32_t basis[32];
    for (int b = 0; b < 32; ++b) basis[b] = ShiftSlow(uint32_t{1} << b);
    for (int k = 0; k < 4; ++k)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t r = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (v & (1u << bit)) r ^= basis[8 * k + bit];
        st->t[k][v] = r;
      }
    return st;
  }();
  return *table;
}

inline uint32_t Shift(const ShiftTable& st, uint32_t x) {
  return st.t[0][x & 0xFF] ^ st.t[1][(x >> 8) & 0xFF] ^ st.t[2][(x >> 16) & 0xFF] ^
         st.t[3][x >> 24];
}

// Carry-less folding with VPCLMULQDQ (four 512-bit accumulators, 256 bytes a
// step; about twice the three-stream crc32 loop, which stays for CPUs without
// it and for short runs). The polynomial arithmetic, with the reflected bit
// order the crc32 instruction uses: a 128-bit lane X of the message that lies
// d bits before a later lane contributes X(x)·x^d to it. Split X = H·x^64 + L
// (H: the lane's first 8 bytes), then X·x^d ≡ H·(x^(64+d) mod P) + L·(x^d mod P)
// (mod P), a polynomial of degree < 128 that is XORed into the later lane. A
// reflected carry-less product of two 64-bit operands comes out one bit short
// of a 128-bit lane (it multiplies by x once more), so the constants are
// x^(64+d-1) and x^(d-1) mod P, bit-reflected into the top 32 bits of a 64-bit
// operand. The last folded lane R stands for the whole prefix; two crc32
// instructions from 0 over its 16 bytes give R·x^32 mod P, the CRC register
// after that prefix, and the tail continues from there.
namespace fold {

constexpr uint64_t XPowMod(uint32_t e) {  // x^e mod P, normal bit order
  uint64_t r = 1;
  for (uint32_t i = 0; i < e; ++i) {
    r <<= 1;
    if (r & (uint64_t{1} << 32)) r ^= 0x11EDC6F41ull;
  }
  return r;
}
constexpr uint64_t ReflectHigh(uint64_t r) {  // degree <= 31 -> reflected 64-bit operand
  uint64_t o = 0;
  for (int j = 0; j < 32; ++j)
    if ((r >> j) & 1) o |= uint64_t{1} << (63 - j);
  return o;
}
struct Consts {
  uint64_t h, l;  // for the lane's first and second 8 bytes
};
constexpr Consts Forward(uint32_t d) {
  return Consts{ReflectHigh(XPowMod(64 + d - 1)), ReflectHigh(XPowMod(d - 1))};
}
constexpr Consts k2048 = Forward(2048), k512 = Forward(512), k128 = Forward(128);
constexpr size_t kStep = 256;

#define PION_FOLD_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

PION_FOLD_TARGET inline __m512i Fold512(__m512i x, __m512i k, __m512i data) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), data, 0x96);
}
PION_FOLD_TARGET inline __m128i Fold128(__m128i x, __m128i k, __m128i data) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), data);
}
PION_FOLD_TARGET inline __m512i Broadcast(const Consts& k) {
  return _mm512_set_epi64(static_cast<long long>(k.l), static_cast<long long>(k.h),
                          static_cast<long long>(k.l), static_cast<long long>(k.h),
                          static_cast<long long>(k.l), static_cast<long long>(k.h),
                          static_cast<long long>(k.l), static_cast<long long>(k.h));
}

// REQUIRES n >= kStep. `c`: the raw (inverted) register; returns it after the
// bytes consumed, advancing p and n (fewer than 16 bytes are left).
PION_FOLD_TARGET uint64_t Run(uint64_t c, const uint8_t*& p, size_t& n) {
  __m512i z0 = _mm512_loadu_si512(p), z1 = _mm512_loadu_si512(p + 64),
          z2 = _mm512_loadu_si512(p + 128), z3 = _mm512_loadu_si512(p + 192);
  // The running register enters as the message's first 32 bits XOR c.
  z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))));
  p += kStep;
  n -= kStep;
  const __m512i k4 = Broadcast(k2048);
  while (n >= kStep) {
    z0 = Fold512(z0, k4, _mm512_loadu_si512(p));
    z1 = Fold512(z1, k4, _mm512_loadu_si512(p + 64));
    z2 = Fold512(z2, k4, _mm512_loadu_si512(p + 128));
    z3 = Fold512(z3, k4, _mm512_loadu_si512(p + 192));
    p += kStep;
    n -= kStep;
  }
  const __m512i k1 = Broadcast(k512);
  z1 = Fold512(z0, k1, z1);
  z2 = Fold512(z1, k1, z2);
  z3 = Fold512(z2, k1, z3);
  const __m128i kx = _mm_set_epi64x(static_cast<long long>(k128.l), static_cast<long long>(k128.h));
  // The four lanes of z3 through memory (GCC 12's lane-extract intrinsic
  // warns about its undefined merge operand).
  alignas(64) uint8_t lanes[64];
  _mm512_store_si512(lanes, z3);
  auto lane = [&](int i) {
    return _mm_load_si128(reinterpret_cast<const __m128i*>(lanes + 16 * i));
  };
  __m128i x = lane(0);
  x = Fold128(x, kx, lane(1));
  x = Fold128(x, kx, lane(2));
  x = Fold128(x, kx, lane(3));
  while (n >= 16) {
    x = Fold128(x, kx, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    p += 16;
    n -= 16;
  }
  uint64_t r = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  return _mm_crc32_u64(r, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
}

#undef PION_FOLD_TARGET

}  // namespace fold

__attribute__((target("sse4.2"))) uint32_t ExtendHw(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  // Runs this long fold (CpuHas is read per call: tests turn it off).
  if (n >= 2 * fold::kStep && CpuHas(CpuFeature::kVpclmul)) c = fold::Run(c, p, n);
  while (n && (reinterpret_cast<uintptr_t>(p) & 7)) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  if (n >= 3 * kStripe) {
    const ShiftTable& st = Shifts();
    while (n >= 3 * kStripe) {
      uint64_t a = c, b = 0, d = 0;
      for (size_t i = 0; i < kStripe; i += 8) {
        uint64_t va, vb, vd;
        std::memcpy(&va, p + i, 8);
        std::memcpy(&vb, p + kStripe + i, 8);
        std::memcpy(&vd, p + 2 * kStripe + i, 8);
        a = _mm_crc32_u64(a, va);
        b = _mm_crc32_u64(b, vb);
        d = _mm_crc32_u64(d, vd);
      }
      uint32_t ab = Shift(st, static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b);
      c = Shift(st, ab) ^ static_cast<uint32_t>(d);
      p += 3 * kStripe;
      n -= 3 * kStripe;
    }
  }
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  while (n--) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables.t[7][lo & 0xFF] ^ kTables.t[6][(lo >> 8) & 0xFF] ^ kTables.t[5][(lo >> 16) & 0xFF] ^
        kTables.t[4][lo >> 24] ^ kTables.t[3][hi & 0xFF] ^ kTables.t[2][(hi >> 8) & 0xFF] ^
        kTables.t[1][(hi >> 16) & 0xFF] ^ kTables.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = kTables.t[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  static const bool hw = CpuHas(CpuFeature::kSse42);
  if (hw) return ExtendHw(crc, static_cast<const uint8_t*>(data), n);
  return ExtendPortable(crc, data, n);
}

}  // namespace pion::crc32c
