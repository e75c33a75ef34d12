// RespValue: a decoded RESP2/RESP3 reply, for tests that assert on what a
// client would read. ParseResp decodes one reply from the wire bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace pion::server::testing {

struct RespValue {
  enum class Type { kSimple, kError, kInteger, kBulk, kNull, kArray, kMap, kSet, kDouble, kBool };
  Type type = Type::kNull;
  std::string str;               // kSimple, kError, kBulk (verbatim text too), kDouble's text
  int64_t integer = 0;           // kInteger, kBool (0/1)
  std::vector<RespValue> elems;  // kArray, kSet; kMap: key, value, key, value, ...

  bool is_error() const { return type == Type::kError; }
  // The error line ("ERR ...") or "" when this is not an error.
  std::string_view error() const { return is_error() ? std::string_view(str) : ""; }
  bool is_integer(int64_t v) const { return type == Type::kInteger && integer == v; }
  size_t size() const { return elems.size(); }
  const RespValue& operator[](size_t i) const { return elems.at(i); }
  // A map's (or a RESP2 flat key/value array's) value for `key`; nullptr if none.
  const RespValue* Find(std::string_view key) const;
  // The string elements of an array (bulk or simple), in order.
  std::vector<std::string> Strings() const;
  std::string Debug() const;
};

// True for a simple, bulk or verbatim string with exactly this text.
bool operator==(const RespValue& v, std::string_view s);
void PrintTo(const RespValue& v, std::ostream* os);

// Decodes one reply from the front of `*in` and removes it; nullopt (and
// `*in` unchanged) when `*in` does not start with a whole, valid reply.
std::optional<RespValue> ParseResp(std::string_view* in);

}  // namespace pion::server::testing
