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
#include <span>
#include <string_view>

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

// KeySlot for the hot path (the store's shard of every command's key, store.h):
// inline; a key with a '{' goes to KeySlot (the hash tag rule). Equal to KeySlot
// for every key.
inline uint32_t KeySlotInline(std::string_view key) {
  if (key.find('{') != std::string_view::npos) return KeySlot(key);
  return internal::Crc16Fast(key) % kClusterSlots;
}

// KeySlotInline of every key (out[i] for keys[i]), for a command of many keys
// (KV.BLOCK.MATCH). Where the CPU has PCLMULQDQ, a key of 16 bytes or more takes
// its CRC 16 bytes a step by carry-less multiplication (and its '{' test from
// the same loads); otherwise internal::KeySlotsTable.
void KeySlots(std::span<const std::string_view> keys, uint16_t* out);

namespace internal {
// KeySlots without PCLMULQDQ: four keys of one length at a time, their CRCs'
// table lookups interleaved, so that one key's chain of dependent loads hides
// another's.
void KeySlotsTable(std::span<const std::string_view> keys, uint16_t* out);
// Whether KeySlots uses the carry-less multiplication path on this CPU.
bool Crc16ClmulAvailable();
// Test hook: that path's CRC of `bytes` and whether they hold a '{' (the
// table's for fewer than 16 bytes or without PCLMULQDQ).
uint16_t Crc16ClmulForTest(std::string_view bytes, bool* brace);
}  // namespace internal

}  // namespace pion
