// KV events: what a router needs to know about the blocks pion holds, in the
// shape of vLLM's KV-event stream (docs/kv_events.md). An event names blocks by
// the engines' u64 block hashes; pion emits one when a block table becomes
// resident (KV.PREFIX.REGISTER ... BLOCKS), when it leaves (DROP, eviction, a
// replaced table) and when everything goes (FLUSHALL, and at start-up).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace pion::events {

enum class KvEventType : uint8_t { kBlockStored, kBlockRemoved, kAllBlocksCleared };

struct KvEvent {
  KvEventType type = KvEventType::kAllBlocksCleared;
  std::vector<uint64_t> block_hashes;         // Stored, Removed
  std::optional<uint64_t> parent_block_hash;  // Stored: the block before the first
  uint32_t block_size = 0;                    // Stored: tokens per block
};

// The events of one batch and the wall clock when it was formed (the batch's
// timestamp). A worker's batches are encoded as they are made instead
// (KvEncodedEvents, kv_event_codec.h); this form is the start-up batch's.
struct KvEventBatch {
  double ts = 0;
  std::vector<KvEvent> events;
};

}  // namespace pion::events
