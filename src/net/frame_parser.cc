#include "net/frame_parser.h"

#include <cstdio>
#include <utility>

#include "net/resp_errors.h"

namespace pion::net {

namespace {

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

RequestParser::Result FrameParser::Fail(std::string msg) {
  state_ = State::kError;
  error_ = std::move(msg);
  return Result::kError;
}

void FrameParser::ConsumeCommand() {
  ReleaseBigArgs();
  body_len_ = 0;
  frame_ = Frame{};
  pos_ = 0;
  last_len_ = 0;
  if (state_ != State::kError) state_ = State::kHeader;
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
      state_ = State::kBigBody;
      BeginBig(body_len_);
      break;
    }
    case State::kBigBody:
      break;
  }
  switch (ConsumeBig(data, len, &pos_)) {
    case BigStep::kMore:
      return Result::kNeedMore;
    case BigStep::kFilled:
      return Finish(big_arg(0));
    case BigStep::kSkipped:
      break;
  }
  return Finish(nullptr);
}

size_t FrameParser::BytesWanted() const {
  switch (state_) {
    case State::kHeader:
      if (last_len_ < kFrameHeaderBytes) return kFrameHeaderBytes - last_len_;
      if (last_len_ < kFrameHeaderBytes + body_len_)
        return static_cast<size_t>(kFrameHeaderBytes + body_len_ - last_len_);
      return 1;
    case State::kBigBody:
      return big_filling() ? big_left() : 1;
    default:
      return 1;
  }
}

}  // namespace pion::net
