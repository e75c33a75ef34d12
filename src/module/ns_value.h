// The module's data type "pion-kvns": one pion namespace (K and V sides, block
// table, PREFILL_MS) per Redis key. The value holds the namespace itself, the
// same store::Namespace a pion-server Store keeps in its map, under the fixed
// internal name kInternalNs, and the commands work on it through the functions
// the Store also uses (store/namespace.h: the registration checks, encoding,
// chunked rows, fetch plans, descriptions, snapshot views), so a rule is
// written once for both. What a Store adds around a namespace - shards, LRU,
// byte budget and eviction, the log, the disk tier - is Redis's here (its
// keyspace, maxmemory, RDB/AOF). The Redis key, not the internal name, is the
// namespace: RENAME, COPY, MIGRATE and RESTORE move it unchanged.
//
// The data-type callbacks (RDB, AOF rewrite, memory, digest, copy, free) are
// here; docs/module_format.md is the RDB layout they write and read.
//
// Thread-safety: Redis calls everything on its main thread, except Free (and
// FreeEffort) which lazy freeing may call on a background thread; the module
// totals are atomics for that reason. The namespace is written only on the
// main thread (one command at a time), so it is "unshared" in the sense of
// store/namespace.h; its side locks are still taken where its methods take
// them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "module/redis_api.h"
#include "store/namespace.h"

namespace pion::module {

inline constexpr std::string_view kInternalNs = "ns";
inline constexpr int kEncodingVersion = 1;  // docs/module_format.md
inline constexpr const char* kTypeName = "pion-kvns";

struct NsValue {
  std::shared_ptr<store::Namespace> ns;  // never null
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

// A value holding `ns` (registered: store::RegisterUnshared); counted in
// Totals() and accounted (Reaccount).
NsValue* NewNsValue(std::shared_ptr<store::Namespace> ns);
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
