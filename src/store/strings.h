// The string keyspace's public types (docs/protocol.md "Keys"). String values
// share the store with the namespaces: one key space (a name is either a string
// key or a namespace), one byte budget (--maxmemory) and one LRU. A value is a
// 64-byte aligned, reference-counted buffer: GET pins it and sends
// it by reference, an overwrite or eviction only drops the store's reference.
//
// Thread-safety: StrValue is immutable while anyone but the store holds it:
// the store edits a value in place (OpPatch, store/string_ops.h) only under its key's
// locks and only when it holds the sole reference (use_count() == 1); a value
// pinned by a reply, a pending log write or a snapshot is copied first.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/owned_buffer.h"
#include "quant/format.h"
#include "tier/tier_file.h"

namespace pion::store {

// KV.BLOCK.CHAIN ... FORMAT f DTYPE d ROW n (docs/protocol.md "Block formats"):
// the value holds whole rows of `row` elements quantized in `format`, each
// decoding to `row` values of `dtype`. row == 0: a plain value.
enum class BlockDtype : uint8_t { kF16 = 0, kBf16 = 1, kF32 = 2 };
inline constexpr size_t BlockDtypeBytes(BlockDtype d) { return d == BlockDtype::kF32 ? 4 : 2; }
struct QuantTag {
  uint32_t row = 0;
  quant::Format format = quant::Format::kFp16;
  BlockDtype dtype = BlockDtype::kF16;
  bool operator==(const QuantTag&) const = default;
};

// The bytes live in `mem`: a block of ours (std::aligned_alloc) or one adopted
// from the layer that received it (a big argument's buffer, Adopt). Either way
// a dropped value's block goes to the process's BufferRecycler
// (base/owned_buffer.h), which keeps large blocks for the next big argument or
// value and frees the rest.
struct StrValue {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t capacity = 0;  // allocated bytes (>= size; what the budget is charged)
  OwnedBuffer mem;
  // Edited in place (APPEND, SETRANGE, SETBIT...): OBJECT ENCODING says "raw"
  // whatever the content, as Redis does for a value it modified.
  bool edited = false;
  // Set once, before the value is published: a quantized block's format
  // (QuantTag; row 0 = plain bytes). Travels with the value (RENAME, the disk
  // tier's moving and mapped copies, the WAL and the snapshot).
  QuantTag quant;
  bool quantized() const { return quant.row != 0; }
  // The length GET answers: the dequantized size of a quantized value.
  size_t PlainSize() const {
    if (!quantized()) return size;
    const size_t rb = quant::RowBytes(quant.format, quant.row);
    return size / rb * quant.row * BlockDtypeBytes(quant.dtype);
  }
  // The disk tier (store/tiering.cc): the extent of a value that lives there.
  // While the extent is being written, `backing` keeps the RAM value alive and
  // `data` points into it; once written, `data` points into the tier's
  // read-only mapping and `backing` is null. Either way capacity is 0 (no RAM
  // charged) and the bytes are never edited in place.
  tier::ExtentRef extent;
  std::shared_ptr<const StrValue> backing;
  bool tiered() const { return extent != nullptr; }
  bool on_disk() const { return extent != nullptr && backing == nullptr; }

  StrValue() = default;
  StrValue(const StrValue&) = delete;
  StrValue& operator=(const StrValue&) = delete;

  std::string_view view() const { return {reinterpret_cast<const char*>(data), size}; }
  // An uninitialised value of `n` bytes, or nullptr when the memory cannot be had.
  static std::shared_ptr<StrValue> TryMake(size_t n);
  // A copy of `s` (nullptr when the memory cannot be had).
  static std::shared_ptr<StrValue> Copy(std::string_view s);
  // The first `n` bytes of `buf` (64-byte aligned, filled by its previous
  // owner) as a value, without copying; its whole capacity is charged.
  static std::shared_ptr<StrValue> Adopt(OwnedBuffer buf, size_t n);
  // How many values Adopt made since start (INFO stats, /metrics).
  static uint64_t adopted_total();
  // The `n` bytes at `offset` of `buf` as a value (a read from the disk tier).
  static std::shared_ptr<StrValue> FromBuffer(OwnedBuffer buf, size_t offset, size_t n);

 private:
  static std::shared_ptr<StrValue> Wrap(OwnedBuffer buf, size_t n);
};
using StrRef = std::shared_ptr<const StrValue>;

// Longest string key (bytes).
inline constexpr size_t kMaxStrKeyBytes = 65536;

// The capacity a string value growing to `n` bytes is given (twice `n` up to
// 1 MiB, then 1 MiB more, as Redis's sds): N appends of k bytes copy O(N k)
// bytes in all.
inline uint64_t StrGrowCapacity(uint64_t n) {
  constexpr uint64_t kGreedyLimit = uint64_t{1} << 20;
  return n < kGreedyLimit ? n * 2 : n + kGreedyLimit;
}

// Redis's LFU_INIT_VAL: a new key's counter (not evicted before it is used).
inline constexpr uint8_t kLfuInitCounter = 5;

// What memory a string key is charged (key, value capacity, entry overhead).
inline constexpr uint64_t kStrEntryOverhead = 96;
inline uint64_t StrCharge(std::string_view key, const StrRef& v) {
  return key.size() + (v ? v->capacity : 0) + kStrEntryOverhead;
}

// maxmemory-policy (Redis's eight). The LFU and TTL policies, and
// volatile-random, choose among maxmemory-samples string keys drawn at random;
// namespaces have no TTL (never volatile) and no access counter (allkeys-lfu
// takes the least recently used one once no string key can go).
enum class EvictPolicy : uint8_t {
  kAllKeysLru,
  kNoEviction,
  kVolatileLru,
  kAllKeysRandom,
  kAllKeysLfu,
  kVolatileLfu,
  kVolatileRandom,
  kVolatileTtl,
};
inline bool IsLfuPolicy(EvictPolicy p) {
  return p == EvictPolicy::kAllKeysLfu || p == EvictPolicy::kVolatileLfu;
}
const char* EvictPolicyName(EvictPolicy p);
bool ParseEvictPolicy(std::string_view s, EvictPolicy* out);

enum class KeyType : uint8_t { kNone, kString, kKvPrefix };

struct SetOptions {
  enum class Cond : uint8_t { kAlways, kNx, kXx } cond = Cond::kAlways;
  bool keep_ttl = false;
  int64_t expire_at_ms = 0;  // unix ms; 0 = no expiry (removes an existing one unless keep_ttl)
  bool want_old = false;     // SET ... GET
};

struct SetOutcome {
  bool done = false;  // the value was written (NX/XX may prevent it)
  StrRef old;         // with want_old: the previous value (nullptr if none)
};

// EXPIRE options (Redis 7).
// EXPIRE's conditions; kLtXx is LT and XX together (only a key that has a TTL,
// and only lowered). GT with XX is kGt (GT already needs a TTL).
enum class ExpireCond : uint8_t { kAlways, kNx, kXx, kGt, kLt, kLtXx };

// OpPatch's edit, filled by the caller's planner from the current value.
struct StrEdit {
  uint64_t offset = 0;
  std::string_view bytes;  // written at offset (zero-filled from the old end); must
                           // outlive the OpPatch call
  bool truncate = false;   // the value ends right after `bytes`
  bool write = true;       // false: nothing changes (OpPatch returns the length)
  bool edited = true;      // OBJECT ENCODING "raw" afterwards (false: by content)
};

// OBJECT's view of a key.
struct KeyObject {
  KeyType type = KeyType::kNone;
  StrRef value;         // a string's value
  uint64_t idle_s = 0;  // seconds since the last access
  uint8_t freq = 0;     // the LFU counter, decayed to now (OBJECT FREQ)
};

struct ScanResult {
  uint64_t cursor = 0;  // 0 = done
  std::vector<std::string> keys;
};

struct KeyspaceStats {
  uint64_t keys = 0;     // string keys + namespaces
  uint64_t expires = 0;  // keys with a TTL
  uint64_t avg_ttl_ms = 0;
  uint64_t string_bytes = 0;  // charged to the budget by string keys
  uint64_t hits = 0, misses = 0;
  uint64_t expired = 0;       // keys removed because their TTL passed
  uint64_t evicted_keys = 0;  // string keys + namespaces evicted
  uint64_t changes = 0;       // string keys written or removed since start (never reset)
};

struct StrEntry;

// Internal to the store: a block's chain links and engine metadata
// (KV.BLOCK.CHAIN, store/block_links.cc). Guarded by Keyspace::mu; `parent` is
// also written only under the entry's shard lock (the read paths test it there
// to choose the path that stamps ancestors).
struct BlockLinks {
  StrEntry* parent = nullptr;       // null: a root
  std::vector<StrEntry*> children;  // live children (each names this entry as parent)
  uint64_t hash = 0;                // the engine's block hash (HASHES), if has_hash
  uint32_t tokens = 0;              // TOKENS (0: not given)
  bool has_hash = false;
};

// Internal to the store (guarded by Keyspace::mu): one string key. Entries live
// in the map's nodes (stable addresses) and are linked into the LRU list.
struct StrEntry {
  const std::string* key = nullptr;  // the map node's key
  StrRef value;
  int64_t expire_at_ms = 0;
  uint64_t stamp = 0;    // LRU stamp (the store's clock, shared with namespaces)
  uint64_t hash = 0;     // scan order
  uint64_t version = 0;  // WATCH
  uint32_t atime_s = 0;  // last access, coarse unix seconds (OBJECT IDLETIME)
  // LFU (Redis's logarithmic access counter, OBJECT FREQ, the LFU policies):
  // the counter and the minute (mod 2^16) it was last decayed at. Written
  // under the entry's shard lock.
  uint16_t lfu_minute = 0;
  uint8_t lfu_counter = 0;
  StrEntry* prev = nullptr;
  StrEntry* next = nullptr;
  // KV.BLOCK.MATCH ... PIN (store/pins.cc): live pins on this key; written
  // under Keyspace::mu and the entry's shard lock. A pinned key is neither
  // evicted nor expired. `born` identifies this entry for the leases that pin
  // it (unique per entry created); `held` keeps it from eviction during a
  // CHAIN that links to it.
  uint32_t pins = 0;
  bool held = false;
  // The value lives in the disk tier: the entry is in its shard's tier LRU list
  // (not the RAM one). Written under Keyspace::mu and the shard lock.
  bool tiered = false;
  uint64_t born = 0;
  // Chain links (KV.BLOCK.CHAIN); null for a plain string key.
  std::unique_ptr<BlockLinks> block;
  bool HasParent() const { return block != nullptr && block->parent != nullptr; }
  bool HasChildren() const { return block != nullptr && !block->children.empty(); }
};

}  // namespace pion::store
