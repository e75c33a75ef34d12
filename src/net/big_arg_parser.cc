#include "net/big_arg_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/check.h"

namespace pion::net {

namespace {
constexpr size_t kSkipBufBytes = 64 * 1024;
}  // namespace

void BigArgParser::PutBack(IoBuf& b) {
  if (b.empty()) return;
  if (pool_ != nullptr) pool_->Put(std::move(b));
  b = IoBuf();
}

void BigArgParser::ReleaseBuffers() {
  for (IoBuf& b : done_) PutBack(b);
  done_.clear();
  PutBack(cur_);
  PutBack(skip_buf_);
}

void BigArgParser::BeginBig(size_t need) {
  need_ = need;
  filled_ = 0;
  phase_ = Phase::kFill;
  GrowBig();  // refused: now skipping
}

bool BigArgParser::GrowBig() {
  size_t have = cur_.capacity();
  IoBuf nb;
  if (pool_ != nullptr) nb = pool_->TakeCached(need_);
  // A block a dropped value gave back (its pages are already faulted in).
  if (nb.empty()) nb = IoBuf::TakeRecycled(need_);
  size_t want = nb.empty() ? std::min(need_, std::max(kBigInitialBytes, 2 * have)) : nb.capacity();
  // The gate is asked for what grows: the buffer being replaced is freed next.
  if (gate_ != nullptr && want > have && !gate_->Reserve(want - have)) {
    PutBack(nb);
    RejectRequest(Reject::kGate);
    return false;
  }
  if (nb.empty()) nb = pool_ != nullptr ? pool_->TryGet(want) : IoBuf::TryAllocate(want);
  if (nb.empty()) {
    RejectRequest(Reject::kNoMemory);
    return false;
  }
  if (filled_ > 0) std::memcpy(nb.data(), cur_.data(), filled_);
  PutBack(cur_);
  cur_ = std::move(nb);
  return true;
}

void BigArgParser::RejectRequest(Reject why) {
  uint64_t left = need_ - filled_;
  for (IoBuf& b : done_) PutBack(b);
  done_.clear();
  PutBack(cur_);
  need_ = filled_ = 0;
  reject_ = why;
  BeginSkip(left);
}

BigArgParser::BigStep BigArgParser::ConsumeBig(const char* data, size_t len, size_t* pos) {
  while (phase_ == Phase::kFill && filled_ < need_ && *pos < len) {
    size_t room = std::min(cur_.capacity(), need_) - filled_;
    if (room == 0) {
      if (!GrowBig()) break;  // rejected: now skipping
      continue;
    }
    size_t n = std::min(len - *pos, room);
    std::memcpy(cur_.data() + filled_, data + *pos, n);
    filled_ += n;
    *pos += n;
  }
  if (phase_ == Phase::kFill) {
    if (filled_ < need_) return BigStep::kMore;
    done_.push_back(std::move(cur_));
    cur_ = IoBuf();
    need_ = filled_ = 0;
    phase_ = Phase::kNone;
    return BigStep::kFilled;
  }
  PION_DCHECK(phase_ == Phase::kSkip);
  uint64_t n = std::min<uint64_t>(len - *pos, skip_left_);
  *pos += n;
  skip_left_ -= n;
  if (skip_left_ > 0) return BigStep::kMore;
  phase_ = Phase::kNone;
  return BigStep::kSkipped;
}

std::span<char> BigArgParser::DirectTarget() {
  PION_DCHECK(WantsDirectRead());
  if (phase_ == Phase::kFill) {
    if (filled_ == std::min(cur_.capacity(), need_)) GrowBig();
    if (phase_ == Phase::kFill) {
      size_t room = std::min(cur_.capacity(), need_) - filled_;
      return {cur_.data() + filled_, room};
    }
  }
  if (skip_buf_.empty())
    skip_buf_ = pool_ != nullptr ? pool_->Get(kSkipBufBytes) : IoBuf(kSkipBufBytes);
  return {skip_buf_.data(),
          static_cast<size_t>(std::min<uint64_t>(skip_left_, skip_buf_.capacity()))};
}

OwnedBuffer BigArgParser::TakeBigArg(const char* data) {
  for (IoBuf& b : done_) {
    if (!b.empty() && b.data() == data) return b.IntoOwned();
  }
  return OwnedBuffer();
}

size_t BigArgParser::allocated_bytes() const {
  size_t n = cur_.capacity() + skip_buf_.capacity();
  for (const IoBuf& b : done_) n += b.capacity();
  return n;
}

}  // namespace pion::net
