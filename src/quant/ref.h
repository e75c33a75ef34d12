// The scalar reference path of every format, callable regardless of the CPU. It is the
// specification the dispatched (possibly AVX2) functions of format.h must match bit
// for bit; tests compare the two. Same contracts as format.h. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "quant/format.h"

namespace pion::quant::ref {

Status EncodeRows(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst);
Status EncodeRowsF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst);
void DecodeRows(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst);
void DecodeRowsF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst);
Status EncodeRowsBF16(Format f, const void* src, size_t rows, uint32_t dim, uint8_t* dst);
void DecodeRowsBF16(Format f, const uint8_t* src, size_t rows, uint32_t dim, void* dst);

}  // namespace pion::quant::ref
