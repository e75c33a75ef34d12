// RespParser: the incremental RESP request parser, a pure function of (state,
// bytes) that never touches a socket. It accepts multibulk arrays of bulk
// strings and inline (telnet) commands, as Redis does, and checks every limit
// before allocating anything.
//
// Input model. The caller keeps the unconsumed input in one contiguous region
// that starts at the first byte of the current command, appends to it, and
// passes the whole region to Parse() each time (it may move the region between
// calls; the parser keeps only offsets). When Parse() returns kCommand, args()
// are views into the region, into the parser's inline arena, or into big-arg
// buffers; they stay valid until ConsumeCommand(). The caller then drops
// command_bytes() from the front of its region.
//
// Big arguments (>= kBigArgBytes, as Redis PROTO_MBULK_BIG_ARG) are read into a
// buffer of exactly len + 2 bytes: the bytes already in the region are copied
// once, and while WantsDirectRead() is true the caller read(2)s the rest straight
// into DirectTarget() and reports it with DirectFilled(), so a 16 MiB argument
// is never copied again.
//
// Memory for a big argument is taken as its bytes arrive (net/big_arg_parser.h,
// shared with the fast lane's parser), so a header alone (`$1073741824`) never
// reserves its whole size. Every allocation first asks the admission gate
// (set_gate; the connection's share of maxmemory-clients). When the gate
// refuses, or the allocation fails, the command is rejected, not the
// connection: the rest of its bytes are read and discarded, and Parse()
// returns kCommand with rejected() set and no args, so the caller answers an
// error and carries on with the next command.
//
// Errors use Redis' texts ("Protocol error: invalid bulk length"); after one the
// parser stays in the error state and the caller replies and closes.
//
// Thread-safety: one parser per connection, used by its worker thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/big_arg_parser.h"
#include "net/buffer.h"
#include "net/request_parser.h"

namespace pion::net {

inline constexpr size_t kInlineMaxBytes = 64 * 1024;  // PROTO_INLINE_MAX_SIZE

class RespParser final : public BigArgParser {
 public:
  explicit RespParser(BufferPool* pool = nullptr) : BigArgParser(pool) {}

  // Parses the region [data, data + len) that starts at the current command.
  Result Parse(const char* data, size_t len) override;

  // After kCommand. A command may be empty (`*0`, `*-1`, an empty inline line):
  // the caller skips it.
  std::span<const std::string_view> args() const { return views_; }
  size_t command_bytes() const override { return pos_; }
  // Drops the command's state (big buffers go back to the pool).
  void ConsumeCommand() override;

  // True while the rest of a big argument should be read straight into
  // DirectTarget() (the region has nothing more for it).
  bool WantsDirectRead() const override { return state_ == State::kBigArg && BigWantsRead(); }
  // How many more bytes the current command needs at least (a read size hint).
  size_t BytesWanted() const override;
  // Bytes of the pending command held outside the region (big arguments).
  uint64_t big_bytes() const override { return big_total_; }
  // A complete command not yet run (held by CLIENT PAUSE) counts whole.
  uint64_t unparsed_bytes(size_t region) const override {
    if (state_ == State::kDone) return region + big_total_;
    return (region > pos_ ? region - pos_ : 0) + (state_ == State::kBigArg ? big_filled() : 0);
  }
  // Between commands: frees argument vectors grown by a huge command.
  void ShrinkIdle() override;

 private:
  enum class State : uint8_t {
    kIdle,
    kInline,
    kArrayLen,
    kBulkLen,
    kBulkBody,
    kBigArg,  // a big argument, read (or, the command rejected, skipped) by BigArgParser
    kDone,
    kError
  };
  enum class Where : uint8_t { kRegion, kBig, kInline };
  struct ArgRef {
    // (A constructor, so that emplace_back builds one in place with either
    // compiler: clang before 16 has no parenthesized aggregate initialization.)
    ArgRef() = default;
    ArgRef(Where w, uint32_t big, size_t o, size_t l) : where(w), big_index(big), off(o), len(l) {}
    Where where = Where::kRegion;
    uint32_t big_index = 0;
    size_t off = 0, len = 0;
  };

  // The whole command already in the buffer, at most kWholeMaxArgs arguments,
  // each shorter than kBigArgBytes and within the limits: parsed in one pass
  // (no per-line search, no ArgRef step) and true; false leaves the parser
  // untouched for the general, incremental path (which also reports every
  // error, so both paths accept and refuse exactly the same input).
  static constexpr uint64_t kWholeMaxArgs = 64;
  bool ParseWhole(const char* data, size_t len);
  // In state kBulkLen: the whole arguments at pos_ in a row (a command of
  // many small arguments that arrived over several reads), each as
  // ParseBulkLen and the kBulkBody step would take it, in one loop. Stops at
  // the first that is not whole or not in SmallLength's form (the general
  // path takes it, and reports any error); true when the command is complete.
  bool BulkRun(const char* data, size_t len);
  Result Fail(std::string msg);
  Result ParseInline(const char* data, size_t len);
  // The "*<n>\r\n" / "$<n>\r\n" line at pos_ (its type byte checked): false
  // with *wait set (kNeedMore, or the failure `too_long` once kInlineMaxBytes
  // passed without a CR) until the line is complete; then true, pos_ past the
  // line, and *n the number (nullopt when it is not one or the LF is missing).
  bool LengthLine(const char* data, size_t len, const char* too_long, Result* wait,
                  std::optional<int64_t>* n);
  Result ParseArrayLen(const char* data, size_t len);
  Result ParseBulkLen(const char* data, size_t len);
  // The big argument just filled: its CRLF checked, its ref recorded.
  Result FinishBig();
  Result ArgDone(const char* data);
  void Materialize(const char* data);

  State state_ = State::kIdle;
  size_t pos_ = 0;   // parse position within the region
  size_t scan_ = 0;  // where the search for a line end resumes
  uint64_t args_left_ = 0;
  uint64_t bulk_len_ = 0;  // the current argument's length (without its CRLF)
  uint64_t big_total_ = 0;
  std::vector<ArgRef> refs_;
  std::vector<std::string_view> views_;
  std::string inline_arena_;
};

// Splits an inline command line as Redis sdssplitargs does (quotes, \x hex and
// C escapes inside double quotes). Tokens are appended to `arena` (which must
// have capacity for line.size() more bytes so views stay valid) and their
// views to `out`. False on unbalanced quotes.
bool SplitInlineArgs(std::string_view line, std::string* arena, std::vector<std::string_view>* out);

}  // namespace pion::net
