#include "module/redis_api.h"

#include <cstring>

namespace pion::module::redis {

Api api{};

namespace {

using GetApiFn = int (*)(const char* name, void** target);

struct Entry {
  const char* name;  // the documented name, "RedisModule_" + member
  void** slot;
  bool required;
};

template <typename F>
void** Slot(F* member) {
  return reinterpret_cast<void**>(member);
}

}  // namespace

bool LoadApi(RedisModuleCtx* ctx) {
  // The context's first field is the GetApi entry point (the documented way
  // RedisModule_Init reaches the API).
  void* first = nullptr;
  std::memcpy(&first, static_cast<void*>(ctx), sizeof(first));
  auto get_api = reinterpret_cast<GetApiFn>(first);
  if (get_api == nullptr) return false;
  const Entry entries[] = {
      {"RedisModule_Alloc", Slot(&api.Alloc), true},
      {"RedisModule_Free", Slot(&api.Free), true},
      {"RedisModule_IsModuleNameBusy", Slot(&api.IsModuleNameBusy), false},
      {"RedisModule_SetModuleAttribs", Slot(&api.SetModuleAttribs), true},
      {"RedisModule_CreateCommand", Slot(&api.CreateCommand), true},
      {"RedisModule_CreateDataType", Slot(&api.CreateDataType), true},
      {"RedisModule_GetContextFlags", Slot(&api.GetContextFlags), true},
      {"RedisModule_OpenKey", Slot(&api.OpenKey), true},
      {"RedisModule_CloseKey", Slot(&api.CloseKey), true},
      {"RedisModule_KeyType", Slot(&api.KeyType), true},
      {"RedisModule_DeleteKey", Slot(&api.DeleteKey), true},
      {"RedisModule_ModuleTypeSetValue", Slot(&api.ModuleTypeSetValue), true},
      {"RedisModule_ModuleTypeGetType", Slot(&api.ModuleTypeGetType), true},
      {"RedisModule_ModuleTypeGetValue", Slot(&api.ModuleTypeGetValue), true},
      {"RedisModule_StringPtrLen", Slot(&api.StringPtrLen), true},
      {"RedisModule_CreateString", Slot(&api.CreateString), true},
      {"RedisModule_FreeString", Slot(&api.FreeString), true},
      {"RedisModule_ReplyWithError", Slot(&api.ReplyWithError), true},
      {"RedisModule_ReplyWithSimpleString", Slot(&api.ReplyWithSimpleString), true},
      {"RedisModule_ReplyWithLongLong", Slot(&api.ReplyWithLongLong), true},
      {"RedisModule_ReplyWithStringBuffer", Slot(&api.ReplyWithStringBuffer), true},
      {"RedisModule_ReplyWithNull", Slot(&api.ReplyWithNull), true},
      {"RedisModule_ReplyWithArray", Slot(&api.ReplyWithArray), true},
      {"RedisModule_ReplyWithMap", Slot(&api.ReplyWithMap), false},
      {"RedisModule_ReplicateVerbatim", Slot(&api.ReplicateVerbatim), true},
      {"RedisModule_SaveUnsigned", Slot(&api.SaveUnsigned), true},
      {"RedisModule_LoadUnsigned", Slot(&api.LoadUnsigned), true},
      {"RedisModule_SaveStringBuffer", Slot(&api.SaveStringBuffer), true},
      {"RedisModule_LoadStringBuffer", Slot(&api.LoadStringBuffer), true},
      {"RedisModule_IsIOError", Slot(&api.IsIOError), false},
      {"RedisModule_EmitAOF", Slot(&api.EmitAOF), true},
      {"RedisModule_DigestAddStringBuffer", Slot(&api.DigestAddStringBuffer), true},
      {"RedisModule_DigestAddLongLong", Slot(&api.DigestAddLongLong), true},
      {"RedisModule_DigestEndSequence", Slot(&api.DigestEndSequence), true},
      {"RedisModule_Call", Slot(&api.Call), true},
      {"RedisModule_CallReplyStringPtr", Slot(&api.CallReplyStringPtr), true},
      {"RedisModule_FreeCallReply", Slot(&api.FreeCallReply), true},
      {"RedisModule_IsKeysPositionRequest", Slot(&api.IsKeysPositionRequest), true},
      {"RedisModule_KeyAtPos", Slot(&api.KeyAtPos), true},
      {"RedisModule_Log", Slot(&api.Log), true},
      {"RedisModule_LogIOError", Slot(&api.LogIOError), true},
  };
  for (const Entry& e : entries) {
    *e.slot = nullptr;
    if (get_api(e.name, e.slot) != kOk) *e.slot = nullptr;
    if (e.required && *e.slot == nullptr) return false;
  }
  return true;
}

}  // namespace pion::module::redis
