#include "base/crc32c.h"

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

__attribute__((target("sse4.2"))) uint32_t ExtendHw(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
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
