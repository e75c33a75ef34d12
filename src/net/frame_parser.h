// The binary fast lane's framing (docs/protocol.md "Binary fast lane") and its
// incremental parser. The lane is a second listener (--fastlane-port) whose
// connections speak fixed little-endian frames instead of RESP:
//
//   request   [u16 magic 0xCA5E][u8 command][u32 body_len][body]
//   response  [u16 magic 0xCA5E][u8 status ][u32 body_len][body]
//
// The transport knows the frame layout, the command codes it accepts and the
// statuses; it does not know what a body means. A complete frame is handed to
// the Service (Service::DispatchFrame), which maps it to its RESP twin.
//
// FrameParser implements RequestParser (net/request_parser.h) with the same
// input model as RespParser: a body below kBigArgBytes is a view into the
// caller's region; a larger one is read into a buffer of its own (taken as its
// bytes arrive, from kBigInitialBytes doubling, each growth admitted by the
// gate; a refusal discards the body and rejects the frame, not the connection).
// A bad magic, an unknown command or a body over the limits is a protocol
// error (checked on the header alone, before any body byte is awaited).
//
// Thread-safety: one parser per connection, used by its worker thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "net/buffer.h"
#include "net/request_parser.h"

namespace pion::net {

inline constexpr uint16_t kFrameMagic = 0xCA5E;
inline constexpr size_t kFrameHeaderBytes = 7;
// Bodies a client that has not authenticated may send (as RESP's 16 KiB bulks).
inline constexpr size_t kFrameUnauthBodyBytes = 16 * 1024;

// Request command codes.
enum class FrameCommand : uint8_t {
  kQueryFused = 0x24,  // ATTEND.PREFIX.QUERY_FUSED
  kQuery = 0x25,       // ATTEND.PREFIX.QUERY
  kAuth = 0x37,        // AUTH
  kPing = 0xFF,        // PING
};
bool IsFrameCommand(uint8_t code);

// Response statuses.
enum class FrameStatus : uint8_t { kOk = 0, kMiss = 1, kError = 2, kColdMiss = 3 };

// One complete request frame: views valid until the parser's ConsumeCommand().
struct Frame {
  FrameCommand command;
  std::string_view body;
};

// Writes a response frame header into `p` (kFrameHeaderBytes bytes).
void EncodeFrameHeader(char* p, FrameStatus status, uint32_t body_len);

class FrameParser final : public RequestParser {
 public:
  // `pool` (may be null) supplies big-body buffers and takes them back.
  explicit FrameParser(BufferPool* pool = nullptr) : pool_(pool) {}
  ~FrameParser() override;
  FrameParser(const FrameParser&) = delete;
  FrameParser& operator=(const FrameParser&) = delete;

  void set_limits(const ParserLimits& l) override { limits_ = l; }
  void set_auth_required(bool v) override { auth_required_ = v; }
  void set_gate(BufferGate* g) override { gate_ = g; }

  Result Parse(const char* data, size_t len) override;
  // After kCommand (and not rejected()).
  const Frame& frame() const { return frame_; }
  size_t command_bytes() const override { return pos_; }
  void ConsumeCommand() override;
  bool rejected() const override { return reject_ != Reject::kNone; }
  Reject reject_reason() const override { return reject_; }
  const std::string& error() const override { return error_; }

  bool WantsDirectRead() const override {
    return (state_ == State::kBigBody && big_filled_ < body_len_) ||
           (state_ == State::kSkipBody && skip_left_ > 0);
  }
  std::span<char> DirectTarget() override;
  void DirectFilled(size_t n) override;
  size_t BytesWanted() const override;
  uint64_t big_bytes() const override { return state_ == State::kBigBody ? body_len_ : 0; }
  size_t allocated_bytes() const override { return big_buf_.capacity() + skip_buf_.capacity(); }
  void ShrinkIdle() override {}

 private:
  enum class State : uint8_t { kHeader, kBigBody, kSkipBody, kDone, kError };

  Result Fail(std::string msg);
  // Makes room for more of the big body; false if refused (then kSkipBody).
  bool GrowBig();
  void RejectFrame(RequestParser::Reject why);
  Result Finish(const char* body);

  BufferPool* pool_;
  ParserLimits limits_;
  bool auth_required_ = false;
  BufferGate* gate_ = nullptr;
  State state_ = State::kHeader;
  RequestParser::Reject reject_ = RequestParser::Reject::kNone;
  size_t pos_ = 0;       // bytes of the region this frame consumed
  size_t last_len_ = 0;  // the region's length at the last Parse
  uint8_t command_ = 0;
  uint64_t body_len_ = 0;
  IoBuf big_buf_;
  size_t big_filled_ = 0;
  uint64_t skip_left_ = 0;
  IoBuf skip_buf_;
  Frame frame_{};
  std::string error_;
};

}  // namespace pion::net
