// Scalar reference encoder/decoder of turbo4/3/2 (see turbo.h). This is the definition; the
// AVX2 kernels in x86/turbo_avx2.cc produce the same bytes and floats.
#include "quant/turbo.h"

#include <cmath>

#include "base/fp16.h"
#include "quant/kernels.h"
#include "quant/rht.h"

namespace pion::quant {

uint16_t TurboScaleBits(float n2, float dot, float post) {
  float s = (n2 / dot) * post;
  if (!(s <= kF16Max)) s = kF16Max;  // also catches inf
  return F32ToF16(s);
}

namespace {

template <int kBits>
void PackCodes(const uint8_t idx[32], uint8_t* out) {
  if constexpr (kBits == 4) {
    for (int i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>(idx[2 * i] | (idx[2 * i + 1] << 4));
  } else if constexpr (kBits == 2) {
    for (int i = 0; i < 8; ++i) {
      out[i] = static_cast<uint8_t>(idx[4 * i] | (idx[4 * i + 1] << 2) | (idx[4 * i + 2] << 4) |
                                    (idx[4 * i + 3] << 6));
    }
  } else {
    for (int i = 0; i < 8; ++i) {
      out[i] = static_cast<uint8_t>((idx[4 * i] & 3) | ((idx[4 * i + 1] & 3) << 2) |
                                    ((idx[4 * i + 2] & 3) << 4) | ((idx[4 * i + 3] & 3) << 6));
    }
    for (int i = 0; i < 4; ++i) {
      uint8_t b = 0;
      for (int k = 0; k < 8; ++k) b |= static_cast<uint8_t>(((idx[8 * i + k] >> 2) & 1) << k);
      out[8 + i] = b;
    }
  }
}

template <int kBits>
void UnpackCodes(const uint8_t* in, uint8_t idx[32]) {
  for (int i = 0; i < 32; ++i) {
    if constexpr (kBits == 4) {
      idx[i] = (in[i / 2] >> (4 * (i % 2))) & 0xF;
    } else if constexpr (kBits == 2) {
      idx[i] = (in[i / 4] >> (2 * (i % 4))) & 3;
    } else {
      idx[i] = static_cast<uint8_t>(((in[i / 4] >> (2 * (i % 4))) & 3) |
                                    (((in[8 + i / 8] >> (i % 8)) & 1) << 2));
    }
  }
}

template <int kBits>
bool EncodeRow(const float* x, uint32_t dim, uint8_t* dst) {
  const float* cb = Codebook<kBits>();
  constexpr size_t kBlockBytes = sizeof(BlockTurbo<kBits>);

  float absmax = 0.0f;
  for (uint32_t i = 0; i < dim; ++i) {
    if (!IsFinite(x[i])) return false;
    absmax = std::fabs(x[i]) > absmax ? std::fabs(x[i]) : absmax;
  }
  const bool huge = absmax > kTurboHugeAbs;
  const float pre = huge ? kTurboHugeDown : 1.0f;
  const float post = huge ? kTurboHugeUp : 1.0f;

  const uint32_t r = rht::BlockSize(dim);
  float acc_hdr[8] = {};
  uint8_t* block = dst + kTurboHeaderBytes;
  float xin[rht::kMaxBlock];
  float y[rht::kMaxBlock];
  for (uint32_t b0 = 0; b0 < dim; b0 += r) {
    for (uint32_t i = 0; i < r; ++i) xin[i] = x[b0 + i] * pre;
    rht::ForwardRef(xin, r, y);
    for (uint32_t j = 0; j < r; j += 32, block += kBlockBytes) {
      const float* v = y + j;
      float acc[8] = {};
      for (int i = 0; i < 32; ++i) acc[i % 8] += v[i] * v[i];
      const float n2 = ReduceLanes8(acc);
      uint8_t idx[32] = {};
      uint16_t scale = 0;
      if (n2 > 0.0f) {
        const float k = kSqrt32 / std::sqrt(n2);
        float dacc[8] = {};
        for (int i = 0; i < 32; ++i) {
          const float u = v[i] * k;
          const int q = TurboIndex<kBits>(u);
          idx[i] = static_cast<uint8_t>(q);
          dacc[i % 8] += v[i] * cb[q];
        }
        const float dot = ReduceLanes8(dacc);
        if (dot > 0.0f) {
          scale = TurboScaleBits(n2, dot, post);
        } else {
          for (auto& q : idx) q = 0;
        }
      }
      StoreU16(block, scale);
      PackCodes<kBits>(idx, block + 2);
      const float s = F16ToF32(scale);
      for (int i = 0; i < 32; ++i) {
        const float w = s * cb[idx[i]];
        acc_hdr[i % 8] += w * w;
      }
    }
  }
  StoreF32(dst, ReduceLanes8(acc_hdr));
  return true;
}

template <int kBits>
void DecodeRow(const uint8_t* src, uint32_t dim, float* dst) {
  const float* cb = Codebook<kBits>();
  constexpr size_t kBlockBytes = sizeof(BlockTurbo<kBits>);
  const uint32_t r = rht::BlockSize(dim);
  const uint8_t* block = src + kTurboHeaderBytes;
  float y[rht::kMaxBlock];
  for (uint32_t b0 = 0; b0 < dim; b0 += r) {
    for (uint32_t j = 0; j < r; j += 32, block += kBlockBytes) {
      const float s = F16ToF32(LoadU16(block));
      uint8_t idx[32];
      UnpackCodes<kBits>(block + 2, idx);
      for (int i = 0; i < 32; ++i) y[j + i] = s * cb[idx[i]];
    }
    rht::InverseRef(y, r, dst + b0);
  }
}

}  // namespace

bool EncodeRowTurbo4Ref(const float* x, uint32_t dim, uint8_t* dst) {
  return EncodeRow<4>(x, dim, dst);
}
bool EncodeRowTurbo3Ref(const float* x, uint32_t dim, uint8_t* dst) {
  return EncodeRow<3>(x, dim, dst);
}
bool EncodeRowTurbo2Ref(const float* x, uint32_t dim, uint8_t* dst) {
  return EncodeRow<2>(x, dim, dst);
}
void DecodeRowTurbo4Ref(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<4>(src, dim, dst);
}
void DecodeRowTurbo3Ref(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<3>(src, dim, dst);
}
void DecodeRowTurbo2Ref(const uint8_t* src, uint32_t dim, float* dst) {
  DecodeRow<2>(src, dim, dst);
}

}  // namespace pion::quant
