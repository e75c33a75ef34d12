// Redis Cluster's key -> slot rule (the cluster specification): CRC16 (XMODEM:
// polynomial 0x1021, initial value 0, no reflection) of the key, or of its hash
// tag, modulo 16384. The hash tag is what lies between the first '{' and the
// first '}' after it, when that is not empty. "{app|v1}" and "{app|v1}_pk" have
// the same tag and so the same slot; "app" and "app_pk" (almost always) do not.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pion {

inline constexpr uint32_t kClusterSlots = 16384;

// Table-driven (slicing by 4); Crc16XmodemScalar is the bit-at-a-time reference
// it is tested against.
uint16_t Crc16Xmodem(std::string_view bytes);
uint16_t Crc16XmodemScalar(std::string_view bytes);
// The part of `key` that is hashed: its hash tag, or the whole key.
std::string_view HashedPart(std::string_view key);
uint32_t KeySlot(std::string_view key);

namespace internal {
// v[k][x]: the CRC of byte x followed by k zero bytes (v[0] is the classic
// byte table, the scalar loop's eight steps precomputed): slicing by 4.
struct Crc16Tables {
  uint16_t v[4][256];
  constexpr Crc16Tables() : v() {
    for (int i = 0; i < 256; ++i) {
      uint16_t crc = static_cast<uint16_t>(i << 8);
      for (int bit = 0; bit < 8; ++bit)
        crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                             : static_cast<uint16_t>(crc << 1);
      v[0][i] = crc;
    }
    for (int k = 1; k < 4; ++k)
      for (int i = 0; i < 256; ++i)
        v[k][i] = static_cast<uint16_t>((v[k - 1][i] << 8) ^ v[0][v[k - 1][i] >> 8]);
  }
};
inline constexpr Crc16Tables kCrc16Tables;

// Crc16Xmodem, four bytes a step.
inline uint16_t Crc16Fast(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  uint16_t crc = 0;
  const auto& t = kCrc16Tables.v;
  for (; n >= 4; n -= 4, p += 4)
    crc = static_cast<uint16_t>(t[3][(crc >> 8) ^ p[0]] ^ t[2][(crc & 0xff) ^ p[1]] ^ t[1][p[2]] ^
                                t[0][p[3]]);
  for (; n > 0; --n, ++p) crc = static_cast<uint16_t>((crc << 8) ^ t[0][(crc >> 8) ^ *p]);
  return crc;
}
}  // namespace internal

// Whether `key` holds a '{', so that it may have a hash tag (HashedPart is
// then the one to ask); key.find('{') is the reference. 16 bytes a step.
inline bool MayHaveHashTag(std::string_view key) {
#if defined(__SSE2__)
  const size_t n = key.size();
  if (n >= 16) {
    const __m128i open = _mm_set1_epi8('{');
    const char* p = key.data();
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
      if (_mm_movemask_epi8(
              _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), open)) != 0)
        return true;
    // The last bytes: the 16 that end the key (some seen already).
    return i < n && _mm_movemask_epi8(_mm_cmpeq_epi8(
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + n - 16)), open)) != 0;
  }
#endif
  for (char c : key)  // a short key: inline, no call
    if (c == '{') return true;
  return false;
}

}  // namespace pion
