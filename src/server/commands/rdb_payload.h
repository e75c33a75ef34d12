// Redis's DUMP payload for a string value (what DUMP returns and RESTORE and
// MIGRATE-based tools read): the RDB object type (0, string), the value in
// RDB string encoding, the RDB version (2 bytes, little endian; pion writes
// 10, Redis 7.0's) and a CRC-64 of everything before it (8 bytes, little
// endian). CRC-64 is Redis's "Jones" variant: reflected polynomial
// 0xad93d23594c935a9, initial value 0, no final xor (check value of
// "123456789": 0xe9c6d914c4b8d9ca).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pion::server {

inline constexpr uint16_t kRdbVersion = 10;

uint64_t Crc64Jones(uint64_t crc, const void* data, size_t n);

// The payload of a string value: a canonical integer of up to 11 characters
// that fits 32 bits in its integer encoding (1, 2 or 4 bytes), anything else
// as length and bytes (uncompressed: every RDB reader takes it).
std::string DumpString(std::string_view value);

enum class PayloadError { kNone, kVersionOrChecksum, kBadFormat };
// The value of a payload: kVersionOrChecksum when it is shorter than its
// footer, names a version above 10 or fails its CRC; kBadFormat when it is
// not a string object in a valid encoding (integers and LZF compression
// included, as Redis writes them).
std::optional<std::string> RestoreString(std::string_view payload, PayloadError* err);

}  // namespace pion::server
