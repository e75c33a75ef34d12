// Redis Cluster's key -> slot rule (the cluster specification): CRC16 (XMODEM:
// polynomial 0x1021, initial value 0, no reflection) of the key, or of its hash
// tag, modulo 16384. The hash tag is what lies between the first '{' and the
// first '}' after it, when that is not empty. "{app|v1}" and "{app|v1}_pk" have
// the same tag and so the same slot; "app" and "app_pk" (almost always) do not.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace pion {

inline constexpr uint32_t kClusterSlots = 16384;

// Table-driven; Crc16XmodemScalar is the bit-at-a-time reference it is tested against.
uint16_t Crc16Xmodem(std::string_view bytes);
uint16_t Crc16XmodemScalar(std::string_view bytes);
// The part of `key` that is hashed: its hash tag, or the whole key.
std::string_view HashedPart(std::string_view key);
uint32_t KeySlot(std::string_view key);

namespace internal {
// The CRC of each byte value alone (the scalar loop's eight steps, precomputed).
struct Crc16Table {
  uint16_t v[256];
  constexpr Crc16Table() : v() {
    for (int i = 0; i < 256; ++i) {
      uint16_t crc = static_cast<uint16_t>(i << 8);
      for (int bit = 0; bit < 8; ++bit)
        crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                             : static_cast<uint16_t>(crc << 1);
      v[i] = crc;
    }
  }
};
inline constexpr Crc16Table kCrc16Table;
}  // namespace internal

// KeySlot for the hot path (the store's shard of every command's key, store.h):
// inline; a key with a '{' goes to KeySlot (the hash tag rule). Equal to KeySlot
// for every key.
inline uint32_t KeySlotInline(std::string_view key) {
  if (key.find('{') != std::string_view::npos) return KeySlot(key);
  uint16_t crc = 0;
  for (char c : key)
    crc = static_cast<uint16_t>(
        (crc << 8) ^ internal::kCrc16Table.v[((crc >> 8) ^ static_cast<uint8_t>(c)) & 0xff]);
  return crc % kClusterSlots;
}

}  // namespace pion
