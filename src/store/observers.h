// The store's observer interfaces (store.h): who is told when namespaces,
// block tables and hashed block keys come and go, and what start-up reports.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "store/block_index.h"

namespace pion::store {

// Told when namespaces leave the store (DROP, LRU eviction, replayed drops) and on
// FLUSHALL, so that what is derived from them (the attention slots of <ns> and
// <ns>_attn) goes too. Called with the store's lock held: it must not call back into
// the store.
class RemovalObserver {
 public:
  virtual void OnNamespaceRemoved(std::string_view ns) = 0;
  virtual void OnFlushAll() = 0;
  // After a namespace left the store (`evicted`: by the LRU, else DROP, DEL or
  // a replayed drop), and after a string key expired or was evicted (not when
  // a command deleted it). Called under the store's locks: keep it short.
  virtual void OnNamespaceGone(std::string_view ns, bool evicted) {
    (void)ns;
    (void)evicted;
  }
  virtual void OnStringRemoved(std::string_view key, bool evicted) {
    (void)key;
    (void)evicted;
  }

 protected:
  ~RemovalObserver() = default;
};

// Told when a namespace's block table (KV.PREFIX.REGISTER ... BLOCKS) becomes
// resident or leaves, and when everything goes, so that routers can be told which
// blocks pion holds (server/kv_events.h). `parent_hash` is the last hash of the
// parent namespace's table (none for a root, or a parent without a table). Called
// with the store's locks held, only for tables of at least one hash: it must be
// quick and must not call back into the store.
class BlockTableObserver {
 public:
  virtual void OnBlocksStored(const BlockTable& table, std::optional<uint64_t> parent_hash) = 0;
  virtual void OnBlocksRemoved(const BlockTable& table) = 0;
  virtual void OnAllBlocksCleared() = 0;
  // Hashed block keys (KV.BLOCK.CHAIN ... HASHES), under the same rules: a
  // chain's keys became resident (`hashes` in key order; `parent_hash` the hash
  // of the key it continues, none when that has no hash or there is none), and
  // a hashed key's block left: DEL/UNLINK, expiry, eviction (also by the disk
  // tier, never a move to it), a write that replaced its value (the hash goes
  // with the bytes it named), or a RENAME over it. FLUSHALL of everything is
  // OnAllBlocksCleared alone.
  virtual void OnBlockKeysStored(std::span<const uint64_t> hashes,
                                 std::optional<uint64_t> parent_hash, uint32_t tokens) {
    (void)hashes;
    (void)parent_hash;
    (void)tokens;
  }
  virtual void OnBlockKeyRemoved(uint64_t hash) { (void)hash; }

 protected:
  ~BlockTableObserver() = default;
};

// A run of resident hashed block keys, each the child of the one before (the
// first the child of the key whose hash is `parent_hash`, if that has one).
struct ResidentBlockRun {
  std::vector<uint64_t> hashes;
  std::optional<uint64_t> parent_hash;
  uint32_t tokens = 0;
};

// A resident block table and its parent's last hash (BlockTableObserver's terms).
struct ResidentTable {
  std::shared_ptr<const BlockTable> table;
  std::optional<uint64_t> parent_hash;
};

}  // namespace pion::store
