// Internal to src/attend: the run kernels every precision implements, and the kernel
// sets (scalar f32-accumulating, AVX2+FMA+F16C) chosen once by CPU detection.
//
// A run kernel attends one contiguous run of n prefix (or suffix) positions, K/V rows
// of stride d, for a list of query rows ("jobs") at once: each K/V row of the run is
// loaded from memory once and reused from L1 for every job (all M rows and all query
// heads of a GQA group). Each job only sees positions [lo, hi) of the run and carries
// its online-softmax state (running max m, sum l, unnormalised output acc[d]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attend/precision.h"

namespace pion::attend::internal {

struct RowJob {
  const float* q;  // d floats, already multiplied by 1/sqrt(D)
  int64_t lo, hi;  // visible positions of this run (clamped to [0, n) by the kernel)
  float* m;        // running max (-inf before the first visible position)
  float* l;        // running sum of exp(s - m)
  float* acc;      // d floats: sum of exp(s - m) * V
};

// Where the caller goes next (sparse runs are short): rows past the end of this run
// are prefetched from there. Null when nothing follows.
struct RunNext {
  const void* k;
  const void* v;
  uint32_t n;
};

// ks / vs: the per-row int8 scales of the run (null for f32/f16).
using RunFn = void (*)(const void* k, const void* v, const float* ks, const float* vs, uint32_t n,
                       uint32_t d, RowJob* jobs, uint32_t n_jobs, const RunNext* next);
using DotFn = float (*)(const float* a, const float* b, uint32_t d);
// sum_d max(q_d * lo_d, q_d * hi_d) (the Quest bound).
using QuestFn = float (*)(const float* q, const float* lo, const float* hi, uint32_t d);
using StreamFn = uint64_t (*)(const void* p, size_t bytes);
// Slot fill checks over n values at any address: every IEEE half finite; every f32
// x with |x| < limit (NaN fails; limit = +inf tests finiteness, 65520 the f16 range).
using FiniteF16Fn = bool (*)(const uint16_t* x, size_t n);
using AbsBelowFn = bool (*)(const float* x, size_t n, float limit);

struct KernelSet {
  std::string_view name;
  RunFn run[kNumPrecisions];
  uint32_t dim_multiple;  // the run kernels need d % dim_multiple == 0
  DotFn dot;
  QuestFn quest;
  StreamFn stream;
  FiniteF16Fn finite_f16;
  AbsBelowFn abs_below;
};

// Scalar kernels (f32 accumulation, any d): the fallback and the "SIMD disabled" path.
const KernelSet& ScalarKernels();
// The set chosen for this CPU (AVX2+FMA+F16C when present, else the scalar set).
const KernelSet& FastKernels();

#if PION_ATTEND_X86
namespace x86 {
extern const KernelSet kAvx2Kernels;
}
#endif

inline constexpr uint32_t kTile = 32;  // positions per online-softmax step

}  // namespace pion::attend::internal
