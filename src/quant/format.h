// The seven storage formats of a K/V row (docs/quant_formats.md is the contract).
// A row is one token's
// kv_dim values of one layer. Every format is row-by-row and deterministic: the
// same input gives the same bytes on every run and on every code path (the AVX2
// kernels are bit-identical to the scalar references in quant/<format>.cc, which
// quant/ref.h exposes).
//
// Thread-safety: every function here is pure and may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "base/status.h"
#include "quant/reason.h"

namespace pion::quant {

// In-memory enum; contiguous so it can index the traits table. On-disk tags are
// defined separately by the persistence formats (docs/wal_format.md).
enum class Format : uint8_t {
  kInt8 = 0,
  kTurbo4 = 1,
  kTurbo3 = 2,
  kTurbo2 = 3,
  kFp16 = 4,
  kFp8 = 5,
  kMlx4g32 = 6,
};
inline constexpr int kNumFormats = 7;
inline constexpr uint32_t kMaxDim = 16384;

// "int8", "turbo4", ... (lower case, as users write them).
std::string_view FormatName(Format f);
// Case-insensitive parse of a format name; nullopt if unknown.
std::optional<Format> ParseFormat(std::string_view name);

// Bytes of one stored row of `dim` values (docs/quant_formats.md §3).
size_t RowBytes(Format f, uint32_t dim);
// Whether `dim` (1..kMaxDim) is valid for `f`: fp16 and int8 take any dim, the
// 32-block formats need dim % 32 == 0.
bool DimSupported(Format f, uint32_t dim);

// Buffers may start at any byte offset (a payload inside a network buffer, a reply
// after its RESP header): `src` and `dst` of the f32/f16 arrays below have no
// alignment requirement, and stored rows are byte arrays.
//
// Encodes `rows` rows of `dim` f32 values (row-major) into rows * RowBytes bytes
// at `dst`. Quantized formats refuse a non-finite input with InvalidArgument,
// Reason::kNonFinite, field 0 the row (counted from 0 within this call); then the
// contents of dst are unspecified; fp16 keeps IEEE semantics (never fails).
// REQUIRES: DimSupported(f, dim).
Status EncodeRows(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst);
// Same, from IEEE binary16 input (FMT F16 uploads). fp16 copies the bytes
// unchanged (bit-exact); other formats widen to f32 and encode.
Status EncodeRowsF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst);
// Same, from bfloat16 input (quant/bf16.h): every format, fp16 included, widens
// to f32 (exact) and encodes.
Status EncodeRowsBF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst);

// Decodes stored rows to f32 / to f16 (f32 decode rounded to nearest even;
// fp16 rows are copied unchanged).
void DecodeRows(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst);
void DecodeRowsF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst);
// Decodes stored rows to bfloat16: the f32 decode rounded to nearest even.
void DecodeRowsBF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst);

// Name of the implementation chosen at start-up ("avx2+f16c+fma" or "scalar").
std::string_view KernelName();

}  // namespace pion::quant
