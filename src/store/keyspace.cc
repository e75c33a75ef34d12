// The keyspace (store/keyspace.h): shards and where a key lives, a string
// key's entry and exit, the LRU clock and LFU counter, and the expiry and
// scan orders.

// XXH3 inline (the header's own mode): KeyHash is every string lookup's hash,
// and KV.BLOCK.MATCH's per key.
#define XXH_INLINE_ALL
#include "store/keyspace.h"

#include <xxhash.h>

#include <ctime>
#include <string>

#include "base/atomic_raise.h"
#include "base/check.h"
#include "base/keyslot.h"

namespace pion::store {

namespace {

uint64_t KeyHash(std::string_view k) { return XXH3_64bits(k.data(), k.size()); }

// OBJECT IDLETIME's clock: the kernel's coarse clock (no hardware read per touch).
uint32_t CoarseUnixSeconds() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

uint16_t LfuMinuteNow() { return static_cast<uint16_t>((CoarseUnixSeconds() / 60) & 0xffff); }

// A cheap per-thread random fraction in [0, 1) for the counter's increments.
double LfuRandom() {
  thread_local uint64_t x = 0x2545f4914f6cdd1dull ^ reinterpret_cast<uintptr_t>(&x);
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return static_cast<double>(x >> 11) / 9007199254740992.0;
}

}  // namespace

size_t StrHash::operator()(std::string_view s) const { return KeyHash(s); }

uint64_t Keyspace::LookupHash(std::string_view key) { return KeyHash(key); }

size_t Keyspace::ShardIndex(std::string_view key) {
  return ShardOfHash(KeyHash(MayHaveHashTag(key) ? HashedPart(key) : key));
}

size_t Keyspace::ShardIndex(std::string_view key, uint64_t lookup_hash) {
  return MayHaveHashTag(key) ? ShardOfHash(KeyHash(HashedPart(key))) : ShardOfHash(lookup_hash);
}

StrEntry* Keyspace::FindStringLocked(std::string_view key) const {
  const Shard& sh = ShardFor(key);
  auto it = StringsOf(sh).find(key);
  return it == StringsOf(sh).end() ? nullptr : const_cast<StrEntry*>(&it->second);
}

StrEntry& Keyspace::InsertStringLocked(Shard& sh, std::string_view key) {
  auto it = sh.strings.emplace(std::string(key), StrEntry{}).first;
  StrEntry& e = it->second;
  e.key = &it->first;
  e.hash = KeyHash(key);
  sh.index.Insert(e.hash, &e);
  scan_order_.insert({e.hash, &e});
  sh.Link(e);
  return e;
}

void Keyspace::EraseStringLocked(Shard& sh, StrEntry& e) {
  auto it = sh.strings.find(*e.key);
  PION_DCHECK(it != sh.strings.end() && &it->second == &e);
  SetExpireLocked(e, 0);
  sh.Unlink(e);
  scan_order_.erase({e.hash, &e});
  ++removals_;
  sh.index.Erase(e.hash, &e);
  sh.strings.erase(it);
}

void Keyspace::ClearStringsLocked() {
  for (Shard& sh : shards_) {
    base::MutexLock sl(&sh.mu);
    removals_ += sh.strings.size();
    sh.strings.clear();
    sh.index.Clear();
    sh.lru_head = sh.lru_tail = nullptr;
    sh.tier_head = sh.tier_tail = nullptr;
  }
  scan_order_.clear();
  expiry_order_.clear();
  expire_sum_ms_ = 0;
}

void Keyspace::RaiseClockAbove(uint64_t stamp) { base::AtomicRaise(&lru_clock_, stamp); }

void Keyspace::TouchLocked(Shard& sh, StrEntry& e) {
  e.stamp = NextStamp();
  e.atime_s = CoarseUnixSeconds();
  LfuTouch(e);
  sh.MoveToTail(e);
}

uint8_t Keyspace::LfuDecayed(const StrEntry& e) const {
  const uint32_t decay = lfu_decay_time_.load(std::memory_order_relaxed);
  if (decay == 0) return e.lfu_counter;
  const uint16_t now = LfuMinuteNow();
  const uint32_t elapsed = now >= e.lfu_minute ? now - e.lfu_minute : 65535u - e.lfu_minute + now;
  const uint32_t periods = elapsed / decay;
  return periods >= e.lfu_counter ? 0 : static_cast<uint8_t>(e.lfu_counter - periods);
}

void Keyspace::LfuTouch(StrEntry& e) {
  uint8_t c = LfuDecayed(e);
  if (c < 255) {
    const double base = c > kLfuInitCounter ? c - kLfuInitCounter : 0;
    const double p = 1.0 / (base * lfu_log_factor_.load(std::memory_order_relaxed) + 1);
    if (LfuRandom() < p) ++c;
  }
  e.lfu_counter = c;
  e.lfu_minute = LfuMinuteNow();
}

void Keyspace::LfuInit(StrEntry& e) {
  e.lfu_counter = kLfuInitCounter;
  e.lfu_minute = LfuMinuteNow();
}

void Keyspace::SetLfuParams(uint32_t log_factor, uint32_t decay_time) {
  lfu_log_factor_.store(log_factor, std::memory_order_relaxed);
  lfu_decay_time_.store(decay_time, std::memory_order_relaxed);
}

void Keyspace::SetExpireLocked(StrEntry& e, int64_t at_ms) {
  if (e.expire_at_ms != 0) {
    expiry_order_.erase({e.expire_at_ms, &e});
    expire_sum_ms_ -= e.expire_at_ms;
  }
  e.expire_at_ms = at_ms;
  if (at_ms != 0) {
    expiry_order_.insert({at_ms, &e});
    expire_sum_ms_ += at_ms;
  }
}

void Keyspace::SetExpireShardLocked(StrEntry& e, int64_t at_ms) {
  Shard& sh = ShardFor(*e.key);
  base::MutexLock sl(&sh.mu);
  SetExpireLocked(e, at_ms);
}

int64_t Keyspace::MeanExpireMsLocked() const {
  if (expiry_order_.empty()) return 0;
  return expire_sum_ms_ / static_cast<int64_t>(expiry_order_.size());
}

}  // namespace pion::store
