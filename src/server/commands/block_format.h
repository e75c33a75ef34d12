// Quantized blocks (KV.BLOCK.CHAIN ... FORMAT f DTYPE d ROW n, docs/protocol.md
// "Block formats"): the value a CHAIN stores in its format, and the value the
// read commands answer (dequantized to its DTYPE). Thread-safe (pure functions
// over immutable values).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "net/reply.h"
#include "store/strings.h"

namespace pion::server {

// "f16" / "bf16" / "f32" (any case); nullopt otherwise.
std::optional<store::BlockDtype> ParseBlockDtype(std::string_view s);
// The ROW error text when `row` is not allowed for `f`, else empty.
std::string CheckBlockRow(quant::Format f, int64_t row);

// `raw` (whole rows of t.row values of t.dtype) quantized into a new value
// carrying `t`. Null with *err set (an -ERR line) when the length is not whole
// rows, an input value is not finite (every format but fp16) or memory is short.
store::StrRef QuantizeBlockValue(std::string_view raw, const store::QuantTag& t, size_t index,
                                 std::string* err);

// A value as the read commands answer it: a quantized block is decoded to its
// DTYPE (a new value, nullptr when memory is short); any other value as it is.
store::StrRef PlainBlockValue(const store::StrRef& v);

// Replies with a string value (nil for null): small ones copied, large ones by
// reference; a quantized block dequantized first (-OOM if that memory is short).
void ReplyStrValue(net::ReplyBuilder& rb, const store::StrRef& v);

}  // namespace pion::server
