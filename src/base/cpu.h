// CPU feature detection, done once (cpuid + xgetbv). Fast kernels are chosen at
// start-up from these bits; the default build never assumes them (no -march=native).
#pragma once

#include <string>

namespace pion {

// kVpclmul: VPCLMULQDQ on 512-bit registers (with AVX-512F and PCLMULQDQ).
enum class CpuFeature { kSse42, kAvx2, kFma, kF16c, kAvx512f, kVpclmul };

bool CpuHas(CpuFeature f);
// "avx2 fma f16c sse4.2" style summary for the start-up log.
std::string CpuSummary();
// Test hook: pretend the CPU has none of the optional features (forces scalar paths).
void TEST_DisableCpuFeatures(bool disable);

}  // namespace pion
