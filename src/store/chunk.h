// Chunk: a fixed-capacity run of stored rows of one layer, 64-byte aligned and
// zero-filled, shared by reference count. A layer's rows live in chunks of
// `rows_per_chunk` rows each (chunk i holds rows [i*R, (i+1)*R)); only a chunk's
// capacity can be smaller than R, and it grows by 1.25x (rounded to 16 rows) up
// to R, so memory stays within ~1.25x of the bytes stored, and no chunk is ever
// doubled or copied as a whole layer. Rows at or beyond a chunk's capacity, and
// chunks never allocated, read as zeros.
//
// Immutability contract: once a reference has been handed out (a fetch pin, a
// snapshot), the chunk's bytes never change; a writer that does not hold the only
// reference copies the chunk first (see Store).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/check.h"

namespace pion::store {

inline constexpr size_t kChunkTargetBytes = 256 * 1024;
inline constexpr uint32_t kChunkRowQuantum = 16;
inline constexpr size_t kChunkAlign = 64;  // chunk data alignment

// Where chunk memory comes from: the C library's aligned_alloc unless a host that
// accounts memory itself installs its own pair before the first chunk is made (the
// Redis module, src/module, installs RedisModule_Alloc/Free so that Redis's
// used_memory, and so maxmemory eviction, sees the rows). `alloc` need not align:
// Make over-allocates and aligns. Process-wide; set once, before any chunk exists.
struct ChunkAllocator {
  void* (*alloc)(size_t bytes) = nullptr;
  void (*free)(void* ptr) = nullptr;
};
inline ChunkAllocator g_chunk_allocator;

struct Chunk {
  uint32_t capacity_rows = 0;
  size_t row_bytes = 0;
  uint8_t* data = nullptr;
  void* raw = nullptr;               // what was allocated (data is inside it)
  void (*release)(void*) = nullptr;  // g_chunk_allocator.free, or null: std::free
  // Captured by a snapshot: never written in place again (guarded by the
  // owning side's mutex). The use count alone cannot say when a snapshot
  // thread's reads are over: a reference dropped on another thread orders
  // nothing before a writer's later relaxed use_count() read, so a write in
  // place after it would race with the snapshot's last reads (ThreadSanitizer
  // reported it); a frozen chunk is copied instead.
  mutable bool frozen = false;
  // Backing owner: non-null for a chunk whose rows lie in memory this keeps alive
  // (a mapped snapshot, Borrow); raw is then null and nothing is freed. Always
  // frozen: its bytes are never written (a writer copies the chunk).
  std::shared_ptr<const void> backing;

  Chunk() = default;
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;
  ~Chunk() {
    if (release != nullptr)
      release(raw);
    else
      std::free(raw);
  }

  size_t bytes() const { return static_cast<size_t>(capacity_rows) * row_bytes; }

  // A zero-filled chunk of `rows` rows.
  static std::shared_ptr<Chunk> Make(uint32_t rows, size_t row_bytes) {
    auto c = MakeUninit(rows, row_bytes);
    std::memset(c->data, 0, AllocBytes(rows, row_bytes));
    return c;
  }

  // A chunk of `rows` rows whose bytes are not initialised: for a writer that
  // fills every one of them (bytes()) before the chunk is published. Saves the
  // zeroing pass of Make (one pass per stored byte).
  static std::shared_ptr<Chunk> MakeUninit(uint32_t rows, size_t row_bytes) {
    auto c = std::make_shared<Chunk>();
    c->capacity_rows = rows;
    c->row_bytes = row_bytes;
    const size_t n = AllocBytes(rows, row_bytes);
    if (g_chunk_allocator.alloc != nullptr) {
      c->raw = g_chunk_allocator.alloc(n + 63);
      c->release = g_chunk_allocator.free;
      PION_CHECK(c->raw != nullptr);
      uintptr_t p = (reinterpret_cast<uintptr_t>(c->raw) + 63) & ~uintptr_t{63};
      c->data = reinterpret_cast<uint8_t*>(p);
    } else {
      c->raw = std::aligned_alloc(64, n);
      PION_CHECK(c->raw != nullptr);
      c->data = static_cast<uint8_t*>(c->raw);
    }
    return c;
  }

  // What MakeUninit allocates for `rows` rows (a multiple of 64, at least 64).
  static size_t AllocBytes(uint32_t rows, size_t row_bytes) {
    size_t n = (static_cast<size_t>(rows) * row_bytes + 63) & ~size_t{63};
    return n == 0 ? 64 : n;
  }

  // A chunk of `rows` rows at `data` (kChunkAlign-aligned) by reference: `backing`
  // keeps them alive and unchanged; frozen, so a write copies it first.
  static std::shared_ptr<Chunk> Borrow(const uint8_t* data, uint32_t rows, size_t row_bytes,
                                       std::shared_ptr<const void> backing) {
    PION_CHECK(backing != nullptr && reinterpret_cast<uintptr_t>(data) % kChunkAlign == 0);
    auto c = std::make_shared<Chunk>();
    c->capacity_rows = rows;
    c->row_bytes = row_bytes;
    c->data = const_cast<uint8_t*>(data);  // never written: frozen
    c->backing = std::move(backing);
    c->frozen = true;
    return c;
  }

  // A copy with capacity `rows` (>= the rows copied); rows beyond are zero.
  // Only the bytes past the copied rows are zeroed (no pass over bytes the
  // copy overwrites).
  std::shared_ptr<Chunk> Clone(uint32_t rows) const {
    auto c = MakeUninit(rows, row_bytes);
    uint32_t keep = rows < capacity_rows ? rows : capacity_rows;
    const size_t kept = static_cast<size_t>(keep) * row_bytes;
    std::memcpy(c->data, data, kept);
    std::memset(c->data + kept, 0, AllocBytes(rows, row_bytes) - kept);
    return c;
  }
};

// Rows per full chunk for a row size: a power of two near kChunkTargetBytes,
// at least kChunkRowQuantum.
inline uint32_t RowsPerChunk(size_t row_bytes) {
  uint32_t r = kChunkRowQuantum;
  while (static_cast<size_t>(r) * 2 * row_bytes <= kChunkTargetBytes) r *= 2;
  return r;
}

// Capacity for a chunk that must hold `needed` rows and currently holds `cap`.
inline uint32_t GrowCapacity(uint32_t cap, uint32_t needed, uint32_t rows_per_chunk) {
  auto round = [](uint64_t x) {
    return static_cast<uint32_t>((x + kChunkRowQuantum - 1) / kChunkRowQuantum * kChunkRowQuantum);
  };
  uint64_t want = round(needed);
  uint64_t grown = round(static_cast<uint64_t>(cap) * 5 / 4);
  if (grown > want) want = grown;
  if (want > rows_per_chunk) want = rows_per_chunk;
  return static_cast<uint32_t>(want);
}

}  // namespace pion::store
