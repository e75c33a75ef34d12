// Little-endian byte writer and bounds-checked reader shared by the record codecs
// (wal_format.cc, str_format.cc): internal to src/persist.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "persist/wal_format.h"

namespace pion::persist::codec {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(v); }
  void U16(uint16_t v) { Raw(&v, 2); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void Name(std::string_view s) {
    U16(static_cast<uint16_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }

 private:
  std::vector<uint8_t>* out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> p) : p_(p) {}
  bool U8(uint8_t* v) {
    return Take(1, [&](const uint8_t* b) { *v = *b; });
  }
  bool U16(uint16_t* v) {
    return Take(2, [&](const uint8_t* b) { *v = GetU16(b); });
  }
  bool U32(uint32_t* v) {
    return Take(4, [&](const uint8_t* b) { *v = GetU32(b); });
  }
  bool U64(uint64_t* v) {
    return Take(8, [&](const uint8_t* b) { *v = GetU64(b); });
  }
  bool Name(std::string_view* s) {
    uint16_t n;
    if (!U16(&n) || n == 0 || n > kMaxNameBytes || n > left()) return false;
    *s = std::string_view(reinterpret_cast<const char*>(p_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool Bytes(uint64_t n, const uint8_t** out) {
    if (n > left()) return false;
    *out = p_.data() + pos_;
    pos_ += n;
    return true;
  }
  size_t left() const { return p_.size() - pos_; }

 private:
  template <typename F>
  bool Take(size_t n, F f) {
    if (left() < n) return false;
    f(p_.data() + pos_);
    pos_ += n;
    return true;
  }
  std::span<const uint8_t> p_;
  size_t pos_ = 0;
};

inline Status Bad(std::string_view what) { return Status::Corruption(what); }

}  // namespace pion::persist::codec
