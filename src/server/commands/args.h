// Argument helpers shared by the command families: strict integers with the
// Redis error text, keyword matching, and the reply of a Status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/strutil.h"
#include "server/commands/command.h"
#include "server/commands/errors.h"

namespace pion::server {

// Parses a strict integer in [lo, hi]. On failure replies "value is not an
// integer" (not a number) or `range_error` (out of range) and returns false.
inline bool ArgInRange(CommandContext& ctx, std::string_view arg, int64_t lo, int64_t hi,
                       std::string_view range_error, int64_t* out) {
  auto v = ParseInt64Strict(arg);
  if (!v) {
    ctx.reply->Error(kErrNotInteger);
    return false;
  }
  if (*v < lo || *v > hi) {
    ctx.reply->Error(range_error);
    return false;
  }
  *out = *v;
  return true;
}

inline bool IsKeyword(std::string_view arg, std::string_view kw) {
  return EqualsIgnoreCase(arg, kw);
}

// Appends one "name:value\r\n" line of an INFO-style body (INFO sections,
// KV.PREFIX.INFO, V.INFO).
inline void InfoField(std::string* out, std::string_view name, std::string_view value) {
  out->append(name);
  out->push_back(':');
  out->append(value);
  out->append("\r\n");
}
inline void InfoField(std::string* out, std::string_view name, uint64_t value) {
  InfoField(out, name, std::to_string(value));
}

inline void ReplyStatus(CommandContext& ctx, const Status& st) {
  ctx.reply->Error(StatusToError(st));
}

}  // namespace pion::server
