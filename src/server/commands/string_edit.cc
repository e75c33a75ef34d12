// String edits (docs/protocol.md "Keys"): GETSET, SETRANGE and LCS, with
// Redis 7.0's replies and texts. SETRANGE is one read-modify-write under the
// key's locks (store::OpPatch: written in place, only the new bytes logged).
// SUBSTR is GETRANGE's old name (registered with it in strings.cc).
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "server/command_env.h"
#include "server/commands/args.h"
#include "server/commands/block_format.h"
#include "server/commands/command_table.h"
#include "store/store.h"
#include "store/string_ops.h"

namespace pion::server {

namespace {

void ReplyOld(CommandContext& ctx, const store::StrRef& v) { ReplyStrValue(*ctx.reply, v); }

// GETSET key value: SET key value GET (the TTL is removed).
void GetSet(CommandContext& ctx) {
  store::StrRef v = store::StrValue::Copy(ctx.args[2]);
  if (!v) return ctx.reply->Error(kErrNoMemory);
  store::SetOptions o;
  o.want_old = true;
  uint64_t lsn = 0;
  auto r = store::OpSet({*ctx.env->store(), &lsn}, ctx.args[1], std::move(v), o);
  ctx.wait_lsn = lsn;
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  ReplyOld(ctx, r->old);
}

// SETRANGE key offset value
void SetRange(CommandContext& ctx) {
  auto off = ParseInt64Strict(ctx.args[2]);
  if (!off) return ctx.reply->Error(kErrNotInteger);
  if (*off < 0) return ctx.reply->Error(kErrOffsetRange);
  const uint64_t offset = static_cast<uint64_t>(*off);
  std::string_view value = ctx.args[3];
  const uint64_t max_len = ctx.env->config().proto_max_bulk_len;
  bool too_big = false;
  uint64_t lsn = 0;
  auto r = store::OpPatch({*ctx.env->store(), &lsn}, ctx.args[1],
                          [&](std::string_view, bool exists, store::StrEdit* ed) {
                            // Setting nothing: 0 for a missing key, else its length, unchanged.
                            if (value.empty()) {
                              ed->write = false;
                              return Status::OK();
                            }
                            (void)exists;
                            if (offset + value.size() > max_len || offset + value.size() < offset) {
                              too_big = true;
                              return Status::InvalidArgument("");
                            }
                            ed->offset = offset;
                            ed->bytes = value;
                            return Status::OK();
                          });
  ctx.wait_lsn = lsn;
  if (too_big) return ctx.reply->Error(kErrStringTooBig);
  if (!r.ok()) return ReplyStatus(ctx, r.status());
  ctx.reply->Integer(static_cast<int64_t>(*r));
}

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
void Lcs(CommandContext& ctx) {
  store::Store* st = ctx.env->store();
  store::StrRef va, vb;
  for (int k = 0; k < 2; ++k) {
    auto r = store::OpGet({*st}, ctx.args[1 + k]);
    if (!r.ok()) {
      if (r.status().code() == Code::kWrongType) return ctx.reply->Error(kErrLcsTypes);
      return ReplyStatus(ctx, r.status());
    }
    (k == 0 ? va : vb) = *r;
  }
  bool getlen = false, getidx = false, withmatchlen = false;
  int64_t minmatchlen = 0;
  for (size_t j = 3; j < ctx.args.size(); ++j) {
    std::string_view o = ctx.args[j];
    bool more = j + 1 < ctx.args.size();
    if (IsKeyword(o, "IDX")) {
      getidx = true;
    } else if (IsKeyword(o, "LEN")) {
      getlen = true;
    } else if (IsKeyword(o, "WITHMATCHLEN")) {
      withmatchlen = true;
    } else if (IsKeyword(o, "MINMATCHLEN") && more) {
      auto v = ParseInt64Strict(ctx.args[++j]);
      if (!v) return ctx.reply->Error(kErrNotInteger);
      minmatchlen = std::max<int64_t>(*v, 0);
    } else {
      return ctx.reply->Error(kErrSyntaxError);
    }
  }
  if (getlen && getidx) return ctx.reply->Error(kErrLcsLenIdx);
  std::string_view a = va ? va->view() : std::string_view();
  std::string_view b = vb ? vb->view() : std::string_view();
  if (a.size() >= UINT32_MAX - 1 || b.size() >= UINT32_MAX - 1)
    return ctx.reply->Error(kErrLcsTooLong);
  const uint64_t alen = a.size(), blen = b.size();
  const uint64_t cells = (alen + 1) * (blen + 1);
  if (cells * sizeof(uint32_t) > ctx.env->config().proto_max_bulk_len)
    return ctx.reply->Error(kErrLcsMemory);
  std::unique_ptr<uint32_t[]> t(new (std::nothrow) uint32_t[cells]());
  if (!t) return ctx.reply->Error(kErrNoMemory);
  auto at = [&](uint64_t i, uint64_t j) -> uint32_t& { return t[j + i * (blen + 1)]; };
  for (uint64_t i = 1; i <= alen; ++i)
    for (uint64_t j = 1; j <= blen; ++j)
      at(i, j) = a[i - 1] == b[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
  const uint32_t total = at(alen, blen);
  if (getlen) return ctx.reply->Integer(total);

  // Walk back from the end, collecting the LCS and (IDX) the matching ranges,
  // emitted as Redis does: a range ends where the walk leaves it.
  struct Range {
    uint64_t a0, a1, b0, b1;
  };
  std::vector<Range> ranges;
  std::string result(total, '\0');
  uint64_t idx = total, i = alen, j = blen;
  bool open = false;
  Range cur{};
  while (i > 0 && j > 0) {
    bool emit = false;
    if (a[i - 1] == b[j - 1]) {
      result[idx - 1] = a[i - 1];
      if (!open) {
        cur = {i - 1, i - 1, j - 1, j - 1};
        open = true;
      } else if (cur.a0 == i && cur.b0 == j) {
        --cur.a0;
        --cur.b0;
      } else {
        emit = true;
      }
      if (cur.a0 == 0 || cur.b0 == 0) emit = true;
      --idx, --i, --j;
    } else {
      if (at(i - 1, j) > at(i, j - 1))
        --i;
      else
        --j;
      if (open) emit = true;
    }
    if (emit) {
      uint64_t len = cur.a1 - cur.a0 + 1;
      if (minmatchlen == 0 || len >= static_cast<uint64_t>(minmatchlen)) ranges.push_back(cur);
      open = false;
    }
  }
  if (!getidx) return ctx.reply->Bulk(result);
  ctx.reply->MapHeader(2);
  ctx.reply->Bulk("matches");
  ctx.reply->ArrayHeader(ranges.size());
  for (const Range& r : ranges) {
    ctx.reply->ArrayHeader(withmatchlen ? 3 : 2);
    ctx.reply->ArrayHeader(2);
    ctx.reply->Integer(static_cast<int64_t>(r.a0));
    ctx.reply->Integer(static_cast<int64_t>(r.a1));
    ctx.reply->ArrayHeader(2);
    ctx.reply->Integer(static_cast<int64_t>(r.b0));
    ctx.reply->Integer(static_cast<int64_t>(r.b1));
    if (withmatchlen) ctx.reply->Integer(static_cast<int64_t>(r.a1 - r.a0 + 1));
  }
  ctx.reply->Bulk("len");
  ctx.reply->Integer(total);
}

}  // namespace

void AddStringEditCommands(std::vector<CommandSpec>* out) {
  constexpr uint32_t kW = kCmdWrite | kCmdKvcache | kCmdDenyOom;
  size_t first = out->size();
  out->push_back({"GETSET", 3, kW | kCmdFast, 1, 1, 1, GetSet,
                  "Returns the previous string value of a key after setting it to a new value.",
                  "string", "1.0.0", "key value"});
  out->push_back({"SETRANGE", 4, kW, 1, 1, 1, SetRange,
                  "Overwrites a part of a string value with another by an offset.", "string",
                  "2.2.0", "key offset value"});
  out->push_back({"LCS", -3, kCmdReadonly | kCmdKvcache, 1, 2, 1, Lcs,
                  "Finds the longest common substring.", "string", "7.0.0",
                  "key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]"});
  for (size_t i = first; i < out->size(); ++i) (*out)[i].acl_categories |= kAclString;
  (*out)[first].acl_key_flags |= kAclKeyAccess;  // GETSET returns the old value
}

}  // namespace pion::server
