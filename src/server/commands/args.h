// Argument helpers shared by the command families: strict integers with the
// Redis error text, keyword matching, and the reply of a Status. The grammar
// the Redis module shares (KV.PREFIX.*, V.*) is in kv_format.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "kvproto/kv_format.h"
#include "server/commands/command.h"

namespace pion::server {

// The error callback of the shared parsers (kv_format.h): replies on `ctx`.
inline ErrorFn ReplyErrors(CommandContext& ctx) {
  return [&ctx](std::string_view e) { ctx.reply->Error(e); };
}

// Parses a strict integer in [lo, hi]. On failure replies "value is not an
// integer" (not a number) or `range_error` (out of range) and returns false.
inline bool ArgInRange(CommandContext& ctx, std::string_view arg, int64_t lo, int64_t hi,
                       std::string_view range_error, int64_t* out) {
  return IntArgInRange(ReplyErrors(ctx), arg, lo, hi, range_error, out);
}

inline bool IsKeyword(std::string_view arg, std::string_view kw) {
  return EqualsIgnoreCase(arg, kw);
}

// InfoField (one "name:value\r\n" line of an INFO-style body) is kv_format.h's.

inline void ReplyStatus(CommandContext& ctx, const Status& st) {
  ctx.reply->Error(StatusToError(st));
}

// True when `st` is OK; else replies its error and returns false.
inline bool OkOrReply(CommandContext& ctx, const Status& st) {
  if (st.ok()) return true;
  ReplyStatus(ctx, st);
  return false;
}

}  // namespace pion::server
