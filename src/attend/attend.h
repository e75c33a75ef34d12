// Attention over a warm slot (docs/attention.md §1 is the math and explains
// positions, windows, sparse selection and split-KV).
//
// One call handles one layer of one session: H_q query heads, M query rows each,
// head dim D, against the slot's H_kv heads. Outputs are [H_q][M][D] f32 and, when
// asked, lse [H_q][M] (natural log; -inf for a row with no visible position, whose
// output is zeros).
//
// Positions: the prefix is 0..N-1. With a suffix of S > 0 caller tokens (FUSED), the M
// rows are the last M suffix positions q(m) = N + S - M + m and see the prefix plus
// suffix positions p <= q(m); with S = 0 every row sits at N and sees the prefix.
// Window W > 0: with S > 0 row m sees q(m) - W < p <= q(m); with S = 0 the last W
// prefix positions.
//
// Thread-safety: Attend() may run concurrently on the same const slot.
#pragma once

#include <cstdint>
#include <vector>

#include "attend/executor.h"
#include "attend/precision.h"
#include "attend/slot.h"
#include "base/status.h"

namespace pion::attend {

inline constexpr uint32_t kMaxQueryRows = 4096;

struct AttendRequest {
  const float* q = nullptr;  // [H_q][M][D]
  uint32_t h_q = 0;
  uint32_t m = 1;
  uint32_t d = 0;  // must equal the slot's D
  // kv head of each query head, [H_q], each < H_kv; null = the GQA map hq / (H_q/H_kv)
  // (then H_q must be a multiple of H_kv).
  const int32_t* head_map = nullptr;
  uint32_t h_kv = 0;   // 0 = the slot's H; otherwise must equal it
  int32_t window = 0;  // 0 = full attention; < 0 is an error

  // Fused suffix: S caller tokens, K/V [H_kv][S][D] f32 (M <= S when S > 0).
  uint32_t s = 0;
  const float* k_suf = nullptr;
  const float* v_suf = nullptr;

  // Sparse explicit: per query head up to k_sparse_max prefix indices
  // (indices[hq * k_sparse_max + i], i < counts[hq]); any order, duplicates counted once,
  // out of range -> error. Intersected with the window.
  const int32_t* indices = nullptr;
  const int32_t* counts = nullptr;
  uint32_t k_sparse_max = 0;

  // Sparse auto: blocks of `block` prefix tokens, the k_top best by `selector` (one
  // mask for every head, block scores summed over all query heads and rows);
  // dense when k_top * block >= N.
  bool sparse_auto = false;
  uint32_t block = 0;
  uint32_t k_top = 0;
  Selector selector = Selector::kBlockMean;
};

struct AttendOptions {
  // Where split-KV chunks run; null = inline on the caller.
  Executor* executor = nullptr;
  // Chunks per KV head along N: 0 = automatic (enough tasks for the executor's
  // concurrency, each at least min_split_tokens positions); > 0 forces that many
  // (tests use it to check that split equals unsplit).
  uint32_t splits = 0;
  uint32_t min_split_tokens = 1024;
  // Use the scalar f32 kernels even where SIMD ones exist (tests, benches).
  bool force_scalar = false;
};

// Validates `req` against `slot` and computes attention. `out` holds H_q*M*D floats,
// `lse` (may be null) H_q*M. On error nothing is written.
Status Attend(const Slot& slot, const AttendRequest& req, float* out, float* lse,
              const AttendOptions& opt = {});

// The oracle: docs/attention.md §1 literally, accumulating in double, reading the slot's stored
// values (so it measures the kernels, not the storage precision). Same validation.
Status AttendReference(const Slot& slot, const AttendRequest& req, float* out, float* lse);

// The prefix blocks sparse auto attends (ascending), or all blocks when it goes dense.
// Fast path (cached statistics, f32) and reference (double, from stored values).
Status SelectBlocks(const Slot& slot, const AttendRequest& req, std::vector<uint32_t>* blocks,
                    const AttendOptions& opt = {});
Status SelectBlocksReference(const Slot& slot, const AttendRequest& req,
                             std::vector<uint32_t>* blocks, std::vector<double>* scores);

// "avx2+fma+f16c" or "scalar": the kernels chosen for this CPU.
std::string_view AttendKernelName();

// A read-only pass over `bytes` bytes at `p` (64-byte aligned) with the fastest loads
// this CPU has; returns a value derived from every byte (so it is not optimised away).
// The memory-speed ceiling the benchmark compares against.
uint64_t StreamRead(const void* p, size_t bytes);

}  // namespace pion::attend
