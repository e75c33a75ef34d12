// Codecs of the string-key records and snapshot sections (docs/wal_format.md and
// docs/snapshot_format.md: STRSET, STRPATCH, STRDEL, STREXPIRE, STRRENAME, STRCHAIN,
// and the snapshot's BLOCK, QUANT and STRING_TIER sections). Namespace records are in
// wal_format.cc.
#include <string>

#include "persist/codec_bytes.h"
#include "persist/wal_format.h"

namespace pion::persist {

using codec::Bad;
using codec::Reader;
using codec::Writer;

namespace {
void Key32(Writer& w, std::string_view k) {
  w.U32(static_cast<uint32_t>(k.size()));
  w.Raw(k.data(), k.size());
}
bool ReadKey32(Reader& rd, std::string_view* k) {
  uint32_t n;
  const uint8_t* p;
  if (!rd.U32(&n) || n > kMaxStrKey || !rd.Bytes(n, &p)) return false;
  *k = std::string_view(reinterpret_cast<const char*>(p), n);
  return true;
}
}  // namespace

void EncodeStrSetPrefix(const StrSetRec& r, uint64_t value_len, bool snap,
                        std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  w.U64(static_cast<uint64_t>(r.expire_at_ms));
  if (snap) w.U64(r.lru_stamp);
  w.U64(value_len);
}

void EncodeStrDel(const StrDelRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  w.U8(r.reason);
}

void EncodeStrExpire(const StrExpireRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  w.U64(static_cast<uint64_t>(r.expire_at_ms));
}

void EncodeStrRename(const StrRenameRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  Key32(w, r.dst);
}

Status DecodeStrSet(std::span<const uint8_t> p, bool snap, StrSetRec* r) {
  Reader rd(p);
  uint64_t exp, len;
  if (!ReadKey32(rd, &r->key)) return Bad("bad string key");
  if (!rd.U64(&exp) || (snap && !rd.U64(&r->lru_stamp)) || !rd.U64(&len))
    return Bad("truncated string record");
  if (static_cast<int64_t>(exp) < 0) return Bad("negative expiry");
  r->expire_at_ms = static_cast<int64_t>(exp);
  if (len != rd.left()) return Bad("string record size does not match value_len");
  r->value_len = len;
  r->value = p.subspan(p.size() - rd.left());
  return Status::OK();
}

void EncodeStrPatchPrefix(const StrPatchRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  w.U64(static_cast<uint64_t>(r.expire_at_ms));
  w.U8(r.truncate ? 1 : 0);
  w.U64(r.offset);
  w.U64(r.bytes.size());
}

Status DecodeStrPatch(std::span<const uint8_t> p, StrPatchRec* r) {
  Reader rd(p);
  uint64_t exp, len;
  uint8_t flags;
  if (!ReadKey32(rd, &r->key)) return Bad("bad string key");
  if (!rd.U64(&exp) || !rd.U8(&flags) || !rd.U64(&r->offset) || !rd.U64(&len))
    return Bad("truncated strpatch record");
  if (static_cast<int64_t>(exp) < 0) return Bad("negative expiry");
  if (flags > 1) return Bad("bad strpatch flags");
  // Values stay below 2^31 (see docs/wal_format.md).
  if (r->offset > (uint64_t{1} << 31) || len > (uint64_t{1} << 31))
    return Bad("strpatch out of range");
  if (len != rd.left()) return Bad("strpatch record size does not match its length");
  r->expire_at_ms = static_cast<int64_t>(exp);
  r->truncate = flags == 1;
  r->bytes = p.subspan(p.size() - rd.left());
  return Status::OK();
}

Status DecodeStrDel(std::span<const uint8_t> p, StrDelRec* r) {
  Reader rd(p);
  if (!ReadKey32(rd, &r->key) || !rd.U8(&r->reason)) return Bad("truncated strdel record");
  if (r->reason > 2) return Bad("bad strdel reason");
  if (rd.left() != 0) return Bad("trailing bytes in strdel record");
  return Status::OK();
}

Status DecodeStrExpire(std::span<const uint8_t> p, StrExpireRec* r) {
  Reader rd(p);
  uint64_t exp;
  if (!ReadKey32(rd, &r->key) || !rd.U64(&exp)) return Bad("truncated strexpire record");
  if (static_cast<int64_t>(exp) < 0) return Bad("negative expiry");
  r->expire_at_ms = static_cast<int64_t>(exp);
  if (rd.left() != 0) return Bad("trailing bytes in strexpire record");
  return Status::OK();
}

Status DecodeStrRename(std::span<const uint8_t> p, StrRenameRec* r) {
  Reader rd(p);
  if (!ReadKey32(rd, &r->key) || !ReadKey32(rd, &r->dst)) return Bad("truncated strrename record");
  if (rd.left() != 0) return Bad("trailing bytes in strrename record");
  return Status::OK();
}

// The 8 bytes of a quantized format: u8 tag, u8 dtype, u16 reserved, u32 row.
static void PutQuant(Writer& w, const QuantRecord& q) {
  w.U8(FormatTag(q.format));
  w.U8(q.dtype);
  w.U16(0);
  w.U32(q.row);
}

static Status ReadQuant(Reader& rd, QuantRecord* q) {
  uint8_t tag, dtype;
  uint16_t r16;
  if (!rd.U8(&tag) || !rd.U8(&dtype) || !rd.U16(&r16) || !rd.U32(&q->row))
    return Bad("truncated quantized format");
  auto f = FormatFromTag(tag);
  if (!f) return Bad("unknown format tag");
  q->format = *f;
  q->dtype = dtype;
  if (r16 != 0) return Bad("reserved bits not zero");
  if (dtype > 2) return Bad("unknown dtype");
  if (!quant::DimSupported(q->format, q->row)) return Bad("row not supported by the format");
  return Status::OK();
}

bool QuantValueValid(const QuantRecord& q, uint64_t value_len) {
  return q.dtype <= 2 && quant::DimSupported(q.format, q.row) &&
         value_len % quant::RowBytes(q.format, q.row) == 0;
}

void EncodeStrChainPrefix(const StrChainRecord& r, std::vector<uint8_t>* out) {
  Writer w(out);
  const bool fmt = r.quant.row != 0;
  w.U8(static_cast<uint8_t>((r.has_after ? 1 : 0) | (r.has_hashes ? 2 : 0) | (fmt ? 4 : 0)));
  w.U8(0);
  w.U16(0);
  w.U32(r.tokens);
  w.U64(static_cast<uint64_t>(r.expire_at_ms));
  if (fmt) PutQuant(w, r.quant);
  Key32(w, r.has_after ? r.after : std::string_view());
  w.U32(static_cast<uint32_t>(r.entries.size()));
  for (const StrChainEntry& e : r.entries) {
    Key32(w, e.key);
    w.U64(r.has_hashes ? e.hash : 0);
    w.U64(e.value_len);
  }
}

Status DecodeStrChain(std::span<const uint8_t> p, StrChainRecord* r,
                      std::vector<StrChainEntry>* entries) {
  Reader rd(p);
  uint8_t flags, r8;
  uint16_t r16;
  uint64_t exp;
  uint32_t count;
  if (!rd.U8(&flags) || !rd.U8(&r8) || !rd.U16(&r16) || !rd.U32(&r->tokens) || !rd.U64(&exp))
    return Bad("truncated strchain record");
  if ((flags & ~7u) != 0 || r8 != 0 || r16 != 0) return Bad("reserved bits not zero");
  if (static_cast<int64_t>(exp) < 0) return Bad("negative expiry");
  r->expire_at_ms = static_cast<int64_t>(exp);
  r->has_after = (flags & 1) != 0;
  r->has_hashes = (flags & 2) != 0;
  r->quant = QuantRecord{};
  if ((flags & 4) != 0) PION_RETURN_IF_ERROR(ReadQuant(rd, &r->quant));
  if (!ReadKey32(rd, &r->after)) return Bad("bad strchain parent key");
  if (!r->has_after && !r->after.empty()) return Bad("strchain parent key without has_after");
  if (!rd.U32(&count) || count == 0) return Bad("bad strchain count");
  // Each entry takes at least 20 bytes: a count beyond that is corrupt (and
  // never makes the vector below large).
  if (count > rd.left() / 20) return Bad("strchain count larger than the record");
  entries->assign(count, StrChainEntry{});
  uint64_t total = 0;
  for (StrChainEntry& e : *entries) {
    if (!ReadKey32(rd, &e.key) || !rd.U64(&e.hash) || !rd.U64(&e.value_len))
      return Bad("truncated strchain entry");
    if (!r->has_hashes && e.hash != 0) return Bad("strchain hash without has_hashes");
    if (e.value_len > rd.left() || total + e.value_len > rd.left())
      return Bad("strchain values larger than the record");
    if (r->quant.row != 0 && !QuantValueValid(r->quant, e.value_len))
      return Bad("strchain value not a whole number of quantized rows");
    total += e.value_len;
  }
  if (total != rd.left()) return Bad("strchain record size does not match the values");
  size_t off = p.size() - rd.left();
  for (StrChainEntry& e : *entries) {
    e.value = p.subspan(off, e.value_len);
    off += e.value_len;
  }
  r->entries = *entries;
  return Status::OK();
}

void EncodeSnapBlock(const StrBlockRecord& r, std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  w.U8(static_cast<uint8_t>((r.has_parent ? 1 : 0) | (r.has_hash ? 2 : 0)));
  w.U8(0);
  w.U16(0);
  w.U32(r.tokens);
  w.U64(r.has_hash ? r.hash : 0);
  Key32(w, r.has_parent ? r.parent : std::string_view());
}

Status DecodeSnapBlock(std::span<const uint8_t> p, StrBlockRecord* r) {
  Reader rd(p);
  uint8_t flags, r8;
  uint16_t r16;
  if (!ReadKey32(rd, &r->key)) return Bad("bad block key");
  if (!rd.U8(&flags) || !rd.U8(&r8) || !rd.U16(&r16) || !rd.U32(&r->tokens) || !rd.U64(&r->hash))
    return Bad("truncated block section");
  if ((flags & ~3u) != 0 || r8 != 0 || r16 != 0) return Bad("reserved bits not zero");
  r->has_parent = (flags & 1) != 0;
  r->has_hash = (flags & 2) != 0;
  if (!r->has_hash && r->hash != 0) return Bad("block hash without has_hash");
  if (!ReadKey32(rd, &r->parent)) return Bad("bad block parent key");
  if (!r->has_parent && !r->parent.empty()) return Bad("block parent key without has_parent");
  if (rd.left() != 0) return Bad("trailing bytes in block section");
  return Status::OK();
}

void EncodeSnapQuant(const StrQuantRecord& r, std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  PutQuant(w, r.quant);
}

Status DecodeSnapQuant(std::span<const uint8_t> p, StrQuantRecord* r) {
  Reader rd(p);
  if (!ReadKey32(rd, &r->key)) return Bad("bad quant key");
  PION_RETURN_IF_ERROR(ReadQuant(rd, &r->quant));
  if (rd.left() != 0) return Bad("trailing bytes in quant section");
  return Status::OK();
}

void EncodeSnapStringTier(const StrTierRecord& r, std::vector<uint8_t>* out) {
  Writer w(out);
  Key32(w, r.key);
  w.U64(static_cast<uint64_t>(r.expire_at_ms));
  w.U64(r.lru_stamp);
  w.U64(r.value_len);
  w.U64(r.extent.offset);
  w.U64(r.extent.length);
  w.U32(r.extent.header_bytes);
  w.U32(r.extent.value_crc);
  w.U64(r.extent.seq);
}

Status DecodeSnapStringTier(std::span<const uint8_t> p, StrTierRecord* r) {
  Reader rd(p);
  uint64_t exp;
  TierExtentRecord& x = r->extent;
  if (!ReadKey32(rd, &r->key)) return Bad("bad string key");
  if (!rd.U64(&exp) || !rd.U64(&r->lru_stamp) || !rd.U64(&r->value_len) || !rd.U64(&x.offset) ||
      !rd.U64(&x.length) || !rd.U32(&x.header_bytes) || !rd.U32(&x.value_crc) || !rd.U64(&x.seq))
    return Bad("truncated string_tier section");
  if (static_cast<int64_t>(exp) < 0) return Bad("negative expiry");
  r->expire_at_ms = static_cast<int64_t>(exp);
  constexpr uint64_t kBlock = 4096;
  if (x.offset % kBlock != 0 || x.length % kBlock != 0 || x.header_bytes % kBlock != 0 ||
      x.header_bytes < 64 + r->key.size() || r->value_len > x.length ||
      x.header_bytes > x.length - r->value_len)
    return Bad("string_tier section does not describe an extent");
  if (rd.left() != 0) return Bad("trailing bytes in string_tier section");
  return Status::OK();
}

}  // namespace pion::persist
