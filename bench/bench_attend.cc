// bench_attend: the kernel rows of docs/attention.md §7 (src/attend), each next to a read-only
// streaming pass over the same slot bytes measured in the same run (the ceiling).
//
//   dense/<prec>/<N>        M = 1, H = 8, D = 128, one thread: µs/query, GB/s of K/V read
//   stream/<prec>/<N>       StreamRead over the same slot buffer (bytes/s ceiling)
//   threads/<T>/<N>         dense f16 split-KV on a T-thread ComputePool (the server's pool)
//   stream_threads/<T>/<N>  the streaming read cut over T threads (the pool's ceiling)
//   multi/<N>               M = 16, H_q = 32 over H_kv = 8, f16: GFLOP/s, bytes = one pass
//   sparse/<sel>/<N>        sparse auto, B = 64, K_top * B = N / 8, H = 8, f16, planted
//                           needle; counters recall (needle block picked) and mass (dense
//                           softmax mass inside the chosen blocks, mean over heads)
//   sparse_dense/<N>        the dense query on the same slot (the speed-up's baseline)
//
// K, V uniform in [-0.5, 0.5], Q in [-1, 1]; the needle block's keys are 3 * Q of their
// head. bytes_per_second = K/V bytes read per query * queries/s. bench/run.py's
// `attend` suite turns the JSON into the table (make bench SUITE=attend).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attend/attend.h"
#include "attend/compute_pool.h"

namespace {

using namespace pion::attend;

constexpr uint32_t kH = 8, kD = 128, kBlock = 64, kNeedle = 101;

std::vector<float> Uniform(size_t n, uint32_t seed, float amp) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-amp, amp);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// One slot alive at a time (the f32 one at N = 32,768 is 268 MB).
struct Fixture {
  Precision p;
  uint32_t n;
  bool needle;
  std::unique_ptr<Slot> slot;
  std::vector<float> q;  // [kH][kD]
};
Fixture* g_fix = nullptr;

const Fixture& Get(Precision p, uint32_t n, bool needle) {
  if (g_fix && g_fix->p == p && g_fix->n == n && g_fix->needle == needle) return *g_fix;
  delete g_fix;
  g_fix = nullptr;
  auto* f = new Fixture{p, n, needle, std::make_unique<Slot>(), Uniform(32 * 16 * kD, 3, 1.0f)};
  std::vector<float> k = Uniform(static_cast<size_t>(kH) * n * kD, 1, 0.5f);
  std::vector<float> v = Uniform(static_cast<size_t>(kH) * n * kD, 2, 0.5f);
  if (needle) {
    for (uint32_t h = 0; h < kH; ++h) {
      for (uint32_t t = kNeedle * kBlock; t < (kNeedle + 1) * kBlock && t < n; ++t) {
        for (uint32_t x = 0; x < kD; ++x) {
          k[(static_cast<size_t>(h) * n + t) * kD + x] = 3.0f * f->q[h * kD + x];
        }
      }
    }
  }
  if (!f->slot->StoreF32(p, kH, n, kD, k.data(), v.data()).ok()) std::abort();
  g_fix = f;
  return *f;
}

AttendRequest Dense(const Fixture& f, uint32_t h_q = kH, uint32_t m = 1) {
  AttendRequest r;
  r.q = f.q.data();
  r.h_q = h_q;
  r.m = m;
  r.d = kD;
  return r;
}

void Finish(benchmark::State& st, const Fixture& f) {
  const double bytes = static_cast<double>(f.slot->kv_bytes());
  st.SetBytesProcessed(static_cast<int64_t>(bytes * st.iterations()));
  st.counters["us_per_query"] =
      benchmark::Counter(static_cast<double>(st.iterations()) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  st.counters["kv_bytes"] = bytes;
}

void BmDense(benchmark::State& st, Precision p, uint32_t n) {
  const Fixture& f = Get(p, n, false);
  AttendRequest r = Dense(f);
  std::vector<float> out(kH * kD), lse(kH);
  for (auto _ : st) {
    pion::Status s = Attend(*f.slot, r, out.data(), lse.data());
    benchmark::DoNotOptimize(s.ok());
    benchmark::DoNotOptimize(out.data());
  }
  Finish(st, f);
}

void BmStream(benchmark::State& st, Precision p, uint32_t n) {
  const Fixture& f = Get(p, n, false);
  for (auto _ : st) benchmark::DoNotOptimize(StreamRead(f.slot->data(), f.slot->kv_bytes()));
  Finish(st, f);
}

void BmThreads(benchmark::State& st, uint32_t threads, uint32_t n) {
  const Fixture& f = Get(Precision::kF16, n, false);
  ComputePool pool(threads, "bench");
  AttendOptions opt;
  opt.executor = &pool;
  AttendRequest r = Dense(f);
  std::vector<float> out(kH * kD), lse(kH);
  for (auto _ : st) {
    pion::Status s = Attend(*f.slot, r, out.data(), lse.data(), opt);
    benchmark::DoNotOptimize(s.ok());
  }
  Finish(st, f);
}

// The 2-thread ceiling: the same read-only pass cut in halves on the pool.
void BmStreamThreads(benchmark::State& st, uint32_t threads, uint32_t n) {
  const Fixture& f = Get(Precision::kF16, n, false);
  ComputePool pool(threads, "bench");
  const size_t bytes = f.slot->kv_bytes();
  const size_t part = (bytes / threads + 63) / 64 * 64;
  std::vector<uint64_t> sink(threads);
  for (auto _ : st) {
    pool.ParallelFor(threads, [&](uint32_t i) {
      const size_t b0 = std::min(bytes, part * i), b1 = std::min(bytes, b0 + part);
      sink[i] = StreamRead(f.slot->data() + b0, b1 - b0);
    });
    benchmark::DoNotOptimize(sink.data());
  }
  Finish(st, f);
}

void BmMulti(benchmark::State& st, uint32_t n) {
  const Fixture& f = Get(Precision::kF16, n, false);
  AttendRequest r = Dense(f, 32, 16);
  std::vector<float> out(32 * 16 * kD), lse(32 * 16);
  for (auto _ : st) {
    pion::Status s = Attend(*f.slot, r, out.data(), lse.data());
    benchmark::DoNotOptimize(s.ok());
  }
  Finish(st, f);
  // QK^T and PV: 2 multiply-adds per (query row, position, dim).
  st.counters["GFLOP/s"] = benchmark::Counter(4.0 * 32 * 16 * n * kD * st.iterations() * 1e-9,
                                              benchmark::Counter::kIsRate);
}

// Dense softmax mass (double) of the positions in `blocks`, mean over heads.
double RetainedMass(const Fixture& f, const std::vector<uint32_t>& blocks) {
  const Slot& s = *f.slot;
  double total = 0.0;
  std::vector<double> sc(f.n);
  for (uint32_t h = 0; h < kH; ++h) {
    double mx = -1e300;
    for (uint32_t t = 0; t < f.n; ++t) {
      double dot = 0.0;
      for (uint32_t x = 0; x < kD; ++x)
        dot += f.q[h * kD + x] * static_cast<double>(s.KAt(h, t, x));
      sc[t] = dot / std::sqrt(static_cast<double>(kD));
      mx = std::max(mx, sc[t]);
    }
    double sum = 0.0, kept = 0.0;
    for (uint32_t t = 0; t < f.n; ++t) sum += std::exp(sc[t] - mx);
    for (uint32_t b : blocks) {
      for (uint32_t t = b * kBlock; t < (b + 1) * kBlock && t < f.n; ++t)
        kept += std::exp(sc[t] - mx);
    }
    total += kept / sum;
  }
  return total / kH;
}

void BmSparse(benchmark::State& st, Selector sel, uint32_t n) {
  const Fixture& f = Get(Precision::kF16, n, true);
  AttendRequest r = Dense(f);
  r.sparse_auto = true;
  r.block = kBlock;
  r.k_top = n / 8 / kBlock;
  r.selector = sel;
  std::vector<float> out(kH * kD), lse(kH);
  std::vector<uint32_t> blocks;
  if (!SelectBlocks(*f.slot, r, &blocks).ok()) {
    st.SkipWithError("select failed");
    return;
  }
  for (auto _ : st) {
    pion::Status s = Attend(*f.slot, r, out.data(), lse.data());
    benchmark::DoNotOptimize(s.ok());
  }
  Finish(st, f);
  st.counters["recall"] =
      std::find(blocks.begin(), blocks.end(), kNeedle) != blocks.end() ? 1.0 : 0.0;
  st.counters["mass"] = RetainedMass(f, blocks);
  st.counters["blocks"] = static_cast<double>(blocks.size());
}

void BmSparseDense(benchmark::State& st, uint32_t n) {
  const Fixture& f = Get(Precision::kF16, n, true);
  AttendRequest r = Dense(f);
  std::vector<float> out(kH * kD), lse(kH);
  for (auto _ : st) {
    pion::Status s = Attend(*f.slot, r, out.data(), lse.data());
    benchmark::DoNotOptimize(s.ok());
  }
  Finish(st, f);
}

void Register() {
  const Precision precs[] = {Precision::kF32, Precision::kF16, Precision::kInt8};
  for (Precision p : precs) {
    for (uint32_t n : {2048u, 32768u}) {
      const std::string tag = std::string(PrecisionName(p)) + "/" + std::to_string(n);
      // Stream right after dense on the same slot: same bytes, same run.
      benchmark::RegisterBenchmark(("dense/" + tag).c_str(), BmDense, p, n)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("stream/" + tag).c_str(), BmStream, p, n)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (uint32_t n : {2048u, 32768u}) {
    for (uint32_t t : {1u, 2u}) {
      benchmark::RegisterBenchmark(
          ("threads/" + std::to_string(t) + "/" + std::to_string(n)).c_str(), BmThreads, t, n)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime()
          ->MeasureProcessCPUTime();  // CPU column: all threads (the split's overhead)
    }
  }
  for (uint32_t t : {1u, 2u}) {
    benchmark::RegisterBenchmark(("stream_threads/" + std::to_string(t) + "/32768").c_str(),
                                 BmStreamThreads, t, 32768u)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime()
        ->MeasureProcessCPUTime();
  }
  for (uint32_t n : {2048u, 32768u}) {
    benchmark::RegisterBenchmark(("multi/" + std::to_string(n)).c_str(), BmMulti, n)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("sparse_dense/32768", BmSparseDense, 32768u)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("sparse/block_mean/32768", BmSparse, Selector::kBlockMean, 32768u)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("sparse/quest/32768", BmSparse, Selector::kQuest, 32768u)
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("%s", "");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  delete g_fix;
  return 0;
}
