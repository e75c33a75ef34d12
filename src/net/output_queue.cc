#include "net/output_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/check.h"

namespace pion::net {

namespace {
constexpr size_t kArenaBlockBytes = 16 * 1024;

IoBuf NewBuf(BufferPool* pool, size_t n) { return pool != nullptr ? pool->Get(n) : IoBuf(n); }
}  // namespace

OutputQueue::~OutputQueue() {
  while (!segs_.empty()) {
    Release(segs_.front());
    segs_.pop_front();
  }
  if (pool_ != nullptr)
    for (Block& b : blocks_) pool_->Put(std::move(b.buf));
}

OutputQueue::Block& OutputQueue::TailBlock(size_t n) {
  if (tail_ != nullptr) {
    if (tail_->buf.capacity() - tail_->used >= n) return *tail_;
    if (tail_->refs == 0) {  // everything in it was written: reuse from the start
      tail_->used = 0;
      if (tail_->buf.capacity() >= n) return *tail_;
    }
  }
  Block b;
  b.buf = NewBuf(pool_, std::max(kArenaBlockBytes, n));
  block_bytes_ += b.buf.capacity();
  blocks_.push_back(std::move(b));
  tail_ = &blocks_.back();
  tail_seq_ = first_block_ + blocks_.size() - 1;
  FreeUnusedBlocks();
  return *tail_;
}

void OutputQueue::FreeUnusedBlocks() {
  // Blocks fill in order and segments are written in order, so the unused
  // blocks are a prefix; the tail block is kept for the next reply.
  while (blocks_.size() > 1 && blocks_.front().refs == 0) {
    block_bytes_ -= blocks_.front().buf.capacity();
    if (pool_ != nullptr) pool_->Put(std::move(blocks_.front().buf));
    blocks_.pop_front();
    ++first_block_;
  }
}

const char* OutputQueue::Base(const Segment& s) const {
  if (s.kind != Kind::kArena) return s.ptr;
  return blocks_[s.block - first_block_].buf.data() + s.off;
}

void OutputQueue::Release(Segment& s) {
  if (s.kind == Kind::kArena) {
    Block& b = blocks_[s.block - first_block_];
    PION_DCHECK(b.refs > 0);
    --b.refs;
  } else if (s.kind == Kind::kOwned) {
    owned_bytes_ -= s.owned.capacity();
    if (pool_ != nullptr) pool_->Put(std::move(s.owned));
  } else if (s.kind == Kind::kExternal) {
    if (s.by_pin) pinned_ref_bytes_ -= s.len;
    for (const PinnedBlock& b : s.blocks) {
      auto it = pins_.find(b.id);
      PION_DCHECK(it != pins_.end());
      if (--it->second.refs == 0) {
        pinned_bytes_ -= it->second.bytes;
        pins_.erase(it);
      }
    }
  }
}

char* OutputQueue::AppendSpace(size_t n) {
  Block& b = TailBlock(n);
  const uint64_t seq = tail_seq_;
  char* p = b.buf.data() + b.used;
  Segment* last = segs_.empty() ? nullptr : &segs_.back();
  if (last != nullptr && last->kind == Kind::kArena && last->block == seq &&
      last->off + last->len == b.used && last->hold == hold_lsn_) {
    last->len += n;
  } else {
    Segment s;
    s.kind = Kind::kArena;
    s.block = seq;
    s.off = b.used;
    s.len = n;
    s.hold = hold_lsn_;
    ++b.refs;
    segs_.push_back(std::move(s));
  }
  b.used += n;
  bytes_ += n;
  appended_total_ += n;
  return p;
}

void OutputQueue::Append(const char* p, size_t n) {
  if (n == 0) return;
  std::memcpy(AppendSpace(n), p, n);
}

char* OutputQueue::AppendOwned(size_t n) {
  IoBuf buf = NewBuf(pool_, std::max<size_t>(n, 1));
  return AdoptOwned(std::move(buf), n);
}

IoBuf OutputQueue::TryAllocate(size_t n) {
  return pool_ != nullptr ? pool_->TryGet(std::max<size_t>(n, 1))
                          : IoBuf::TryAllocate(std::max<size_t>(n, 1));
}

char* OutputQueue::AdoptOwned(IoBuf buf, size_t n) {
  Segment s;
  s.kind = Kind::kOwned;
  s.owned = std::move(buf);
  s.ptr = s.owned.data();
  s.len = n;
  s.hold = hold_lsn_;
  char* p = s.owned.data();
  bytes_ += n;
  appended_total_ += n;
  owned_bytes_ += s.owned.capacity();
  segs_.push_back(std::move(s));
  return p;
}

void OutputQueue::AppendExternal(std::span<const iovec> parts, std::shared_ptr<const void> pin,
                                 std::span<const PinnedBlock> blocks) {
  const bool by_pin = !blocks.empty();
  size_t first = segs_.size();
  for (const iovec& v : parts) {
    if (v.iov_len == 0) continue;
    Segment s;
    s.kind = Kind::kExternal;
    s.ptr = static_cast<const char*>(v.iov_base);
    s.len = v.iov_len;
    s.hold = hold_lsn_;
    if (by_pin) {
      s.by_pin = true;
      pinned_ref_bytes_ += v.iov_len;
    }
    bytes_ += v.iov_len;
    appended_total_ += v.iov_len;
    segs_.push_back(std::move(s));
  }
  // The last part carries the pin: parts are written (and released) in order.
  if (segs_.size() > first) {
    segs_.back().pin = std::move(pin);
    segs_.back().blocks.assign(blocks.begin(), blocks.end());
    for (const PinnedBlock& b : blocks) {
      PinCount& c = pins_[b.id];
      if (c.refs++ == 0) {
        c.bytes = b.bytes;
        pinned_bytes_ += b.bytes;
      }
    }
  }
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
      tail.block = s.block;
      tail.off = s.off + keep;
      tail.len = s.len - keep;
      s.len = keep;
      ++blocks_[s.block - first_block_].refs;
      segs_.Insert(idx + 1, std::move(tail));
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
      segs_.Erase(i);
      return true;
    }
    s.kind = Kind::kOwned;
    s.owned = NewBuf(pool_, bytes.size());
    std::memcpy(s.owned.data(), bytes.data(), bytes.size());
    s.ptr = s.owned.data();
    s.len = bytes.size();
    bytes_ += bytes.size();
    appended_total_ += bytes.size();
    owned_bytes_ += s.owned.capacity();
    return true;
  }
  return false;
}

bool OutputQueue::FillSlotFrom(uint64_t id, OutputQueue& src) {
  size_t at = 0;
  while (at < segs_.size() && (segs_[at].kind != Kind::kSlot || segs_[at].slot != id)) ++at;
  if (at == segs_.size()) return false;
  --pending_slots_;
  const uint64_t hold = segs_[at].hold;
  // Below this a part is copied (with its neighbours) rather than moved.
  constexpr size_t kMoveBytes = 4096;
  std::vector<Segment> out;
  std::string small;
  auto flush_small = [&] {
    if (small.empty()) return;
    Segment t;
    t.kind = Kind::kOwned;
    t.owned = NewBuf(pool_, small.size());
    std::memcpy(t.owned.data(), small.data(), small.size());
    t.ptr = t.owned.data();
    t.len = small.size();
    out.push_back(std::move(t));
    small.clear();
  };
  size_t skip = src.head_off_;
  for (Segment& s : src.segs_) {
    const size_t off = skip;
    skip = 0;
    if (s.kind == Kind::kSlot || s.len == off) continue;
    if (off == 0 && s.len >= kMoveBytes && (s.kind == Kind::kExternal || s.kind == Kind::kOwned)) {
      flush_small();
      Segment t;
      t.kind = s.kind;
      t.len = s.len;
      if (s.kind == Kind::kOwned) {
        const size_t in = static_cast<size_t>(s.ptr - s.owned.data());
        t.owned = std::move(s.owned);  // src's Release then frees nothing
        src.owned_bytes_ -= t.owned.capacity();
        t.ptr = t.owned.data() + in;
      } else {
        t.ptr = s.ptr;
        t.pin = std::move(s.pin);
        t.blocks = s.blocks;  // src keeps its own count of them
        t.by_pin = s.by_pin;
      }
      out.push_back(std::move(t));
      continue;
    }
    small.append(src.Base(s) + off, s.len - off);
  }
  flush_small();
  if (out.empty()) {
    segs_.Erase(at);
    return true;
  }
  for (size_t k = 0; k < out.size(); ++k) {
    Segment& t = out[k];
    t.hold = hold;
    bytes_ += t.len;
    appended_total_ += t.len;
    if (t.kind == Kind::kOwned) owned_bytes_ += t.owned.capacity();
    if (t.by_pin) pinned_ref_bytes_ += t.len;
    for (const PinnedBlock& b : t.blocks) {
      PinCount& c = pins_[b.id];
      if (c.refs++ == 0) {
        c.bytes = b.bytes;
        pinned_bytes_ += b.bytes;
      }
    }
    if (k == 0)
      segs_[at] = std::move(t);
    else
      segs_.Insert(at + k, std::move(t));
  }
  return true;
}

std::string OutputQueue::CopyAll() const {
  std::string out;
  out.reserve(bytes_);
  size_t skip = head_off_;
  for (const Segment& s : segs_) {
    if (s.kind == Kind::kSlot) continue;
    out.append(Base(s) + skip, s.len - skip);
    skip = 0;
  }
  return out;
}

int OutputQueue::Writable(uint64_t durable_lsn, iovec* iov, int max) const {
  int n = 0;
  size_t skip = head_off_;
  for (const Segment& s : segs_) {
    if (n == max || s.hold > durable_lsn || s.kind == Kind::kSlot) break;
    iov[n].iov_base = const_cast<char*>(Base(s) + skip);
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
  consumed_total_ += n;
  while (n > 0) {
    Segment& s = segs_.front();
    size_t left = s.len - head_off_;
    if (n < left) {
      head_off_ += n;
      return;
    }
    n -= left;
    head_off_ = 0;
    Release(s);
    segs_.pop_front();
    ++popped_;
  }
  // Drop fully written zero-length leftovers.
  while (!segs_.empty() && segs_.front().len == 0 && segs_.front().kind != Kind::kSlot) {
    Release(segs_.front());
    segs_.pop_front();
    ++popped_;
  }
  FreeUnusedBlocks();
}

void OutputQueue::ShrinkIdle(size_t keep) {
  if (!segs_.empty() || block_bytes_ <= keep) return;
  if (pool_ != nullptr)
    for (Block& b : blocks_) pool_->Put(std::move(b.buf));
  first_block_ += blocks_.size();
  blocks_.clear();
  tail_ = nullptr;
  block_bytes_ = 0;
}

}  // namespace pion::net
