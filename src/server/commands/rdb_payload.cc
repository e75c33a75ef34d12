#include "server/commands/rdb_payload.h"

#include <array>
#include <cstring>

#include "base/strutil.h"

namespace pion::server {

namespace {

constexpr uint64_t kCrc64Poly = 0x95ac9329ac4bc9b5ull;  // 0xad93d23594c935a9 bit-reversed

const std::array<uint64_t, 256>& Crc64Table() {
  static const std::array<uint64_t, 256> t = [] {
    std::array<uint64_t, 256> r{};
    for (uint64_t i = 0; i < 256; ++i) {
      uint64_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc64Poly : c >> 1;
      r[i] = c;
    }
    return r;
  }();
  return t;
}

void PutLength(std::string* out, uint64_t n) {
  if (n < (1u << 6)) {
    out->push_back(static_cast<char>(n));
  } else if (n < (1u << 14)) {
    out->push_back(static_cast<char>(0x40 | (n >> 8)));
    out->push_back(static_cast<char>(n & 0xff));
  } else if (n <= UINT32_MAX) {
    out->push_back(static_cast<char>(0x80));
    for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((n >> s) & 0xff));
  } else {
    out->push_back(static_cast<char>(0x81));
    for (int s = 56; s >= 0; s -= 8) out->push_back(static_cast<char>((n >> s) & 0xff));
  }
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool Byte(uint8_t* b) {
    if (pos_ >= s_.size()) return false;
    *b = static_cast<uint8_t>(s_[pos_++]);
    return true;
  }
  bool Bytes(size_t n, std::string_view* out) {
    if (s_.size() - pos_ < n) return false;
    *out = s_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  // A length; *special is set (and the 6-bit code returned) for 11xxxxxx.
  bool Length(uint64_t* n, bool* special) {
    uint8_t b;
    if (!Byte(&b)) return false;
    *special = false;
    switch (b >> 6) {
      case 0:
        *n = b & 0x3f;
        return true;
      case 1: {
        uint8_t c;
        if (!Byte(&c)) return false;
        *n = (uint64_t{b & 0x3fu} << 8) | c;
        return true;
      }
      case 2: {
        int bytes = b == 0x80 ? 4 : b == 0x81 ? 8 : 0;
        if (bytes == 0) return false;
        uint64_t v = 0;
        for (int i = 0; i < bytes; ++i) {
          uint8_t c;
          if (!Byte(&c)) return false;
          v = (v << 8) | c;
        }
        *n = v;
        return true;
      }
      default:
        *special = true;
        *n = b & 0x3f;
        return true;
    }
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

// LZF (as Redis's lzf_d.c defines the format): a control byte below 32 is a
// literal run of ctrl+1 bytes; otherwise a back reference of (ctrl >> 5) + 2
// bytes (7 means one more length byte follows) at distance
// ((ctrl & 31) << 8 | next byte) + 1.
bool LzfDecompress(std::string_view in, std::string* out, size_t want) {
  out->clear();
  out->reserve(want);
  size_t i = 0;
  while (i < in.size()) {
    uint8_t ctrl = static_cast<uint8_t>(in[i++]);
    if (ctrl < 32) {
      size_t n = size_t{ctrl} + 1;
      if (in.size() - i < n || out->size() + n > want) return false;
      out->append(in.substr(i, n));
      i += n;
      continue;
    }
    size_t len = ctrl >> 5;
    if (len == 7) {
      if (i >= in.size()) return false;
      len += static_cast<uint8_t>(in[i++]);
    }
    if (i >= in.size()) return false;
    size_t dist = ((size_t{ctrl} & 0x1f) << 8) + static_cast<uint8_t>(in[i++]) + 1;
    len += 2;
    if (dist > out->size() || out->size() + len > want) return false;
    size_t from = out->size() - dist;
    for (size_t k = 0; k < len; ++k) out->push_back((*out)[from + k]);
  }
  return out->size() == want;
}

}  // namespace

uint64_t Crc64Jones(uint64_t crc, const void* data, size_t n) {
  const auto& t = Crc64Table();
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

std::string DumpString(std::string_view value) {
  std::string out;
  out.reserve(value.size() + 24);
  out.push_back(0);  // RDB_TYPE_STRING
  std::optional<int64_t> iv;
  if (value.size() <= 11) iv = ParseInt64Strict(value);
  if (iv && *iv >= INT8_MIN && *iv <= INT8_MAX) {
    out.push_back(static_cast<char>(0xc0));
    out.push_back(static_cast<char>(static_cast<int8_t>(*iv)));
  } else if (iv && *iv >= INT16_MIN && *iv <= INT16_MAX) {
    out.push_back(static_cast<char>(0xc1));
    auto u = static_cast<uint16_t>(static_cast<int16_t>(*iv));
    for (int s = 0; s < 16; s += 8) out.push_back(static_cast<char>((u >> s) & 0xff));
  } else if (iv && *iv >= INT32_MIN && *iv <= INT32_MAX) {
    out.push_back(static_cast<char>(0xc2));
    auto u = static_cast<uint32_t>(static_cast<int32_t>(*iv));
    for (int s = 0; s < 32; s += 8) out.push_back(static_cast<char>((u >> s) & 0xff));
  } else {
    PutLength(&out, value.size());
    out.append(value);
  }
  out.push_back(static_cast<char>(kRdbVersion & 0xff));
  out.push_back(static_cast<char>(kRdbVersion >> 8));
  uint64_t crc = Crc64Jones(0, out.data(), out.size());
  for (int s = 0; s < 64; s += 8) out.push_back(static_cast<char>((crc >> s) & 0xff));
  return out;
}

std::optional<std::string> RestoreString(std::string_view p, PayloadError* err) {
  *err = PayloadError::kVersionOrChecksum;
  if (p.size() < 10) return std::nullopt;
  const auto* f = reinterpret_cast<const uint8_t*>(p.data() + p.size() - 10);
  uint16_t ver = static_cast<uint16_t>(f[0] | (f[1] << 8));
  if (ver > kRdbVersion) return std::nullopt;
  uint64_t crc = Crc64Jones(0, p.data(), p.size() - 8), stored = 0;
  for (int i = 7; i >= 0; --i) stored = (stored << 8) | f[2 + i];
  if (crc != stored) return std::nullopt;
  *err = PayloadError::kBadFormat;
  Reader rd(p.substr(0, p.size() - 10));
  uint8_t type;
  if (!rd.Byte(&type) || type != 0) return std::nullopt;
  uint64_t n;
  bool special;
  if (!rd.Length(&n, &special)) return std::nullopt;
  std::string_view raw;
  if (!special) {
    if (!rd.Bytes(n, &raw)) return std::nullopt;
    *err = PayloadError::kNone;
    return std::string(raw);
  }
  if (n <= 2) {  // an integer of 1, 2 or 4 bytes, little endian, signed
    size_t bytes = size_t{1} << n;
    if (!rd.Bytes(bytes, &raw)) return std::nullopt;
    uint32_t u = 0;
    for (size_t i = 0; i < bytes; ++i) u |= uint32_t{static_cast<uint8_t>(raw[i])} << (8 * i);
    int64_t v = bytes == 1   ? static_cast<int8_t>(u)
                : bytes == 2 ? static_cast<int16_t>(u)
                             : static_cast<int32_t>(u);
    *err = PayloadError::kNone;
    return std::to_string(v);
  }
  if (n != 3) return std::nullopt;
  uint64_t clen, len;
  bool s1, s2;
  if (!rd.Length(&clen, &s1) || !rd.Length(&len, &s2) || s1 || s2) return std::nullopt;
  if (!rd.Bytes(clen, &raw) || len > (uint64_t{1} << 32)) return std::nullopt;
  std::string out;
  if (!LzfDecompress(raw, &out, len)) return std::nullopt;
  *err = PayloadError::kNone;
  return out;
}

}  // namespace pion::server
