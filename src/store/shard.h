// One shard of the keyspace: the namespaces and string keys whose hash (or
// hash tag's hash) has its top kShardBits bits equal to the shard's index
// (Keyspace::ShardIndex), with the shard's mutex, its maps, the flat index the
// block match reads, and its string LRU and tier lists. The rules for who may
// change what under which lock are Store's (store.h's header comment): a
// writer holds Keyspace::mu and the shard's `mu`, a reader only `mu`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/mutex.h"
#include "store/str_index.h"
#include "store/strings.h"

namespace pion::store {

class Namespace;
using NsPtr = std::shared_ptr<Namespace>;

// Transparent hashing: lookups by string_view allocate nothing.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using NsMap = std::unordered_map<std::string, NsPtr, NameHash, std::equal_to<>>;
// The string map's hasher: XXH3 (as StrEntry::hash), out of line. Not
// noexcept on purpose: libstdc++ then keeps each node's hash, so a lookup
// compares hashes before keys and never rehashes a neighbour's key to find
// where a bucket ends (KV.BLOCK.MATCH's cost per key).
struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const;  // NOLINT: not noexcept (see above)
};
using StrMap = std::unordered_map<std::string, StrEntry, StrHash, std::equal_to<>>;
// `map` and `strings` change only with both Keyspace::mu and `mu` held; a
// reader holds only `mu`.
struct alignas(64) Shard {
  mutable base::Mutex mu;
  NsMap map GUARDED_BY(mu);
  StrMap strings GUARDED_BY(mu);
  // The same entries by hash, flat (store/str_index.h): KV.BLOCK.MATCH's
  // lookups. Changed wherever `strings` gains or loses an entry.
  StrIndex index GUARDED_BY(mu);
  StrEntry* lru_head GUARDED_BY(mu) = nullptr;  // least recently used of this shard
  StrEntry* lru_tail GUARDED_BY(mu) = nullptr;
  StrEntry* tier_head GUARDED_BY(mu) = nullptr;  // the tier's entries, oldest first
  StrEntry* tier_tail GUARDED_BY(mu) = nullptr;
  uint64_t hits GUARDED_BY(mu) = 0;
  uint64_t misses GUARDED_BY(mu) = 0;

  // An entry's place in its list (the tier's when e.tiered, else the RAM
  // LRU's): Link appends it as the most recent, Unlink takes it out, and
  // MoveToTail is both in one pass, inline (KV.BLOCK.MATCH's touch per key).
  void Link(StrEntry& e) REQUIRES(mu) {
    StrEntry*& head = e.tiered ? tier_head : lru_head;
    StrEntry*& tail = e.tiered ? tier_tail : lru_tail;
    e.prev = tail;
    e.next = nullptr;
    if (tail != nullptr)
      tail->next = &e;
    else
      head = &e;
    tail = &e;
  }
  void Unlink(StrEntry& e) REQUIRES(mu) {
    StrEntry*& head = e.tiered ? tier_head : lru_head;
    StrEntry*& tail = e.tiered ? tier_tail : lru_tail;
    if (e.prev != nullptr)
      e.prev->next = e.next;
    else
      head = e.next;
    if (e.next != nullptr)
      e.next->prev = e.prev;
    else
      tail = e.prev;
    e.prev = e.next = nullptr;
  }
  void MoveToTail(StrEntry& e) REQUIRES(mu) {
    StrEntry*& head = e.tiered ? tier_head : lru_head;
    StrEntry*& tail = e.tiered ? tier_tail : lru_tail;
    if (tail == &e) return;
    // In the list and not its tail: e.next and tail are set.
    if (e.prev != nullptr)
      e.prev->next = e.next;
    else
      head = e.next;
    e.next->prev = e.prev;
    e.prev = tail;
    e.next = nullptr;
    tail->next = &e;
    tail = &e;
  }
};

}  // namespace pion::store
