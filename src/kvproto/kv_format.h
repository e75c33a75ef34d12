// The parts of the KV.PREFIX.* and V.* commands that pion-server and the Redis
// module (src/module/commands.cc) share: argument grammar and checks (the
// same limits, the same error texts in the same order), and the bodies of
// V.INFO and KV.PREFIX.INFO <ns>. The two differ only in how they open a
// namespace and how they reply, so everything here reports a refusal through
// an error callback and returns data, never touching a connection.
//
// Depends on store, quant and base (and the error table), so the module can
// compile it in as it compiles errors.cc; never on the server or net.
//
// Thread-safety: free functions over their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace pion::server {

// Replies one error line (errors.h) for the caller.
using ErrorFn = std::function<void(std::string_view)>;

inline constexpr int64_t kMaxPrefillMs = 86400000;
inline constexpr int64_t kMaxLookupTokens = 100000000;

// A strict integer in [lo, hi]; otherwise replies "value is not an integer"
// (not a number) or `range_error` (out of range) and returns false.
bool IntArgInRange(const ErrorFn& err, std::string_view arg, int64_t lo, int64_t hi,
                   std::string_view range_error, int64_t* out);
// A namespace name of 1..kMaxNamespaceBytes bytes.
bool CheckNsLength(const ErrorFn& err, std::string_view ns);
// "<hash_count> <hash_blob>" into `out` (little-endian u64s).
bool ParseHashes(const ErrorFn& err, std::string_view count_arg, std::string_view blob,
                 std::string_view count_err, std::string_view len_err, std::vector<uint64_t>* out);
// A layer index in [0, kMaxLayers).
bool ParseLayer(const ErrorFn& err, std::string_view arg, uint32_t* layer);

// KV.PREFIX.REGISTER <ns> <kv_dim> <vquant> [BLOCKS ..] [PREFILL_MS ..] [PARENT ..]:
// everything but ra->ns (the caller's: the module keys the store differently).
// `parent_ok` vets a PARENT value after its length check (the server's ACL
// read check) and replies itself when it refuses; an empty `parent_ok` makes
// PARENT an unknown option (the module keeps no links). ra->parent views `a`.
bool ParseRegister(const ErrorFn& err, std::span<const std::string_view> a,
                   const std::function<bool(std::string_view)>& parent_ok, store::RegisterArgs* ra);

// KV.PREFIX.LOOKUP <ns> [TOKENS n] [PREFILL_MS ms] [CHAIN] (CHAIN only when
// `allow_chain`; otherwise it is an unknown option).
struct LookupArgs {
  bool chain = false;
  bool has_tokens = false, has_prefill = false;
  int64_t tokens = 0, prefill_ms = 0;
};
bool ParseLookup(const ErrorFn& err, std::span<const std::string_view> a, bool allow_chain,
                 LookupArgs* out);
// What a hit credits to the receipt: the namespace's own tokens and reported
// prefill time, unless TOKENS / PREFILL_MS say otherwise.
void LookupCredit(const store::LookupResult& lr, const LookupArgs& la, uint64_t* tokens,
                  uint64_t* prefill_us);

// V.STOREBATCH <sid> <layer> <start> <count> <blob> [FMT F32|F16].
struct StoreBatchArgs {
  uint32_t layer = 0;
  uint64_t start = 0, count = 0;
  store::RowInput in;  // views a[5]
};
bool ParseStoreBatch(const ErrorFn& err, std::span<const std::string_view> a, StoreBatchArgs* out);

// V.FETCH <sid> <layer> RANGE <start> <end> | <sid> BATCH <start> <end> [num_layers]
// | <sid> <layer> <id> [<id> ...], each with an optional trailing FMT F32|F16|NATIVE.
enum class OutFmt { kF32, kF16, kNative };
struct FetchArgs {
  enum class Kind { kRange, kBatch, kIds } kind = Kind::kRange;
  OutFmt fmt = OutFmt::kF32;
  uint32_t layer = 0;           // RANGE, ids
  uint64_t start = 0, end = 0;  // RANGE, BATCH
  uint32_t layers = 0;          // BATCH (0: every stored layer)
  // ids: up to kInlineIds held inline (a small V.FETCH allocates nothing), more
  // in a vector.
  static constexpr size_t kInlineIds = 32;
  std::span<const uint64_t> ids() const {
    return num_ids <= kInlineIds ? std::span<const uint64_t>(ids_inline.data(), num_ids)
                                 : std::span<const uint64_t>(ids_heap);
  }
  uint64_t* ResizeIds(size_t n) {
    num_ids = n;
    if (n <= kInlineIds) return ids_inline.data();
    ids_heap.resize(n);
    return ids_heap.data();
  }
  size_t num_ids = 0;
  std::array<uint64_t, kInlineIds> ids_inline;
  std::vector<uint64_t> ids_heap;
};
bool ParseFetch(const ErrorFn& err, std::span<const std::string_view> a, FetchArgs* out);
inline constexpr size_t kMaxFetchIds = 4096;
inline constexpr uint64_t kMaxFetchReplyBytes = 1ull << 30;
// Bytes of one output element of `p` in `fmt`, and of its whole reply body.
uint64_t ElemBytes(const store::FetchPlan& p, OutFmt fmt);
uint64_t BodyBytes(const store::FetchPlan& p, OutFmt fmt);

// Appends one "name:value\r\n" line of an INFO-style body.
void InfoField(std::string* out, std::string_view name, std::string_view value);
void InfoField(std::string* out, std::string_view name, uint64_t value);

// V.INFO's totals, and V.INFO <sid>'s layout of one session.
std::string VStoreTotalsBody(uint64_t sessions, uint64_t total_tokens, uint64_t total_fetches,
                             uint64_t bytes);
std::string SessionInfoBody(const store::SessionInfo& info);
// KV.PREFIX.INFO <ns>'s lines. The names (namespace, parent) are written
// escaped as Redis's sdscatrepr escapes, unquoted (base/strutil.h AppendRepr):
// a name of printable ASCII without a backslash reads as it is.
std::string NamespaceInfoBody(std::string_view ns, const store::NamespaceInfo& info);

}  // namespace pion::server
