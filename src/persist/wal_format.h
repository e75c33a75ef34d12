// Constants and payload codecs shared by the WAL and snapshot writers and
// readers. docs/wal_format.md and docs/snapshot_format.md are the contract; the
// numbers here are frozen (a change needs a new version and a golden file).
// Decoded records hold views into the caller's buffer.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "persist/records.h"
#include "quant/format.h"

namespace pion::persist {

inline constexpr char kWalMagic[8] = {'P', 'I', 'O', 'N', 'W', 'A', 'L', '\0'};
inline constexpr char kSnapMagic[8] = {'P', 'I', 'O', 'N', 'S', 'N', 'P', '\0'};
// 2: string-key records 5-8; 3: REGISTER_CHILD; 4: STRPATCH (record 10) and STRCHAIN (11);
// 5: STRCHAIN has_format (quantized blocks)
inline constexpr uint32_t kWalVersion = 5;
// 2: STRING sections, END string_count; 3: NAMESPACE_CHILD; 4: PAD sections
// (rows of every ROWS section 64-byte aligned in the file, so a loader can map them);
// 5: BLOCK sections; 6: QUANT sections; 7: STRING_TIER sections; 8: NAMESPACE_TIER sections.
inline constexpr uint32_t kSnapVersion = 8;
inline constexpr uint32_t kOldestVersion = 1;  // readers accept kOldestVersion..current
inline constexpr size_t kMaxStrKey = 65536;
inline constexpr size_t kWalHeaderSize = 40;
inline constexpr size_t kSnapHeaderSize = 64;
inline constexpr size_t kRecordHeaderSize = 20;
inline constexpr uint64_t kMaxPayload = uint64_t{1} << 31;
inline constexpr size_t kMaxNameBytes = 512;
// Rows per snapshot ROWS section are bounded by this many bytes.
inline constexpr uint64_t kSnapMaxRowsSection = 64ull << 20;

inline constexpr const char* kSnapshotName = "pion.vstore";
inline constexpr const char* kWalName = "pion.vstore.wal";
// The WAL file the last compaction retired, kept to be recycled (docs/wal_format.md §6).
inline constexpr const char* kWalSpareName = "pion.vstore.wal-spare";

enum class RecordType : uint8_t {
  kRegister = 1,
  kStore = 2,
  kDrop = 3,
  kFlushAll = 4,
  kStrSet = 5,
  kStrDel = 6,
  kStrExpire = 7,
  kStrRename = 8,
  kRegisterChild = 9,  // version 3: REGISTER ... PARENT
  kStrPatch = 10,      // an in-place edit of a string (APPEND, SETRANGE, SETBIT, INCR ...)
  kStrChain = 11,      // version 4: KV.BLOCK.CHAIN
  kSnapNamespace = 16,
  kSnapRows = 17,
  kSnapEnd = 18,
  kSnapString = 19,
  kSnapNamespaceChild = 20,  // version 3
  kSnapPad = 21,             // version 4: 0..63 zero bytes aligning the next ROWS' rows
  kSnapBlock = 22,           // version 5: a string key's chain link, hash and tokens
  kSnapQuant = 23,           // version 6: a string key's value is a quantized block
  kSnapStringTier = 24,      // version 7: a string key's value referenced in the disk tier
  kSnapNamespaceTier = 25,   // version 8: a namespace's chunks referenced in the disk tier
};
// Alignment of the rows of a ROWS section in a version 4 snapshot file.
inline constexpr uint64_t kSnapRowsAlign = 64;
inline constexpr uint8_t kMaxWalRecordType = 11;

// On-disk format tags (int8 0, turbo4 1, fp16 2, turbo3 3, turbo2 4, fp8 5, mlx4g32 7).
uint8_t FormatTag(quant::Format f);
std::optional<quant::Format> FormatFromTag(uint8_t tag);

// Little-endian fixed-width helpers.
inline void PutU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void PutU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void PutU64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint16_t GetU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t GetU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t GetU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

struct WalHeader {
  uint64_t generation = 0;
  uint64_t first_lsn = 0;
};
void EncodeWalHeader(const WalHeader& h, uint8_t out[kWalHeaderSize]);
Status DecodeWalHeader(const uint8_t* p, size_t n, WalHeader* h);

struct SnapHeader {
  uint64_t generation = 0;
  uint64_t next_lsn = 1;
  uint64_t lru_clock = 0;
  uint64_t created_unix = 0;
  uint64_t namespace_count = 0;
};
void EncodeSnapHeader(const SnapHeader& h, uint8_t out[kSnapHeaderSize]);
Status DecodeSnapHeader(const uint8_t* p, size_t n, SnapHeader* h);

// Record header (crc filled by FinishRecordHeader).
void EncodeRecordHeader(uint8_t out[kRecordHeaderSize], RecordType t, uint64_t lsn,
                        uint32_t length);
// CRC of a record: generation, header bytes 4..19, then the payload pieces.
uint32_t RecordCrc(uint64_t generation, const uint8_t hdr[kRecordHeaderSize],
                   std::span<const std::span<const uint8_t>> payload);

struct SnapEndRec {
  uint64_t namespaces = 0;
  uint64_t rows_sections = 0;
  uint64_t total_rows = 0;
  uint64_t total_row_bytes = 0;
  uint64_t strings = 0;     // version 2
  bool has_strings = true;  // decoded: false for a version 1 END
};
// Encoders append to `out`. For STORE/ROWS only the fixed part before the rows
// is encoded (the rows are written from the caller's memory); likewise a
// REGISTER whose `hashes` is nullptr stops before the hash_count hashes.
void EncodeRegister(const RegisterRec& r, std::vector<uint8_t>* out);
void EncodeSnapNamespace(const RegisterRec& r, std::vector<uint8_t>* out);
// The child forms: `name parent ‖ u64 parent_incarnation` then the plain payload.
void EncodeRegisterChild(const RegisterRec& r, std::vector<uint8_t>* out);
void EncodeSnapNamespaceChild(const RegisterRec& r, std::vector<uint8_t>* out);
void EncodeStorePrefix(const StoreRec& r, std::vector<uint8_t>* out);
void EncodeDrop(const DropRec& r, std::vector<uint8_t>* out);
void EncodeSnapEnd(const SnapEndRec& r, std::vector<uint8_t>* out);

// String records. The STRSET/STRING encoders stop before the value bytes.
void EncodeStrSetPrefix(const StrSetRec& r, uint64_t value_len, bool snap,
                        std::vector<uint8_t>* out);
void EncodeStrDel(const StrDelRec& r, std::vector<uint8_t>* out);
void EncodeStrExpire(const StrExpireRec& r, std::vector<uint8_t>* out);
void EncodeStrRename(const StrRenameRec& r, std::vector<uint8_t>* out);
// STRPATCH's fixed part (the patch bytes follow it).
void EncodeStrPatchPrefix(const StrPatchRec& r, std::vector<uint8_t>* out);
Status DecodeStrPatch(std::span<const uint8_t> p, StrPatchRec* r);
Status DecodeStrSet(std::span<const uint8_t> p, bool snap, StrSetRec* r);
Status DecodeStrDel(std::span<const uint8_t> p, StrDelRec* r);
Status DecodeStrExpire(std::span<const uint8_t> p, StrExpireRec* r);
Status DecodeStrRename(std::span<const uint8_t> p, StrRenameRec* r);
// STRCHAIN: the encoder stops before the values (entries' value_len counts);
// the decoder fills `entries` (views of the payload, values included) and
// points r->entries at it.
void EncodeStrChainPrefix(const StrChainRecord& r, std::vector<uint8_t>* out);
Status DecodeStrChain(std::span<const uint8_t> p, StrChainRecord* r,
                      std::vector<StrChainEntry>* entries);
// BLOCK (snapshot version 5).
void EncodeSnapBlock(const StrBlockRecord& r, std::vector<uint8_t>* out);
Status DecodeSnapBlock(std::span<const uint8_t> p, StrBlockRecord* r);
// QUANT (snapshot version 6).
void EncodeSnapQuant(const StrQuantRecord& r, std::vector<uint8_t>* out);
Status DecodeSnapQuant(std::span<const uint8_t> p, StrQuantRecord* r);
// STRING_TIER (snapshot version 7).
void EncodeSnapStringTier(const StrTierRecord& r, std::vector<uint8_t>* out);
Status DecodeSnapStringTier(std::span<const uint8_t> p, StrTierRecord* r);
// NAMESPACE_TIER (snapshot version 8). The chunk list is checked (order, no
// overlap, inside the value) but not against a namespace's chunk size.
void EncodeSnapNamespaceTier(const NsTierRecord& r, std::vector<uint8_t>* out);
Status DecodeSnapNamespaceTier(std::span<const uint8_t> p, NsTierRecord* r);
// Bytes of a NAMESPACE_TIER section's fixed part and of each chunk entry.
inline constexpr size_t kNsTierChunkBytes = 32;
// A writer names at most this many chunks in one NAMESPACE_TIER section (64 MiB of
// entries); a namespace with more is copied into ROWS sections instead.
inline constexpr size_t kSnapMaxNsTierChunks = (64u << 20) / kNsTierChunkBytes;
// Whether a value of `value_len` bytes is whole rows of a valid quantized format.
bool QuantValueValid(const QuantRecord& q, uint64_t value_len);

// Decoders: Corruption with a reason unless the payload parses exactly.
Status DecodeRegister(std::span<const uint8_t> p, RegisterRec* r);
Status DecodeSnapNamespace(std::span<const uint8_t> p, RegisterRec* r);
Status DecodeRegisterChild(std::span<const uint8_t> p, RegisterRec* r);
Status DecodeSnapNamespaceChild(std::span<const uint8_t> p, RegisterRec* r);
Status DecodeStore(std::span<const uint8_t> p, StoreRec* r);
Status DecodeDrop(std::span<const uint8_t> p, DropRec* r);
Status DecodeSnapEnd(std::span<const uint8_t> p, SnapEndRec* r);

// A Record in the WAL (docs/wal_format.md §4): EncodeWal appends the payload's
// bytes before the body to `prefix` and says the record's type, its body's
// length and the body bytes the record itself carries (empty where the caller
// writes them after a reservation: rows from chunks, values). The body always
// ends the payload. REQUIRES: a WAL kind (not LruStampRec, StrBlockRecord,
// StrQuantRecord, StrTierRecord: snapshot sections).
struct WalForm {
  RecordType type = RecordType::kFlushAll;
  uint64_t body_len = 0;
  std::span<const uint8_t> body;
};
WalForm EncodeWal(const Record& r, std::vector<uint8_t>* prefix);
// What a decoded Record's views may point into besides the payload.
struct DecodeScratch {
  std::vector<StrChainEntry> chain_entries;  // StrChainRecord::entries
};
// Decodes a WAL payload of type `t` into `out` (views of `p` and `scratch`):
// Corruption with a reason unless it parses exactly.
Status DecodeWal(RecordType t, std::span<const uint8_t> p, Record* out, DecodeScratch* scratch);
// Validates a WAL record payload of the given type (DecodeWal, result dropped).
Status ValidateWalPayload(RecordType t, std::span<const uint8_t> p);

}  // namespace pion::persist
