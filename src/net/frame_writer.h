// FrameWriter: the fast lane connection's ReplyBuilder. A handler writes its
// usual RESP reply; each reply becomes one response frame (net/frame_parser.h):
//
//   bulk string (Bulk, BulkReserve, BulkExternal, BulkPinned) -> OK, body = the bytes
//   simple string (+OK, +PONG)                                -> OK, empty body
//   integer, double, boolean, verbatim                        -> OK, body = its text
//   null (Null, NullArray)                                    -> MISS, empty body
//   error whose code word is COLDMISS                         -> COLDMISS, body = the error line
//   any other error                                           -> ERROR, body = the error line
//   array / map / set                                         -> OK, body = its elements'
//                                                                bodies concatenated
//
// The status is chosen by the kind of reply and, for errors, by the code word
// (the text before the first space), never by the rest of the text. Bodies are
// queued as RespWriter queues them: small ones copied into the arena, large
// ones into an owned buffer (or written there by the handler: BulkReserve), by
// reference ones by reference, so the lane copies a reply no more than RESP.
//
// Thread-safety: owned by one connection, used by its worker thread only.
#pragma once

#include <cstdint>
#include <string_view>

#include "net/buffer.h"
#include "net/frame_parser.h"
#include "net/output_queue.h"
#include "net/reply.h"
#include "net/resp_writer.h"

namespace pion::net {

class FrameWriter final : public ReplyBuilder {
 public:
  static constexpr size_t kCopyThreshold = kReplyCopyBytes;

  explicit FrameWriter(OutputQueue* out) : out_(out) {}

  // Handlers see RESP2 semantics (maps are flat pairs).
  int proto() const override { return 2; }

  void SimpleString(std::string_view s) override;
  void Error(std::string_view text) override;
  void Integer(int64_t v) override;
  void Bulk(std::string_view s) override;
  void Null() override;
  void NullArray() override { Null(); }
  void ArrayHeader(size_t n) override;
  void MapHeader(size_t pairs) override { ArrayHeader(2 * pairs); }
  void SetHeader(size_t n) override { ArrayHeader(n); }
  void Double(double v) override;
  void Boolean(bool v) override { Text(v ? "1" : "0"); }
  void Verbatim(std::string_view body) override { Bulk(body); }
  uint8_t* BulkReserve(size_t len) override;
  uint8_t* TryBulkReserve(size_t len) override;
  void BulkPinned(size_t len, std::span<const iovec> parts, std::shared_ptr<const void> pin,
                  std::span<const PinnedBlock> blocks) override;
  void BulkExternal(size_t len, std::span<const iovec> parts,
                    std::shared_ptr<const void> pin) override;

  // Error replies written (one per failed command normally).
  uint64_t errors() const { return error_count(); }

  // The status an error line is answered with (COLDMISS for that code word).
  static FrameStatus ErrorStatus(std::string_view text);

 private:
  // Starts a value: a whole frame with `status` and `len` body bytes at the top
  // level; inside an aggregate, one more element of `len` bytes. False (after
  // writing an ERROR frame) when a top-level body cannot be framed.
  bool Begin(FrameStatus status, uint64_t len);
  // Small text body (scalars).
  void Text(std::string_view s);
  // An element of an aggregate ended: patch the frame once the last one did.
  void EndElement();

  OutputQueue* out_;
  // The aggregate being written: its header (patched at the end), elements
  // still to come, body bytes so far.
  char* agg_header_ = nullptr;
  uint64_t agg_left_ = 0;
  uint64_t agg_bytes_ = 0;
};

}  // namespace pion::net
