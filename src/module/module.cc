// pion.so: the entry point Redis calls on MODULE LOAD / --loadmodule. Fills the
// API table, routes row memory through Redis's allocator (so used_memory and
// maxmemory eviction see it), registers the pion-kvns type and the commands.
#include "module/commands.h"
#include "module/ns_value.h"
#include "module/redis_api.h"
#include "store/chunk.h"

namespace {

void* ChunkAlloc(size_t n) { return pion::module::redis::api.Alloc(n); }
void ChunkFree(void* p) { pion::module::redis::api.Free(p); }

}  // namespace

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx* ctx,
                                                                         RedisModuleString**, int) {
  namespace redis = pion::module::redis;
  if (!redis::LoadApi(ctx)) return redis::kErr;
  if (redis::api.IsModuleNameBusy != nullptr && redis::api.IsModuleNameBusy("pion"))
    return redis::kErr;
  redis::api.SetModuleAttribs(ctx, "pion", 1, redis::kApiVersion1);
  pion::store::g_chunk_allocator = {ChunkAlloc, ChunkFree};
  if (!pion::module::CreateNsType(ctx)) {
    redis::api.Log(ctx, "warning", "pion: could not create the pion-kvns data type");
    return redis::kErr;
  }
  if (!pion::module::RegisterCommands(ctx)) {
    redis::api.Log(ctx, "warning", "pion: could not register the commands");
    return redis::kErr;
  }
  return redis::kOk;
}
