// ReplyBuilder: encodes RESP2/RESP3 replies for one connection. Small replies are
// appended to the connection's output buffer; large payloads are either written
// straight into an exactly-sized owned buffer (BulkReserve, for decoded rows) or
// queued by reference to stored chunks (BulkExternal, sent with writev and kept
// alive by a pin), so a payload is never copied into a reply buffer twice.
//
// Thread-safety: owned by one connection, used by the worker thread that runs it.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

#include "base/status.h"
#include "net/pinned_block.h"

namespace pion::net {

class ReplyBuilder {
 public:
  virtual ~ReplyBuilder() = default;

  virtual int proto() const = 0;  // 2 or 3

  virtual void SimpleString(std::string_view s) = 0;  // +s
  // `text` is the whole error line without '-' and CRLF, e.g. "ERR wrong number ...".
  virtual void Error(std::string_view text) = 0;
  // (A Status is worded by the command layer's table, src/kvproto/errors.h:
  // Error(StatusToError(st)); the transport renders none.)
  virtual void Integer(int64_t v) = 0;
  virtual void Bulk(std::string_view s) = 0;
  virtual void Null() = 0;       // $-1 (RESP2) / _ (RESP3)
  virtual void NullArray() = 0;  // *-1 (RESP2) / _ (RESP3)
  virtual void ArrayHeader(size_t n) = 0;
  virtual void MapHeader(size_t pairs) = 0;  // %n (RESP3) / *2n (RESP2)
  virtual void SetHeader(size_t n) = 0;      // ~n (RESP3) / *n (RESP2)
  // A Pub/Sub push: >n (RESP3) / *n (RESP2).
  virtual void PushHeader(size_t n) { ArrayHeader(n); }
  virtual void Double(double v) = 0;  // ,v (RESP3) / bulk (RESP2)
  virtual void Boolean(bool v) = 0;   // #t/#f (RESP3) / :1/:0 (RESP2)
  // RESP3 verbatim string (=len\r\ntxt:body) / RESP2 bulk.
  virtual void Verbatim(std::string_view body) = 0;

  // A bulk string of `len` bytes whose body the caller writes into the returned
  // buffer before the next call on this builder.
  virtual uint8_t* BulkReserve(size_t len) = 0;
  // The same, or nullptr with nothing written when the memory cannot be had.
  virtual uint8_t* TryBulkReserve(size_t len) = 0;
  // A bulk string whose body is `parts` (total `len` bytes), sent by reference.
  // `pin` keeps the memory alive until the bytes have been written to the socket.
  virtual void BulkExternal(size_t len, std::span<const iovec> parts,
                            std::shared_ptr<const void> pin) = 0;
  // The same, where `pin` keeps `blocks` alive (whole stored chunks, a private
  // buffer): those count against the client's output limits instead of `len`,
  // each distinct block once however many replies pin it (parts outside them,
  // such as shared zeros, count nothing).
  virtual void BulkPinned(size_t len, std::span<const iovec> parts, std::shared_ptr<const void> pin,
                          std::span<const PinnedBlock> blocks) = 0;

  // Error replies written through this builder so far, and the code word of
  // the last one ("ERR", "WRONGTYPE"; empty before the first): what the
  // service counts per command (INFO commandstats/errorstats).
  uint64_t error_count() const { return errors_; }
  std::string_view last_error_code() const { return std::string_view(last_code_, last_code_len_); }

 protected:
  // A builder's Error() calls this with the line it writes.
  void NoteError(std::string_view text) {
    ++errors_;
    size_t n = 0;
    while (n < text.size() && n < kMaxCode && text[n] != ' ' && text[n] != '\r' && text[n] != '\n')
      ++n;
    std::memcpy(last_code_, text.data(), n);
    last_code_len_ = n;
  }

 private:
  uint64_t errors_ = 0;
  static constexpr size_t kMaxCode = 32;  // the code word kept (at most this many bytes)
  char last_code_[kMaxCode] = {};
  size_t last_code_len_ = 0;
};

}  // namespace pion::net
