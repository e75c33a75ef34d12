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

// The events one worker produced in one turn of its event loop, and the wall
// clock when that turn ended (the batch's timestamp).
struct KvEventBatch {
  double ts = 0;
  std::vector<KvEvent> events;
};

}  // namespace pion::events
