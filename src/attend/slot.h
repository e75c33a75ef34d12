// Slot: the K and V of one (session, layer), resident in the engine's layout and
// precision (docs/attention.md §2).
//
// Layout: one 64-byte-aligned allocation holding, each region starting on a 64-byte
// boundary, K [H][N][D] then V [H][N][D] in the slot precision, then (int8 only) the
// K scales [H][N] and V scales [H][N] (f32). Rows are dense (row stride D): the size
// is exactly what the shape needs plus < 64 bytes of alignment per region, never
// doubled. int8 rows are symmetric: s = absmax/127, q = clamp(rint(x/s), -127, 127),
// value = q * s (an all-zero row has s = 0).
//
// Block statistics for the sparse-auto selectors are computed on first use per
// (block size, selector), cached with the slot, counted in bytes(), and dropped by
// every Store*() call.
//
// Memory: the buffer comes from the slot's SlotArena when it has one (attend/slot_arena.h:
// reused memory of freed slots) and goes back to it when the slot dies; bytes() counts
// the buffer's capacity (at most 1/8 above the layout's size).
//
// Thread-safety: const methods (queries, BlockStatsFor) may run concurrently; Store*()
// needs exclusive access (the server replaces or locks the slot around a re-store).
// A failed Store*() leaves the previous contents (and stats) intact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "attend/precision.h"
#include "attend/reason.h"
#include "attend/slot_arena.h"
#include "base/status.h"
#include "quant/format.h"

namespace pion::attend {

inline constexpr uint32_t kMaxHeadDim = 1024;
inline constexpr uint32_t kMaxHeads = 1024;
// Cached (block size, selector) statistics kept per slot (oldest forgotten first).
inline constexpr size_t kMaxCachedStats = 4;

// Cached per-block statistics of K for one (block size, selector). For kBlockMean
// `a` holds the mean [H][n_blocks][D]; for kQuest `a` holds the per-dimension min and
// `b` the max, same shape. The last block may be partial (its own count).
struct BlockStats {
  uint32_t block = 0;
  Selector selector = Selector::kBlockMean;
  uint32_t n_blocks = 0;
  std::vector<float> a, b;
  size_t bytes() const { return (a.size() + b.size()) * sizeof(float); }
};

// One run of Stage-1 rows: `rows` consecutive tokens, each quant::RowBytes(f, H*D)
// bytes, token-major (a row holds all heads: [H*D]).
struct RowSpan {
  const uint8_t* data = nullptr;
  size_t rows = 0;
};

class Slot {
 public:
  // `arena`: where the buffer comes from and goes back to (null: plain allocation).
  explicit Slot(std::shared_ptr<SlotArena> arena = nullptr) : arena_(std::move(arena)) {}
  ~Slot();
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  // K and V are [H][N][D] (head-major), f32 or IEEE half. Errors (nothing changes):
  // H or D out of 1..kMaxHeads / 1..kMaxHeadDim, a non-finite value, a value beyond
  // the f16 range when the precision is f16.
  Status StoreF32(Precision p, uint32_t h, uint32_t n, uint32_t d, const float* k, const float* v);
  Status StoreF16(Precision p, uint32_t h, uint32_t n, uint32_t d, const uint16_t* k,
                  const uint16_t* v);
  // From Stage-1 rows [N][H*D] stored in vquant `f` (any format quant decodes): each
  // row is decoded (into one row of scratch, never a full f32 copy), split per head
  // and converted straight into the slot. K and V may be chunked differently but must
  // hold the same number of rows.
  Status StoreRows(Precision p, uint32_t h, uint32_t d, quant::Format f,
                   std::span<const RowSpan> k_rows, std::span<const RowSpan> v_rows);

  bool empty() const { return buf_ == nullptr; }
  Precision precision() const { return prec_; }
  uint32_t heads() const { return h_; }
  uint32_t tokens() const { return n_; }
  uint32_t dim() const { return d_; }
  // Every byte this slot holds: the allocation plus cached block statistics.
  size_t bytes() const;
  // Bytes of K and V (and int8 scales) one dense pass reads.
  size_t kv_bytes() const { return alloc_bytes_; }

  // Region pointers (head h, token 0). Scales are null unless int8.
  const void* k(uint32_t head) const { return buf_ + k_off_ + RowOffset(head); }
  const void* v(uint32_t head) const { return buf_ + v_off_ + RowOffset(head); }
  const float* k_scale(uint32_t head) const;
  const float* v_scale(uint32_t head) const;
  const uint8_t* data() const { return buf_; }

  // One stored element, dequantized to f32 (the value every kernel attends to).
  float KAt(uint32_t head, uint32_t n, uint32_t d) const;
  float VAt(uint32_t head, uint32_t n, uint32_t d) const;

  // Cached statistics for (block, selector), built on first use. REQUIRES block > 0.
  std::shared_ptr<const BlockStats> BlockStatsFor(uint32_t block, Selector sel) const;
  // Test hook: how many times statistics were computed since construction.
  uint64_t block_stats_builds() const;

 private:
  struct Layout {
    size_t k_off, v_off, ks_off, vs_off, total;
  };
  static Layout MakeLayout(Precision p, uint32_t h, uint32_t n, uint32_t d);
  size_t RowOffset(uint32_t head) const {
    return static_cast<size_t>(head) * n_ * d_ * ElementBytes(prec_);
  }
  // A buffer being filled: handed back to the arena unless adopted.
  class Buffer {
   public:
    Buffer(SlotArena* arena, size_t bytes);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    uint8_t* get() const { return p_; }
    size_t capacity() const { return cap_; }
    uint8_t* release() {
      uint8_t* p = p_;
      p_ = nullptr;
      return p;
    }

   private:
    SlotArena* arena_;
    uint8_t* p_ = nullptr;
    size_t cap_ = 0;
  };
  // Zeroes the alignment padding after each region of `l` (deterministic bytes).
  static void ZeroPadding(uint8_t* buf, Precision p, uint32_t h, uint32_t n, uint32_t d,
                          const Layout& l);
  // Adopts a filled buffer (frees the old one, drops cached stats).
  void Adopt(Buffer* buf, const Layout& l, Precision p, uint32_t h, uint32_t n, uint32_t d);
  void FreeBuf();

  std::shared_ptr<SlotArena> arena_;
  uint8_t* buf_ = nullptr;
  size_t alloc_bytes_ = 0;
  size_t cap_bytes_ = 0;
  size_t k_off_ = 0, v_off_ = 0, ks_off_ = 0, vs_off_ = 0;
  Precision prec_ = Precision::kF16;
  uint32_t h_ = 0, n_ = 0, d_ = 0;

  mutable std::mutex stats_mu_;
  mutable std::vector<std::shared_ptr<const BlockStats>> stats_;
  mutable uint64_t stats_builds_ = 0;
};

}  // namespace pion::attend
