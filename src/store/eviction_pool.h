// The namespaces' eviction pool, as Redis's evict.c keeps one: the
// kEvictionPoolSize (store_types.h) oldest candidates seen by the samples so far (across
// evictions), by weak reference, so a pooled namespace that is dropped is
// freed. Eviction offers each sampled leaf, refreshes the pool (dropping
// entries that are gone or no longer candidates and re-reading the stamps of
// the rest) and evicts the oldest. Guarded by the store's writers' lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "store/store_types.h"

namespace pion::store {

class Namespace;

class EvictionPool {
 public:
  // Older first: the lower stamp, the deeper namespace on a tie (a chain goes
  // leaf to root).
  static bool Older(uint64_t sa, uint32_t da, uint64_t sb, uint32_t db) {
    return sa != sb ? sa < sb : da > db;
  }

  // Offers `n` (stamp `stamp`, chain depth `depth`): a pooled one is refreshed
  // in place; else it joins while there is room, or replaces the youngest
  // entry when it is older.
  void Offer(const std::shared_ptr<Namespace>& n, uint64_t stamp, uint32_t depth) {
    if (entries_.capacity() < kEvictionPoolSize) entries_.reserve(kEvictionPoolSize);
    for (Entry& e : entries_)
      if (e.ns == n.get()) {
        e.stamp = stamp;
        return;
      }
    if (entries_.size() < kEvictionPoolSize) {
      entries_.push_back(Entry{stamp, depth, n.get(), n});
      return;
    }
    auto youngest = std::max_element(entries_.begin(), entries_.end(), OlderEntry);
    if (Older(stamp, depth, youngest->stamp, youngest->depth))
      *youngest = Entry{stamp, depth, n.get(), n};
  }

  // Re-reads every entry: `stamp_of(n)` gives a live candidate's current
  // stamp, or nullopt to drop it (as a namespace already gone is dropped).
  template <typename StampOf>
  void Refresh(StampOf&& stamp_of) {
    size_t w = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      Entry& e = entries_[i];
      std::shared_ptr<Namespace> n = e.ref.lock();
      if (!n) continue;
      std::optional<uint64_t> st = stamp_of(n);
      if (!st) continue;
      e.stamp = *st;
      if (w != i) entries_[w] = std::move(e);
      ++w;
    }
    entries_.resize(w);
  }

  // The oldest entry (null when the pool is empty or it has just gone).
  std::shared_ptr<Namespace> Oldest() const {
    if (entries_.empty()) return nullptr;
    return std::min_element(entries_.begin(), entries_.end(), OlderEntry)->ref.lock();
  }

  void Remove(const Namespace* n) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].ns == n) {
        entries_[i] = std::move(entries_.back());
        entries_.pop_back();
        return;
      }
  }

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t stamp;
    uint32_t depth;
    const Namespace* ns;  // identifies the entry
    std::weak_ptr<Namespace> ref;
  };
  static bool OlderEntry(const Entry& a, const Entry& b) {
    return Older(a.stamp, a.depth, b.stamp, b.depth);
  }
  std::vector<Entry> entries_;
};

}  // namespace pion::store
