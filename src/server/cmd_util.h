// Argument helpers shared by the command families: strict integers with the
// Redis error text, keyword matching, and the reply of a Status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/strutil.h"
#include "server/command.h"
#include "server/errors.h"

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

inline void ReplyStatus(CommandContext& ctx, const Status& st) {
  ctx.reply->Error(StatusToError(st));
}

}  // namespace pion::server
