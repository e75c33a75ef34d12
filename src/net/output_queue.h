// OutputQueue: the bytes a connection still has to send, in reply order, as a
// queue of segments that writev(2) sends without coalescing copies:
//
//   * arena segments: small replies appended to a chain of fixed-size arena
//     blocks (consecutive small replies merge into one segment). A block is
//     returned to the pool as soon as every segment in it has been written, so
//     a client that pipelines steadily while reading slowly holds only its
//     unsent bytes plus one partly filled block, never the bytes already sent;
//   * owned segments: an exactly-sized IoBuf (BulkReserve, large Bulk copies),
//     returned to the worker's BufferPool once written;
//   * external segments: memory owned elsewhere (stored chunks), kept alive by
//     a pin (shared_ptr) released as soon as its last byte is written.
//
// Deferred replies. Every segment carries a hold LSN: it may be written only
// once the durable LSN (Server::durable_lsn()) is at least that value. Holds
// never decrease along the queue, so a command whose reply waits for the log
// also holds every later reply (replies stay in request order). A connection
// calls HoldFrom(mark, lsn) after a handler that set ctx.wait_lsn; Writable()
// then yields only the prefix that is durable. With no persistence every LSN is
// 0 and nothing is ever held.
//
// Reply slots. A command whose reply is completed later (DeferredReply) gets an
// empty placeholder segment, AddSlot(id), at its place in the queue. Writable()
// stops at a slot that is not filled yet, so everything queued after it is held
// too; FillSlot(id, bytes) later turns the placeholder into the reply and
// releases what follows (unless an LSN hold still applies). Both kinds of hold
// only ever block a suffix of the queue, so replies leave in request order.
//
// Thread-safety: owned by one connection, used by its worker thread only.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/buffer.h"
#include "net/pinned_block.h"
#include "net/ring_queue.h"

namespace pion::net {

class OutputQueue {
 public:
  // A position in the queue (see Mark / HoldFrom).
  struct Mark {
    size_t segments = 0;   // segments queued at the time
    size_t last_len = 0;   // length of the last one then
    uint64_t written = 0;  // segments popped at the time
  };

  explicit OutputQueue(BufferPool* pool) : pool_(pool) {}
  ~OutputQueue();
  OutputQueue(const OutputQueue&) = delete;
  OutputQueue& operator=(const OutputQueue&) = delete;

  // Small bytes, copied into the arena.
  void Append(const char* p, size_t n);
  void Append(std::string_view s) { Append(s.data(), s.size()); }
  // Reserves `n` arena bytes; the caller fills them before the next call.
  char* AppendSpace(size_t n);
  // An owned buffer of exactly `n` bytes, queued now, filled by the caller.
  char* AppendOwned(size_t n);
  // A buffer for AppendOwned(buf, n), or an empty one when the memory cannot
  // be had; then AppendOwned(std::move(buf), n) queues it.
  IoBuf TryAllocate(size_t n);
  char* AppendOwned(IoBuf buf, size_t n) { return AdoptOwned(std::move(buf), n); }
  // Memory owned elsewhere; `pin` is released once the last part is written.
  // `blocks` is the memory the pin keeps alive (see held_bytes()); when empty,
  // the parts count by their own length.
  void AppendExternal(std::span<const iovec> parts, std::shared_ptr<const void> pin,
                      std::span<const PinnedBlock> blocks = {});

  Mark GetMark() const;
  // Holds everything appended since `m` (and all later appends) until the
  // durable LSN reaches `lsn`.
  void HoldFrom(const Mark& m, uint64_t lsn);
  uint64_t hold_lsn() const { return hold_lsn_; }

  // Reserves the place of a reply completed later (see the file comment).
  void AddSlot(uint64_t id);
  // Puts `bytes` (one whole encoded reply) at slot `id`; false if there is no
  // such pending slot.
  bool FillSlot(uint64_t id, std::string_view bytes);
  // The same with the reply encoded into `src` (a scratch queue, nothing of it
  // written): what it sends by reference (a value's buffer, with its pin) and
  // its big owned buffers move here as they are, its small bytes are copied
  // into one buffer. A deferred GET's value is then never copied. `src` is
  // left to be destroyed.
  bool FillSlotFrom(uint64_t id, OutputQueue& src);
  size_t pending_slots() const { return pending_slots_; }
  // Every queued byte, holds ignored (a scratch queue's contents).
  std::string CopyAll() const;

  // Fills up to `max` iovecs with the writable prefix given the durable LSN;
  // returns how many.
  int Writable(uint64_t durable_lsn, iovec* iov, int max) const;
  // The first queued segment's hold LSN (0 if none is queued).
  uint64_t HeadHold() const;
  // Removes `n` written bytes from the front.
  void Consume(size_t n);

  bool empty() const { return segs_.empty(); }
  // Unsent bytes (arena, owned and external).
  size_t bytes() const { return bytes_; }
  // What the client holds for its limits: unsent bytes, except that replies
  // sent by reference count the memory their pins keep alive instead of the
  // bytes they reference (a one-row fetch pins its whole chunk; zeros sent from
  // the shared zero block pin nothing).
  size_t held_bytes() const {
    // (The partly written head part still counts whole in pinned_ref_bytes_.)
    size_t own = bytes_ > pinned_ref_bytes_ ? bytes_ - pinned_ref_bytes_ : 0;
    return own + pinned_bytes_;
  }
  // Bytes ever queued / ever written (for per-reply accounting by the caller).
  uint64_t appended_total() const { return appended_total_; }
  uint64_t consumed_total() const { return consumed_total_; }
  // Memory this queue allocated and holds: arena blocks and owned buffers.
  size_t allocated_bytes() const { return block_bytes_ + owned_bytes_; }
  size_t arena_capacity() const { return block_bytes_; }
  // Frees the idle arena blocks when they add up to more than `keep` bytes.
  void ShrinkIdle(size_t keep);

 private:
  enum class Kind : uint8_t { kArena, kOwned, kExternal, kSlot };
  struct Block {
    IoBuf buf;
    size_t used = 0;
    uint32_t refs = 0;  // segments pointing into it
  };
  struct Segment {
    Kind kind;
    uint64_t block = 0;         // kArena: block sequence number
    size_t off = 0;             // kArena: offset in that block
    const char* ptr = nullptr;  // kOwned, kExternal
    size_t len = 0;
    uint64_t hold = 0;
    uint64_t slot = 0;  // kSlot: the id given to AddSlot
    IoBuf owned;
    std::shared_ptr<const void> pin;
    std::vector<PinnedBlock> blocks;  // kExternal with a pin: what it keeps alive
    bool by_pin = false;              // kExternal: counted through blocks, not its length
  };

  // The arena block that can take `n` more bytes (a new one if needed).
  Block& TailBlock(size_t n);
  const char* Base(const Segment& s) const;
  char* AdoptOwned(IoBuf buf, size_t n);
  // Drops a written segment: its block reference or its owned buffer.
  void Release(Segment& s);
  void FreeUnusedBlocks();

  BufferPool* pool_;
  // Rings, not deques: no allocation per reply once grown (net/ring_queue.h).
  RingQueue<Segment> segs_;
  RingQueue<Block> blocks_;  // oldest first; blocks_[i] has sequence first_block_ + i
  uint64_t first_block_ = 0;
  Block* tail_ = nullptr;  // blocks_.back(), or nullptr when there is none (reset on every push)
  uint64_t tail_seq_ = 0;
  size_t block_bytes_ = 0;  // capacity of blocks_
  size_t owned_bytes_ = 0;  // capacity of owned segments
  struct PinCount {
    uint32_t refs = 0;
    size_t bytes = 0;
  };
  std::unordered_map<const void*, PinCount> pins_;  // distinct blocks queued pins keep alive
  size_t pinned_bytes_ = 0;                         // their bytes
  size_t pinned_ref_bytes_ = 0;                     // unsent bytes of the parts those pins cover
  uint64_t appended_total_ = 0;
  uint64_t consumed_total_ = 0;
  size_t head_off_ = 0;  // bytes of segs_.front() already written
  size_t bytes_ = 0;     // queued, not yet written
  uint64_t hold_lsn_ = 0;
  uint64_t popped_ = 0;  // segments written and removed since creation
  size_t pending_slots_ = 0;
};

}  // namespace pion::net
