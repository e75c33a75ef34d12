// bfloat16 as an input and output type of the codecs (EncodeRowsBF16 /
// DecodeRowsBF16): the conversions' rounding, the fast path against the scalar
// reference bit for bit, the error budgets of docs/quant_formats.md "Test data and budgets" measured on
// bf16 rows, and non-finite input. Built twice, as quant_test is: once with the
// CPU's own kernels and once forced to the scalar references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/cpu.h"
#include "quant/bf16.h"
#include "quant/format.h"
#include "quant/ref.h"
#include "quant/rht.h"

namespace pion::quant {
namespace {

#if PION_QUANT_FORCE_SCALAR
const bool kForceScalar = (TEST_DisableCpuFeatures(true), true);
#endif

constexpr Format kAll[] = {Format::kInt8, Format::kTurbo4, Format::kTurbo3, Format::kTurbo2,
                           Format::kFp16, Format::kFp8,    Format::kMlx4g32};

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t Next() { return rht::SplitMix64(s); }
  double Uniform() { return (Next() >> 11) * 0x1p-53; }
  double Gauss() {
    double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }
};

// Gaussian rows rounded to bf16 (what a bf16 engine holds).
std::vector<uint16_t> GaussianBf16(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint16_t> h(n);
  for (auto& v : h) v = F32ToBf16(static_cast<float>(rng.Gauss()));
  return h;
}

// Synthetic keys as quant_test's K-like rows: log-normal channel scales, outlier
// channels with a mean, a gain per row; rounded to bf16.
std::vector<uint16_t> KLikeBf16(size_t rows, uint32_t dim, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> scale(dim), mean(dim, 0.0);
  for (uint32_t c = 0; c < dim; ++c) scale[c] = std::exp(0.5 * rng.Gauss());
  for (uint32_t k = 0; k < dim * 24 / 1024; ++k) {
    const uint32_t c = static_cast<uint32_t>(rng.Next() % dim);
    scale[c] *= 4.5;
    mean[c] = (rng.Next() & 1 ? 3.0 : -3.0) * scale[c];
  }
  std::vector<uint16_t> h(rows * dim);
  for (size_t r = 0; r < rows; ++r) {
    const double gain = std::exp(0.3 * rng.Gauss());
    for (uint32_t c = 0; c < dim; ++c)
      h[r * dim + c] = F32ToBf16(static_cast<float>(gain * (mean[c] + scale[c] * rng.Gauss())));
  }
  return h;
}

double Nmse(const std::vector<uint16_t>& x, const std::vector<uint16_t>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = Bf16ToF32(x[i]), d = a - Bf16ToF32(y[i]);
    num += d * d;
    den += a * a;
  }
  return num / den;
}

std::vector<uint16_t> RoundTrip(Format f, const std::vector<uint16_t>& x, uint32_t dim) {
  const size_t rows = x.size() / dim;
  std::vector<uint8_t> b(rows * RowBytes(f, dim));
  Status s = EncodeRowsBF16(f, x.data(), rows, dim, b.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<uint16_t> y(x.size());
  DecodeRowsBF16(f, b.data(), rows, dim, y.data());
  return y;
}

TEST(QuantBf16, ConversionRoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(F32ToBf16(-2.0f), 0xC000);
  EXPECT_EQ(F32ToBf16(FromBits(0x3F808000)), 0x3F80);  // tie, even stays
  EXPECT_EQ(F32ToBf16(FromBits(0x3F818000)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(F32ToBf16(FromBits(0x3F808001)), 0x3F81);  // above the tie
  EXPECT_EQ(F32ToBf16(FromBits(0x7F7FFFFF)), 0x7F80);  // max f32 rounds to +inf
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(F32ToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(F32ToBf16(FromBits(0x7F800001)), 0x7FC0);  // signalling NaN -> quiet, never inf
  EXPECT_EQ(F32ToBf16(FromBits(0xFFFFFFFF)), 0xFFFF);
  EXPECT_EQ(F32ToBf16(FromBits(0x00000001)), 0x0000);  // denormal rounds to zero
  for (uint32_t h = 0; h < 0x10000; ++h) {             // widening then narrowing is the identity
    const float f = Bf16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F32ToBf16(f), h);
  }
}

TEST(QuantBf16, FastPathBitIdenticalToReference) {
  // Every format, dims with and without 8-lane tails, encode and decode; plus a
  // sweep of raw f32 bit patterns through the fp16 format's bf16 decode path.
  for (Format f : kAll) {
    for (uint32_t dim : {32u, 96u, 640u, 1024u}) {
      const size_t rows = 5;
      std::vector<uint16_t> x = GaussianBf16(rows * dim, dim + static_cast<int>(f));
      std::vector<uint8_t> fast(rows * RowBytes(f, dim)), ref(fast.size());
      ASSERT_TRUE(EncodeRowsBF16(f, x.data(), rows, dim, fast.data()).ok());
      ASSERT_TRUE(ref::EncodeRowsBF16(f, x.data(), rows, dim, ref.data()).ok());
      ASSERT_EQ(fast, ref) << FormatName(f) << " encode dim " << dim;
      std::vector<uint16_t> df(rows * dim), dr(rows * dim);
      DecodeRowsBF16(f, ref.data(), rows, dim, df.data());
      ref::DecodeRowsBF16(f, ref.data(), rows, dim, dr.data());
      ASSERT_EQ(df, dr) << FormatName(f) << " decode dim " << dim;
    }
  }
  for (uint32_t dim : {7u, 8u, 29u}) {  // int8 takes any dim: the scalar tails
    std::vector<uint16_t> x = GaussianBf16(3 * dim, dim);
    std::vector<uint8_t> fast(3 * RowBytes(Format::kInt8, dim)), ref(fast.size());
    ASSERT_TRUE(EncodeRowsBF16(Format::kInt8, x.data(), 3, dim, fast.data()).ok());
    ASSERT_TRUE(ref::EncodeRowsBF16(Format::kInt8, x.data(), 3, dim, ref.data()).ok());
    ASSERT_EQ(fast, ref) << dim;
    std::vector<uint16_t> df(3 * dim), dr(3 * dim);
    DecodeRowsBF16(Format::kInt8, ref.data(), 3, dim, df.data());
    ref::DecodeRowsBF16(Format::kInt8, ref.data(), 3, dim, dr.data());
    ASSERT_EQ(df, dr) << dim;
  }
  // fp16 rows of arbitrary bits (inf, NaN, denormals) decoded to bf16.
  constexpr uint32_t kDim = 4096;
  std::vector<uint8_t> rows(2 * kDim);
  Rng rng(77);
  for (auto& b : rows) b = static_cast<uint8_t>(rng.Next());
  std::vector<uint16_t> df(kDim), dr(kDim);
  DecodeRowsBF16(Format::kFp16, rows.data(), 1, kDim, df.data());
  ref::DecodeRowsBF16(Format::kFp16, rows.data(), 1, kDim, dr.data());
  ASSERT_EQ(df, dr);
}

TEST(QuantBf16, MisalignedBuffersGiveTheSameBytes) {
  constexpr uint32_t kDim = 128;
  const std::vector<uint16_t> x = GaussianBf16(2 * kDim, 5);
  for (Format f : kAll) {
    std::vector<uint8_t> a(2 * RowBytes(f, kDim)), b(a.size());
    ASSERT_TRUE(EncodeRowsBF16(f, x.data(), 2, kDim, a.data()).ok());
    std::vector<uint8_t> odd(x.size() * 2 + 1);
    std::memcpy(odd.data() + 1, x.data(), x.size() * 2);
    ASSERT_TRUE(EncodeRowsBF16(f, odd.data() + 1, 2, kDim, b.data()).ok());
    ASSERT_EQ(a, b) << FormatName(f);
    std::vector<uint16_t> y(x.size());
    DecodeRowsBF16(f, a.data(), 2, kDim, y.data());
    std::vector<uint8_t> yo(y.size() * 2 + 1);
    DecodeRowsBF16(f, a.data(), 2, kDim, yo.data() + 1);
    ASSERT_EQ(0, std::memcmp(yo.data() + 1, y.data(), y.size() * 2)) << FormatName(f);
  }
}

// docs/quant_formats.md §4.1 on bf16 rows, bf16 out. The output's own rounding to
// bf16 adds ~1.3e-6 (relative error up to 2^-9 per value), far below every
// quantized budget; fp16 stores a normal-range bf16 value exactly.
struct Budget {
  Format f;
  double gauss, klike;
  bool klike_lower;
};
constexpr Budget kBudgets[] = {
    {Format::kFp8, 5.7e-4, 1.6e-4, false},     {Format::kInt8, 6.1e-5, 8.9e-4, false},
    {Format::kMlx4g32, 6.1e-3, 1.4e-2, false}, {Format::kTurbo4, 8.3e-3, 7.5e-3, true},
    {Format::kTurbo3, 3.2e-2, 2.8e-2, true},   {Format::kTurbo2, 1.2e-1, 9.5e-2, true},
};

TEST(QuantBf16, ErrorBudgetsOnBf16Rows) {
  constexpr uint32_t kDim = 1024;
  const std::vector<uint16_t> g = GaussianBf16(2000 * kDim, 1);
  const std::vector<uint16_t> k = KLikeBf16(2000, kDim, 2);
  // (only values below fp16's normal range, |x| < 2^-14, lose bits)
  EXPECT_LE(Nmse(g, RoundTrip(Format::kFp16, g, kDim)), 4.3e-8);
  EXPECT_LE(Nmse(k, RoundTrip(Format::kFp16, k, kDim)), 4.3e-8);
  for (const Budget& b : kBudgets) {
    const double eg = Nmse(g, RoundTrip(b.f, g, kDim));
    const double ek = Nmse(k, RoundTrip(b.f, k, kDim));
    std::printf("bf16 nmse %-8s gaussian %.3e (table %.1e) k-like %.3e (table %.1e)\n",
                std::string(FormatName(b.f)).c_str(), eg, b.gauss, ek, b.klike);
    EXPECT_LE(eg, 1.15 * b.gauss) << FormatName(b.f);
    EXPECT_GE(eg, 0.85 * b.gauss) << FormatName(b.f);
    EXPECT_LE(ek, 1.15 * b.klike) << FormatName(b.f);
    if (b.klike_lower) {
      EXPECT_GE(ek, 0.85 * b.klike) << FormatName(b.f);
    }
  }
}

TEST(QuantBf16, NonFiniteRefusedExceptFp16) {
  constexpr uint32_t kDim = 64;
  for (uint16_t bad : {uint16_t{0x7F80}, uint16_t{0xFF80}, uint16_t{0x7FC0}}) {
    std::vector<uint16_t> x = GaussianBf16(3 * kDim, 9);
    x[2 * kDim + 17] = bad;
    for (Format f : kAll) {
      std::vector<uint8_t> out(3 * RowBytes(f, kDim));
      Status s = EncodeRowsBF16(f, x.data(), 3, kDim, out.data());
      if (f == Format::kFp16) {
        EXPECT_TRUE(s.ok());
        std::vector<uint16_t> y(x.size());
        DecodeRowsBF16(f, out.data(), 3, kDim, y.data());
        EXPECT_EQ(y[2 * kDim + 17] & 0x7F80, 0x7F80);  // inf stays inf, NaN stays NaN
        EXPECT_EQ(std::isnan(Bf16ToF32(y[2 * kDim + 17])), std::isnan(Bf16ToF32(bad)));
      } else {
        ASSERT_FALSE(s.ok()) << FormatName(f);
        EXPECT_EQ(s.message(), "non-finite value in row 2") << FormatName(f);
      }
    }
  }
}

}  // namespace
}  // namespace pion::quant
