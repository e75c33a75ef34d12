// Bit commands on string keys (docs/protocol.md "Keys"): SETBIT, GETBIT,
// BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO, with Redis 7.0's
// replies and texts. Bit 0 is the most significant bit of byte 0. Writes are
// one read-modify-write under the key's locks (store::OpPatch): the bytes
// they change are written in place and logged alone (SETBIT logs one byte).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/command_table.h"
#include "store/key_ops.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::server {

namespace {

// A bit offset (GETBIT/SETBIT/BITFIELD): non-negative and inside the largest
// string (proto-max-bulk-len bytes); with `bits` > 0 a "#n" form means n * bits.
bool BitOffsetArg(CommandContext& ctx, std::string_view a, int bits, uint64_t* out) {
  bool hash = bits > 0 && !a.empty() && a[0] == '#';
  auto v = ParseInt64Strict(hash ? a.substr(1) : a);
  int64_t off = v ? *v : -1;
  if (v && hash && __builtin_mul_overflow(*v, static_cast<int64_t>(bits), &off)) off = -1;
  if (off < 0 || (static_cast<uint64_t>(off) >> 3) >= ctx.env->config().proto_max_bulk_len) {
    ctx.reply->Error(kErrBitOffset);
    return false;
  }
  *out = static_cast<uint64_t>(off);
  return true;
}

inline int BitAt(std::string_view s, uint64_t bit) {
  uint64_t byte = bit >> 3;
  if (byte >= s.size()) return 0;
  return (static_cast<uint8_t>(s[byte]) >> (7 - (bit & 7))) & 1;
}

// Reads a string as Redis's GET would for the bit commands (nullptr: missing).
bool ReadValue(CommandContext& ctx, std::string_view key, store::StrRef* out) {
  auto r = store::OpGet({*ctx.env->store()}, key);
  if (!r.ok()) {
    ReplyStatus(ctx, r.status());
    return false;
  }
  *out = *r;
  return true;
}

void SetBit(CommandContext& ctx) {
  uint64_t off;
  if (!BitOffsetArg(ctx, ctx.args[2], 0, &off)) return;
  auto on = ParseInt64Strict(ctx.args[3]);
  if (!on || (*on & ~int64_t{1}) != 0) return ctx.reply->Error(kErrBitValue);
  int old = 0;
  char byte = 0;
  uint64_t lsn = 0;
  auto r = store::OpPatch(
      {*ctx.env->store(), &lsn}, ctx.args[1], [&](std::string_view cur, bool, store::StrEdit* ed) {
        uint64_t at = off >> 3;
        uint8_t b = at < cur.size() ? static_cast<uint8_t>(cur[at]) : 0;
        int shift = 7 - static_cast<int>(off & 7);
        old = (b >> shift) & 1;
        if (at < cur.size() && old == *on) {
          ed->write = false;  // nothing changes
          return Status::OK();
        }
        b = static_cast<uint8_t>((b & ~(1u << shift)) | (static_cast<unsigned>(*on) << shift));
        byte = static_cast<char>(b);
        ed->offset = at;
        ed->bytes = std::string_view(&byte, 1);
        return Status::OK();
      });
  ctx.wait_lsn = lsn;
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  ctx.reply->Integer(old);
}

void GetBit(CommandContext& ctx) {
  uint64_t off;
  if (!BitOffsetArg(ctx, ctx.args[2], 0, &off)) return;
  store::StrRef v;
  if (!ReadValue(ctx, ctx.args[1], &v)) return;
  ctx.reply->Integer(v ? BitAt(v->view(), off) : 0);
}

uint64_t Popcount(const uint8_t* p, uint64_t n) {
  uint64_t c = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    c += static_cast<uint64_t>(__builtin_popcountll(w));
  }
  for (; i < n; ++i) c += static_cast<uint64_t>(__builtin_popcount(p[i]));
  return c;
}

// Resolves a [start, end] range (negative from the end) over `total` units;
// false when it is empty.
bool ResolveRange(int64_t total, int64_t* start, int64_t* end) {
  if (*start < 0) *start += total;
  if (*end < 0) *end += total;
  if (*start < 0) *start = 0;
  if (*end < 0) *end = 0;
  if (*end >= total) *end = total - 1;
  return *start <= *end;
}

// BITCOUNT key [start end [BYTE|BIT]]
void BitCount(CommandContext& ctx) {
  store::StrRef v;
  if (!ReadValue(ctx, ctx.args[1], &v)) return;
  if (!v) return ctx.reply->Integer(0);
  std::string_view s = v->view();
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t argc = ctx.args.size();
  if (argc == 2) return ctx.reply->Integer(static_cast<int64_t>(Popcount(p, s.size())));
  if (argc != 4 && argc != 5) return ctx.reply->Error(kErrSyntaxError);
  auto a = ParseInt64Strict(ctx.args[2]);
  auto b = ParseInt64Strict(ctx.args[3]);
  if (!a || !b) return ctx.reply->Error(kErrNotInteger);
  int64_t start = *a, end = *b;
  if (start < 0 && end < 0 && start > end) return ctx.reply->Integer(0);
  bool bit = false;
  if (argc == 5) {
    if (IsKeyword(ctx.args[4], "BIT"))
      bit = true;
    else if (!IsKeyword(ctx.args[4], "BYTE"))
      return ctx.reply->Error(kErrSyntaxError);
  }
  int64_t total = static_cast<int64_t>(s.size()) * (bit ? 8 : 1);
  if (!ResolveRange(total, &start, &end)) return ctx.reply->Integer(0);
  if (!bit)
    return ctx.reply->Integer(
        static_cast<int64_t>(Popcount(p + start, static_cast<uint64_t>(end - start + 1))));
  // Whole bytes in the middle, single bits at the edges.
  uint64_t b0 = static_cast<uint64_t>(start), b1 = static_cast<uint64_t>(end);
  uint64_t n = 0;
  while (b0 <= b1 && (b0 & 7) != 0) n += static_cast<uint64_t>(BitAt(s, b0++));
  while (b1 >= b0 && (b1 & 7) != 7) n += static_cast<uint64_t>(BitAt(s, b1--));
  if (b0 <= b1) n += Popcount(p + (b0 >> 3), ((b1 - b0) >> 3) + 1);
  ctx.reply->Integer(static_cast<int64_t>(n));
}

// BITPOS key bit [start [end [BYTE|BIT]]]
void BitPos(CommandContext& ctx) {
  auto bitv = ParseInt64Strict(ctx.args[2]);
  if (!bitv) return ctx.reply->Error(kErrNotInteger);
  if (*bitv != 0 && *bitv != 1) return ctx.reply->Error(kErrBitArg);
  const int want = static_cast<int>(*bitv);
  store::StrRef v;
  if (!ReadValue(ctx, ctx.args[1], &v)) return;
  if (!v) return ctx.reply->Integer(want ? -1 : 0);
  std::string_view s = v->view();
  size_t argc = ctx.args.size();
  bool isbit = false, end_given = false;
  int64_t start = 0, end = 0;
  const int64_t len = static_cast<int64_t>(s.size());
  if (argc >= 4 && argc <= 6) {
    auto a = ParseInt64Strict(ctx.args[3]);
    if (!a) return ctx.reply->Error(kErrNotInteger);
    start = *a;
    if (argc == 6) {
      if (IsKeyword(ctx.args[5], "BIT"))
        isbit = true;
      else if (!IsKeyword(ctx.args[5], "BYTE"))
        return ctx.reply->Error(kErrSyntaxError);
    }
    if (argc >= 5) {
      auto b = ParseInt64Strict(ctx.args[4]);
      if (!b) return ctx.reply->Error(kErrNotInteger);
      end = *b;
      end_given = true;
    } else {
      end = isbit ? len * 8 + 7 : len - 1;
    }
  } else if (argc == 3) {
    end = len - 1;
  } else {
    return ctx.reply->Error(kErrSyntaxError);
  }
  int64_t total = isbit ? len * 8 : len;
  if (!ResolveRange(total, &start, &end)) return ctx.reply->Integer(-1);
  uint64_t b0 = static_cast<uint64_t>(isbit ? start : start * 8);
  uint64_t b1 = static_cast<uint64_t>(isbit ? end : end * 8 + 7);
  const uint8_t skip = want ? 0x00 : 0xFF;  // a byte holding no wanted bit
  for (uint64_t i = b0; i <= b1;) {
    if ((i & 7) == 0 && i + 7 <= b1 && static_cast<uint8_t>(s[i >> 3]) == skip) {
      i += 8;
      continue;
    }
    if (BitAt(s, i) == want) return ctx.reply->Integer(static_cast<int64_t>(i));
    ++i;
  }
  // No clear bit in the string and no end given: the first bit past it (the
  // string reads as zero-padded on the right).
  if (want == 0 && !end_given) return ctx.reply->Integer(static_cast<int64_t>(b1 + 1));
  ctx.reply->Integer(-1);
}

// BITOP AND|OR|XOR|NOT destkey key [key ...]
void BitOp(CommandContext& ctx) {
  std::string_view op = ctx.args[1];
  enum { kAnd, kOr, kXor, kNot } code;
  if (IsKeyword(op, "AND"))
    code = kAnd;
  else if (IsKeyword(op, "OR"))
    code = kOr;
  else if (IsKeyword(op, "XOR"))
    code = kXor;
  else if (IsKeyword(op, "NOT"))
    code = kNot;
  else
    return ctx.reply->Error(kErrSyntaxError);
  if (code == kNot && ctx.args.size() != 4) return ctx.reply->Error(kErrBitopNot);
  std::vector<store::StrRef> src;
  size_t maxlen = 0, minlen = SIZE_MAX;
  for (size_t i = 3; i < ctx.args.size(); ++i) {
    store::StrRef v;
    if (!ReadValue(ctx, ctx.args[i], &v)) return;
    size_t n = v ? v->size : 0;
    maxlen = std::max(maxlen, n);
    minlen = std::min(minlen, n);
    src.push_back(std::move(v));
  }
  uint64_t lsn = 0;
  if (maxlen == 0) {
    // An empty result deletes the destination (as Redis).
    std::string_view dst = ctx.args[2];
    auto r = store::OpDelete({*ctx.env->store(), &lsn}, std::span<const std::string_view>(&dst, 1));
    ctx.wait_lsn = lsn;
    if (!r.ok()) return ReplyStatus(ctx, r.status());
    return ctx.reply->Integer(0);
  }
  auto out = store::StrValue::TryMake(maxlen);
  if (!out) return ctx.reply->Error(kErrNoMemory);
  uint8_t* d = out->data;
  auto byte = [&](size_t k, size_t i) -> uint8_t {
    return src[k] && i < src[k]->size ? src[k]->data[i] : 0;
  };
  for (size_t i = 0; i < maxlen; ++i) {
    uint8_t acc = byte(0, i);
    if (code == kNot) acc = static_cast<uint8_t>(~acc);
    for (size_t k = 1; k < src.size(); ++k) {
      uint8_t b = byte(k, i);
      if (code == kAnd)
        acc &= b;
      else if (code == kOr)
        acc |= b;
      else
        acc ^= b;
    }
    d[i] = acc;
  }
  (void)minlen;
  store::SetOptions o;
  auto r = store::OpSet({*ctx.env->store(), &lsn}, ctx.args[2], std::move(out), o);
  ctx.wait_lsn = lsn;
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  ctx.reply->Integer(static_cast<int64_t>(maxlen));
}

// ---- BITFIELD ----

enum class Overflow : uint8_t { kWrap, kSat, kFail };
enum class FieldOp : uint8_t { kGet, kSet, kIncrBy };

struct Field {
  FieldOp op;
  Overflow ow;
  bool sign;
  int bits;
  uint64_t offset;
  int64_t arg;
};

bool FieldType(CommandContext& ctx, std::string_view a, bool* sign, int* bits) {
  auto n = a.size() > 1 ? ParseInt64Strict(a.substr(1)) : std::nullopt;
  bool ok =
      !a.empty() && (a[0] == 'i' || a[0] == 'u') && n && *n >= 1 && *n <= (a[0] == 'i' ? 64 : 63);
  if (!ok) {
    ctx.reply->Error(kErrBitfieldType);
    return false;
  }
  *sign = a[0] == 'i';
  *bits = static_cast<int>(*n);
  return true;
}

// Reads `bits` bits at `off` through `at` (a byte source).
template <class ByteAt>
uint64_t ReadBits(const ByteAt& at, uint64_t off, int bits) {
  uint64_t v = 0;
  for (int i = 0; i < bits; ++i) {
    uint64_t p = off + static_cast<uint64_t>(i);
    v = (v << 1) | ((at(p >> 3) >> (7 - (p & 7))) & 1u);
  }
  return v;
}

int64_t AsSigned(uint64_t v, int bits) {
  if (bits < 64 && (v >> (bits - 1)) & 1) v |= ~uint64_t{0} << bits;
  return static_cast<int64_t>(v);
}

// The value a SET or INCRBY stores, or nullopt (FAIL on overflow).
std::optional<uint64_t> FieldResult(const Field& f, uint64_t old_raw, int64_t* reply) {
  using i128 = __int128;
  i128 lo, hi, r;
  if (f.sign) {
    hi = (i128{1} << (f.bits - 1)) - 1;
    lo = -hi - 1;
    i128 old = AsSigned(old_raw, f.bits);
    r = f.op == FieldOp::kIncrBy ? old + f.arg : i128{f.arg};
  } else {
    hi = (i128{1} << f.bits) - 1;
    lo = 0;
    r = f.op == FieldOp::kIncrBy ? i128{old_raw} + f.arg : i128{static_cast<uint64_t>(f.arg)};
  }
  if (r > hi || r < lo) {
    if (f.ow == Overflow::kFail) return std::nullopt;
    if (f.ow == Overflow::kSat) r = r > hi ? hi : lo;
  }
  uint64_t mask = f.bits == 64 ? ~uint64_t{0} : (uint64_t{1} << f.bits) - 1;
  uint64_t stored = static_cast<uint64_t>(r) & mask;
  if (f.op == FieldOp::kIncrBy)
    *reply = f.sign ? AsSigned(stored, f.bits) : static_cast<int64_t>(stored);
  else
    *reply = f.sign ? AsSigned(old_raw, f.bits) : static_cast<int64_t>(old_raw);
  return stored;
}

void BitFieldCommon(CommandContext& ctx, bool ro) {
  std::vector<Field> ops;
  Overflow ow = Overflow::kWrap;
  bool writes = false;
  uint64_t lo_byte = UINT64_MAX, hi_byte = 0;
  for (size_t j = 2; j < ctx.args.size(); ++j) {
    size_t rem = ctx.args.size() - j - 1;
    std::string_view sub = ctx.args[j];
    FieldOp op;
    if (IsKeyword(sub, "GET") && rem >= 2) {
      op = FieldOp::kGet;
    } else if (IsKeyword(sub, "SET") && rem >= 3) {
      op = FieldOp::kSet;
    } else if (IsKeyword(sub, "INCRBY") && rem >= 3) {
      op = FieldOp::kIncrBy;
    } else if (IsKeyword(sub, "OVERFLOW") && rem >= 1) {
      std::string_view t = ctx.args[++j];
      if (IsKeyword(t, "WRAP"))
        ow = Overflow::kWrap;
      else if (IsKeyword(t, "SAT"))
        ow = Overflow::kSat;
      else if (IsKeyword(t, "FAIL"))
        ow = Overflow::kFail;
      else
        return ctx.reply->Error(kErrBitfieldOverflow);
      continue;
    } else {
      return ctx.reply->Error(kErrSyntaxError);
    }
    Field f{op, ow, false, 0, 0, 0};
    if (!FieldType(ctx, ctx.args[j + 1], &f.sign, &f.bits)) return;
    if (!BitOffsetArg(ctx, ctx.args[j + 2], f.bits, &f.offset)) return;
    if (op != FieldOp::kGet) {
      auto v = ParseInt64Strict(ctx.args[j + 3]);
      if (!v) return ctx.reply->Error(kErrNotInteger);
      f.arg = *v;
      writes = true;
      lo_byte = std::min(lo_byte, f.offset >> 3);
      hi_byte = std::max(hi_byte, (f.offset + static_cast<uint64_t>(f.bits) - 1) >> 3);
    }
    ops.push_back(f);
    j += op == FieldOp::kGet ? 2 : 3;
  }
  std::vector<std::optional<int64_t>> out(ops.size());
  if (!writes) {
    store::StrRef v;
    if (!ReadValue(ctx, ctx.args[1], &v)) return;
    std::string_view s = v ? v->view() : std::string_view();
    auto at = [&](uint64_t i) -> uint8_t { return i < s.size() ? static_cast<uint8_t>(s[i]) : 0; };
    ctx.reply->ArrayHeader(ops.size());
    for (const Field& f : ops) {
      uint64_t raw = ReadBits(at, f.offset, f.bits);
      ctx.reply->Integer(f.sign ? AsSigned(raw, f.bits) : static_cast<int64_t>(raw));
    }
    return;
  }
  if (ro) return ctx.reply->Error(kErrBitfieldRo);
  // The bytes the writes touch, edited in a scratch copy and patched at once.
  std::string scratch;
  uint64_t lsn = 0;
  auto r = store::OpPatch({*ctx.env->store(), &lsn}, ctx.args[1],
                          [&](std::string_view cur, bool, store::StrEdit* ed) {
                            scratch.assign(hi_byte - lo_byte + 1, '\0');
                            if (lo_byte < cur.size())
                              std::memcpy(scratch.data(), cur.data() + lo_byte,
                                          std::min<uint64_t>(cur.size() - lo_byte, scratch.size()));
                            auto at = [&](uint64_t i) -> uint8_t {
                              if (i >= lo_byte && i <= hi_byte)
                                return static_cast<uint8_t>(scratch[i - lo_byte]);
                              return i < cur.size() ? static_cast<uint8_t>(cur[i]) : 0;
                            };
                            for (size_t k = 0; k < ops.size(); ++k) {
                              const Field& f = ops[k];
                              uint64_t raw = ReadBits(at, f.offset, f.bits);
                              if (f.op == FieldOp::kGet) {
                                out[k] = f.sign ? AsSigned(raw, f.bits) : static_cast<int64_t>(raw);
                                continue;
                              }
                              int64_t reply = 0;
                              auto stored = FieldResult(f, raw, &reply);
                              if (!stored) continue;  // FAIL: null, nothing written
                              out[k] = reply;
                              for (int i = 0; i < f.bits; ++i) {
                                uint64_t p = f.offset + static_cast<uint64_t>(i);
                                auto& b = reinterpret_cast<uint8_t&>(scratch[(p >> 3) - lo_byte]);
                                uint8_t m = static_cast<uint8_t>(1u << (7 - (p & 7)));
                                if ((*stored >> (f.bits - 1 - i)) & 1)
                                  b |= m;
                                else
                                  b &= static_cast<uint8_t>(~m);
                              }
                            }
                            ed->offset = lo_byte;
                            ed->bytes = scratch;
                            return Status::OK();
                          });
  ctx.wait_lsn = lsn;
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  ctx.reply->ArrayHeader(out.size());
  for (const auto& v : out) {
    if (v)
      ctx.reply->Integer(*v);
    else
      ctx.reply->Null();
  }
}

void BitField(CommandContext& ctx) { BitFieldCommon(ctx, false); }
void BitFieldRo(CommandContext& ctx) { BitFieldCommon(ctx, true); }

}  // namespace

void AddBitCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kR = kCmdReadonly | kCmdKvcache;
  constexpr uint32_t kW = kCmdWrite | kCmdKvcache | kCmdDenyOom;
  size_t first = out->size();
  out->push_back({"SETBIT", 4, kW, 1, 1, 1, SetBit,
                  "Sets or clears the bit at offset of the string value.", "bitmap", "2.2.0",
                  "key offset value"});
  out->push_back({"GETBIT", 3, kR | kCmdFast, 1, 1, 1, GetBit, "Returns a bit value by offset.",
                  "bitmap", "2.2.0", "key offset"});
  out->push_back({"BITCOUNT", -2, kR, 1, 1, 1, BitCount, "Counts the number of set bits.", "bitmap",
                  "2.6.0", "key [start end [BYTE | BIT]]"});
  out->push_back({"BITPOS", -3, kR, 1, 1, 1, BitPos, "Finds the first set or clear bit.", "bitmap",
                  "2.8.7", "key bit [start [end [BYTE | BIT]]]"});
  out->push_back({"BITOP", -4, kW, 2, -1, 1, BitOp,
                  "Performs bitwise operations on strings, storing the result in a key.", "bitmap",
                  "2.6.0", "operation destkey key..."});
  out->push_back({"BITFIELD", -2, kW, 1, 1, 1, BitField,
                  "Performs arbitrary bitfield integer operations on strings.", "bitmap", "3.2.0",
                  "key [GET encoding offset | OVERFLOW (WRAP | SAT | FAIL) | SET encoding offset "
                  "value | INCRBY encoding offset increment]..."});
  out->push_back({"BITFIELD_RO", -2, kR | kCmdFast, 1, 1, 1, BitFieldRo,
                  "Performs arbitrary read-only bitfield integer operations on strings.", "bitmap",
                  "6.0.0", "key [GET encoding offset]..."});
  for (size_t i = first; i < out->size(); ++i) (*out)[i].acl_categories |= kAclBitmap;
}

}  // namespace pion::server
