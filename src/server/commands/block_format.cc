// Quantized blocks: encode at KV.BLOCK.CHAIN, decode for the read commands
// (see block_format.h). The codecs are src/quant's (bf16, f16 and f32 in and out).
#include "server/commands/block_format.h"

#include <sys/uio.h>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "quant/format.h"

namespace pion::server {

namespace {

// Values at least this large are sent by reference (as strings.cc does).
constexpr size_t kByRefBytes = 16 * 1024;

// The formats take any ROW or (the 32-blocks) multiples of 32.
uint32_t RowMultiple(quant::Format f) { return quant::DimSupported(f, 1) ? 1 : 32; }

}  // namespace

std::optional<store::BlockDtype> ParseBlockDtype(std::string_view s) {
  if (EqualsIgnoreCase(s, "f16")) return store::BlockDtype::kF16;
  if (EqualsIgnoreCase(s, "bf16")) return store::BlockDtype::kBf16;
  if (EqualsIgnoreCase(s, "f32")) return store::BlockDtype::kF32;
  return std::nullopt;
}

std::string CheckBlockRow(quant::Format f, int64_t row) {
  if (row >= 1 && row <= quant::kMaxDim && quant::DimSupported(f, static_cast<uint32_t>(row)))
    return {};
  return ChainRowError(quant::FormatName(f), RowMultiple(f), quant::kMaxDim);
}

store::StrRef QuantizeBlockValue(std::string_view raw, const store::QuantTag& t, size_t index,
                                 std::string* err) {
  const size_t in_row = size_t{t.row} * store::BlockDtypeBytes(t.dtype);
  if (raw.size() % in_row != 0) {
    *err = ChainValueLengthError(index, in_row);
    return nullptr;
  }
  const size_t rows = raw.size() / in_row;
  auto v = store::StrValue::TryMake(rows * quant::RowBytes(t.format, t.row));
  if (!v) {
    *err = std::string(kErrNoMemory);
    return nullptr;
  }
  Status st;
  switch (t.dtype) {
    case store::BlockDtype::kF32:
      st = quant::EncodeRows(t.format, raw.data(), rows, t.row, v->data);
      break;
    case store::BlockDtype::kF16:
      st = quant::EncodeRowsF16(t.format, raw.data(), rows, t.row, v->data);
      break;
    case store::BlockDtype::kBf16:
      st = quant::EncodeRowsBF16(t.format, raw.data(), rows, t.row, v->data);
      break;
  }
  if (!st.ok()) {
    *err = ChainNonFiniteError(index, st);
    return nullptr;
  }
  v->quant = t;
  return v;
}

store::StrRef PlainBlockValue(const store::StrRef& v) {
  if (v == nullptr || !v->quantized()) return v;
  const store::QuantTag& t = v->quant;
  const size_t rows = v->size / quant::RowBytes(t.format, t.row);
  auto out = store::StrValue::TryMake(v->PlainSize());
  if (!out) return nullptr;
  switch (t.dtype) {
    case store::BlockDtype::kF32:
      quant::DecodeRows(t.format, v->data, rows, t.row, out->data);
      break;
    case store::BlockDtype::kF16:
      quant::DecodeRowsF16(t.format, v->data, rows, t.row, out->data);
      break;
    case store::BlockDtype::kBf16:
      quant::DecodeRowsBF16(t.format, v->data, rows, t.row, out->data);
      break;
  }
  return out;
}

void ReplyStrValue(net::ReplyBuilder& rb, const store::StrRef& stored) {
  if (!stored) return rb.Null();
  store::StrRef v = PlainBlockValue(stored);
  if (!v) return rb.Error(kErrNoMemory);
  if (v->size < kByRefBytes) return rb.Bulk(v->view());
  iovec part{v->data, v->size};
  rb.BulkExternal(v->size, std::span<const iovec>(&part, 1), v);
}

}  // namespace pion::server
