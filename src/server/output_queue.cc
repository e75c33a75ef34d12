#include "server/output_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/check.h"

namespace pion::server {

namespace {
constexpr size_t kArenaInitial = 16 * 1024;
}  // namespace

OutputQueue::~OutputQueue() {
  while (!segs_.empty()) {
    if (segs_.front().kind == Kind::kOwned && pool_ != nullptr)
      pool_->Put(std::move(segs_.front().owned));
    segs_.pop_front();
  }
  if (pool_ != nullptr && !arena_.empty()) pool_->Put(std::move(arena_));
}

void OutputQueue::GrowArena(size_t need) {
  size_t cap = std::max(kArenaInitial, arena_.capacity());
  while (cap < arena_used_ + need) cap *= 2;
  IoBuf nb = pool_ != nullptr ? pool_->Get(cap) : IoBuf(cap);
  if (arena_used_ > 0) std::memcpy(nb.data(), arena_.data(), arena_used_);
  if (pool_ != nullptr && !arena_.empty()) pool_->Put(std::move(arena_));
  arena_ = std::move(nb);
}

char* OutputQueue::AppendSpace(size_t n) {
  if (arena_used_ + n > arena_.capacity()) GrowArena(n);
  char* p = arena_.data() + arena_used_;
  Segment* last = segs_.empty() ? nullptr : &segs_.back();
  if (last != nullptr && last->kind == Kind::kArena && last->off + last->len == arena_used_ &&
      last->hold == hold_lsn_) {
    last->len += n;
  } else {
    Segment s;
    s.kind = Kind::kArena;
    s.off = arena_used_;
    s.len = n;
    s.hold = hold_lsn_;
    segs_.push_back(std::move(s));
  }
  arena_used_ += n;
  bytes_ += n;
  return p;
}

void OutputQueue::Append(const char* p, size_t n) {
  if (n == 0) return;
  std::memcpy(AppendSpace(n), p, n);
}

char* OutputQueue::AppendOwned(size_t n) {
  Segment s;
  s.kind = Kind::kOwned;
  s.owned = pool_ != nullptr ? pool_->Get(std::max<size_t>(n, 1)) : IoBuf(std::max<size_t>(n, 1));
  s.ptr = s.owned.data();
  s.len = n;
  s.hold = hold_lsn_;
  char* p = s.owned.data();
  bytes_ += n;
  segs_.push_back(std::move(s));
  return p;
}

void OutputQueue::AppendExternal(std::span<const iovec> parts, std::shared_ptr<const void> pin) {
  size_t first = segs_.size();
  for (const iovec& v : parts) {
    if (v.iov_len == 0) continue;
    Segment s;
    s.kind = Kind::kExternal;
    s.ptr = static_cast<const char*>(v.iov_base);
    s.len = v.iov_len;
    s.hold = hold_lsn_;
    bytes_ += v.iov_len;
    segs_.push_back(std::move(s));
  }
  // The last part carries the pin: parts are written (and released) in order.
  if (segs_.size() > first) segs_.back().pin = std::move(pin);
}

OutputQueue::Mark OutputQueue::GetMark() const {
  Mark m;
  m.segments = segs_.size();
  m.last_len = segs_.empty() ? 0 : segs_.back().len;
  m.written = popped_;
  return m;
}

void OutputQueue::HoldFrom(const Mark& m, uint64_t lsn) {
  if (lsn <= hold_lsn_) return;
  hold_lsn_ = lsn;
  // Segments popped since the mark was taken shift the indices.
  uint64_t gone = popped_ - m.written;
  size_t idx;
  if (m.segments == 0 || gone >= m.segments) {
    idx = 0;
  } else {
    idx = m.segments - static_cast<size_t>(gone) - 1;  // the segment that was last at the mark
    Segment& s = segs_[idx];
    if (s.len > m.last_len) {
      // It grew after the mark (merged small replies): split it at the mark.
      PION_DCHECK(s.kind == Kind::kArena);
      size_t keep = m.last_len;
      if (idx == 0 && head_off_ > keep) keep = head_off_;  // never split written bytes
      Segment tail;
      tail.kind = Kind::kArena;
      tail.off = s.off + keep;
      tail.len = s.len - keep;
      s.len = keep;
      segs_.insert(segs_.begin() + static_cast<long>(idx) + 1, std::move(tail));
    }
    ++idx;
  }
  for (size_t i = idx; i < segs_.size(); ++i) segs_[i].hold = lsn;
}

void OutputQueue::AddSlot(uint64_t id) {
  Segment s;
  s.kind = Kind::kSlot;
  s.hold = hold_lsn_;
  s.slot = id;
  segs_.push_back(std::move(s));
  ++pending_slots_;
}

bool OutputQueue::FillSlot(uint64_t id, std::string_view bytes) {
  for (size_t i = 0; i < segs_.size(); ++i) {
    Segment& s = segs_[i];
    if (s.kind != Kind::kSlot || s.slot != id) continue;
    --pending_slots_;
    if (bytes.empty()) {
      // Nothing to send: drop the placeholder. (No Mark is outstanding here:
      // marks live only while a handler runs.)
      segs_.erase(segs_.begin() + static_cast<long>(i));
      if (segs_.empty()) arena_used_ = 0;
      return true;
    }
    s.kind = Kind::kOwned;
    s.owned = pool_ != nullptr ? pool_->Get(bytes.size()) : IoBuf(bytes.size());
    std::memcpy(s.owned.data(), bytes.data(), bytes.size());
    s.ptr = s.owned.data();
    s.len = bytes.size();
    bytes_ += bytes.size();
    return true;
  }
  return false;
}

std::string OutputQueue::CopyAll() const {
  std::string out;
  out.reserve(bytes_);
  size_t skip = head_off_;
  for (const Segment& s : segs_) {
    if (s.kind == Kind::kSlot) continue;
    const char* base = s.kind == Kind::kArena ? arena_.data() + s.off : s.ptr;
    out.append(base + skip, s.len - skip);
    skip = 0;
  }
  return out;
}

int OutputQueue::Writable(uint64_t durable_lsn, iovec* iov, int max) const {
  int n = 0;
  size_t skip = head_off_;
  for (const Segment& s : segs_) {
    if (n == max || s.hold > durable_lsn || s.kind == Kind::kSlot) break;
    const char* base = s.kind == Kind::kArena ? arena_.data() + s.off : s.ptr;
    iov[n].iov_base = const_cast<char*>(base + skip);
    iov[n].iov_len = s.len - skip;
    skip = 0;
    if (iov[n].iov_len > 0) ++n;
  }
  return n;
}

uint64_t OutputQueue::HeadHold() const { return segs_.empty() ? 0 : segs_.front().hold; }

void OutputQueue::Consume(size_t n) {
  PION_DCHECK(n <= bytes_);
  bytes_ -= n;
  while (n > 0) {
    Segment& s = segs_.front();
    size_t left = s.len - head_off_;
    if (n < left) {
      head_off_ += n;
      return;
    }
    n -= left;
    head_off_ = 0;
    if (s.kind == Kind::kOwned && pool_ != nullptr) pool_->Put(std::move(s.owned));
    segs_.pop_front();
    ++popped_;
  }
  // Drop fully written zero-length leftovers and reset the arena when idle.
  while (!segs_.empty() && segs_.front().len == 0 && segs_.front().kind != Kind::kSlot) {
    segs_.pop_front();
    ++popped_;
  }
  if (segs_.empty()) arena_used_ = 0;
}

void OutputQueue::ShrinkIdle(size_t keep) {
  if (segs_.empty() && arena_.capacity() > keep) {
    arena_used_ = 0;
    if (pool_ != nullptr) pool_->Put(std::move(arena_));
    arena_ = IoBuf();
  }
}

}  // namespace pion::server
