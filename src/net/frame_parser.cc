#include "net/frame_parser.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "net/resp_errors.h"

namespace pion::net {

namespace {

constexpr size_t kSkipBufBytes = 64 * 1024;

uint32_t LoadU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | static_cast<uint32_t>(u[1]) << 8 |
         static_cast<uint32_t>(u[2]) << 16 | static_cast<uint32_t>(u[3]) << 24;
}

}  // namespace

bool IsFrameCommand(uint8_t code) {
  switch (static_cast<FrameCommand>(code)) {
    case FrameCommand::kQueryFused:
    case FrameCommand::kQuery:
    case FrameCommand::kAuth:
    case FrameCommand::kPing:
      return true;
  }
  return false;
}

void EncodeFrameHeader(char* p, FrameStatus status, uint32_t body_len) {
  p[0] = static_cast<char>(kFrameMagic & 0xFF);
  p[1] = static_cast<char>(kFrameMagic >> 8);
  p[2] = static_cast<char>(status);
  for (int i = 0; i < 4; ++i) p[3 + i] = static_cast<char>((body_len >> (8 * i)) & 0xFF);
}

FrameParser::~FrameParser() { ConsumeCommand(); }

RequestParser::Result FrameParser::Fail(std::string msg) {
  state_ = State::kError;
  error_ = std::move(msg);
  return Result::kError;
}

void FrameParser::ConsumeCommand() {
  if (!big_buf_.empty()) {
    if (pool_ != nullptr) pool_->Put(std::move(big_buf_));
    big_buf_ = IoBuf();
  }
  if (!skip_buf_.empty()) {
    if (pool_ != nullptr) pool_->Put(std::move(skip_buf_));
    skip_buf_ = IoBuf();
  }
  big_filled_ = 0;
  skip_left_ = 0;
  body_len_ = 0;
  reject_ = Reject::kNone;
  frame_ = Frame{};
  pos_ = 0;
  last_len_ = 0;
  if (state_ != State::kError) state_ = State::kHeader;
}

void FrameParser::RejectFrame(RequestParser::Reject why) {
  if (!big_buf_.empty() && pool_ != nullptr) pool_->Put(std::move(big_buf_));
  big_buf_ = IoBuf();
  reject_ = why;
  skip_left_ = body_len_ - big_filled_;
  big_filled_ = 0;
  state_ = State::kSkipBody;
}

bool FrameParser::GrowBig() {
  size_t have = big_buf_.capacity();
  IoBuf nb;
  if (pool_ != nullptr) nb = pool_->TakeCached(body_len_);
  size_t want = nb.empty() ? std::min<size_t>(body_len_, std::max(kBigInitialBytes, 2 * have))
                           : nb.capacity();
  // The gate is asked for what grows: the buffer being replaced is freed next.
  if (gate_ != nullptr && want > have && !gate_->Reserve(want - have)) {
    if (pool_ != nullptr && !nb.empty()) pool_->Put(std::move(nb));
    RejectFrame(Reject::kGate);
    return false;
  }
  if (nb.empty()) nb = pool_ != nullptr ? pool_->TryGet(want) : IoBuf::TryAllocate(want);
  if (nb.empty()) {
    RejectFrame(Reject::kNoMemory);
    return false;
  }
  if (big_filled_ > 0) std::memcpy(nb.data(), big_buf_.data(), big_filled_);
  if (!big_buf_.empty() && pool_ != nullptr) pool_->Put(std::move(big_buf_));
  big_buf_ = std::move(nb);
  return true;
}

RequestParser::Result FrameParser::Finish(const char* body) {
  state_ = State::kDone;
  frame_.command = static_cast<FrameCommand>(command_);
  frame_.body = std::string_view(body, body == nullptr ? 0 : body_len_);
  return Result::kCommand;
}

RequestParser::Result FrameParser::Parse(const char* data, size_t len) {
  last_len_ = len;
  switch (state_) {
    case State::kError:
      return Result::kError;
    case State::kDone:
      return Result::kCommand;
    case State::kHeader: {
      // Each header byte is checked as soon as it is there: a client speaking
      // RESP to the lane port gets its error at once, not after 7 bytes.
      const auto* u = reinterpret_cast<const unsigned char*>(data);
      if ((len >= 1 && u[0] != (kFrameMagic & 0xFF)) || (len >= 2 && u[1] != (kFrameMagic >> 8)))
        return Fail(std::string(kErrFrameBadMagic));
      if (len >= 3 && !IsFrameCommand(u[2])) {
        char code[8];
        std::snprintf(code, sizeof(code), "0x%02X", u[2]);
        return Fail(std::string(kErrFrameUnknownCommand) + " " + code);
      }
      if (len < kFrameHeaderBytes) return Result::kNeedMore;
      command_ = u[2];
      body_len_ = LoadU32(data + 3);
      if (body_len_ > limits_.max_frame_body)
        return Fail(std::string(kErrFrameTooLong) + " (" + std::to_string(body_len_) +
                    " bytes, fastlane-max-frame-len is " + std::to_string(limits_.max_frame_body) +
                    ")");
      if (auth_required_ && body_len_ > kFrameUnauthBodyBytes)
        return Fail(std::string(kErrFrameUnauthenticated));
      if (kFrameHeaderBytes + body_len_ > limits_.max_query_bytes)
        return Fail(std::string(kErrQueryBufferLimit));
      if (body_len_ < kBigArgBytes) {
        if (len - kFrameHeaderBytes < body_len_) return Result::kNeedMore;
        pos_ = kFrameHeaderBytes + body_len_;
        return Finish(data + kFrameHeaderBytes);
      }
      // A big body: its own buffer, filled from the region, then read directly.
      pos_ = kFrameHeaderBytes;
      big_filled_ = 0;
      state_ = State::kBigBody;
      if (!GrowBig()) break;  // rejected: now in kSkipBody
      break;
    }
    case State::kBigBody:
    case State::kSkipBody:
      break;
  }
  while (state_ == State::kBigBody && big_filled_ < body_len_ && pos_ < len) {
    size_t room = std::min<size_t>(big_buf_.capacity(), body_len_) - big_filled_;
    if (room == 0) {
      if (!GrowBig()) break;
      continue;
    }
    size_t n = std::min(len - pos_, room);
    std::memcpy(big_buf_.data() + big_filled_, data + pos_, n);
    big_filled_ += n;
    pos_ += n;
  }
  if (state_ == State::kBigBody)
    return big_filled_ < body_len_ ? Result::kNeedMore : Finish(big_buf_.data());
  if (state_ == State::kSkipBody) {
    uint64_t n = std::min<uint64_t>(len - pos_, skip_left_);
    pos_ += n;
    skip_left_ -= n;
    if (skip_left_ > 0) return Result::kNeedMore;
    return Finish(nullptr);
  }
  return Result::kNeedMore;
}

std::span<char> FrameParser::DirectTarget() {
  PION_DCHECK(WantsDirectRead());
  if (state_ == State::kBigBody) {
    if (big_filled_ == std::min<size_t>(big_buf_.capacity(), body_len_)) GrowBig();
    if (state_ == State::kBigBody) {
      size_t room = std::min<size_t>(big_buf_.capacity(), body_len_) - big_filled_;
      return {big_buf_.data() + big_filled_, room};
    }
  }
  if (skip_buf_.empty())
    skip_buf_ = pool_ != nullptr ? pool_->Get(kSkipBufBytes) : IoBuf(kSkipBufBytes);
  return {skip_buf_.data(),
          static_cast<size_t>(std::min<uint64_t>(skip_left_, skip_buf_.capacity()))};
}

void FrameParser::DirectFilled(size_t n) {
  if (state_ == State::kSkipBody)
    skip_left_ -= n;
  else
    big_filled_ += n;
}

size_t FrameParser::BytesWanted() const {
  switch (state_) {
    case State::kHeader:
      if (last_len_ < kFrameHeaderBytes) return kFrameHeaderBytes - last_len_;
      if (last_len_ < kFrameHeaderBytes + body_len_)
        return static_cast<size_t>(kFrameHeaderBytes + body_len_ - last_len_);
      return 1;
    case State::kBigBody:
      return body_len_ - big_filled_;
    default:
      return 1;
  }
}

}  // namespace pion::net
