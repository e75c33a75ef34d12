#include "base/keyslot.h"

#include <cstring>

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

void KeySlots(std::span<const std::string_view> keys, uint16_t* out) {
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

}  // namespace pion
