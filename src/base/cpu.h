// CPU feature detection, done once (cpuid + xgetbv). Fast kernels are chosen at
// start-up from these bits; the default build never assumes them (no -march=native).
#pragma once

#include <string>
#include <string_view>

namespace pion {

// kVpclmul: VPCLMULQDQ on 512-bit registers (with AVX-512F and PCLMULQDQ).
// kPclmul: PCLMULQDQ on 128-bit registers (with SSSE3).
enum class CpuFeature { kSse42, kAvx2, kFma, kF16c, kAvx512f, kVpclmul, kPclmul };

// What the CPU has, less what PION_CPU_DISABLE turned off (read once, at the
// first call) and less what a test turned off.
bool CpuHas(CpuFeature f);

// PION_CPU_DISABLE's syntax: a comma-separated list of avx512 (AVX-512F and
// VPCLMULQDQ), vpclmulqdq, pclmul, avx2, fma, f16c, or all (every optional
// feature; SSE4.2 is never turned off). Sets *mask to the bits
// (1 << CpuFeature) to turn off; false for an unknown name (the other names
// still count).
bool ParseCpuDisable(std::string_view list, unsigned* mask);
// The cores to use where a setting's 0 means "one per core" (--workers,
// --attend-threads, snapshot-verify-threads): the hardware's thread count,
// at least 1.
unsigned CoreCount();
// "avx2 fma f16c sse4.2" style summary for the start-up log.
std::string CpuSummary();
// Test hook: pretend the CPU has none of the optional features (forces scalar paths).
void TEST_DisableCpuFeatures(bool disable);
// Test hook: turn single features off (bits 1 << CpuFeature; 0 restores them),
// e.g. AVX-512 alone, to test the fallback each CPU generation takes.
void TEST_SetCpuFeaturesOff(unsigned mask);

}  // namespace pion
