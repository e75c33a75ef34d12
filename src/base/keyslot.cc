#include "base/keyslot.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/cpu.h"

namespace pion {

uint16_t Crc16XmodemScalar(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char b : bytes) {
    crc ^= static_cast<uint16_t>(b) << 8;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

uint16_t Crc16Xmodem(std::string_view bytes) { return internal::Crc16Fast(bytes); }

std::string_view HashedPart(std::string_view key) {
  size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

uint32_t KeySlot(std::string_view key) { return Crc16Xmodem(HashedPart(key)) % kClusterSlots; }

namespace {

#if defined(__x86_64__)
// x^k mod P for XMODEM's P = x^16 + x^12 + x^5 + 1 (0x11021): a folding constant.
constexpr uint64_t XPowModP(unsigned k) {
  uint32_t r = 1;
  for (unsigned i = 0; i < k; ++i) {
    r <<= 1;
    if (r & 0x10000) r ^= 0x11021;
  }
  return r;
}

// Asked per call (one relaxed load): PION_CPU_DISABLE=pclmul and the tests'
// hooks take the table path.
bool HasClmul() { return CpuHas(CpuFeature::kPclmul); }

// floor(x^80 / P) without its x^64 term (the quotient has degree 64): the
// Barrett constant that takes a 64-bit residue times x^16 to its remainder.
constexpr uint64_t BarrettMuLow() {
  unsigned __int128 rem = static_cast<unsigned __int128>(1) << 80, q = 0;
  for (int d = 80; d >= 16; --d) {
    if (((rem >> d) & 1) == 0) continue;
    q |= static_cast<unsigned __int128>(1) << (d - 16);
    rem ^= static_cast<unsigned __int128>(0x11021) << (d - 16);
  }
  return static_cast<uint64_t>(q);  // bit 64 (x^64) dropped: it is always set
}

// The CRC of `n` >= 16 bytes by carry-less multiplication, and whether they hold
// a '{'. The bytes are taken 16 at a time as a polynomial (the first byte's top
// bit the highest term, as XMODEM reads them); folding a block into the next one
// replaces its two halves H x^64 + L, which the next block shifts by x^128, with
// H (x^192 mod P) + L (x^128 mod P): the same residue mod P, under 80 terms.
// The folded 16 bytes A = H x^64 + L then give their CRC, A x^16 mod P, in
// four more products: H (x^64 mod P) + L is under 80 terms and its top 16
// fold the same way, leaving a 64-bit V with V = A (mod P); Barrett's
// reduction with mu = floor(x^80 / P) = x^64 + m gives the quotient of V x^16
// by P as Q = V + floor(V m / x^64), and the remainder as the low 16 bits of
// V x^16 + Q P, which are those of Q (P - x^16). The bytes after the last
// whole block go through the table.
__attribute__((target("pclmul,ssse3"), always_inline)) inline uint16_t Crc16Clmul(
    const uint8_t* p, size_t n, bool* brace) {
  const __m128i rev = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m128i k =
      _mm_set_epi64x(static_cast<int64_t>(XPowModP(192)), static_cast<int64_t>(XPowModP(128)));
  const __m128i open = _mm_set1_epi8('{');
  __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i seen = _mm_cmpeq_epi8(block, open);
  __m128i acc = _mm_shuffle_epi8(block, rev);
  size_t at = 16;
  for (; at + 16 <= n; at += 16) {
    block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + at));
    seen = _mm_or_si128(seen, _mm_cmpeq_epi8(block, open));
    const __m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);
    const __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
    acc = _mm_xor_si128(_mm_xor_si128(hi, lo), _mm_shuffle_epi8(block, rev));
  }
  bool b = _mm_movemask_epi8(seen) != 0;
  // (low lane: x^64 mod P; high lane: m, mu's terms under x^64; then P - x^16)
  const __m128i r = _mm_set_epi64x(static_cast<int64_t>(BarrettMuLow()),
                                   static_cast<int64_t>(XPowModP(64)));
  const __m128i poly = _mm_cvtsi32_si128(0x1021);
  // H (x^64 mod P) + L: under 80 terms, the top 16 in the high lane.
  __m128i v = _mm_xor_si128(_mm_clmulepi64_si128(acc, r, 0x01), _mm_move_epi64(acc));
  // Their fold: V, under 64 terms.
  v = _mm_xor_si128(_mm_clmulepi64_si128(v, r, 0x01), _mm_move_epi64(v));
  // Q = V + floor(V m / x^64); the CRC is the low 16 bits of Q (P - x^16).
  const __m128i q = _mm_xor_si128(v, _mm_srli_si128(_mm_clmulepi64_si128(v, r, 0x10), 8));
  uint16_t crc = static_cast<uint16_t>(_mm_cvtsi128_si32(_mm_clmulepi64_si128(q, poly, 0x00)));
  const auto& t = internal::kCrc16Tables.v;
  for (; at < n; ++at) {
    b |= p[at] == '{';
    crc = static_cast<uint16_t>((crc << 8) ^ t[0][(crc >> 8) ^ p[at]]);
  }
  *brace = b;
  return crc;
}

// Crc16Clmul as a call, for the test hook (a caller without the target cannot
// inline it).
__attribute__((target("pclmul,ssse3"))) uint16_t Crc16ClmulCall(const uint8_t* p, size_t n,
                                                                bool* brace) {
  return Crc16Clmul(p, n, brace);
}

// KeySlots with Crc16Clmul for every key of 16 bytes or more (inlined, so
// that one key's chain of products overlaps the next key's).
__attribute__((target("pclmul,ssse3"))) void KeySlotsClmul(std::span<const std::string_view> keys, uint16_t* out) {
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + 8 < keys.size()) {  // a few keys ahead: a received request may not be in cache
      __builtin_prefetch(keys[i + 8].data());
      __builtin_prefetch(keys[i + 8].data() + keys[i + 8].size() - 1);
    }
    const std::string_view k = keys[i];
    if (k.size() < 16) {
      out[i] = static_cast<uint16_t>(KeySlotInline(k));
      continue;
    }
    bool brace;
    const uint16_t crc = Crc16Clmul(reinterpret_cast<const uint8_t*>(k.data()), k.size(), &brace);
    out[i] = brace ? static_cast<uint16_t>(KeySlot(k)) : static_cast<uint16_t>(crc % kClusterSlots);
  }
}
#endif

}  // namespace

namespace internal {
bool Crc16ClmulAvailable() {
#if defined(__x86_64__)
  return HasClmul();
#else
  return false;
#endif
}

uint16_t Crc16ClmulForTest(std::string_view bytes, bool* brace) {
#if defined(__x86_64__)
  if (bytes.size() >= 16 && HasClmul())
    return Crc16ClmulCall(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), brace);
#endif
  *brace = bytes.find('{') != std::string_view::npos;
  return Crc16Fast(bytes);
}

void KeySlotsTable(std::span<const std::string_view> keys, uint16_t* out) {
  const auto& t = internal::kCrc16Tables.v;
  // Crc16Fast's step (four bytes), and its one-byte tail step.
  auto step4 = [&t](uint16_t crc, const uint8_t* p) {
    return static_cast<uint16_t>(t[3][(crc >> 8) ^ p[0]] ^ t[2][(crc & 0xff) ^ p[1]] ^ t[1][p[2]] ^
                                 t[0][p[3]]);
  };
  auto step1 = [&t](uint16_t crc, uint8_t b) {
    return static_cast<uint16_t>((crc << 8) ^ t[0][(crc >> 8) ^ b]);
  };
  const size_t n = keys.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const std::string_view* k = &keys[i];
    const size_t len = k[0].size();
    bool plain = k[1].size() == len && k[2].size() == len && k[3].size() == len;
    for (int j = 0; j < 4 && plain; ++j)
      plain = len == 0 || std::memchr(k[j].data(), '{', len) == nullptr;
    if (!plain) {  // mixed lengths or a hash tag: one at a time
      for (int j = 0; j < 4; ++j) out[i + j] = static_cast<uint16_t>(KeySlotInline(k[j]));
      continue;
    }
    const auto* p0 = reinterpret_cast<const uint8_t*>(k[0].data());
    const auto* p1 = reinterpret_cast<const uint8_t*>(k[1].data());
    const auto* p2 = reinterpret_cast<const uint8_t*>(k[2].data());
    const auto* p3 = reinterpret_cast<const uint8_t*>(k[3].data());
    uint16_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    size_t at = 0;
    for (; at + 4 <= len; at += 4) {
      c0 = step4(c0, p0 + at);
      c1 = step4(c1, p1 + at);
      c2 = step4(c2, p2 + at);
      c3 = step4(c3, p3 + at);
    }
    for (; at < len; ++at) {
      c0 = step1(c0, p0[at]);
      c1 = step1(c1, p1[at]);
      c2 = step1(c2, p2[at]);
      c3 = step1(c3, p3[at]);
    }
    out[i] = static_cast<uint16_t>(c0 % kClusterSlots);
    out[i + 1] = static_cast<uint16_t>(c1 % kClusterSlots);
    out[i + 2] = static_cast<uint16_t>(c2 % kClusterSlots);
    out[i + 3] = static_cast<uint16_t>(c3 % kClusterSlots);
  }
  for (; i < n; ++i) out[i] = static_cast<uint16_t>(KeySlotInline(keys[i]));
}

}  // namespace internal

void KeySlots(std::span<const std::string_view> keys, uint16_t* out) {
#if defined(__x86_64__)
  if (HasClmul()) {
    KeySlotsClmul(keys, out);
    return;
  }
#endif
  internal::KeySlotsTable(keys, out);
}

}  // namespace pion
