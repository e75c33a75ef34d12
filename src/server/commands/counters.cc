// Counters on string keys (docs/protocol.md "Keys"): INCR, INCRBY, DECR,
// DECRBY and INCRBYFLOAT, with Redis 7.0's number rules and texts. Each is
// one read-modify-write under the key's locks (store::OpPatch): the new
// digits replace the value where it lies (no allocation once the key exists)
// and only they are logged (a STRPATCH record); the TTL is kept.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::server {

namespace {

// Redis's MAX_LONG_DOUBLE_CHARS: longer strings are not floats.
constexpr size_t kMaxLongDoubleChars = 5 * 1024;

// Redis's string2ld: the whole string is one strtold number, no leading
// space, no NaN, no overflow to infinity or underflow to zero.
bool ParseLongDouble(std::string_view s, long double* out) {
  if (s.empty() || s.size() >= kMaxLongDoubleChars) return false;
  char buf[kMaxLongDoubleChars];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  if (isspace(static_cast<unsigned char>(buf[0]))) return false;
  errno = 0;
  char* end = nullptr;
  long double v = strtold(buf, &end);
  if (end != buf + s.size()) return false;
  if (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0.0L)) return false;
  if (errno == EINVAL || std::isnan(v)) return false;
  *out = v;
  return true;
}

// Redis's ld2string in its "human" mode: 17 decimals, trailing zeros (and a
// bare point) removed, "-0" written "0".
std::string FormatLongDouble(long double v) {
  char buf[kMaxLongDoubleChars];
  int n = snprintf(buf, sizeof(buf), "%.17Lf", v);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(buf)) return "0";
  size_t l = static_cast<size_t>(n);
  if (std::memchr(buf, '.', l) != nullptr) {
    while (l > 0 && buf[l - 1] == '0') --l;
    if (l > 0 && buf[l - 1] == '.') --l;
  }
  if (l == 2 && buf[0] == '-' && buf[1] == '0') return "0";
  return std::string(buf, l);
}

void IncrBy(CommandContext& ctx, int64_t incr) {
  char digits[24];
  int64_t result = 0;
  std::string_view err;
  uint64_t lsn = 0;
  auto r = store::OpPatch({*ctx.env->store(), &lsn}, ctx.args[1],
                          [&](std::string_view cur, bool exists, store::StrEdit* ed) {
                            int64_t v = 0;
                            if (exists) {
                              auto p = ParseInt64Strict(cur);
                              if (!p) {
                                err = kErrNotInteger;
                                return Status::InvalidArgument("");
                              }
                              v = *p;
                            }
                            if (__builtin_add_overflow(v, incr, &result)) {
                              err = kErrIncrOverflow;
                              return Status::InvalidArgument("");
                            }
                            int n = snprintf(digits, sizeof(digits), "%lld",
                                             static_cast<long long>(result));
                            ed->offset = 0;
                            ed->bytes = std::string_view(digits, static_cast<size_t>(n));
                            ed->truncate = true;
                            ed->edited = false;
                            return Status::OK();
                          });
  ctx.wait_lsn = lsn;
  if (!err.empty()) return ctx.reply->Error(err);
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  ctx.reply->Integer(result);
}

bool IncrArg(CommandContext& ctx, int64_t* out) {
  auto v = ParseInt64Strict(ctx.args[2]);
  if (!v) {
    ctx.reply->Error(kErrNotInteger);
    return false;
  }
  *out = *v;
  return true;
}

void Incr(CommandContext& ctx) { IncrBy(ctx, 1); }
void Decr(CommandContext& ctx) { IncrBy(ctx, -1); }

void IncrByCmd(CommandContext& ctx) {
  int64_t n;
  if (IncrArg(ctx, &n)) IncrBy(ctx, n);
}

void DecrByCmd(CommandContext& ctx) {
  int64_t n;
  if (!IncrArg(ctx, &n)) return;
  if (n == INT64_MIN) return ctx.reply->Error(kErrDecrOverflow);
  IncrBy(ctx, -n);
}

void IncrByFloat(CommandContext& ctx) {
  long double incr;
  std::string text;
  std::string_view err;
  uint64_t lsn = 0;
  auto r = store::OpPatch(
      {*ctx.env->store(), &lsn}, ctx.args[1],
      [&](std::string_view cur, bool exists, store::StrEdit* ed) {
        long double v = 0;
        // As Redis: the stored value is checked first, then the increment.
        if ((exists && !ParseLongDouble(cur, &v)) || !ParseLongDouble(ctx.args[2], &incr)) {
          err = kErrNotFloat;
          return Status::InvalidArgument("");
        }
        v += incr;
        if (std::isnan(v) || std::isinf(v)) {
          err = kErrIncrNanInf;
          return Status::InvalidArgument("");
        }
        text = FormatLongDouble(v);
        ed->offset = 0;
        ed->bytes = text;
        ed->truncate = true;
        ed->edited = false;
        return Status::OK();
      });
  ctx.wait_lsn = lsn;
  if (!err.empty()) return ctx.reply->Error(err);
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  ctx.reply->Bulk(text);
}

}  // namespace

void AddCounterCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kW = kCmdWrite | kCmdKvcache | kCmdDenyOom | kCmdFast;
  size_t first = out->size();
  out->push_back({"INCR", 2, kW, 1, 1, 1, Incr, "Increments the integer value of a key by one.",
                  "string", "1.0.0", "key"});
  out->push_back({"INCRBY", 3, kW, 1, 1, 1, IncrByCmd,
                  "Increments the integer value of a key by a number.", "string", "1.0.0",
                  "key increment"});
  out->push_back({"DECR", 2, kW, 1, 1, 1, Decr, "Decrements the integer value of a key by one.",
                  "string", "1.0.0", "key"});
  out->push_back({"DECRBY", 3, kW, 1, 1, 1, DecrByCmd,
                  "Decrements the integer value of a key by a number.", "string", "1.0.0",
                  "key decrement"});
  out->push_back({"INCRBYFLOAT", 3, kW, 1, 1, 1, IncrByFloat,
                  "Increments the floating point value of a key by a number.", "string", "2.6.0",
                  "key increment"});
  for (size_t i = first; i < out->size(); ++i) (*out)[i].acl_categories |= kAclString;
}

}  // namespace pion::server
