// Scalar reference of fp16 (see fp16.h): base/fp16.h conversions.
#include "quant/fp16.h"

#include "base/fp16.h"
#include "quant/kernels.h"

namespace pion::quant {

bool EncodeRowFp16Ref(const float* x, uint32_t dim, uint8_t* dst) {
  for (uint32_t i = 0; i < dim; ++i) StoreU16(dst + 2 * i, F32ToF16(x[i]));
  return true;
}

void DecodeRowFp16Ref(const uint8_t* src, uint32_t dim, float* dst) {
  for (uint32_t i = 0; i < dim; ++i) dst[i] = F16ToF32(LoadU16(src + 2 * i));
}

}  // namespace pion::quant
