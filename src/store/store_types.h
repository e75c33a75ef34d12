// The store's value types: limits, configuration, and the arguments and
// results of Store's calls (store/store.h declares the calls and says what
// each one does). Kept apart so that a caller that only passes these around
// need not read the whole Store.
//
// Thread-safety: plain values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "quant/format.h"
#include "store/block_index.h"
#include "store/chunk.h"
#include "store/strings.h"

namespace pion::store {

inline constexpr uint32_t kMaxLayers = 256;
inline constexpr uint64_t kMaxTokens = 16777216;  // start + count <= kMaxTokens
inline constexpr size_t kMaxNamespaceBytes = 512;
inline constexpr uint32_t kMaxBlockSize = 65536;
inline constexpr uint64_t kMaxHashCount = 1048576;

struct StoreConfig {
  uint64_t max_sessions = 256;    // a namespace uses two sessions
  uint64_t max_bytes = 0;         // 0 = no byte budget
  uint32_t max_chain = 1024;      // namespaces in one PARENT chain, root..leaf inclusive
  uint32_t eviction_samples = 5;  // maxmemory-samples: namespaces sampled per eviction
};

// Shards of the key space: a power of two, fixed; a key's shard is the top
// kShardBits bits of the string map's hash (XXH3) of its hash tag, the whole
// key where it has none (Keyspace::ShardIndex), so keys with the same hash tag
// share a shard and a key's lookup hash gives its shard.
inline constexpr size_t kShards = 16;
inline constexpr uint32_t kShardBits = 4;
static_assert((size_t{1} << kShardBits) == kShards);

// The sampled-LRU eviction pool's size (as Redis's EVPOOL_SIZE).
inline constexpr size_t kEvictionPoolSize = 16;

struct StoreStats {
  uint64_t registered_prefixes = 0;
  uint64_t total_prefix_tokens = 0;  // sum of K-side layer-0 rows over namespaces
  uint64_t sessions = 0;             // 2 per namespace
  uint64_t max_sessions = 0;
  uint64_t total_fetches = 0;  // rows requested by fetches since start
  uint64_t evictions = 0;      // namespaces' sessions freed by LRU or DROP (2 per namespace)
  uint64_t bytes = 0;          // K/V bytes held in stored form (vstore_bytes)
  uint64_t max_bytes = 0;
  uint64_t total_tokens = 0;     // sum of rows over every layer of every session
  uint64_t allocated_bytes = 0;  // bytes of row chunks allocated (>= bytes; <= ~1.25x)
  uint64_t linked_prefixes = 0;  // namespaces registered with a PARENT
};

struct RegisterArgs {
  std::string_view ns;
  uint32_t kv_dim = 0;
  quant::Format fmt = quant::Format::kFp16;
  // nullptr: keep any existing table. Finished (BlockTable::Finish) by the
  // caller, ideally: otherwise Register copies it to build the index.
  std::shared_ptr<const BlockTable> blocks;
  bool has_prefill = false;
  uint64_t prefill_us = 0;  // replaces the stored time (0 if !has_prefill)
  // Non-empty: the namespace continues this one (it must be registered, with
  // the same kv_dim). A re-registration without it keeps the existing link;
  // with it, it must name the existing parent.
  std::string_view parent;
};

struct LookupResult {
  bool hit = false;
  uint64_t layer0_tokens = 0;  // K side, layer 0 row count
  uint64_t prefill_us = 0;     // reported at REGISTER (0 = none)
};

// One segment of a chain (LookupChain), root first.
struct ChainSegment {
  std::string ns;
  uint64_t tokens = 0;      // K side, layer 0 row count
  uint64_t prefill_us = 0;  // reported at REGISTER (0 = none)
};

// What Describe reports of one namespace (no LRU touch).
struct NamespaceInfo {
  std::string parent;         // empty for a root
  uint64_t children = 0;      // live children
  uint64_t depth = 0;         // ancestors
  uint64_t chain_length = 0;  // namespaces root..this, inclusive
  uint64_t tokens = 0;        // K side, layer 0 row count
  uint64_t chain_tokens = 0;  // sum of tokens over the chain
  bool on_disk = false;       // its rows live in the disk tier
};

// Input rows of a store: f32 or f16, row-major [count, dim].
struct RowInput {
  enum class Type : uint8_t { kF32, kF16 } type = Type::kF32;
  const void* data = nullptr;
  size_t bytes = 0;
  // Optional: keeps `data` alive and unchanged for as long as it is held (a
  // received argument buffer, ctx.TakeArg). F16 rows into an fp16 namespace
  // whose whole chunks lie 64-byte aligned in it are then kept by reference
  // (Chunk::Borrow) instead of copied.
  std::shared_ptr<const void> owner;
};

// A run of `rows` consecutive rows: stored bytes at `data` (kept alive by
// `chunk`), or zeros when data == nullptr (never written).
struct FetchSegment {
  std::shared_ptr<const Chunk> chunk;
  const uint8_t* data = nullptr;
  uint64_t rows = 0;
};

// Internal to the store's write path (Store::StorePieces): rows of a store in stored form, in row
// order, covering [start, start+count) together: `count` rows at `data`, or, with `chunk`, exactly
// the whole chunk start / rows_per_chunk (data == chunk->data), filled and not yet published: it
// replaces that chunk when the store is applied.
struct RowPiece {
  uint64_t start = 0;
  uint64_t count = 0;
  const uint8_t* data = nullptr;
  std::shared_ptr<Chunk> chunk;
};

// A per-thread cache of segment vectors (their capacity): the store builds a
// FetchRange/FetchIds plan's segments in one taken from it, and a caller that
// is done with a plan may give the vector back, so a small fetch on a worker
// allocates nothing in steady state. At most a few vectors of
// modest capacity are kept per thread.
std::vector<FetchSegment> TakeSegmentVector();
void RecycleSegmentVector(std::vector<FetchSegment>&& v);

// The rows a fetch will send, pinned. Decoding or sending needs no lock.
struct FetchPlan {
  quant::Format fmt = quant::Format::kFp16;
  uint32_t dim = 0;
  size_t row_bytes = 0;
  uint64_t rows = 0;         // rows in the reply
  uint64_t stored_rows = 0;  // of those, rows below the layer's high-water mark
  std::vector<FetchSegment> segments;
};

struct SessionInfo {
  uint32_t dim = 0;
  quant::Format fmt = quant::Format::kFp16;
  uint32_t num_layers = 0;             // highest stored layer + 1
  std::vector<uint64_t> layer_tokens;  // per layer < num_layers
  uint64_t total_tokens = 0;
  uint64_t bytes = 0;
};

// ---- Results and arguments of Store's block and tier calls (store.h says
// what each call does; Store names them as Store::TierStats etc.) ----

// Store::tier_stats().
inline constexpr size_t kTierLatencyBuckets = 24;  // read latency: <= 2^i us
struct TierStats {
  bool enabled = false;
  uint64_t bytes = 0, max_bytes = 0, entries = 0, reads = 0, read_bytes = 0, writes = 0,
           write_bytes = 0, promotions = 0, evictions = 0, errors = 0, backlog_bytes = 0,
           read_us = 0, ring_reads = 0;
  bool direct_io = false;
  std::array<uint64_t, kTierLatencyBuckets> read_latency{};
};

// OpBlockMatch (KV.BLOCK.MATCH).
struct BlockMatchResult {
  uint64_t count = 0;
  uint64_t lease = 0;
  bool too_many_leases = false;
};

// Store::PinStatsNow.
struct PinStats {
  uint64_t keys = 0;    // distinct keys with at least one pin
  uint64_t bytes = 0;   // their charged bytes
  uint64_t leases = 0;  // live leases
};

// OpBlockChain (KV.BLOCK.CHAIN).
struct ChainArgs {
  std::string_view after;
  bool has_after = false;
  int64_t expire_at_ms = 0;
  std::string_view hashes;
  uint32_t tokens = 0;
  // FORMAT (row != 0): every value is in `made`, already quantized with this tag.
  QuantTag quant;
};

// OpDescribeBlock.
struct BlockInfo {
  bool has_parent = false;
  std::string parent;
  uint64_t children = 0;
  bool has_hash = false;
  uint64_t hash = 0;
  uint32_t tokens = 0;
  uint64_t stamp = 0;
};

}  // namespace pion::store
