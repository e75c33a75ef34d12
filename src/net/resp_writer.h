// RespWriter: the connection's ReplyBuilder. Encodes RESP2 or RESP3 into the
// connection's OutputQueue: small replies are appended to its arena, bulk
// strings of kCopyThreshold bytes or more are copied once into an owned,
// exactly-sized buffer, BulkReserve hands out such a buffer for the handler to
// fill, and BulkExternal queues the caller's iovecs by reference with a pin.
//
// Thread-safety: owned by one connection, used by its worker thread only.
#pragma once

#include <string>
#include <string_view>

#include "net/output_queue.h"
#include "net/reply.h"

namespace pion::net {

// Bodies this large are copied once into an owned buffer of their own rather
// than into the arena (both writers: RESP, and the fast lane's FrameWriter).
inline constexpr size_t kReplyCopyBytes = 16 * 1024;

// Bulk() of a body of kReplyCopyBytes or more, for both writers: one copy into
// a TryBulkReserve() buffer, or the OOM error when that memory cannot be had (a
// client-sized copy, such as ECHO of a big argument, fails its reply, not the
// process).
void BulkByCopy(ReplyBuilder& reply, std::string_view s);

class RespWriter final : public ReplyBuilder {
 public:
  static constexpr size_t kCopyThreshold = kReplyCopyBytes;

  explicit RespWriter(OutputQueue* out) : out_(out) {}

  int proto() const override { return proto_; }
  void set_proto(int p) { proto_ = p; }

  void SimpleString(std::string_view s) override;
  void Error(std::string_view text) override;
  void Integer(int64_t v) override;
  void Bulk(std::string_view s) override;
  void Null() override;
  void NullArray() override;
  void ArrayHeader(size_t n) override;
  void MapHeader(size_t pairs) override;
  void SetHeader(size_t n) override;
  void PushHeader(size_t n) override { Header(proto_ == 3 ? '>' : '*', n); }
  void Double(double v) override;
  void Boolean(bool v) override;
  void Verbatim(std::string_view body) override;
  uint8_t* BulkReserve(size_t len) override;
  uint8_t* TryBulkReserve(size_t len) override;
  void BulkPinned(size_t len, std::span<const iovec> parts, std::shared_ptr<const void> pin,
                  std::span<const PinnedBlock> blocks) override;
  void BulkExternal(size_t len, std::span<const iovec> parts,
                    std::shared_ptr<const void> pin) override;

  // Error replies written through this builder (one per failed command normally).
  uint64_t errors() const { return error_count(); }
  // Where replies go: the connection's queue, or a scratch queue whose bytes
  // are dropped (CLIENT REPLY OFF|SKIP).
  void set_out(OutputQueue* out) { out_ = out; }
  OutputQueue* out() const { return out_; }

 private:
  uint8_t* SmallBulkReserve(size_t len);
  void Header(char type, uint64_t n);

  OutputQueue* out_;
  int proto_ = 2;
};

// Formats a double as Redis does for RESP3 doubles ("inf", "-inf", "nan",
// else the shortest text that round-trips).
std::string FormatDouble(double v);

}  // namespace pion::net
