// The shared KV.PREFIX.* / V.* grammar and bodies: see kv_format.h.
#include "kvproto/kv_format.h"

#include <cstring>

#include "base/strutil.h"
#include "kvproto/errors.h"
#include "quant/format.h"

namespace pion::server {

namespace {

constexpr int64_t kMaxLayer = store::kMaxLayers - 1;
constexpr int64_t kMaxTokens = static_cast<int64_t>(store::kMaxTokens);

bool IsKeyword(std::string_view arg, std::string_view kw) { return EqualsIgnoreCase(arg, kw); }

bool ParseOutFmt(const ErrorFn& err, std::string_view v, OutFmt* out) {
  if (IsKeyword(v, "F32")) {
    *out = OutFmt::kF32;
  } else if (IsKeyword(v, "F16")) {
    *out = OutFmt::kF16;
  } else if (IsKeyword(v, "NATIVE")) {
    *out = OutFmt::kNative;
  } else {
    err(FetchFormatError(v));
    return false;
  }
  return true;
}

// A "<start> <end>" pair with 0 <= start < end <= kMaxTokens; `order_err` for any refusal.
bool ParseSpan(const ErrorFn& err, std::string_view s, std::string_view e,
               std::string_view order_err, uint64_t* start, uint64_t* end) {
  int64_t a, b;
  if (!IntArgInRange(err, s, 0, kMaxTokens, order_err, &a) ||
      !IntArgInRange(err, e, 0, kMaxTokens, order_err, &b))
    return false;
  if (b <= a) {
    err(order_err);
    return false;
  }
  *start = static_cast<uint64_t>(a);
  *end = static_cast<uint64_t>(b);
  return true;
}

}  // namespace

bool IntArgInRange(const ErrorFn& err, std::string_view arg, int64_t lo, int64_t hi,
                   std::string_view range_error, int64_t* out) {
  auto v = ParseInt64Strict(arg);
  if (!v) {
    err(kErrNotInteger);
    return false;
  }
  if (*v < lo || *v > hi) {
    err(range_error);
    return false;
  }
  *out = *v;
  return true;
}

bool CheckNsLength(const ErrorFn& err, std::string_view ns) {
  if (ns.empty() || ns.size() > store::kMaxNamespaceBytes) {
    err(kErrNsKeyLength);
    return false;
  }
  return true;
}

bool ParseHashes(const ErrorFn& err, std::string_view count_arg, std::string_view blob,
                 std::string_view count_err, std::string_view len_err, std::vector<uint64_t>* out) {
  int64_t count;
  if (!IntArgInRange(err, count_arg, 0, static_cast<int64_t>(store::kMaxHashCount), count_err,
                     &count))
    return false;
  if (blob.size() != static_cast<size_t>(count) * 8) {
    err(len_err);
    return false;
  }
  out->resize(count);
  if (count > 0) std::memcpy(out->data(), blob.data(), blob.size());
  return true;
}

bool ParseLayer(const ErrorFn& err, std::string_view arg, uint32_t* layer) {
  int64_t v;
  if (!IntArgInRange(err, arg, 0, kMaxLayer, kErrLayerRange, &v)) return false;
  *layer = static_cast<uint32_t>(v);
  return true;
}

bool ParseRegister(const ErrorFn& err, std::span<const std::string_view> a,
                   const std::function<bool(std::string_view)>& parent_ok,
                   store::RegisterArgs* ra) {
  if (!CheckNsLength(err, a[1])) return false;
  int64_t dim;
  if (!IntArgInRange(err, a[2], 1, quant::kMaxDim, kErrKvDimRange, &dim)) return false;
  auto fmt = quant::ParseFormat(a[3]);
  if (!fmt) {
    err(UnknownVquantError(a[3]));
    return false;
  }
  if (!quant::DimSupported(*fmt, static_cast<uint32_t>(dim))) {
    err(VquantDimError(quant::FormatName(*fmt)));
    return false;
  }
  ra->kv_dim = static_cast<uint32_t>(dim);
  ra->fmt = *fmt;
  auto table = std::make_shared<store::BlockTable>();  // handed to the store, not copied
  bool have_blocks = false;
  for (size_t i = 4; i < a.size();) {
    if (IsKeyword(a[i], "BLOCKS")) {
      if (have_blocks) {
        err(kErrRegisterBlocksTwice);
        return false;
      }
      if (i + 3 >= a.size()) {
        err(kErrBlocksArgs);
        return false;
      }
      int64_t bs;
      if (!IntArgInRange(err, a[i + 1], 1, store::kMaxBlockSize, kErrBlocksBlockSizeRange, &bs))
        return false;
      if (!ParseHashes(err, a[i + 2], a[i + 3], kErrBlocksHashCountRange, kErrBlocksHashBlobLength,
                       &table->hashes))
        return false;
      table->block_size = static_cast<uint32_t>(bs);
      table->Finish();  // no store lock held
      have_blocks = true;
      i += 4;
    } else if (IsKeyword(a[i], "PREFILL_MS")) {
      if (ra->has_prefill) {
        err(kErrRegisterPrefillTwice);
        return false;
      }
      if (i + 1 >= a.size()) {
        err(kErrPrefillNeedsValue);
        return false;
      }
      int64_t ms;
      if (!IntArgInRange(err, a[i + 1], 0, kMaxPrefillMs, kErrPrefillRange, &ms)) return false;
      ra->has_prefill = true;
      ra->prefill_us = static_cast<uint64_t>(ms) * 1000;
      i += 2;
    } else if (parent_ok && IsKeyword(a[i], "PARENT")) {
      if (!ra->parent.empty()) {
        err(kErrRegisterParentTwice);
        return false;
      }
      if (i + 1 >= a.size()) {
        err(kErrParentNeedsValue);
        return false;
      }
      if (!CheckNsLength(err, a[i + 1])) return false;
      if (!parent_ok(a[i + 1])) return false;
      ra->parent = a[i + 1];
      i += 2;
    } else {
      err(RegisterOptionError(a[i]));
      return false;
    }
  }
  if (have_blocks) ra->blocks = std::move(table);
  return true;
}

bool ParseLookup(const ErrorFn& err, std::span<const std::string_view> a, bool allow_chain,
                 LookupArgs* out) {
  for (size_t i = 2; i < a.size(); i += 2) {
    if (allow_chain && IsKeyword(a[i], "CHAIN")) {  // a flag: no value
      if (out->chain) {
        err(kErrLookupChainTwice);
        return false;
      }
      out->chain = true;
      --i;
      continue;
    }
    bool is_tokens = IsKeyword(a[i], "TOKENS");
    if (!is_tokens && !IsKeyword(a[i], "PREFILL_MS")) {
      err(kErrLookupUnknownOption);
      return false;
    }
    if (i + 1 >= a.size()) {
      err(kErrLookupOptionNeedsValue);
      return false;
    }
    if (is_tokens) {
      if (!IntArgInRange(err, a[i + 1], 0, kMaxLookupTokens, kErrTokensRange, &out->tokens))
        return false;
      out->has_tokens = true;
    } else {
      if (!IntArgInRange(err, a[i + 1], 0, kMaxPrefillMs, kErrPrefillRange, &out->prefill_ms))
        return false;
      out->has_prefill = true;
    }
  }
  return true;
}

void LookupCredit(const store::LookupResult& lr, const LookupArgs& la, uint64_t* tokens,
                  uint64_t* prefill_us) {
  *tokens = lr.layer0_tokens;
  *prefill_us = lr.prefill_us;
  if (la.has_tokens) {
    // The caller restored `tokens` tokens (possibly across several namespaces):
    // credit those, with this lookup's own measured time if it gave one.
    *tokens = static_cast<uint64_t>(la.tokens);
    *prefill_us = la.has_prefill ? static_cast<uint64_t>(la.prefill_ms) * 1000 : 0;
  } else if (la.has_prefill) {
    *prefill_us = static_cast<uint64_t>(la.prefill_ms) * 1000;
  }
}

bool ParseStoreBatch(const ErrorFn& err, std::span<const std::string_view> a, StoreBatchArgs* out) {
  if (!ParseLayer(err, a[2], &out->layer)) return false;
  int64_t start, count;
  if (!IntArgInRange(err, a[3], 0, kMaxTokens, kErrStoreStartRange, &start)) return false;
  if (!IntArgInRange(err, a[4], 1, kMaxTokens, kErrStoreCountRange, &count)) return false;
  if (start + count > kMaxTokens) {
    err(kErrStoreEndRange);
    return false;
  }
  out->start = static_cast<uint64_t>(start);
  out->count = static_cast<uint64_t>(count);
  out->in.type = store::RowInput::Type::kF32;
  if (a.size() > 6) {
    if (a.size() != 8 || !IsKeyword(a[6], "FMT") ||
        !(IsKeyword(a[7], "F32") || IsKeyword(a[7], "F16"))) {
      err(kErrStoreBatchOption);
      return false;
    }
    if (IsKeyword(a[7], "F16")) out->in.type = store::RowInput::Type::kF16;
  }
  out->in.data = a[5].data();
  out->in.bytes = a[5].size();
  return true;
}

bool ParseFetch(const ErrorFn& err, std::span<const std::string_view> a, FetchArgs* out) {
  out->fmt = OutFmt::kF32;
  if (a.size() >= 2 && IsKeyword(a[a.size() - 2], "FMT")) {
    if (!ParseOutFmt(err, a.back(), &out->fmt)) return false;
    a = a.first(a.size() - 2);
  }
  if (a.size() < 3) {
    err(kErrFetchArgs);
    return false;
  }
  if (IsKeyword(a[2], "BATCH")) {
    // sid BATCH start end [num_layers]
    out->kind = FetchArgs::Kind::kBatch;
    if (a.size() != 5 && a.size() != 6) {
      err(kErrFetchBatchArgs);
      return false;
    }
    if (!ParseSpan(err, a[3], a[4], kErrFetchBatchOrder, &out->start, &out->end)) return false;
    int64_t layers = 0;
    if (a.size() == 6 &&
        !IntArgInRange(err, a[5], 1, store::kMaxLayers, kErrNumLayersRange, &layers))
      return false;
    out->layers = static_cast<uint32_t>(layers);
    return true;
  }
  if (a.size() >= 4 && IsKeyword(a[3], "RANGE")) {
    // sid layer RANGE start end
    out->kind = FetchArgs::Kind::kRange;
    if (a.size() != 6) {
      err(kErrFetchRangeArgs);
      return false;
    }
    if (!ParseLayer(err, a[2], &out->layer)) return false;
    return ParseSpan(err, a[4], a[5], kErrFetchRangeOrder, &out->start, &out->end);
  }
  // sid layer id [id ...]
  out->kind = FetchArgs::Kind::kIds;
  if (out->fmt == OutFmt::kNative) {
    err(kErrNativeNeedsRange);
    return false;
  }
  if (!ParseLayer(err, a[2], &out->layer)) return false;
  if (a.size() < 4) {
    err(kErrNoTokenIds);
    return false;
  }
  if (a.size() - 3 > kMaxFetchIds) {
    err(kErrTooManyTokenIds);
    return false;
  }
  uint64_t* ids = out->ResizeIds(a.size() - 3);
  for (size_t i = 3; i < a.size(); ++i) {
    int64_t v;
    if (!IntArgInRange(err, a[i], 0, kMaxTokens - 1, kErrTokenIdRange, &v)) return false;
    ids[i - 3] = static_cast<uint64_t>(v);
  }
  return true;
}

uint64_t ElemBytes(const store::FetchPlan& p, OutFmt fmt) {
  bool raw = p.fmt == quant::Format::kFp16 && fmt != OutFmt::kF32;
  return raw || fmt == OutFmt::kF16 ? 2 : 4;
}

uint64_t BodyBytes(const store::FetchPlan& p, OutFmt fmt) {
  return p.rows * p.dim * ElemBytes(p, fmt);
}

void InfoField(std::string* out, std::string_view name, std::string_view value) {
  out->append(name);
  out->push_back(':');
  out->append(value);
  out->append("\r\n");
}

void InfoField(std::string* out, std::string_view name, uint64_t value) {
  InfoField(out, name, std::to_string(value));
}

std::string VStoreTotalsBody(uint64_t sessions, uint64_t total_tokens, uint64_t total_fetches,
                             uint64_t bytes) {
  std::string out;
  InfoField(&out, "enabled", "1");
  InfoField(&out, "sessions", sessions);
  InfoField(&out, "total_tokens", total_tokens);
  InfoField(&out, "total_fetches", total_fetches);
  InfoField(&out, "bytes", bytes);
  return out;
}

std::string SessionInfoBody(const store::SessionInfo& info) {
  std::string out;
  InfoField(&out, "value_dim", info.dim);
  InfoField(&out, "v_format", quant::FormatName(info.fmt));
  InfoField(&out, "bytes_per_token", quant::RowBytes(info.fmt, info.dim));
  InfoField(&out, "num_layers", info.num_layers);
  InfoField(&out, "schema", "uniform");
  for (size_t i = 0; i < info.layer_tokens.size(); ++i)
    if (info.layer_tokens[i] > 0)
      InfoField(&out, "layer_" + std::to_string(i) + "_tokens", info.layer_tokens[i]);
  InfoField(&out, "total_tokens", info.total_tokens);
  InfoField(&out, "bytes", info.bytes);
  return out;
}

std::string NamespaceInfoBody(std::string_view ns, const store::NamespaceInfo& info) {
  // Names are any bytes: escaped, so a CR or LF in one cannot end its line.
  auto safe = [](std::string_view name) {
    std::string s;
    AppendRepr(&s, name, /*quoted=*/false);
    return s;
  };
  std::string out;
  InfoField(&out, "namespace", safe(ns));
  InfoField(&out, "parent", safe(info.parent));
  InfoField(&out, "children", info.children);
  InfoField(&out, "depth", info.depth);
  InfoField(&out, "chain_length", info.chain_length);
  InfoField(&out, "tokens", info.tokens);
  InfoField(&out, "chain_tokens", info.chain_tokens);
  InfoField(&out, "tier", info.on_disk ? "disk" : "ram");
  return out;
}

}  // namespace pion::server
