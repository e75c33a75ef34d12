// RequestParser: what a Connection needs of the parser of its protocol (one
// per listener: RESP, net/resp_parser.h, or the binary fast lane,
// net/frame_parser.h). Both are pure functions of (state, bytes) over the same
// input model: the caller keeps the unconsumed input in one contiguous region
// that starts at the first byte of the current request, passes the whole region
// to Parse() each time, and drops command_bytes() from its front after
// kCommand. Large arguments (RESP bulks, frame bodies of kBigArgBytes or more)
// are read into a buffer of their own: while WantsDirectRead() the caller
// read(2)s straight into DirectTarget() and reports it with DirectFilled().
// Every buffer is admitted by the BufferGate first; a refusal rejects the
// request (rejected(): its bytes are discarded and the caller answers an OOM
// error), not the connection. After kError the parser stays in the error state
// and the caller sends error() and closes.
//
// Thread-safety: one parser per connection, used by its worker thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/owned_buffer.h"

namespace pion::net {

inline constexpr size_t kBigArgBytes = 32 * 1024;     // PROTO_MBULK_BIG_ARG
inline constexpr size_t kBigInitialBytes = 4u << 20;  // first admitted part of a new big-arg buffer

struct ParserLimits {
  uint64_t max_bulk_len = 1ull << 30;     // proto-max-bulk-len
  uint64_t max_args = 1ull << 20;         // arguments per command
  uint64_t max_query_bytes = 2ull << 30;  // client-query-buffer-limit (one command)
  uint64_t max_frame_body = 1ull << 30;   // fastlane-max-frame-len (one frame's body)
};

// Asked before the parser allocates a big-argument buffer; false refuses it.
class BufferGate {
 public:
  virtual ~BufferGate() = default;
  virtual bool Reserve(size_t bytes) = 0;
};

class RequestParser {
 public:
  enum class Result { kNeedMore, kCommand, kError };
  enum class Reject : uint8_t { kNone, kGate, kNoMemory };

  virtual ~RequestParser() = default;

  virtual void set_limits(const ParserLimits& l) = 0;
  // Unauthenticated clients get tighter header limits (Redis': 10 arguments,
  // 16 KiB bulks; the lane: 16 KiB bodies) so they cannot make the server
  // allocate before AUTH.
  virtual void set_auth_required(bool v) = 0;
  virtual void set_gate(BufferGate* g) = 0;

  virtual Result Parse(const char* data, size_t len) = 0;
  virtual size_t command_bytes() const = 0;
  virtual void ConsumeCommand() = 0;
  virtual bool rejected() const = 0;
  virtual Reject reject_reason() const = 0;
  // After kError: the reply text without a type byte, e.g. "ERR Protocol error: ...".
  virtual const std::string& error() const = 0;

  virtual bool WantsDirectRead() const = 0;
  virtual std::span<char> DirectTarget() = 0;
  virtual void DirectFilled(size_t n) = 0;
  // How many more bytes the current request needs at least (a read size hint).
  virtual size_t BytesWanted() const = 0;
  // Bytes of the pending request held outside the region (big arguments).
  virtual uint64_t big_bytes() const = 0;
  // Input received for the pending request and not yet parsed into its
  // arguments, given the `region` bytes buffered from its start (CLIENT LIST
  // qbuf, as Redis counts its query buffer: a big argument being read counts
  // the bytes that arrived; parsed arguments no longer count).
  virtual uint64_t unparsed_bytes(size_t region) const { return region + big_bytes(); }
  // Memory held for the pending request (big-argument and discard buffers).
  virtual size_t allocated_bytes() const = 0;
  // Between requests: frees what a huge request grew.
  virtual void ShrinkIdle() = 0;
  // During the current request's dispatch: gives away the buffer of the big
  // argument that starts at `data` (an argument view's data()), which then no
  // longer goes back to the pool at the end of the request; empty when `data`
  // is not the start of one (a small argument, a copy). The view stays valid
  // for as long as the new owner keeps the buffer.
  virtual OwnedBuffer TakeBigArg(const char* data) {
    (void)data;
    return OwnedBuffer();
  }
};

}  // namespace pion::net
