#include "base/cpu.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace pion {

namespace {

struct Features {
  bool sse42 = false, avx2 = false, fma = false, f16c = false, avx512f = false, vpclmul = false,
       pclmul = false;
};

Features Detect() {
  Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse42 = c & bit_SSE4_2;
  bool osxsave = c & bit_OSXSAVE;
  bool avx = c & bit_AVX;
  f.fma = c & bit_FMA;
  f.f16c = c & bit_F16C;
  const bool pclmul = c & bit_PCLMUL;
  f.pclmul = pclmul && (c & bit_SSSE3);
  bool ymm_ok = false, zmm_ok = false;
  if (osxsave) {
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    ymm_ok = (lo & 0x6) == 0x6;
    zmm_ok = (lo & 0xE6) == 0xE6;
  }
  if (!(avx && ymm_ok)) f.fma = f.f16c = false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = avx && ymm_ok && (b & bit_AVX2);
    f.avx512f = zmm_ok && (b & bit_AVX512F);
    f.vpclmul = f.avx512f && pclmul && (c & bit_VPCLMULQDQ);
  }
  return f;
}

const Features& Get() {
  static const Features f = Detect();
  return f;
}

constexpr unsigned Bit(CpuFeature f) { return 1u << static_cast<unsigned>(f); }
constexpr unsigned kAllOptional = ~Bit(CpuFeature::kSse42);

// PION_CPU_DISABLE, read once.
unsigned EnvOff() {
  static const unsigned off = [] {
    unsigned m = 0;
    const char* v = std::getenv("PION_CPU_DISABLE");
    if (v != nullptr && !ParseCpuDisable(v, &m))
      std::fprintf(stderr, "PION_CPU_DISABLE: unknown feature name in \"%s\" (ignored)\n", v);
    return m;
  }();
  return off;
}

std::atomic<bool> g_disabled{false};
std::atomic<unsigned> g_test_off{0};

}  // namespace

bool ParseCpuDisable(std::string_view list, unsigned* mask) {
  *mask = 0;
  bool ok = true;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.empty()) continue;
    if (name == "avx512")
      *mask |= Bit(CpuFeature::kAvx512f) | Bit(CpuFeature::kVpclmul);
    else if (name == "vpclmulqdq")
      *mask |= Bit(CpuFeature::kVpclmul);
    else if (name == "pclmul")
      *mask |= Bit(CpuFeature::kPclmul);
    else if (name == "avx2")
      *mask |= Bit(CpuFeature::kAvx2);
    else if (name == "fma")
      *mask |= Bit(CpuFeature::kFma);
    else if (name == "f16c")
      *mask |= Bit(CpuFeature::kF16c);
    else if (name == "all")
      *mask |= kAllOptional;
    else
      ok = false;
  }
  return ok;
}

bool CpuHas(CpuFeature feat) {
  const Features& f = Get();
  if (g_disabled.load(std::memory_order_relaxed) && feat != CpuFeature::kSse42) return false;
  const unsigned off = EnvOff() | g_test_off.load(std::memory_order_relaxed);
  if (off & kAllOptional & Bit(feat)) return false;
  switch (feat) {
    case CpuFeature::kSse42:
      return f.sse42;
    case CpuFeature::kAvx2:
      return f.avx2;
    case CpuFeature::kFma:
      return f.fma;
    case CpuFeature::kF16c:
      return f.f16c;
    case CpuFeature::kAvx512f:
      return f.avx512f;
    case CpuFeature::kVpclmul:
      return f.vpclmul;
    case CpuFeature::kPclmul:
      return f.pclmul;
  }
  return false;
}

std::string CpuSummary() {
  std::string s;
  auto add = [&](bool on, const char* n) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += n;
  };
  add(CpuHas(CpuFeature::kSse42), "sse4.2");
  add(CpuHas(CpuFeature::kAvx2), "avx2");
  add(CpuHas(CpuFeature::kFma), "fma");
  add(CpuHas(CpuFeature::kF16c), "f16c");
  add(CpuHas(CpuFeature::kAvx512f), "avx512f");
  add(CpuHas(CpuFeature::kVpclmul), "vpclmulqdq");
  add(CpuHas(CpuFeature::kPclmul), "pclmul");
  return s.empty() ? "none" : s;
}

void TEST_DisableCpuFeatures(bool disable) { g_disabled.store(disable); }

void TEST_SetCpuFeaturesOff(unsigned mask) { g_test_off.store(mask); }

unsigned CoreCount() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace pion
