#include "attend/slot_cache.h"

#include <algorithm>
#include <utility>

namespace pion::attend {

SlotCache::SlotCache(SlotCacheLimits limits) : limits_(limits) {}

// Holds mu_ for one change. On exit: the arena's keep limit follows the new warm bytes,
// mu_ is released, and only then the slots the change removed are let go (the last
// reference frees into the arena under the new limit, outside the lock).
class SlotCache::Mutation {
 public:
  explicit Mutation(SlotCache* c) : c_(c), l_(c->mu_) {}
  ~Mutation() {
    c_->UpdateArenaLocked();
    dead_.swap(c_->dead_);
    l_.unlock();
    dead_.clear();
  }
  Mutation(const Mutation&) = delete;
  Mutation& operator=(const Mutation&) = delete;

 private:
  SlotCache* c_;
  std::unique_lock<std::mutex> l_;
  std::vector<std::shared_ptr<const Slot>> dead_;
};

void SlotCache::SetLimits(const SlotCacheLimits& limits) {
  Mutation m(this);
  limits_ = limits;
  EnforceLocked(nullptr);
  TrimColdLocked();
}

void SlotCache::UpdateArenaLocked() {
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  uint64_t keep = peak_bytes_;
  if (limits_.max_bytes != 0) keep = limits_.max_bytes > bytes_ ? limits_.max_bytes - bytes_ : 0;
  if (cleared_) keep = 0;
  arena_->SetKeepLimit(keep);
}

SlotCacheLimits SlotCache::limits() const {
  std::lock_guard<std::mutex> l(mu_);
  return limits_;
}

SlotState SlotCache::State(std::string_view sid, uint32_t layer) const {
  std::lock_guard<std::mutex> l(mu_);
  KeyView k{sid, layer};
  if (warm_.find(k) != warm_.end()) return SlotState::kWarm;
  if (cold_.find(k) != cold_.end()) return SlotState::kCold;
  return SlotState::kMissing;
}

std::shared_ptr<const Slot> SlotCache::Acquire(std::string_view sid, uint32_t layer,
                                               SlotState* state) {
  std::lock_guard<std::mutex> l(mu_);
  KeyView k{sid, layer};
  auto it = warm_.find(k);
  if (it == warm_.end()) {
    auto c = cold_.find(k);
    if (state) *state = c != cold_.end() ? SlotState::kCold : SlotState::kMissing;
    if (c != cold_.end()) {
      cold_lru_.erase(c->second.last_access);
      c->second.last_access = ++clock_;
      cold_lru_.emplace(c->second.last_access, &c->first);
    }
    return nullptr;
  }
  warm_lru_.erase(it->second.stamp);
  it->second.stamp = ++clock_;
  warm_lru_.emplace(it->second.stamp, &it->first);
  if (state) *state = SlotState::kWarm;
  return it->second.slot;
}

uint64_t SlotCache::LastAccess(std::string_view sid, uint32_t layer) const {
  std::lock_guard<std::mutex> l(mu_);
  KeyView k{sid, layer};
  if (auto it = warm_.find(k); it != warm_.end()) return it->second.stamp;
  if (auto it = cold_.find(k); it != cold_.end()) return it->second.last_access;
  return 0;
}

Status SlotCache::Admit(uint64_t bytes) const {
  std::lock_guard<std::mutex> l(mu_);
  if (limits_.max_bytes != 0 && bytes > limits_.max_bytes) {
    return Status(Code::kOutOfBudget, Reason::kSlotTooBig, {bytes, limits_.max_bytes},
                  "slot of " + std::to_string(bytes) + " bytes exceeds attend-maxmemory (" +
                      std::to_string(limits_.max_bytes) + ")");
  }
  if (limits_.max_slots == 0)
    return Status(Code::kOutOfBudget, Reason::kNoSlots, {}, "attend-max-slots is 0");
  return Status::OK();
}

void SlotCache::Put(std::string_view sid, uint32_t layer, std::shared_ptr<const Slot> slot) {
  const uint64_t b = slot->bytes();
  Mutation m(this);
  cleared_ = false;
  KeyView k{sid, layer};
  auto c = cold_.find(k);
  if (c != cold_.end()) {
    EraseColdLocked(c);
    ++rehydrates_;
  }
  auto it = warm_.find(k);
  if (it == warm_.end()) {
    it = warm_.emplace(Key{std::string(sid), layer}, Warm{}).first;
  } else {
    warm_lru_.erase(it->second.stamp);
    bytes_ -= it->second.bytes;
    dead_.push_back(std::move(it->second.slot));
  }
  it->second.slot = std::move(slot);
  it->second.bytes = b;
  it->second.stamp = ++clock_;
  bytes_ += b;
  warm_lru_.emplace(it->second.stamp, &it->first);
  EnforceLocked(&it->first);
}

void SlotCache::Recount(std::string_view sid, uint32_t layer, const Slot* slot) {
  const uint64_t b = slot->bytes();
  Mutation m(this);
  auto it = warm_.find(KeyView{sid, layer});
  if (it == warm_.end() || it->second.slot.get() != slot || it->second.bytes == b) return;
  bytes_ = bytes_ - it->second.bytes + b;
  it->second.bytes = b;
  EnforceLocked(&it->first);
}

void SlotCache::EnforceLocked(const Key* keep) {
  auto over = [&] {
    return warm_.size() > limits_.max_slots ||
           (limits_.max_bytes != 0 && bytes_ > limits_.max_bytes);
  };
  auto lru = warm_lru_.begin();
  while (over() && lru != warm_lru_.end()) {
    const Key* k = lru->second;
    ++lru;
    if (k == keep) continue;
    DemoteLocked(warm_.find(*k));
  }
}

void SlotCache::DemoteLocked(WarmMap::iterator it) {
  ++demotions_;
  if (limits_.cold_slots > 0) {
    const Slot& s = *it->second.slot;
    ColdInfo ci{s.heads(), s.tokens(), s.dim(), it->second.stamp};
    auto c = cold_.emplace(it->first, ci).first;
    cold_lru_.emplace(ci.last_access, &c->first);
  } else {
    ++cold_forgotten_;
  }
  EraseWarmLocked(it);
  TrimColdLocked();
}

void SlotCache::EraseWarmLocked(WarmMap::iterator it) {
  warm_lru_.erase(it->second.stamp);
  bytes_ -= it->second.bytes;
  dead_.push_back(std::move(it->second.slot));  // freed when its last query releases it
  warm_.erase(it);
}

void SlotCache::EraseColdLocked(ColdMap::iterator it) {
  cold_lru_.erase(it->second.last_access);
  cold_.erase(it);
}

void SlotCache::TrimColdLocked() {
  while (cold_.size() > limits_.cold_slots && !cold_lru_.empty()) {
    EraseColdLocked(cold_.find(*cold_lru_.begin()->second));
    ++cold_forgotten_;
  }
}

uint64_t SlotCache::DropLocked(std::string_view sid, std::optional<uint32_t> layer) {
  uint64_t n = 0;
  if (layer) {
    KeyView k{sid, *layer};
    if (auto it = warm_.find(k); it != warm_.end()) EraseWarmLocked(it), ++n;
    if (auto it = cold_.find(k); it != cold_.end()) EraseColdLocked(it), ++n;
    return n;
  }
  for (auto it = warm_.lower_bound(KeyView{sid, 0}); it != warm_.end() && it->first.sid == sid;) {
    auto next = std::next(it);
    EraseWarmLocked(it);
    ++n;
    it = next;
  }
  for (auto it = cold_.lower_bound(KeyView{sid, 0}); it != cold_.end() && it->first.sid == sid;) {
    auto next = std::next(it);
    EraseColdLocked(it);
    ++n;
    it = next;
  }
  return n;
}

uint64_t SlotCache::Drop(std::string_view sid, std::optional<uint32_t> layer) {
  Mutation m(this);
  return DropLocked(sid, layer);
}

uint64_t SlotCache::DropNamespace(std::string_view ns) {
  std::string attn(ns);
  attn += "_attn";
  Mutation m(this);
  return DropLocked(ns, std::nullopt) + DropLocked(attn, std::nullopt);
}

void SlotCache::Clear() {
  {
    Mutation m(this);
    for (auto& [k, w] : warm_) dead_.push_back(std::move(w.slot));
    warm_lru_.clear();
    warm_.clear();
    cold_lru_.clear();
    cold_.clear();
    bytes_ = 0;
    peak_bytes_ = 0;
    cleared_ = true;  // slots still held by queries are freed, not kept
  }
  arena_->Clear();  // FLUSHALL gives the memory back too
}

SlotCacheStats SlotCache::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  SlotCacheStats s;
  s.warm = warm_.size();
  s.cold = cold_.size();
  s.demotions = demotions_;
  s.rehydrates = rehydrates_;
  s.cold_forgotten = cold_forgotten_;
  s.bytes = bytes_;
  s.arena = arena_->Stats();
  return s;
}

std::optional<ColdInfo> SlotCache::Cold(std::string_view sid, uint32_t layer) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = cold_.find(KeyView{sid, layer});
  if (it == cold_.end()) return std::nullopt;
  return it->second;
}

}  // namespace pion::attend
