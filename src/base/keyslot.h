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

uint16_t Crc16Xmodem(std::string_view bytes);
// The part of `key` that is hashed: its hash tag, or the whole key.
std::string_view HashedPart(std::string_view key);
uint32_t KeySlot(std::string_view key);

}  // namespace pion
