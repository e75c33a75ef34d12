// The traits table (one row per Format: name, dim rule, bytes per row, reference and
// fast row kernels) and the row loops behind format.h. The fast kernels are chosen
// once, on first use, from pion::CpuHas: AVX2 + FMA + F16C -> x86/*_avx2.cc, anything
// else -> the scalar references. ref.h exposes the reference path unconditionally.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/cpu.h"
#include "base/fp16.h"
#include "quant/bf16.h"
#include "quant/format.h"
#include "quant/fp16.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/kernels.h"
#include "quant/mlx4g32.h"
#include "quant/ref.h"
#include "quant/turbo.h"
#if PION_QUANT_X86
#include "quant/x86/avx2.h"
#endif

namespace pion::quant {
namespace {

struct FormatTraits {
  Format format;
  std::string_view name;
  uint32_t dim_multiple;  // dim must be a multiple of this
  bool refuses_non_finite;
  size_t (*row_bytes)(uint32_t dim);
  RowKernels ref;
  RowKernels avx2;  // {nullptr, nullptr} when not built for x86
};

#if PION_QUANT_X86
#define PION_AVX2(enc, dec) \
  RowKernels { x86::enc, x86::dec }
#define PION_AVX2_F16(enc, dec, dec16) \
  RowKernels { x86::enc, x86::dec, x86::dec16 }
#else
#define PION_AVX2_F16(enc, dec, dec16) \
  RowKernels { nullptr, nullptr }
#define PION_AVX2(enc, dec) \
  RowKernels { nullptr, nullptr }
#endif

constexpr std::array<FormatTraits, kNumFormats> kTraits = {{
    {Format::kInt8,
     "int8",
     1,
     true,
     [](uint32_t d) { return Int8RowBytes(d); },
     {EncodeRowInt8Ref, DecodeRowInt8Ref},
     PION_AVX2(EncodeRowInt8Avx2, DecodeRowInt8Avx2)},
    {Format::kTurbo4,
     "turbo4",
     32,
     true,
     [](uint32_t d) { return TurboRowBytes(4, d); },
     {EncodeRowTurbo4Ref, DecodeRowTurbo4Ref},
     PION_AVX2_F16(EncodeRowTurbo4Avx2, DecodeRowTurbo4Avx2, DecodeRowF16Turbo4Avx2)},
    {Format::kTurbo3,
     "turbo3",
     32,
     true,
     [](uint32_t d) { return TurboRowBytes(3, d); },
     {EncodeRowTurbo3Ref, DecodeRowTurbo3Ref},
     PION_AVX2_F16(EncodeRowTurbo3Avx2, DecodeRowTurbo3Avx2, DecodeRowF16Turbo3Avx2)},
    {Format::kTurbo2,
     "turbo2",
     32,
     true,
     [](uint32_t d) { return TurboRowBytes(2, d); },
     {EncodeRowTurbo2Ref, DecodeRowTurbo2Ref},
     PION_AVX2_F16(EncodeRowTurbo2Avx2, DecodeRowTurbo2Avx2, DecodeRowF16Turbo2Avx2)},
    {Format::kFp16,
     "fp16",
     1,
     false,
     [](uint32_t d) { return Fp16RowBytes(d); },
     {EncodeRowFp16Ref, DecodeRowFp16Ref},
     PION_AVX2(EncodeRowFp16Avx2, DecodeRowFp16Avx2)},
    {Format::kFp8,
     "fp8",
     32,
     true,
     [](uint32_t d) { return Fp8RowBytes(d); },
     {EncodeRowFp8Ref, DecodeRowFp8Ref},
     PION_AVX2_F16(EncodeRowFp8Avx2, DecodeRowFp8Avx2, DecodeRowF16Fp8Avx2)},
    {Format::kMlx4g32,
     "mlx4g32",
     32,
     true,
     [](uint32_t d) { return Mlx4g32RowBytes(d); },
     {EncodeRowMlx4g32Ref, DecodeRowMlx4g32Ref},
     PION_AVX2_F16(EncodeRowMlx4g32Avx2, DecodeRowMlx4g32Avx2, DecodeRowF16Mlx4g32Avx2)},
}};
#undef PION_AVX2
#undef PION_AVX2_F16

constexpr bool TableInOrder() {
  for (int i = 0; i < kNumFormats; ++i) {
    if (static_cast<int>(kTraits[i].format) != i) return false;
  }
  return true;
}
static_assert(TableInOrder(), "row i of kTraits must describe Format i");

const FormatTraits& Traits(Format f) { return kTraits[static_cast<size_t>(f)]; }

using F32ToF16Fn = void (*)(const float* x, uint32_t n, uint16_t* dst);
using F16ToF32Fn = void (*)(const uint16_t* x, uint32_t n, float* dst);

void F32ToF16Ref(const float* x, uint32_t n, uint16_t* dst) {
  for (uint32_t i = 0; i < n; ++i) dst[i] = F32ToF16(x[i]);
}
void F16ToF32Ref(const uint16_t* x, uint32_t n, float* dst) {
  for (uint32_t i = 0; i < n; ++i) dst[i] = F16ToF32(x[i]);
}
void F32ToBf16Ref(const float* x, uint32_t n, uint16_t* dst) {
  for (uint32_t i = 0; i < n; ++i) dst[i] = F32ToBf16(x[i]);
}
void Bf16ToF32Ref(const uint16_t* x, uint32_t n, float* dst) {
  for (uint32_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(x[i]);
}

// One complete set of kernels: the references, or the fast path of this CPU.
struct KernelSet {
  std::string_view name;
  std::array<RowKernels, kNumFormats> rows;
  F32ToF16Fn to_f16;
  F16ToF32Fn to_f32;
  F32ToF16Fn to_bf16;  // the same signatures, for bfloat16
  F16ToF32Fn bf16_to_f32;
  bool any_alignment;  // the kernels take f32/f16 arrays at any address (kernels.h)
};

KernelSet MakeRefSet() {
  KernelSet k{"scalar", {}, F32ToF16Ref, F16ToF32Ref, F32ToBf16Ref, Bf16ToF32Ref, false};
  for (int i = 0; i < kNumFormats; ++i) k.rows[i] = kTraits[i].ref;
  return k;
}

KernelSet PickFastSet() {
  KernelSet k = MakeRefSet();
#if PION_QUANT_X86
  if (CpuHas(CpuFeature::kAvx2) && CpuHas(CpuFeature::kF16c) && CpuHas(CpuFeature::kFma)) {
    k.name = "avx2+f16c+fma";
    for (int i = 0; i < kNumFormats; ++i) k.rows[i] = kTraits[i].avx2;
    k.to_f16 = x86::F32ToF16Avx2;
    k.to_f32 = x86::F16ToF32Avx2;
    k.to_bf16 = x86::F32ToBf16Avx2;
    k.bf16_to_f32 = x86::Bf16ToF32Avx2;
    k.any_alignment = true;
  }
#endif
  return k;
}

const KernelSet& RefSet() {
  static const KernelSet k = MakeRefSet();
  return k;
}
const KernelSet& FastSet() {
  static const KernelSet k = PickFastSet();
  return k;
}

// Scratch rows (kMaxDim values per thread): the f32 row between an f16 conversion
// and a row kernel, and the aligned copy of a caller's misaligned row.
float* ScratchRow() {
  alignas(64) static thread_local float buf[kMaxDim];
  return buf;
}
uint16_t* ScratchHalfRow() {
  alignas(64) static thread_local uint16_t buf[kMaxDim];
  return buf;
}

// Callers' f32/f16 arrays may start at any byte (format.h). The AVX2 kernels take
// them where they are; for the scalar references, which index them as float /
// uint16_t arrays, a misaligned row is copied to or from an aligned scratch row.
bool Usable(const KernelSet& k, const void* p, size_t align) {
  return k.any_alignment || reinterpret_cast<uintptr_t>(p) % align == 0;
}

Status NonFinite(size_t row) {
  return Status(Code::kInvalidArgument, Reason::kNonFinite, {row},
                "non-finite value in row " + std::to_string(row));
}

Status Encode(const KernelSet& k, Format f, const void* src, size_t rows, uint32_t dim,
              uint8_t* dst) {
  PION_DCHECK(DimSupported(f, dim));
  const size_t rb = RowBytes(f, dim);
  const EncodeRowFn enc = k.rows[static_cast<size_t>(f)].encode;
  if (Usable(k, src, alignof(float))) {
    const float* x = static_cast<const float*>(src);
    for (size_t r = 0; r < rows; ++r) {
      if (!enc(x + r * dim, dim, dst + r * rb)) return NonFinite(r);
    }
    return Status::OK();
  }
  const uint8_t* in = static_cast<const uint8_t*>(src);
  const size_t in_bytes = size_t{dim} * sizeof(float);
  float* tmp = ScratchRow();
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(tmp, in + r * in_bytes, in_bytes);
    if (!enc(tmp, dim, dst + r * rb)) return NonFinite(r);
  }
  return Status::OK();
}

// Encodes 16-bit input (f16 or bf16) widened to f32 by `widen`.
Status EncodeHalf(const KernelSet& k, F16ToF32Fn widen, Format f, const void* src, size_t rows,
                  uint32_t dim, uint8_t* dst) {
  const size_t rb = RowBytes(f, dim);
  const EncodeRowFn enc = k.rows[static_cast<size_t>(f)].encode;
  const bool direct = Usable(k, src, alignof(uint16_t));
  const uint8_t* in = static_cast<const uint8_t*>(src);
  const size_t in_bytes = size_t{dim} * sizeof(uint16_t);
  float* tmp = ScratchRow();
  uint16_t* half = ScratchHalfRow();
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* h = half;
    if (direct) {
      h = static_cast<const uint16_t*>(src) + r * dim;
    } else {
      std::memcpy(half, in + r * in_bytes, in_bytes);
    }
    widen(h, dim, tmp);
    if (!enc(tmp, dim, dst + r * rb)) return NonFinite(r);
  }
  return Status::OK();
}

Status EncodeF16(const KernelSet& k, Format f, const void* src, size_t rows, uint32_t dim,
                 uint8_t* dst) {
  PION_DCHECK(DimSupported(f, dim));
  if (f == Format::kFp16) {
    std::memcpy(dst, src, rows * dim * sizeof(uint16_t));
    return Status::OK();
  }
  return EncodeHalf(k, k.to_f32, f, src, rows, dim, dst);
}

Status EncodeBF16(const KernelSet& k, Format f, const void* src, size_t rows, uint32_t dim,
                  uint8_t* dst) {
  PION_DCHECK(DimSupported(f, dim));
  return EncodeHalf(k, k.bf16_to_f32, f, src, rows, dim, dst);
}

void Decode(const KernelSet& k, Format f, const uint8_t* src, size_t rows, uint32_t dim,
            void* dst) {
  PION_DCHECK(DimSupported(f, dim));
  const size_t rb = RowBytes(f, dim);
  const DecodeRowFn dec = k.rows[static_cast<size_t>(f)].decode;
  if (Usable(k, dst, alignof(float))) {
    float* y = static_cast<float*>(dst);
    for (size_t r = 0; r < rows; ++r) dec(src + r * rb, dim, y + r * dim);
    return;
  }
  uint8_t* out = static_cast<uint8_t*>(dst);
  const size_t out_bytes = size_t{dim} * sizeof(float);
  float* tmp = ScratchRow();
  for (size_t r = 0; r < rows; ++r) {
    dec(src + r * rb, dim, tmp);
    std::memcpy(out + r * out_bytes, tmp, out_bytes);
  }
}

void DecodeF16(const KernelSet& k, Format f, const uint8_t* src, size_t rows, uint32_t dim,
               void* dst) {
  PION_DCHECK(DimSupported(f, dim));
  if (f == Format::kFp16) {
    std::memcpy(dst, src, rows * dim * sizeof(uint16_t));
    return;
  }
  const size_t rb = RowBytes(f, dim);
  const DecodeRowFn dec = k.rows[static_cast<size_t>(f)].decode;
  const DecodeRowF16Fn dec16 = k.rows[static_cast<size_t>(f)].decode_f16;
  const bool direct = Usable(k, dst, alignof(uint16_t));
  uint8_t* out = static_cast<uint8_t*>(dst);
  const size_t out_bytes = size_t{dim} * sizeof(uint16_t);
  if (dec16 != nullptr && k.any_alignment) {  // straight to f16, any address (kernels.h)
    uint16_t* h = static_cast<uint16_t*>(dst);
    for (size_t r = 0; r < rows; ++r) {
      // The stored rows are usually cold (a WARM reads the V-store once): ask for the
      // row after next while this one decodes.
      if (r + 2 < rows) {
        const uint8_t* next = src + (r + 2) * rb;
        for (size_t off = 0; off < rb; off += 64) __builtin_prefetch(next + off);
      }
      dec16(src + r * rb, dim, h + r * dim);
    }
    return;
  }
  float* tmp = ScratchRow();
  uint16_t* half = ScratchHalfRow();
  for (size_t r = 0; r < rows; ++r) {
    dec(src + r * rb, dim, tmp);
    if (direct) {
      k.to_f16(tmp, dim, static_cast<uint16_t*>(dst) + r * dim);
    } else {
      k.to_f16(tmp, dim, half);
      std::memcpy(out + r * out_bytes, half, out_bytes);
    }
  }
}

// Decodes to bf16: the f32 decode of each row, narrowed.
void DecodeBF16(const KernelSet& k, Format f, const uint8_t* src, size_t rows, uint32_t dim,
                void* dst) {
  PION_DCHECK(DimSupported(f, dim));
  const size_t rb = RowBytes(f, dim);
  const DecodeRowFn dec = k.rows[static_cast<size_t>(f)].decode;
  const bool direct = Usable(k, dst, alignof(uint16_t));
  uint8_t* out = static_cast<uint8_t*>(dst);
  const size_t out_bytes = size_t{dim} * sizeof(uint16_t);
  float* tmp = ScratchRow();
  uint16_t* half = ScratchHalfRow();
  for (size_t r = 0; r < rows; ++r) {
    dec(src + r * rb, dim, tmp);
    if (direct) {
      k.to_bf16(tmp, dim, static_cast<uint16_t*>(dst) + r * dim);
    } else {
      k.to_bf16(tmp, dim, half);
      std::memcpy(out + r * out_bytes, half, out_bytes);
    }
  }
}

}  // namespace

std::string_view FormatName(Format f) { return Traits(f).name; }

std::optional<Format> ParseFormat(std::string_view name) {
  for (const FormatTraits& t : kTraits) {
    if (t.name.size() != name.size()) continue;
    bool eq = std::equal(name.begin(), name.end(), t.name.begin(), [](char a, char b) {
      return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
    });
    if (eq) return t.format;
  }
  return std::nullopt;
}

size_t RowBytes(Format f, uint32_t dim) { return Traits(f).row_bytes(dim); }

bool DimSupported(Format f, uint32_t dim) {
  return dim >= 1 && dim <= kMaxDim && dim % Traits(f).dim_multiple == 0;
}

Status EncodeRows(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst) {
  return Encode(FastSet(), f, src, rows, dim, dst);
}
Status EncodeRowsF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst) {
  return EncodeF16(FastSet(), f, src, rows, dim, dst);
}
void DecodeRows(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst) {
  Decode(FastSet(), f, src, rows, dim, dst);
}
void DecodeRowsF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst) {
  DecodeF16(FastSet(), f, src, rows, dim, dst);
}
Status EncodeRowsBF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst) {
  return EncodeBF16(FastSet(), f, src, rows, dim, dst);
}
void DecodeRowsBF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst) {
  DecodeBF16(FastSet(), f, src, rows, dim, dst);
}
std::string_view KernelName() { return FastSet().name; }

namespace ref {
Status EncodeRows(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst) {
  return Encode(RefSet(), f, src, rows, dim, dst);
}
Status EncodeRowsF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst) {
  return EncodeF16(RefSet(), f, src, rows, dim, dst);
}
void DecodeRows(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst) {
  Decode(RefSet(), f, src, rows, dim, dst);
}
void DecodeRowsF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst) {
  DecodeF16(RefSet(), f, src, rows, dim, dst);
}
Status EncodeRowsBF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst) {
  return EncodeBF16(RefSet(), f, src, rows, dim, dst);
}
void DecodeRowsBF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst) {
  DecodeBF16(RefSet(), f, src, rows, dim, dst);
}
}  // namespace ref

}  // namespace pion::quant
