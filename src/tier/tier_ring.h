// ReadRing: a thread's own io_uring for checked reads of tier extents, many in
// flight at once, their completions handed back on the same thread.
//
// A worker thread owns one (server/worker.cc): it watches event_fd() in its
// event loop and calls Reap() when it is readable, so a GET of a value on disk
// costs the worker one submission and one completion, with no hand-off to an
// I/O thread and back, and as many reads wait on the device as clients asked
// for (up to depth()). The callbacks run inside Reap() (or Drain()), on the
// owning thread, never inside Read().
//
// Thread-safety: everything but Create() runs on the owning thread. An extent
// read in flight is held (its space is not reused, its file stays open).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/owned_buffer.h"
#include "base/status.h"
#include "tier/tier_file.h"

namespace pion::tier {

class ReadRing {
 public:
  // The checked extent (at `at` in the buffer, as TierFile::Read with `at`),
  // or the error: kCorruption for damage, kIOError for a failed read.
  using Done = std::function<void(Result<OwnedBuffer> buf, size_t at)>;

  // A ring of `depth` (1..4096) reads in flight; an error where io_uring is not
  // available (an old kernel, a sandbox that forbids it).
  static Result<std::unique_ptr<ReadRing>> Create(unsigned depth);
  ~ReadRing();  // Drain()s first
  ReadRing(const ReadRing&) = delete;
  ReadRing& operator=(const ReadRing&) = delete;

  // Readable (non-blocking eventfd) when completions wait for Reap().
  int event_fd() const { return efd_; }
  unsigned depth() const { return depth_; }
  size_t in_flight() const { return in_flight_; }

  // Starts a checked read of `x` (written, of at most kMaxRead bytes). False
  // when depth() reads are in flight, the buffer cannot be had or the ring
  // failed: `done` is then left as it was (read the extent another way).
  // True: `done` was taken and runs from a later Reap() or Drain().
  static constexpr uint64_t kMaxRead = 1ull << 30;
  bool Read(const ExtentRef& x, Done& done);
  // Runs the callbacks of the reads that finished (never waits); how many.
  size_t Reap();
  // Waits for every read in flight and runs its callback.
  void Drain();

  // Reads ever started through any ring (INFO tier_ring_reads).
  static uint64_t total_reads();

  // The calling thread's ring (set by its owner), or null.
  static ReadRing* Current();
  static void SetCurrent(ReadRing* r);

 private:
  struct Impl;
  struct Op {
    ExtentRef x;
    OwnedBuffer buf;
    size_t at = 0;
    Done done;
    Status preset;  // an injected failure: a no-op stands for the read
    bool used = false;
  };
  explicit ReadRing(unsigned depth);
  // Takes the completions waiting (blocking for one first when `wait`);
  // false when the ring failed.
  bool Collect(bool wait, std::vector<std::pair<Op, int>>* out);
  void Finish(Op op, int res);
  bool SubmitPending();

  std::unique_ptr<Impl> impl_;
  unsigned depth_;
  int efd_ = -1;
  bool broken_ = false;
  bool unsubmitted_ = false;  // a submission failed: retried by the next Read or Reap
  size_t in_flight_ = 0;
  std::vector<Op> ops_;         // by slot (the completion's user data)
  std::vector<uint32_t> free_;  // unused slots
};

}  // namespace pion::tier
