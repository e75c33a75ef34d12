// AVX2 + FMA + F16C run kernels (compiled with those flags only; picked at run time by
// kernel_scalar.cc's dispatch). Same tiling and online softmax as the scalar kernels:
// scores of 8 positions at a time (8 accumulators, one transpose-add), a vector exp,
// and V accumulated 32 dims at a time in registers over the tile. f16 is widened with
// vcvtph2ps and int8 with vpmovsxbd + vcvtdq2ps in registers: the int8 K dot uses the
// integer values and applies the row scale once per score; V's scale is folded into
// the softmax weight. Requires d % 8 == 0.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attend/kernel.h"
#include "quant/x86/avx2_util.h"

namespace pion::attend::internal::x86 {
namespace {

using quant::x86::HMax8;
using quant::x86::HSum8;

// Software prefetch distance in positions (one tile): K and V are two streams far
// apart read in row-interleaved order, which the hardware prefetchers follow poorly.
constexpr int64_t kPrefetchAhead = 2 * kTile;

template <Precision P>
inline __m256 Load8(const void* base, size_t idx) {
  if constexpr (P == Precision::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + idx);
  } else if constexpr (P == Precision::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + idx)));
  } else {
    const int8_t* p = static_cast<const int8_t*>(base) + idx;
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
}

// Four vectors of 8 floats: 32 consecutive dimensions of one row, or 8
// dimensions of 4 rows.
struct Vec4 {
  __m256 v0, v1, v2, v3;
};

// The 8 values at idx, idx + stride, idx + 2 * stride and idx + 3 * stride.
template <Precision P>
inline Vec4 Load4(const void* base, size_t idx, size_t stride) {
  return {Load8<P>(base, idx), Load8<P>(base, idx + stride), Load8<P>(base, idx + 2 * stride),
          Load8<P>(base, idx + 3 * stride)};
}

inline void Store4(float* p, const Vec4& a) {
  _mm256_storeu_ps(p, a.v0);
  _mm256_storeu_ps(p + 8, a.v1);
  _mm256_storeu_ps(p + 16, a.v2);
  _mm256_storeu_ps(p + 24, a.v3);
}

// a += u * x, vector by vector.
inline void Fma4(__m256 u, const Vec4& x, Vec4& a) {
  a.v0 = _mm256_fmadd_ps(u, x.v0, a.v0);
  a.v1 = _mm256_fmadd_ps(u, x.v1, a.v1);
  a.v2 = _mm256_fmadd_ps(u, x.v2, a.v2);
  a.v3 = _mm256_fmadd_ps(u, x.v3, a.v3);
}

// a += u * x and b += w * x: two query rows (or two jobs' weights) sharing each
// loaded vector of x.
inline void Fma4x2(__m256 u, __m256 w, const Vec4& x, Vec4& a, Vec4& b) {
  a.v0 = _mm256_fmadd_ps(u, x.v0, a.v0);
  b.v0 = _mm256_fmadd_ps(w, x.v0, b.v0);
  a.v1 = _mm256_fmadd_ps(u, x.v1, a.v1);
  b.v1 = _mm256_fmadd_ps(w, x.v1, b.v1);
  a.v2 = _mm256_fmadd_ps(u, x.v2, a.v2);
  b.v2 = _mm256_fmadd_ps(w, x.v2, b.v2);
  a.v3 = _mm256_fmadd_ps(u, x.v3, a.v3);
  b.v3 = _mm256_fmadd_ps(w, x.v3, b.v3);
}

// exp(x) for x <= 0 (scores minus the running max), Cephes-style: 2^n * p(r) with
// |r| <= ln2/2; relative error ~2 ulp; x below -87 gives ~0.
inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// Scores of 8 consecutive rows: out[j] = q . K[j].
// With pk/pv set, also prefetches the 8 K rows and 8 V rows starting there, spread
// over the loop (ElementBytes(P) lines of each per step).
template <Precision P>
inline __m256 Dot8(const float* q, const void* k, size_t row0, uint32_t d, const char* pk,
                   const char* pv) {
  const __m256 z = _mm256_setzero_ps();
  Vec4 lo{z, z, z, z}, hi = lo;  // rows 0-3 and 4-7
  const size_t b = row0 * d;
  constexpr uint32_t kLines = ElementBytes(P);
  for (uint32_t x = 0; x < d; x += 8) {
    if (pk != nullptr) {
      const size_t o = static_cast<size_t>(x) * 8 * kLines;
      for (uint32_t i = 0; i < kLines; ++i) {
        _mm_prefetch(pk + o + 64 * i, _MM_HINT_T0);
        if (pv != nullptr) _mm_prefetch(pv + o + 64 * i, _MM_HINT_T0);
      }
    }
    const __m256 qv = _mm256_loadu_ps(q + x);
    Fma4(qv, Load4<P>(k, b + x, d), lo);
    Fma4(qv, Load4<P>(k, b + 4 * d + x, d), hi);
  }
  const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(lo.v0, lo.v1), _mm256_hadd_ps(lo.v2, lo.v3));
  const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(hi.v0, hi.v1), _mm256_hadd_ps(hi.v2, hi.v3));
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

template <Precision P>
inline float Dot1(const float* q, const void* k, size_t row, uint32_t d) {
  __m256 a0 = _mm256_setzero_ps();
  const size_t b = row * d;
  for (uint32_t x = 0; x < d; x += 8) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + x), Load8<P>(k, b + x), a0);
  }
  return HSum8(a0);
}

// acc[0..d) += sum_j w[j] * V[row0 + j][0..d) for j < cnt.
// With pv set (V row row0 + kPrefetchAhead, same stride), also prefetches the V rows
// that far ahead, one 32-dimension slice per step.
template <Precision P>
inline void AccumulateV(float* acc, const void* v, size_t row0, const float* w, int64_t cnt,
                        uint32_t d, const char* pv = nullptr) {
  const size_t row_bytes = static_cast<size_t>(d) * ElementBytes(P);
  uint32_t x = 0;
  for (; x + 32 <= d; x += 32) {
    Vec4 a = Load4<Precision::kF32>(acc, x, 8);
    for (int64_t j = 0; j < cnt; ++j) {
      if (pv != nullptr) {
        const char* p = pv + j * row_bytes + static_cast<size_t>(x) * ElementBytes(P);
        _mm_prefetch(p, _MM_HINT_T0);
        if constexpr (ElementBytes(P) == 4) _mm_prefetch(p + 64, _MM_HINT_T0);
      }
      Fma4(_mm256_broadcast_ss(w + j), Load4<P>(v, (row0 + j) * d + x, 8), a);
    }
    Store4(acc + x, a);
  }
  for (; x < d; x += 8) {
    __m256 a0 = _mm256_loadu_ps(acc + x);
    for (int64_t j = 0; j < cnt; ++j) {
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j), Load8<P>(v, (row0 + j) * d + x), a0);
    }
    _mm256_storeu_ps(acc + x, a0);
  }
}

// Softmax step of one job over cnt scores in s (kTile floats, raw dots): applies the
// int8 K scale (kScaled), updates the running max/sum (rescaling acc when the max grows)
// and turns s into the V weights (with the int8 V scale folded in). ks/vs start at the
// first score.
template <bool kScaled>
inline void SoftmaxTile(RowJob& job, float* s, int64_t cnt, const float* ks, const float* vs,
                        uint32_t d) {
  // Pad the last group of 8 with -inf so whole vectors can be used below.
  const int64_t padded = (cnt + 7) & ~int64_t{7};
  for (int64_t z = cnt; z < padded; ++z) s[z] = -std::numeric_limits<float>::infinity();
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t z = 0; z < padded; z += 8) {
    __m256 sv = _mm256_load_ps(s + z);
    if constexpr (kScaled) {  // the K scale, once per score
      if (z + 8 <= cnt) {
        sv = _mm256_mul_ps(sv, _mm256_loadu_ps(ks + z));
      } else {
        for (int64_t y = z; y < cnt; ++y) s[y] *= ks[y];
        sv = _mm256_load_ps(s + z);
      }
      _mm256_store_ps(s + z, sv);
    }
    vmax = _mm256_max_ps(vmax, sv);
  }
  const float tmax = HMax8(vmax);
  if (tmax > *job.m) {
    const float c = std::exp(*job.m - tmax);
    *job.l *= c;
    const __m256 cv = _mm256_set1_ps(c);
    for (uint32_t x = 0; x < d; x += 8) {
      _mm256_storeu_ps(job.acc + x, _mm256_mul_ps(cv, _mm256_loadu_ps(job.acc + x)));
    }
    *job.m = tmax;
  }
  const __m256 mv = _mm256_set1_ps(*job.m);
  __m256 lsum = _mm256_setzero_ps();
  for (int64_t z = 0; z < padded; z += 8) {
    __m256 p = Exp(_mm256_sub_ps(_mm256_load_ps(s + z), mv));
    if (z + 8 > cnt) {  // zero the padding lanes
      const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i lim = _mm256_set1_epi32(static_cast<int>(cnt - z));
      p = _mm256_and_ps(p, _mm256_castsi256_ps(_mm256_cmpgt_epi32(lim, idx)));
    }
    lsum = _mm256_add_ps(lsum, p);
    if constexpr (kScaled) {  // the V scale folded into the weight
      if (z + 8 <= cnt) {
        p = _mm256_mul_ps(p, _mm256_loadu_ps(vs + z));
        _mm256_store_ps(s + z, p);
      } else {
        _mm256_store_ps(s + z, p);
        for (int64_t y = z; y < cnt; ++y) s[y] *= vs[y];
      }
    } else {
      _mm256_store_ps(s + z, p);
    }
  }
  *job.l += HSum8(lsum);
}

// The rows to prefetch: this run's, then the next run's (RunNext) past its end.
struct Ahead {
  const char* k;
  const char* v;
  int64_t n;
  const char* kn;
  const char* vn;
  int64_t nn;
  size_t rb;
  // Rows [r, r + g) in this run's numbering; false when they straddle or run off the end.
  bool At(int64_t r, int64_t g, const char** pk, const char** pv) const {
    if (r + g <= n) {
      *pk = k + r * rb;
      *pv = v + r * rb;
      return true;
    }
    if (kn != nullptr && r >= n && r - n + g <= nn) {
      *pk = kn + (r - n) * rb;
      *pv = vn + (r - n) * rb;
      return true;
    }
    return false;
  }
};

// One job over positions [a, b) of K/V stored as L (absolute row indices), scores into
// `s` (kTile floats). kScaled: apply the int8 row scales ks/vs (same indices). With
// `pf` set, prefetches the rows kPrefetchAhead positions ahead while computing.
template <Precision L, bool kScaled>
inline void JobTile(RowJob& job, const void* k, const void* v, const float* ks, const float* vs,
                    int64_t a, int64_t b, uint32_t d, const Ahead* pf, float* s) {
  const int64_t cnt = b - a;
  // When the rows kPrefetchAhead on lie in one run, K is prefetched during the score
  // loop and V during the V loop (half the density each); otherwise both in the score
  // loop, group by group.
  const char* vk = nullptr;
  const char* vv = nullptr;
  const bool split = pf != nullptr && d % 32 == 0 && pf->At(a + kPrefetchAhead, cnt, &vk, &vv);
  int64_t i = 0;
  for (; i + 8 <= cnt; i += 8) {
    const char* qk = nullptr;
    const char* qv = nullptr;
    if (pf != nullptr && !pf->At(a + i + kPrefetchAhead, 8, &qk, &qv)) qk = qv = nullptr;
    if (split) qv = nullptr;
    _mm256_store_ps(s + i, Dot8<L>(job.q, k, a + i, d, qk, qv));
  }
  for (; i < cnt; ++i) s[i] = Dot1<L>(job.q, k, a + i, d);
  SoftmaxTile<kScaled>(job, s, cnt, kScaled ? ks + a : nullptr, kScaled ? vs + a : nullptr, d);
  AccumulateV<L>(job.acc, v, a, s, cnt, d, split ? vv : nullptr);
}

// Two jobs with the same range over f32 rows (a widened tile): every K and V load feeds
// both. Scores of 4 positions for 2 query rows use 8 accumulators.
[[gnu::always_inline]] inline void Dot4x2(const float* q0, const float* q1, const float* k,
                                          size_t row0, uint32_t d, float* s0, float* s1) {
  const __m256 z = _mm256_setzero_ps();
  Vec4 a{z, z, z, z}, b = a;
  for (uint32_t x = 0; x < d; x += 8) {
    Fma4x2(_mm256_loadu_ps(q0 + x), _mm256_loadu_ps(q1 + x),
           Load4<Precision::kF32>(k, row0 * d + x, d), a, b);
  }
  // hadd(hadd(v0, v1), hadd(v2, v3)) holds the low-half sums of v0..v3 in lanes 0-3 and
  // the high-half sums in lanes 4-7.
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a.v0, a.v1), _mm256_hadd_ps(a.v2, a.v3));
  const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(b.v0, b.v1), _mm256_hadd_ps(b.v2, b.v3));
  _mm_storeu_ps(s0, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  _mm_storeu_ps(s1, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

// acc0 += sum_j w0[j] V[row0 + j], acc1 likewise (V f32), sharing each load.
inline void AccumulateV2(float* acc0, float* acc1, const float* v, size_t row0, const float* w0,
                         const float* w1, int64_t cnt, uint32_t d) {
  uint32_t x = 0;
  for (; x + 32 <= d; x += 32) {
    Vec4 a = Load4<Precision::kF32>(acc0, x, 8), b = Load4<Precision::kF32>(acc1, x, 8);
    for (int64_t j = 0; j < cnt; ++j) {
      Fma4x2(_mm256_broadcast_ss(w0 + j), _mm256_broadcast_ss(w1 + j),
             Load4<Precision::kF32>(v, (row0 + j) * d + x, 8), a, b);
    }
    Store4(acc0 + x, a);
    Store4(acc1 + x, b);
  }
  for (; x < d; x += 8) {
    __m256 a0 = _mm256_loadu_ps(acc0 + x), b0 = _mm256_loadu_ps(acc1 + x);
    for (int64_t j = 0; j < cnt; ++j) {
      const __m256 vv = _mm256_loadu_ps(v + (row0 + j) * d + x);
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w0 + j), vv, a0);
      b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w1 + j), vv, b0);
    }
    _mm256_storeu_ps(acc0 + x, a0);
    _mm256_storeu_ps(acc1 + x, b0);
  }
}

// Two jobs over the same positions [a, b) of f32 rows (a widened tile).
template <bool kScaled>
inline void JobPairTile(RowJob& j0, RowJob& j1, const float* k, const float* v, const float* ks,
                        const float* vs, int64_t a, int64_t b, uint32_t d, float* s0, float* s1) {
  const int64_t cnt = b - a;
  int64_t i = 0;
  for (; i + 4 <= cnt; i += 4) Dot4x2(j0.q, j1.q, k, a + i, d, s0 + i, s1 + i);
  for (; i < cnt; ++i) {
    s0[i] = Dot1<Precision::kF32>(j0.q, k, a + i, d);
    s1[i] = Dot1<Precision::kF32>(j1.q, k, a + i, d);
  }
  SoftmaxTile<kScaled>(j0, s0, cnt, kScaled ? ks + a : nullptr, kScaled ? vs + a : nullptr, d);
  SoftmaxTile<kScaled>(j1, s1, cnt, kScaled ? ks + a : nullptr, kScaled ? vs + a : nullptr, d);
  AccumulateV2(j0.acc, j1.acc, v, a, s0, s1, cnt, d);
}

// Widens rows [t0, t1) of K and V to f32 (exact: f16 and int8 values are f32 values)
// into kt / vt, prefetching the rows kPrefetchAhead further on.
template <Precision P>
inline void Widen(const void* k, const void* v, int64_t t0, int64_t t1, const Ahead& pf, uint32_t d,
                  float* kt, float* vt) {
  const size_t row_bytes = static_cast<size_t>(d) * ElementBytes(P);
  for (int64_t r = t0; r < t1; ++r) {
    const char* pk;
    const char* pv;
    if (pf.At(r + kPrefetchAhead, 1, &pk, &pv)) {
      for (size_t o = 0; o < row_bytes; o += 64) {
        _mm_prefetch(pk + o, _MM_HINT_T0);
        _mm_prefetch(pv + o, _MM_HINT_T0);
      }
    }
    float* ko = kt + (r - t0) * d;
    float* vo = vt + (r - t0) * d;
    for (uint32_t x = 0; x < d; x += 8) {
      _mm256_storeu_ps(ko + x, Load8<P>(k, r * d + x));
      _mm256_storeu_ps(vo + x, Load8<P>(v, r * d + x));
    }
  }
}

template <Precision P>
void RunAvx2(const void* k, const void* v, const float* ks, const float* vs, uint32_t n, uint32_t d,
             RowJob* jobs, uint32_t n_jobs, const RunNext* next) {
  alignas(32) float s[kTile];
  alignas(32) float s2[kTile];
  constexpr bool kScaled = P == Precision::kInt8;
  const size_t row_bytes = static_cast<size_t>(d) * ElementBytes(P);
  const Ahead ahead{static_cast<const char*>(k),
                    static_cast<const char*>(v),
                    n,
                    next ? static_cast<const char*>(next->k) : nullptr,
                    next ? static_cast<const char*>(next->v) : nullptr,
                    next ? int64_t{next->n} : 0,
                    row_bytes};
  // Several jobs (M > 1, GQA): widen each tile to f32 once instead of once per job.
  const bool widen = P != Precision::kF32 && n_jobs > 1;
  thread_local std::vector<float> scratch;
  if (widen && scratch.size() < 2 * static_cast<size_t>(kTile) * d) {
    scratch.resize(2 * static_cast<size_t>(kTile) * d);
  }
  for (uint32_t t0 = 0; t0 < n; t0 += kTile) {
    const int64_t t1 = std::min<int64_t>(n, t0 + kTile);
    if (widen) {
      float* kt = scratch.data();
      float* vt = kt + static_cast<size_t>(kTile) * d;
      Widen<P>(k, v, t0, t1, ahead, d, kt, vt);
      const float* kst = kScaled ? ks + t0 : nullptr;
      const float* vst = kScaled ? vs + t0 : nullptr;
      for (uint32_t j = 0; j < n_jobs; ++j) {
        RowJob& job = jobs[j];
        const int64_t a = std::max<int64_t>(job.lo, t0), b = std::min<int64_t>(job.hi, t1);
        if (a >= b) continue;
        // Pair with the next job when it sees the same positions of this tile.
        if (j + 1 < n_jobs) {
          RowJob& nx = jobs[j + 1];
          if (std::max<int64_t>(nx.lo, t0) == a && std::min<int64_t>(nx.hi, t1) == b) {
            JobPairTile<kScaled>(job, nx, kt, vt, kst, vst, a - t0, b - t0, d, s, s2);
            ++j;
            continue;
          }
        }
        JobTile<Precision::kF32, kScaled>(job, kt, vt, kst, vst, a - t0, b - t0, d, nullptr, s);
      }
      continue;
    }
    for (uint32_t j = 0; j < n_jobs; ++j) {
      RowJob& job = jobs[j];
      const int64_t a = std::max<int64_t>(job.lo, t0), b = std::min<int64_t>(job.hi, t1);
      if (a >= b) continue;
      // The first job prefetches for all.
      JobTile<P, kScaled>(job, k, v, ks, vs, a, b, d, j == 0 ? &ahead : nullptr, s);
    }
  }
}

float DotAvx2(const float* a, const float* b, uint32_t d) {
  __m256 acc = _mm256_setzero_ps();
  uint32_t i = 0;
  for (; i + 8 <= d; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = HSum8(acc);
  for (; i < d; ++i) s += a[i] * b[i];
  return s;
}

float QuestAvx2(const float* q, const float* lo, const float* hi, uint32_t d) {
  __m256 acc = _mm256_setzero_ps();
  uint32_t i = 0;
  for (; i + 8 <= d; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    acc = _mm256_add_ps(acc, _mm256_max_ps(_mm256_mul_ps(qv, _mm256_loadu_ps(lo + i)),
                                           _mm256_mul_ps(qv, _mm256_loadu_ps(hi + i))));
  }
  float s = HSum8(acc);
  for (; i < d; ++i) s += std::max(q[i] * lo[i], q[i] * hi[i]);
  return s;
}

uint64_t StreamAvx2(const void* p, size_t bytes) {
  const uint8_t* c = static_cast<const uint8_t*>(p);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(c + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(c + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(c + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(c + i + 96)));
  }
  a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  uint64_t r = static_cast<uint64_t>(_mm256_extract_epi64(a0, 0)) ^
               static_cast<uint64_t>(_mm256_extract_epi64(a0, 1)) ^
               static_cast<uint64_t>(_mm256_extract_epi64(a0, 2)) ^
               static_cast<uint64_t>(_mm256_extract_epi64(a0, 3));
  for (; i < bytes; ++i) r ^= c[i];
  return r;
}

// (x & 0x7C00) == 0x7C00 marks an inf/NaN half; four vectors per step, one test at
// the end (the check is on the KV.PREFIX.WARM path for every value).
bool FiniteF16Avx2(const uint16_t* x, size_t n) {
  const __m256i m = _mm256_set1_epi16(0x7C00);
  __m256i b0 = _mm256_setzero_si256(), b1 = b0, b2 = b0, b3 = b0;
  auto at = [&](size_t i) {
    return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), m);
  };
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    b0 = _mm256_or_si256(b0, _mm256_cmpeq_epi16(at(i), m));
    b1 = _mm256_or_si256(b1, _mm256_cmpeq_epi16(at(i + 16), m));
    b2 = _mm256_or_si256(b2, _mm256_cmpeq_epi16(at(i + 32), m));
    b3 = _mm256_or_si256(b3, _mm256_cmpeq_epi16(at(i + 48), m));
  }
  for (; i + 16 <= n; i += 16) b0 = _mm256_or_si256(b0, _mm256_cmpeq_epi16(at(i), m));
  b0 = _mm256_or_si256(_mm256_or_si256(b0, b1), _mm256_or_si256(b2, b3));
  uint32_t bad = _mm256_testz_si256(b0, b0) ? 0u : 1u;
  for (; i < n; ++i) bad |= (x[i] & 0x7C00u) == 0x7C00u;
  return bad == 0;
}

// |x| < limit, ordered (a NaN compares false and fails).
bool AbsBelowAvx2(const float* x, size_t n, float limit) {
  const __m256 sign = _mm256_set1_ps(-0.0f), lim = _mm256_set1_ps(limit);
  __m256 ok0 = _mm256_castsi256_ps(_mm256_set1_epi32(-1)), ok1 = ok0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
    __m256 b = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i + 8));
    ok0 = _mm256_and_ps(ok0, _mm256_cmp_ps(a, lim, _CMP_LT_OQ));
    ok1 = _mm256_and_ps(ok1, _mm256_cmp_ps(b, lim, _CMP_LT_OQ));
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
    ok0 = _mm256_and_ps(ok0, _mm256_cmp_ps(a, lim, _CMP_LT_OQ));
  }
  if (_mm256_movemask_ps(_mm256_and_ps(ok0, ok1)) != 0xFF) return false;
  for (; i < n; ++i) {
    if (!(std::fabs(x[i]) < limit)) return false;
  }
  return true;
}

}  // namespace

const KernelSet kAvx2Kernels = {
    "avx2+fma+f16c",
    {RunAvx2<Precision::kF32>, RunAvx2<Precision::kF16>, RunAvx2<Precision::kInt8>},
    8,
    DotAvx2,
    QuestAvx2,
    StreamAvx2,
    FiniteF16Avx2,
    AbsBelowAvx2};

}  // namespace pion::attend::internal::x86
