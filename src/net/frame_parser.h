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
// caller's region; a larger one is read into a buffer of its own by the half
// both parsers share (net/big_arg_parser.h: taken as its bytes arrive, each
// growth admitted by the gate; a refusal discards the body and rejects the
// frame, not the connection).
// A bad magic, an unknown command or a body over the limits is a protocol
// error (checked on the header alone, before any body byte is awaited).
//
// Thread-safety: one parser per connection, used by its worker thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/big_arg_parser.h"
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

class FrameParser final : public BigArgParser {
 public:
  explicit FrameParser(BufferPool* pool = nullptr) : BigArgParser(pool) {}

  Result Parse(const char* data, size_t len) override;
  // After kCommand (and not rejected()).
  const Frame& frame() const { return frame_; }
  size_t command_bytes() const override { return pos_; }
  void ConsumeCommand() override;

  bool WantsDirectRead() const override { return state_ == State::kBigBody && BigWantsRead(); }
  size_t BytesWanted() const override;
  uint64_t big_bytes() const override {
    return state_ == State::kBigBody && big_filling() ? body_len_ : 0;
  }
  void ShrinkIdle() override {}

 private:
  // kBigBody: a body of kBigArgBytes or more, read (or, rejected, skipped) by
  // the BigArgParser half.
  enum class State : uint8_t { kHeader, kBigBody, kDone, kError };

  Result Fail(std::string msg);
  Result Finish(const char* body);

  State state_ = State::kHeader;
  size_t pos_ = 0;       // bytes of the region this frame consumed
  size_t last_len_ = 0;  // the region's length at the last Parse
  uint8_t command_ = 0;
  uint64_t body_len_ = 0;
  Frame frame_{};
};

}  // namespace pion::net
