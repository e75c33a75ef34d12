// SlotCache: the warm attention slots of the server, keyed by (session id, layer), and
// the cold registry behind them (docs/attention.md §5a).
//
// States of a key: WARM (a slot is resident), COLD (it was demoted: only its shape and
// last access are remembered, the caller must rebuild it, e.g. KV.PREFIX.WARM), MISSING.
//
//  * LRU: every Put() and Acquire() stamps the key most recent (a global counter). An
//    Acquire() of a COLD key stamps its cold entry (the query that met COLDMISS wants it
//    back), so a rebuild of the session that puts its layers in LastAccess() order
//    (KV.PREFIX.WARM) leaves the layer the client is waiting for the most recent slot.
//  * Limits (SetLimits, at any time): at most max_slots warm slots and, when max_bytes
//    is not 0, at most max_bytes of slot memory (Slot::bytes(): K, V, scales, cached
//    block statistics). Reaching either demotes least-recently-used slots to the cold
//    registry (`demotions`); the registry keeps at most cold_slots entries and forgets
//    the oldest access first. Put() never demotes the slot it installs.
//  * A Put() of a cold key removes its cold entry and counts a rehydrate.
//  * Slots are shared_ptr<const Slot>: a query holds its own reference, so a re-store
//    (which installs a new object), a demotion or a drop never frees memory a query is
//    reading; the old slot goes when its last reader finishes.
//
//  * Slot memory (attend/slot_arena.h): slots built with arena() take the memory of
//    freed slots back. The arena keeps at most attend-maxmemory minus the warm bytes
//    (max_bytes > 0: warm + kept never exceeds it), else at most the peak warm bytes
//    seen (freed slot memory is never more than the slots once held); lowering
//    the limits trims it and Clear() frees everything it keeps. Its limit follows every
//    change of the warm bytes, and removed slots are released only after that (and
//    outside the lock).
//
// Thread-safety: every method may be called from any thread (one mutex; no slot is
// built or attended under it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attend/slot.h"
#include "base/status.h"

namespace pion::attend {

enum class SlotState : uint8_t { kMissing = 0, kWarm = 1, kCold = 2 };

struct SlotCacheLimits {
  uint64_t max_slots = 4096;
  uint64_t max_bytes = 0;  // 0 = no byte bound
  uint64_t cold_slots = 65536;
};

struct SlotCacheStats {
  uint64_t warm = 0;
  uint64_t cold = 0;
  uint64_t demotions = 0;   // lifetime WARM -> COLD (also counted when cold_slots = 0)
  uint64_t rehydrates = 0;  // lifetime COLD -> WARM
  uint64_t cold_forgotten = 0;
  uint64_t bytes = 0;  // Slot::bytes() over the warm slots, as last counted
  SlotArenaStats arena;
};

// What the cold registry remembers of a demoted slot.
struct ColdInfo {
  uint32_t heads = 0, tokens = 0, dim = 0;
  uint64_t last_access = 0;
};

class SlotCache {
 public:
  explicit SlotCache(SlotCacheLimits limits = {});
  SlotCache(const SlotCache&) = delete;
  SlotCache& operator=(const SlotCache&) = delete;

  // New limits, enforced at once (may demote and forget).
  void SetLimits(const SlotCacheLimits& limits);
  SlotCacheLimits limits() const;

  SlotState State(std::string_view sid, uint32_t layer) const;
  // The warm slot of (sid, layer), stamped most recent; null when COLD or MISSING
  // (`*state` says which; may be null).
  std::shared_ptr<const Slot> Acquire(std::string_view sid, uint32_t layer, SlotState* state);
  // The last stamp of (sid, layer): its warm LRU stamp, its cold entry's last access, or
  // 0 when MISSING. Larger = more recent.
  uint64_t LastAccess(std::string_view sid, uint32_t layer) const;
  // Whether a slot of `bytes` could be held at all (max_bytes): OutOfBudget if not.
  Status Admit(uint64_t bytes) const;
  // Installs `slot` as (sid, layer) (replacing a warm one), stamped most recent, then
  // demotes other slots until the limits hold.
  void Put(std::string_view sid, uint32_t layer, std::shared_ptr<const Slot> slot);
  // Re-counts the bytes of (sid, layer) if it still holds `slot` (block statistics
  // were built), then enforces max_bytes.
  void Recount(std::string_view sid, uint32_t layer, const Slot* slot);
  // Removes (sid, layer), or every layer of sid when `layer` is empty, warm and cold;
  // returns how many entries went.
  uint64_t Drop(std::string_view sid, std::optional<uint32_t> layer);
  // Drop(ns) + Drop(ns + "_attn") (a namespace was dropped or evicted).
  uint64_t DropNamespace(std::string_view ns);
  void Clear();  // FLUSHALL: everything, warm and cold

  SlotCacheStats Stats() const;
  // The arena slots for this cache are built with (it outlives the cache while slots
  // hold it).
  const std::shared_ptr<SlotArena>& arena() const { return arena_; }
  std::optional<ColdInfo> Cold(std::string_view sid, uint32_t layer) const;

 private:
  struct Key {
    std::string sid;
    uint32_t layer;
  };
  struct KeyView {
    std::string_view sid;
    uint32_t layer;
  };
  struct KeyLess {
    using is_transparent = void;
    static KeyView V(const Key& k) { return {k.sid, k.layer}; }
    static KeyView V(const KeyView& k) { return k; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      KeyView x = V(a), y = V(b);
      int c = x.sid.compare(y.sid);
      return c < 0 || (c == 0 && x.layer < y.layer);
    }
  };
  struct Warm {
    std::shared_ptr<const Slot> slot;
    uint64_t stamp = 0;
    uint64_t bytes = 0;
  };
  using WarmMap = std::map<Key, Warm, KeyLess>;
  using ColdMap = std::map<Key, ColdInfo, KeyLess>;

  class Mutation;

  // All REQUIRE mu_.
  void EnforceLocked(const Key* keep);
  void DemoteLocked(WarmMap::iterator it);
  void EraseWarmLocked(WarmMap::iterator it);
  void EraseColdLocked(ColdMap::iterator it);
  void TrimColdLocked();
  uint64_t DropLocked(std::string_view sid, std::optional<uint32_t> layer);
  // The arena's keep limit for the current warm bytes and limits.
  void UpdateArenaLocked();

  mutable std::mutex mu_;
  SlotCacheLimits limits_;
  uint64_t clock_ = 0;
  WarmMap warm_;
  std::map<uint64_t, const Key*> warm_lru_;  // stamp -> key in warm_
  ColdMap cold_;
  std::map<uint64_t, const Key*> cold_lru_;  // last access -> key in cold_
  uint64_t bytes_ = 0;
  uint64_t peak_bytes_ = 0;
  bool cleared_ = false;  // Clear() ran and no Put() since: the arena keeps nothing
  const std::shared_ptr<SlotArena> arena_ = std::make_shared<SlotArena>();
  // Slots removed under mu_, released by the Mutation after the arena's limit was
  // updated and mu_ unlocked (their memory goes back to the arena outside the lock).
  std::vector<std::shared_ptr<const Slot>> dead_;
  uint64_t demotions_ = 0, rehydrates_ = 0, cold_forgotten_ = 0;
};

}  // namespace pion::attend
