// Codecs for docs/wal_format.md and docs/snapshot_format.md.
#include "persist/wal_format.h"

#include "base/crc32c.h"

namespace pion::persist {
namespace {

constexpr uint8_t kNoTag = 0xFF;
// Indexed by quant::Format (kInt8, kTurbo4, kTurbo3, kTurbo2, kFp16, kFp8, kMlx4g32).
constexpr uint8_t kTagOf[quant::kNumFormats] = {0, 1, 3, 4, 2, 5, 7};

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

Status Bad(std::string_view what) { return Status::Corruption(what); }

Status DecodeBlocks(Reader& rd, RegisterRec* r) {
  uint32_t reserved;
  if (!rd.U32(&r->block_size) || !rd.U32(&reserved) || !rd.U64(&r->hash_count))
    return Bad("truncated block table");
  if (reserved != 0) return Bad("reserved bytes not zero");
  if (r->hash_count > rd.left() / 8) return Bad("block table longer than the record");
  if (!rd.Bytes(r->hash_count * 8, &r->hashes)) return Bad("truncated block table");
  return Status::OK();
}

}  // namespace

uint8_t FormatTag(quant::Format f) { return kTagOf[static_cast<int>(f)]; }

std::optional<quant::Format> FormatFromTag(uint8_t tag) {
  for (int i = 0; i < quant::kNumFormats; ++i)
    if (kTagOf[i] == tag && tag != kNoTag) return static_cast<quant::Format>(i);
  return std::nullopt;
}

void EncodeWalHeader(const WalHeader& h, uint8_t out[kWalHeaderSize]) {
  std::memset(out, 0, kWalHeaderSize);
  std::memcpy(out, kWalMagic, 8);
  PutU32(out + 8, kWalVersion);
  PutU64(out + 16, h.generation);
  PutU64(out + 24, h.first_lsn);
  PutU32(out + 36, crc32c::Value(out, 36));
}

Status DecodeWalHeader(const uint8_t* p, size_t n, WalHeader* h) {
  if (n < kWalHeaderSize) return Bad("file shorter than the WAL header");
  if (std::memcmp(p, kWalMagic, 8) != 0) return Bad("bad magic (not a pion WAL)");
  if (GetU32(p + 36) != crc32c::Value(p, 36)) return Bad("WAL header checksum mismatch");
  if (GetU32(p + 8) != kWalVersion) return Bad("unsupported WAL version");
  if (GetU32(p + 12) != 0 || GetU32(p + 32) != 0) return Bad("unknown WAL header flags");
  h->generation = GetU64(p + 16);
  h->first_lsn = GetU64(p + 24);
  if (h->generation == 0 || h->first_lsn == 0) return Bad("WAL header with zero generation/lsn");
  return Status::OK();
}

void EncodeSnapHeader(const SnapHeader& h, uint8_t out[kSnapHeaderSize]) {
  std::memset(out, 0, kSnapHeaderSize);
  std::memcpy(out, kSnapMagic, 8);
  PutU32(out + 8, kSnapVersion);
  PutU64(out + 16, h.generation);
  PutU64(out + 24, h.next_lsn);
  PutU64(out + 32, h.lru_clock);
  PutU64(out + 40, h.created_unix);
  PutU64(out + 48, h.namespace_count);
  PutU32(out + 60, crc32c::Value(out, 60));
}

Status DecodeSnapHeader(const uint8_t* p, size_t n, SnapHeader* h) {
  if (n < kSnapHeaderSize) return Bad("file shorter than the snapshot header");
  if (std::memcmp(p, kSnapMagic, 8) != 0) return Bad("bad magic (not a pion snapshot)");
  if (GetU32(p + 60) != crc32c::Value(p, 60)) return Bad("snapshot header checksum mismatch");
  if (GetU32(p + 8) != kSnapVersion) return Bad("unsupported snapshot version");
  if (GetU32(p + 12) != 0 || GetU32(p + 56) != 0) return Bad("unknown snapshot header flags");
  h->generation = GetU64(p + 16);
  h->next_lsn = GetU64(p + 24);
  h->lru_clock = GetU64(p + 32);
  h->created_unix = GetU64(p + 40);
  h->namespace_count = GetU64(p + 48);
  if (h->next_lsn == 0) return Bad("snapshot header with next_lsn 0");
  return Status::OK();
}

void EncodeRecordHeader(uint8_t out[kRecordHeaderSize], RecordType t, uint64_t lsn,
                        uint32_t length) {
  PutU32(out, 0);
  PutU32(out + 4, length);
  out[8] = static_cast<uint8_t>(t);
  out[9] = out[10] = out[11] = 0;
  PutU64(out + 12, lsn);
}

uint32_t RecordCrc(uint64_t generation, const uint8_t hdr[kRecordHeaderSize],
                   std::span<const std::span<const uint8_t>> payload) {
  uint8_t g[8];
  PutU64(g, generation);
  uint32_t c = crc32c::Extend(0, g, 8);
  c = crc32c::Extend(c, hdr + 4, kRecordHeaderSize - 4);
  for (auto s : payload) c = crc32c::Extend(c, s.data(), s.size());
  return c;
}

void EncodeRegister(const RegisterRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Name(r.ns);
  w.U64(r.incarnation);
  w.U32(r.kv_dim);
  w.U8(FormatTag(r.fmt));
  w.U8(r.has_blocks ? 1 : 0);
  if (r.has_blocks) {
    w.U32(r.block_size);
    w.U32(0);
    w.U64(r.hash_count);
    if (r.hashes != nullptr) w.Raw(r.hashes, r.hash_count * 8);
  }
}

void EncodeSnapNamespace(const RegisterRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Name(r.ns);
  w.U64(r.incarnation);
  w.U32(r.kv_dim);
  w.U8(FormatTag(r.fmt));
  w.U8(r.has_blocks ? 1 : 0);
  w.U16(0);
  w.U64(r.lru_stamp);
  if (r.has_blocks) {
    w.U32(r.block_size);
    w.U32(0);
    w.U64(r.hash_count);
    w.Raw(r.hashes, r.hash_count * 8);
  }
}

void EncodeStorePrefix(const StoreRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Name(r.ns);
  w.U64(r.incarnation);
  w.U8(static_cast<uint8_t>(r.side));
  w.U8(0);
  w.U16(0);
  w.U32(r.layer);
  w.U64(r.start);
  w.U64(r.count);
  w.U32(r.row_bytes);
}

void EncodeDrop(const DropRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Name(r.ns);
  w.U64(r.incarnation);
  w.U8(static_cast<uint8_t>(r.reason));
}

void EncodeSnapEnd(const SnapEndRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.U64(r.namespaces);
  w.U64(r.rows_sections);
  w.U64(r.total_rows);
  w.U64(r.total_row_bytes);
}

static Status DecodeRegisterCommon(Reader& rd, RegisterRec* r, bool snap) {
  uint8_t tag, hb;
  if (!rd.Name(&r->ns)) return Bad("bad namespace name");
  if (!rd.U64(&r->incarnation) || !rd.U32(&r->kv_dim) || !rd.U8(&tag) || !rd.U8(&hb))
    return Bad("truncated register record");
  auto f = FormatFromTag(tag);
  if (!f) return Bad("unknown format tag");
  r->fmt = *f;
  if (hb > 1) return Bad("bad has_blocks flag");
  r->has_blocks = hb == 1;
  if (snap) {
    uint16_t res;
    if (!rd.U16(&res) || !rd.U64(&r->lru_stamp)) return Bad("truncated namespace section");
    if (res != 0) return Bad("reserved bytes not zero");
  }
  if (r->kv_dim == 0 || r->kv_dim > quant::kMaxDim) return Bad("kv_dim out of range");
  if (r->has_blocks) PION_RETURN_IF_ERROR(DecodeBlocks(rd, r));
  if (rd.left() != 0) return Bad("trailing bytes in register record");
  return Status::OK();
}

Status DecodeRegister(std::span<const uint8_t> p, RegisterRec* r) {
  Reader rd(p);
  return DecodeRegisterCommon(rd, r, false);
}

Status DecodeSnapNamespace(std::span<const uint8_t> p, RegisterRec* r) {
  Reader rd(p);
  return DecodeRegisterCommon(rd, r, true);
}

Status DecodeStore(std::span<const uint8_t> p, StoreRec* r) {
  Reader rd(p);
  uint8_t side, res8;
  uint16_t res16;
  if (!rd.Name(&r->ns)) return Bad("bad namespace name");
  if (!rd.U64(&r->incarnation) || !rd.U8(&side) || !rd.U8(&res8) || !rd.U16(&res16) ||
      !rd.U32(&r->layer) || !rd.U64(&r->start) || !rd.U64(&r->count) || !rd.U32(&r->row_bytes))
    return Bad("truncated store record");
  if (side > 1) return Bad("bad side");
  if (res8 != 0 || res16 != 0) return Bad("reserved bytes not zero");
  r->side = static_cast<Side>(side);
  if (r->count == 0 || r->row_bytes == 0) return Bad("empty store record");
  if (r->count > rd.left() / r->row_bytes || r->count * r->row_bytes != rd.left())
    return Bad("store record size does not match count * row_bytes");
  r->rows = p.subspan(p.size() - rd.left());
  return Status::OK();
}

Status DecodeDrop(std::span<const uint8_t> p, DropRec* r) {
  Reader rd(p);
  uint8_t reason;
  if (!rd.Name(&r->ns)) return Bad("bad namespace name");
  if (!rd.U64(&r->incarnation) || !rd.U8(&reason)) return Bad("truncated drop record");
  if (reason > 1) return Bad("bad drop reason");
  r->reason = static_cast<DropReason>(reason);
  if (rd.left() != 0) return Bad("trailing bytes in drop record");
  return Status::OK();
}

Status DecodeSnapEnd(std::span<const uint8_t> p, SnapEndRec* r) {
  Reader rd(p);
  if (!rd.U64(&r->namespaces) || !rd.U64(&r->rows_sections) || !rd.U64(&r->total_rows) ||
      !rd.U64(&r->total_row_bytes) || rd.left() != 0)
    return Bad("bad end section");
  return Status::OK();
}

BlockRecord BlockRecordOf(const RegisterRec& r) {
  BlockRecord b;
  b.block_size = r.block_size;
  b.hashes.resize(r.hash_count);
  if (r.hash_count) std::memcpy(b.hashes.data(), r.hashes, r.hash_count * 8);
  return b;
}

Status ValidateWalPayload(RecordType t, std::span<const uint8_t> p) {
  switch (t) {
    case RecordType::kRegister: {
      RegisterRec r;
      return DecodeRegister(p, &r);
    }
    case RecordType::kStore: {
      StoreRec r;
      return DecodeStore(p, &r);
    }
    case RecordType::kDrop: {
      DropRec r;
      return DecodeDrop(p, &r);
    }
    case RecordType::kFlushAll:
      return p.empty() ? Status::OK() : Bad("flushall record with a payload");
    default:
      return Bad("unknown record type");
  }
}

}  // namespace pion::persist
