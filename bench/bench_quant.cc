// bench_quant: encode and decode throughput of every storage format (src/quant) at dims
// 128, 1024 and 8192 on one core, next to memcpy of the same f32 bytes in the same run.
// items/s = elements/s. Each iteration converts a batch of 131072 elements (rows =
// 131072 / dim), so source and destination stay in L2 ("hot"), as the targets of
// docs/quant_formats.md §6 assume. The *_off1 cases read the f32 input / write the f32 output one
// byte past an aligned address, as the server does in place in its network buffers (the rows then
// go through an aligned scratch row). Run: make bench-quant (or
// build/release/bin/bench_quant).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "quant/format.h"

namespace {

using pion::quant::Format;

constexpr size_t kBatchElems = 131072;
constexpr uint32_t kDims[] = {128, 1024, 8192};

std::vector<float> Input(size_t n) {
  std::vector<float> x(n);
  uint64_t s = 42;
  for (float& v : x) {  // roughly Gaussian: sum of 4 uniforms, centred
    double acc = 0;
    for (int k = 0; k < 4; ++k) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      acc += static_cast<double>(s >> 11) * 0x1p-53;
    }
    v = static_cast<float>((acc - 2.0) * 1.7320508);
  }
  return x;
}

void BmEncode(benchmark::State& st, Format f, uint32_t dim, size_t offset) {
  const size_t rows = kBatchElems / dim;
  const std::vector<float> x = Input(rows * dim);
  std::vector<uint8_t> in(x.size() * sizeof(float) + 8);
  std::memcpy(in.data() + offset, x.data(), x.size() * sizeof(float));
  std::vector<uint8_t> out(rows * pion::quant::RowBytes(f, dim));
  for (auto _ : st) {
    pion::Status s = pion::quant::EncodeRows(f, in.data() + offset, rows, dim, out.data());
    benchmark::DoNotOptimize(s.ok());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * rows * dim));
  st.counters["bytes_per_row"] = static_cast<double>(pion::quant::RowBytes(f, dim));
}

void BmDecode(benchmark::State& st, Format f, uint32_t dim, size_t offset, bool f16) {
  const size_t rows = kBatchElems / dim;
  const std::vector<float> x = Input(rows * dim);
  std::vector<uint8_t> enc(rows * pion::quant::RowBytes(f, dim));
  if (!pion::quant::EncodeRows(f, x.data(), rows, dim, enc.data()).ok()) {
    st.SkipWithError("encode failed");
    return;
  }
  std::vector<uint8_t> out(rows * dim * sizeof(float) + 8);
  for (auto _ : st) {
    if (f16) {  // straight into f16 (what a KV.PREFIX.WARM into f16 slots does)
      pion::quant::DecodeRowsF16(f, enc.data(), rows, dim, out.data() + offset);
    } else {
      pion::quant::DecodeRows(f, enc.data(), rows, dim, out.data() + offset);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * rows * dim));
}

// memcpy of the f32 batch (what a decode writes), the yardstick of the same run.
void BmMemcpy(benchmark::State& st, uint32_t dim) {
  const size_t rows = kBatchElems / dim;
  const std::vector<float> x = Input(rows * dim);
  std::vector<float> out(rows * dim);
  for (auto _ : st) {
    std::memcpy(out.data(), x.data(), x.size() * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * rows * dim));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("quant_kernels", std::string(pion::quant::KernelName()));
  for (uint32_t dim : kDims) {
    const std::string d = std::to_string(dim);
    benchmark::RegisterBenchmark(("memcpy_f32/" + d).c_str(), BmMemcpy, dim);
    for (int i = 0; i < pion::quant::kNumFormats; ++i) {
      const Format f = static_cast<Format>(i);
      const std::string name(pion::quant::FormatName(f));
      benchmark::RegisterBenchmark(("decode/" + name + "/" + d).c_str(), BmDecode, f, dim, 0,
                                   false);
      benchmark::RegisterBenchmark(("encode/" + name + "/" + d).c_str(), BmEncode, f, dim, 0);
      if (dim == 1024) {
        benchmark::RegisterBenchmark(("decode_off1/" + name + "/" + d).c_str(), BmDecode, f, dim, 1,
                                     false);
        benchmark::RegisterBenchmark(("decode_f16/" + name + "/" + d).c_str(), BmDecode, f, dim, 0,
                                     true);
        benchmark::RegisterBenchmark(("encode_off1/" + name + "/" + d).c_str(), BmEncode, f, dim,
                                     1);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
