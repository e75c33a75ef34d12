#include "base/keyslot.h"

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

}  // namespace pion
