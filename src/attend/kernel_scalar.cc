// Scalar run kernels: the same tiling and online softmax as the SIMD ones, in plain
// C++ with f32 accumulation. Used on CPUs without AVX2+FMA+F16C, for head dims the
// SIMD kernels do not take (d % 8 != 0), and when dispatch is forced to scalar.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attend/kernel.h"
#include "base/cpu.h"
#include "base/fp16.h"

namespace pion::attend::internal {
namespace {

template <Precision P>
inline float At(const void* base, size_t idx) {
  if constexpr (P == Precision::kF32) {
    return static_cast<const float*>(base)[idx];
  } else if constexpr (P == Precision::kF16) {
    return F16ToF32(static_cast<const uint16_t*>(base)[idx]);
  } else {
    return static_cast<float>(static_cast<const int8_t*>(base)[idx]);
  }
}

template <Precision P>
void RunScalar(const void* k, const void* v, const float* ks, const float* vs, uint32_t n,
               uint32_t d, RowJob* jobs, uint32_t n_jobs, const RunNext* /*next*/) {
  float s[kTile];
  for (uint32_t t0 = 0; t0 < n; t0 += kTile) {
    const int64_t t1 = std::min<int64_t>(n, t0 + kTile);
    for (uint32_t j = 0; j < n_jobs; ++j) {
      RowJob& job = jobs[j];
      const int64_t a = std::max<int64_t>(job.lo, t0), b = std::min<int64_t>(job.hi, t1);
      if (a >= b) continue;
      float tmax = -std::numeric_limits<float>::infinity();
      for (int64_t i = a; i < b; ++i) {
        float dot = 0.0f;
        const size_t base = static_cast<size_t>(i) * d;
        for (uint32_t x = 0; x < d; ++x) dot += job.q[x] * At<P>(k, base + x);
        if constexpr (P == Precision::kInt8) dot *= ks[i];
        s[i - a] = dot;
        tmax = std::max(tmax, dot);
      }
      if (tmax > *job.m) {
        const float c = std::exp(*job.m - tmax);
        *job.l *= c;
        for (uint32_t x = 0; x < d; ++x) job.acc[x] *= c;
        *job.m = tmax;
      }
      float sum = 0.0f;
      for (int64_t i = a; i < b; ++i) {
        const float p = std::exp(s[i - a] - *job.m);
        sum += p;
        float w = p;
        if constexpr (P == Precision::kInt8) w *= vs[i];
        const size_t base = static_cast<size_t>(i) * d;
        for (uint32_t x = 0; x < d; ++x) job.acc[x] += w * At<P>(v, base + x);
      }
      *job.l += sum;
    }
  }
}

float DotScalar(const float* a, const float* b, uint32_t d) {
  float s = 0.0f;
  for (uint32_t i = 0; i < d; ++i) s += a[i] * b[i];
  return s;
}

float QuestScalar(const float* q, const float* lo, const float* hi, uint32_t d) {
  float s = 0.0f;
  for (uint32_t i = 0; i < d; ++i) s += std::max(q[i] * lo[i], q[i] * hi[i]);
  return s;
}

uint64_t StreamScalar(const void* p, size_t bytes) {
  const uint64_t* w = static_cast<const uint64_t*>(p);
  uint64_t a = 0, b = 0, c = 0, e = 0;
  size_t n = bytes / 8, i = 0;
  for (; i + 4 <= n; i += 4) {
    a ^= w[i];
    b ^= w[i + 1];
    c ^= w[i + 2];
    e ^= w[i + 3];
  }
  for (; i < n; ++i) a ^= w[i];
  return a ^ b ^ c ^ e;
}

bool FiniteF16Scalar(const uint16_t* x, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad |= (x[i] & 0x7C00u) == 0x7C00u;
  return bad == 0;
}

bool AbsBelowScalar(const float* x, size_t n, float limit) {
  for (size_t i = 0; i < n; ++i) {
    if (!(std::fabs(x[i]) < limit)) return false;
  }
  return true;
}

const KernelSet kScalar = {
    "scalar",
    {RunScalar<Precision::kF32>, RunScalar<Precision::kF16>, RunScalar<Precision::kInt8>},
    1,
    DotScalar,
    QuestScalar,
    StreamScalar,
    FiniteF16Scalar,
    AbsBelowScalar};

const KernelSet& PickFast() {
#if PION_ATTEND_X86
  if (CpuHas(CpuFeature::kAvx2) && CpuHas(CpuFeature::kFma) && CpuHas(CpuFeature::kF16c)) {
    return x86::kAvx2Kernels;
  }
#endif
  return kScalar;
}

}  // namespace

const KernelSet& ScalarKernels() { return kScalar; }

const KernelSet& FastKernels() {
  static const KernelSet& k = PickFast();
  return k;
}

}  // namespace pion::attend::internal
