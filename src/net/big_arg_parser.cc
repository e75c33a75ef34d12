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
  if (!cur_.empty()) {
    // The whole buffer is there; admit the next part of it (doubling what is
    // admitted, so a header alone never reserves its whole size).
    size_t step = std::min(need_, 2 * admitted_) - admitted_;
    if (gate_ != nullptr && !gate_->Reserve(step)) {
      RejectRequest(Reject::kGate);
      return false;
    }
    admitted_ += step;
    return true;
  }
  IoBuf nb;
  if (pool_ != nullptr) nb = pool_->TakeCached(need_);
  // A block a dropped value gave back (its pages are already faulted in).
  if (nb.empty()) nb = IoBuf::TakeRecycled(need_);
  // A cached block is resident already: it is admitted whole. A new one is
  // allocated whole too (no growth, no copy), but its pages become resident
  // only as the bytes arrive, so it is admitted kBigInitialBytes first.
  size_t admit = nb.empty() ? std::min(need_, kBigInitialBytes) : nb.capacity();
  if (gate_ != nullptr && !gate_->Reserve(admit)) {
    PutBack(nb);
    RejectRequest(Reject::kGate);
    return false;
  }
  if (nb.empty()) nb = pool_ != nullptr ? pool_->TryGet(need_) : IoBuf::TryAllocate(need_);
  if (nb.empty()) {
    RejectRequest(Reject::kNoMemory);
    return false;
  }
  cur_ = std::move(nb);
  admitted_ = std::min(admit, cur_.capacity());
  return true;
}

void BigArgParser::RejectRequest(Reject why) {
  uint64_t left = need_ - filled_;
  for (IoBuf& b : done_) PutBack(b);
  done_.clear();
  PutBack(cur_);
  need_ = filled_ = admitted_ = 0;
  reject_ = why;
  BeginSkip(left);
}

BigArgParser::BigStep BigArgParser::ConsumeBig(const char* data, size_t len, size_t* pos) {
  while (phase_ == Phase::kFill && filled_ < need_ && *pos < len) {
    size_t room = std::min(admitted_, need_) - filled_;
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
    need_ = filled_ = admitted_ = 0;
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
    if (filled_ == std::min(admitted_, need_)) GrowBig();
    if (phase_ == Phase::kFill) {
      size_t room = std::min(admitted_, need_) - filled_;
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
  // The argument being filled counts what is admitted of it (a new buffer's
  // pages beyond are not resident yet).
  size_t n = admitted_ + skip_buf_.capacity();
  for (const IoBuf& b : done_) n += b.capacity();
  return n;
}

}  // namespace pion::net
