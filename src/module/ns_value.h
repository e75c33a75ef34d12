// The module's data type "pion-kvns": one pion namespace (K and V sides, block
// table, PREFILL_MS) per Redis key. The value owns a store::Store that holds
// exactly that namespace under the fixed internal name kInternalNs, so the
// commands run the very code pion-server runs (registration checks, encoding,
// chunked rows, fetch plans), and the Redis key - not the internal name - is
// the namespace: RENAME, COPY, MIGRATE and RESTORE move it unchanged.
//
// The data-type callbacks (RDB, AOF rewrite, memory, digest, copy, free) are
// here; docs/module_format.md is the RDB layout they write and read.
//
// Thread-safety: Redis calls everything on its main thread, except Free (and
// FreeEffort) which lazy freeing may call on a background thread; the module
// totals are atomics for that reason.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "module/redis_api.h"
#include "store/store.h"

namespace pion::module {

inline constexpr std::string_view kInternalNs = "ns";
inline constexpr std::string_view kInternalK = "ns_pk";
inline constexpr std::string_view kInternalV = "ns_pv";
inline constexpr int kEncodingVersion = 1;  // docs/module_format.md
inline constexpr const char* kTypeName = "pion-kvns";

struct NsValue {
  std::unique_ptr<store::Store> store;
  // What this value last added to the module totals (Reaccount).
  uint64_t acc_prefix_tokens = 0, acc_total_tokens = 0, acc_bytes = 0;
};

// Module-wide counters over every namespace of this node (KV.PREFIX.INFO, V.INFO).
struct ModuleTotals {
  std::atomic<uint64_t> namespaces{0};
  std::atomic<uint64_t> prefix_tokens{0};  // K side, layer 0 rows
  std::atomic<uint64_t> total_tokens{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> fetches{0};  // rows requested by fetches since load
};
ModuleTotals& Totals();

// A value with an empty store (nothing registered yet); counted in Totals().
NsValue* NewNsValue();
// Brings Totals() up to date with this value after a change.
void Reaccount(NsValue* v);
// Takes the value out of Totals() and frees it.
void DeleteNsValue(NsValue* v);

// The data-type callbacks (CreateNsType registers them; declared for ns_value_test).
void RdbSave(RedisModuleIO* io, void* value);
void* RdbLoad(RedisModuleIO* io, int encver);  // nullptr: refused (logged)
void AofRewrite(RedisModuleIO* aof, RedisModuleString* key, void* value);
size_t MemUsage(const void* value);
size_t FreeEffort(RedisModuleString* key, const void* value);
void Digest(RedisModuleDigest* md, void* value);
void* Copy(RedisModuleString* from, RedisModuleString* to, const void* value);
void FreeValue(void* value);

// The data type, registered in OnLoad.
RedisModuleType* NsType();
bool CreateNsType(RedisModuleCtx* ctx);

}  // namespace pion::module
