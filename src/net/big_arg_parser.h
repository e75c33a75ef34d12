// BigArgParser: the half of a request parser that both protocols share below
// their grammars (RESP, net/resp_parser.h; the fast lane, net/frame_parser.h):
// the limits and the auth flag, the error text, a request's rejection, and its
// big arguments (a RESP bulk of kBigArgBytes or more with its CRLF, a frame
// body as large), each read into a buffer of its own.
//
// A big argument is read into one buffer of its whole size (len + 2, never
// grown or copied): a cached one when the pool or the process's recycler has
// one (its pages are already faulted in; admitted whole), else a new one whose
// pages become resident only as the bytes arrive. A new buffer is admitted in
// steps as it fills, kBigInitialBytes first, then doubling what is admitted,
// so a header alone never reserves its whole size. Every step first asks the
// BufferGate. When the gate refuses, or the allocation
// fails, the request is rejected (net/request_parser.h): every buffer it holds
// goes back, and the rest of the argument is discarded instead (read into a
// small scratch buffer while direct reads are wanted).
//
// The derived parser keeps its grammar state and, while it is inside a big
// argument, feeds the region to ConsumeBig() and answers WantsDirectRead() with
// BigWantsRead(); DirectTarget() and DirectFilled() are implemented here.
//
// Thread-safety: one parser per connection, used by its worker thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "net/buffer.h"
#include "net/request_parser.h"

namespace pion::net {

class BigArgParser : public RequestParser {
 public:
  // `pool` (may be null) supplies big-argument buffers and takes them back.
  explicit BigArgParser(BufferPool* pool) : pool_(pool) {}
  ~BigArgParser() override { ReleaseBigArgs(); }
  BigArgParser(const BigArgParser&) = delete;
  BigArgParser& operator=(const BigArgParser&) = delete;

  void set_limits(const ParserLimits& l) override { limits_ = l; }
  void set_auth_required(bool v) override { auth_required_ = v; }
  void set_gate(BufferGate* g) override { gate_ = g; }

  bool rejected() const override { return reject_ != Reject::kNone; }
  Reject reject_reason() const override { return reject_; }
  const std::string& error() const override { return error_; }

  std::span<char> DirectTarget() override;
  void DirectFilled(size_t n) override {
    if (phase_ == Phase::kSkip)
      skip_left_ -= n;
    else
      filled_ += n;
  }
  size_t allocated_bytes() const override;
  OwnedBuffer TakeBigArg(const char* data) override;

 protected:
  // What ConsumeBig() did with the current big argument.
  enum class BigStep : uint8_t {
    kMore,     // it needs more bytes
    kFilled,   // complete: it is big_arg(big_arg_count() - 1)
    kSkipped,  // its bytes were all discarded (the request is rejected)
  };
  // Argument vectors grown past this are freed between requests.
  static constexpr size_t kKeepArgs = 1024;

  // Begins a big argument of `need` bytes in a buffer of its own; when its
  // first buffer is refused, the request is rejected and the argument skipped.
  void BeginBig(size_t need);
  // Begins discarding `n` bytes (a big argument of a rejected request).
  void BeginSkip(uint64_t n) {
    skip_left_ = n;
    phase_ = Phase::kSkip;
  }
  // Takes the region's bytes [*pos, len) into the current big argument (or
  // discards them), advancing *pos. Only between BeginBig/BeginSkip and the
  // step that completes the argument.
  BigStep ConsumeBig(const char* data, size_t len, size_t* pos);
  // While inside a big argument: true when its next bytes should be read
  // straight into DirectTarget() (the region has nothing more for it).
  bool BigWantsRead() const {
    return (phase_ == Phase::kFill && filled_ < need_) ||
           (phase_ == Phase::kSkip && skip_left_ > 0);
  }
  bool big_filling() const { return phase_ == Phase::kFill; }
  // Bytes the big argument being filled still needs.
  size_t big_left() const { return need_ - filled_; }
  // Bytes of the big argument being filled that arrived so far.
  size_t big_filled() const { return phase_ == Phase::kFill ? filled_ : 0; }
  size_t big_arg_count() const { return done_.size(); }
  const char* big_arg(size_t i) const { return done_[i].data(); }

  // End of a request: every buffer back to the pool, no rejection.
  void ReleaseBigArgs() {
    if (!done_.empty() || !cur_.empty() || !skip_buf_.empty()) ReleaseBuffers();
    need_ = filled_ = admitted_ = 0;
    skip_left_ = 0;
    reject_ = Reject::kNone;
    phase_ = Phase::kNone;
  }
  // Between requests: frees the list of big arguments a huge request grew.
  void ShrinkBigArgs() {
    if (done_.capacity() > kKeepArgs) std::vector<IoBuf>().swap(done_);
  }

  BufferPool* const pool_;
  ParserLimits limits_;
  bool auth_required_ = false;
  BufferGate* gate_ = nullptr;
  std::string error_;

 private:
  enum class Phase : uint8_t { kNone, kFill, kSkip };

  // Makes room for more of the argument being filled: its buffer, else the
  // next admitted part of it; false if refused (the request is then rejected).
  bool GrowBig();
  // Rejects the request: its buffers go back, the rest of the current
  // argument is discarded.
  void RejectRequest(Reject why);
  void PutBack(IoBuf& b);
  void ReleaseBuffers();

  Reject reject_ = Reject::kNone;
  Phase phase_ = Phase::kNone;
  IoBuf cur_;  // the argument being filled
  size_t need_ = 0, filled_ = 0;
  size_t admitted_ = 0;      // bytes of cur_ the gate admitted (filled_ <= admitted_)
  std::vector<IoBuf> done_;  // the request's complete big arguments
  uint64_t skip_left_ = 0;
  IoBuf skip_buf_;  // scratch for discarded bytes read directly
};

}  // namespace pion::net
