// Codecs for docs/wal_format.md and docs/snapshot_format.md.
#include "persist/wal_format.h"

#include <initializer_list>
#include <string>
#include <variant>

#include "base/check.h"
#include "base/crc32c.h"
#include "persist/codec_bytes.h"

namespace pion::persist {
namespace {

using codec::Bad;
using codec::Reader;
using codec::Writer;

constexpr uint8_t kNoTag = 0xFF;
// Indexed by quant::Format (kInt8, kTurbo4, kTurbo3, kTurbo2, kFp16, kFp8, kMlx4g32).
constexpr uint8_t kTagOf[quant::kNumFormats] = {0, 1, 3, 4, 2, 5, 7};

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

namespace {

// The file header both formats share: magic (8 bytes), version (u32), a zero
// flags word, `fields` u64s from offset 16, a zero word, and the CRC32C of every
// byte before it in the last 4 bytes. `what` names the file in errors.
struct FileHeader {
  const char* magic;
  uint32_t version;
  size_t size;
  const char* what;
};
constexpr FileHeader kWalFile{kWalMagic, kWalVersion, kWalHeaderSize, "WAL"};
constexpr FileHeader kSnapFile{kSnapMagic, kSnapVersion, kSnapHeaderSize, "snapshot"};

void EncodeFileHeader(const FileHeader& f, std::initializer_list<uint64_t> fields, uint8_t* out) {
  std::memset(out, 0, f.size);
  std::memcpy(out, f.magic, 8);
  PutU32(out + 8, f.version);
  size_t off = 16;
  for (uint64_t v : fields) {
    PutU64(out + off, v);
    off += 8;
  }
  PutU32(out + f.size - 4, crc32c::Value(out, f.size - 4));
}

Status DecodeFileHeader(const FileHeader& f, const uint8_t* p, size_t n,
                        std::initializer_list<uint64_t*> fields) {
  const std::string what = f.what;
  if (n < f.size) return Bad("file shorter than the " + what + " header");
  if (std::memcmp(p, f.magic, 8) != 0) return Bad("bad magic (not a pion " + what + ")");
  if (GetU32(p + f.size - 4) != crc32c::Value(p, f.size - 4))
    return Bad(what + " header checksum mismatch");
  if (GetU32(p + 8) < kOldestVersion || GetU32(p + 8) > f.version)
    return Bad("unsupported " + what + " version");
  if (GetU32(p + 12) != 0 || GetU32(p + f.size - 8) != 0)
    return Bad("unknown " + what + " header flags");
  size_t off = 16;
  for (uint64_t* v : fields) {
    *v = GetU64(p + off);
    off += 8;
  }
  return Status::OK();
}

}  // namespace

void EncodeWalHeader(const WalHeader& h, uint8_t out[kWalHeaderSize]) {
  EncodeFileHeader(kWalFile, {h.generation, h.first_lsn}, out);
}

Status DecodeWalHeader(const uint8_t* p, size_t n, WalHeader* h) {
  PION_RETURN_IF_ERROR(DecodeFileHeader(kWalFile, p, n, {&h->generation, &h->first_lsn}));
  if (h->generation == 0 || h->first_lsn == 0) return Bad("WAL header with zero generation/lsn");
  return Status::OK();
}

void EncodeSnapHeader(const SnapHeader& h, uint8_t out[kSnapHeaderSize]) {
  EncodeFileHeader(kSnapFile,
                   {h.generation, h.next_lsn, h.lru_clock, h.created_unix, h.namespace_count}, out);
}

Status DecodeSnapHeader(const uint8_t* p, size_t n, SnapHeader* h) {
  PION_RETURN_IF_ERROR(DecodeFileHeader(
      kSnapFile, p, n,
      {&h->generation, &h->next_lsn, &h->lru_clock, &h->created_unix, &h->namespace_count}));
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

namespace {

// The fields REGISTER and the snapshot's NAMESPACE share, up to has_blocks.
void EncodeNamespaceHead(Writer& w, const RegisterRec& r) {
  w.Name(r.ns);
  w.U64(r.incarnation);
  w.U32(r.kv_dim);
  w.U8(FormatTag(r.fmt));
  w.U8(r.has_blocks ? 1 : 0);
}

// The block table both end with (the hashes only when `r.hashes` is set).
void EncodeBlocks(Writer& w, const RegisterRec& r) {
  if (!r.has_blocks) return;
  w.U32(r.block_size);
  w.U32(0);
  w.U64(r.hash_count);
  if (r.hashes != nullptr) w.Raw(r.hashes, r.hash_count * 8);
}

}  // namespace

void EncodeRegister(const RegisterRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  EncodeNamespaceHead(w, r);
  EncodeBlocks(w, r);
}

void EncodeSnapNamespace(const RegisterRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  EncodeNamespaceHead(w, r);
  w.U16(0);
  w.U64(r.lru_stamp);
  EncodeBlocks(w, r);
}

void EncodeRegisterChild(const RegisterRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Name(r.parent);
  w.U64(r.parent_incarnation);
  EncodeRegister(r, out);
}

void EncodeSnapNamespaceChild(const RegisterRec& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Name(r.parent);
  w.U64(r.parent_incarnation);
  EncodeSnapNamespace(r, out);
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
  w.U64(r.strings);
}

void EncodeSnapNamespaceTier(const NsTierRecord& r, std::vector<uint8_t>* out) {
  Writer w(out);
  w.Name(r.ns);
  w.U64(r.incarnation);
  w.U32(r.row_bytes);
  w.U32(static_cast<uint32_t>(r.chunks.size()));
  w.U64(r.value_len);
  w.U64(r.extent.offset);
  w.U64(r.extent.length);
  w.U32(r.extent.header_bytes);
  w.U32(r.extent.value_crc);
  w.U64(r.extent.seq);
  for (const NsTierChunkRecord& c : r.chunks) {
    w.U8(static_cast<uint8_t>(c.side));
    w.U8(0);
    w.U16(0);
    w.U32(c.layer);
    w.U64(c.start);
    w.U64(c.rows);
    w.U64(c.value_offset);
  }
}

Status DecodeSnapNamespaceTier(std::span<const uint8_t> p, NsTierRecord* r) {
  Reader rd(p);
  uint32_t count = 0;
  TierExtentRecord& x = r->extent;
  if (!rd.Name(&r->ns)) return Bad("bad namespace name");
  if (!rd.U64(&r->incarnation) || !rd.U32(&r->row_bytes) || !rd.U32(&count) ||
      !rd.U64(&r->value_len) || !rd.U64(&x.offset) || !rd.U64(&x.length) ||
      !rd.U32(&x.header_bytes) || !rd.U32(&x.value_crc) || !rd.U64(&x.seq))
    return Bad("truncated namespace_tier section");
  constexpr uint64_t kBlock = 4096;
  if (x.offset % kBlock != 0 || x.length % kBlock != 0 || x.header_bytes % kBlock != 0 ||
      x.header_bytes < 64 + r->ns.size() || r->value_len > x.length ||
      x.header_bytes > x.length - r->value_len)
    return Bad("namespace_tier section does not describe an extent");
  if (r->row_bytes == 0 || count == 0) return Bad("empty namespace_tier section");
  if (rd.left() != static_cast<uint64_t>(count) * kNsTierChunkBytes)
    return Bad("namespace_tier section size does not match its chunk count");
  r->chunks.clear();
  r->chunks.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    NsTierChunkRecord c;
    uint8_t side = 0, res8 = 0;
    uint16_t res16 = 0;
    (void)(rd.U8(&side) && rd.U8(&res8) && rd.U16(&res16) && rd.U32(&c.layer) && rd.U64(&c.start) &&
           rd.U64(&c.rows) && rd.U64(&c.value_offset));
    if (side > 1) return Bad("bad side");
    if (res8 != 0 || res16 != 0) return Bad("reserved bytes not zero");
    c.side = static_cast<Side>(side);
    if (c.rows == 0 || c.value_offset % 64 != 0 || c.value_offset > r->value_len ||
        c.rows > (r->value_len - c.value_offset) / r->row_bytes)
      return Bad("namespace_tier chunk outside the extent's value");
    if (c.start > UINT64_MAX - c.rows) return Bad("namespace_tier chunk rows overflow");
    if (!r->chunks.empty()) {
      const NsTierChunkRecord& b = r->chunks.back();
      const bool after = c.side != b.side     ? c.side > b.side
                         : c.layer != b.layer ? c.layer > b.layer
                                              : c.start >= b.start + b.rows;
      if (!after) return Bad("namespace_tier chunks out of order or overlapping");
    }
    r->chunks.push_back(c);
  }
  return Status::OK();
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

static Status DecodeChild(std::span<const uint8_t> p, RegisterRec* r, bool snap) {
  Reader rd(p);
  if (!rd.Name(&r->parent)) return Bad("bad parent name");
  if (!rd.U64(&r->parent_incarnation)) return Bad("truncated child record");
  PION_RETURN_IF_ERROR(DecodeRegisterCommon(rd, r, snap));
  if (r->parent == r->ns) return Bad("namespace is its own parent");
  return Status::OK();
}

Status DecodeRegisterChild(std::span<const uint8_t> p, RegisterRec* r) {
  return DecodeChild(p, r, false);
}

Status DecodeSnapNamespaceChild(std::span<const uint8_t> p, RegisterRec* r) {
  return DecodeChild(p, r, true);
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
      !rd.U64(&r->total_row_bytes))
    return Bad("bad end section");
  r->has_strings = rd.left() != 0;
  r->strings = 0;
  if (r->has_strings && !rd.U64(&r->strings)) return Bad("bad end section");
  if (rd.left() != 0) return Bad("bad end section");
  return Status::OK();
}

namespace {

// The WAL form of each kind (docs/wal_format.md §4): its type, the payload
// before the body into `prefix`, the body's length and what the record carries
// of it. One overload per WAL kind; the snapshot-only kinds have none here.
WalForm WalOf(const RegisterRec& r, std::vector<uint8_t>* prefix) {
  RegisterRec head = r;
  head.hashes = nullptr;  // the hashes are the body
  const bool child = !r.parent.empty();
  if (child)
    EncodeRegisterChild(head, prefix);
  else
    EncodeRegister(head, prefix);
  WalForm f{child ? RecordType::kRegisterChild : RecordType::kRegister,
            r.has_blocks ? r.hash_count * 8 : 0,
            {}};
  if (r.has_blocks && r.hashes != nullptr) f.body = {r.hashes, r.hash_count * 8};
  return f;
}
WalForm WalOf(const StoreRec& r, std::vector<uint8_t>* prefix) {
  EncodeStorePrefix(r, prefix);
  return {RecordType::kStore, r.count * r.row_bytes, r.rows};
}
WalForm WalOf(const DropRec& r, std::vector<uint8_t>* prefix) {
  EncodeDrop(r, prefix);
  return {RecordType::kDrop, 0, {}};
}
WalForm WalOf(const FlushAllRec&, std::vector<uint8_t>*) { return {RecordType::kFlushAll, 0, {}}; }
WalForm WalOf(const StrSetRec& r, std::vector<uint8_t>* prefix) {
  EncodeStrSetPrefix(r, r.value_len, false, prefix);
  return {RecordType::kStrSet, r.value_len, r.value};
}
WalForm WalOf(const StrDelRec& r, std::vector<uint8_t>* prefix) {
  EncodeStrDel(r, prefix);
  return {RecordType::kStrDel, 0, {}};
}
WalForm WalOf(const StrExpireRec& r, std::vector<uint8_t>* prefix) {
  EncodeStrExpire(r, prefix);
  return {RecordType::kStrExpire, 0, {}};
}
WalForm WalOf(const StrRenameRec& r, std::vector<uint8_t>* prefix) {
  EncodeStrRename(r, prefix);
  return {RecordType::kStrRename, 0, {}};
}
WalForm WalOf(const StrPatchRec& r, std::vector<uint8_t>* prefix) {
  EncodeStrPatchPrefix(r, prefix);
  return {RecordType::kStrPatch, r.bytes.size(), r.bytes};
}
WalForm WalOf(const StrChainRecord& r, std::vector<uint8_t>* prefix) {
  EncodeStrChainPrefix(r, prefix);
  uint64_t body = 0;
  bool carried = true;  // the values back to back in memory (a decoded record)
  for (const StrChainEntry& e : r.entries) {
    carried = carried && e.value.size() == e.value_len &&
              (body == 0 || e.value_len == 0 || e.value.data() == r.entries[0].value.data() + body);
    body += e.value_len;
  }
  WalForm f{RecordType::kStrChain, body, {}};  // else the values: write_parts
  if (carried && body > 0) f.body = {r.entries[0].value.data(), body};
  return f;
}
template <typename SnapshotOnly>
WalForm WalOf(const SnapshotOnly&, std::vector<uint8_t>*) {
  PION_CHECK(false && "a snapshot-only record has no WAL form");
  return {};
}

template <typename T>
Status DecodeInto(Status (*decode)(std::span<const uint8_t>, T*), std::span<const uint8_t> p,
                  Record* out) {
  T r;
  PION_RETURN_IF_ERROR(decode(p, &r));
  *out = r;
  return Status::OK();
}

}  // namespace

WalForm EncodeWal(const Record& r, std::vector<uint8_t>* prefix) {
  return std::visit([prefix](const auto& rec) { return WalOf(rec, prefix); }, r);
}

Status DecodeWal(RecordType t, std::span<const uint8_t> p, Record* out, DecodeScratch* scratch) {
  switch (t) {
    case RecordType::kRegister:
      return DecodeInto(DecodeRegister, p, out);
    case RecordType::kRegisterChild:
      return DecodeInto(DecodeRegisterChild, p, out);
    case RecordType::kStore:
      return DecodeInto(DecodeStore, p, out);
    case RecordType::kDrop:
      return DecodeInto(DecodeDrop, p, out);
    case RecordType::kFlushAll:
      if (!p.empty()) return Bad("flushall record with a payload");
      *out = FlushAllRec{};
      return Status::OK();
    case RecordType::kStrSet: {
      StrSetRec r;
      PION_RETURN_IF_ERROR(DecodeStrSet(p, false, &r));
      *out = r;
      return Status::OK();
    }
    case RecordType::kStrDel:
      return DecodeInto(DecodeStrDel, p, out);
    case RecordType::kStrExpire:
      return DecodeInto(DecodeStrExpire, p, out);
    case RecordType::kStrRename:
      return DecodeInto(DecodeStrRename, p, out);
    case RecordType::kStrPatch:
      return DecodeInto(DecodeStrPatch, p, out);
    case RecordType::kStrChain: {
      StrChainRecord r;
      PION_RETURN_IF_ERROR(DecodeStrChain(p, &r, &scratch->chain_entries));
      *out = r;
      return Status::OK();
    }
    default:
      return Bad("unknown record type");
  }
}

Status ValidateWalPayload(RecordType t, std::span<const uint8_t> p) {
  Record r;
  DecodeScratch scratch;
  return DecodeWal(t, p, &r, &scratch);
}

}  // namespace pion::persist
