// The part of Redis's module API that pion.so uses, declared here from Redis's
// documented module API (https://redis.io/docs/latest/develop/reference/modules/):
// Redis ships no header on Debian, and this file is the only place the module
// names Redis's types, constants and functions.
//
// How the API is reached: Redis calls RedisModule_OnLoad(ctx, argv, argc); the
// first pointer-sized field of that context is Redis's GetApi function, which
// maps a documented API name ("RedisModule_OpenKey") to its function. LoadApi()
// fills `api` with every entry below; a missing required entry fails the load.
//
// Thread-safety: `api` is written once in OnLoad on Redis's main thread; the
// functions are called from the main thread, except Alloc/Free (any thread).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// Opaque Redis objects (never dereferenced by pion).
struct RedisModuleCtx;
struct RedisModuleString;
struct RedisModuleKey;
struct RedisModuleType;
struct RedisModuleIO;
struct RedisModuleDigest;
struct RedisModuleDefragCtx;
struct RedisModuleCallReply;
}

namespace pion::module::redis {

// Return values of the API and of command callbacks.
inline constexpr int kOk = 0;
inline constexpr int kErr = 1;
inline constexpr int kApiVersion1 = 1;

// OpenKey modes.
inline constexpr int kRead = 1 << 0;
inline constexpr int kWrite = 1 << 1;

// KeyType results.
inline constexpr int kKeyEmpty = 0;
inline constexpr int kKeyString = 1;
inline constexpr int kKeyModule = 6;

// GetContextFlags bits.
inline constexpr int kCtxCluster = 1 << 5;
inline constexpr int kCtxReplicated = 1 << 12;  // the command came from our primary / AOF
inline constexpr int kCtxLoading = 1 << 13;

// The data-type callbacks (RedisModuleTypeMethods). `version` says how many of
// the fields Redis reads: 3 covers everything up to and including `defrag`
// (Redis 6.2+; 7.0 reads version 4 and below).
using CmdFunc = int (*)(RedisModuleCtx*, RedisModuleString**, int);
using LoadFunc = void* (*)(RedisModuleIO*, int encver);
using SaveFunc = void (*)(RedisModuleIO*, void* value);
using RewriteFunc = void (*)(RedisModuleIO*, RedisModuleString* key, void* value);
using MemUsageFunc = size_t (*)(const void* value);
using DigestFunc = void (*)(RedisModuleDigest*, void* value);
using FreeFunc = void (*)(void* value);
using AuxLoadFunc = int (*)(RedisModuleIO*, int encver, int when);
using AuxSaveFunc = void (*)(RedisModuleIO*, int when);
using FreeEffortFunc = size_t (*)(RedisModuleString* key, const void* value);
using UnlinkFunc = void (*)(RedisModuleString* key, const void* value);
using CopyFunc = void* (*)(RedisModuleString* from, RedisModuleString* to, const void* value);
using DefragFunc = int (*)(RedisModuleDefragCtx*, RedisModuleString* key, void** value);

inline constexpr uint64_t kTypeMethodVersion = 3;

struct TypeMethods {
  uint64_t version = kTypeMethodVersion;
  LoadFunc rdb_load = nullptr;
  SaveFunc rdb_save = nullptr;
  RewriteFunc aof_rewrite = nullptr;
  MemUsageFunc mem_usage = nullptr;
  DigestFunc digest = nullptr;
  FreeFunc free = nullptr;
  AuxLoadFunc aux_load = nullptr;
  AuxSaveFunc aux_save = nullptr;
  int aux_save_triggers = 0;
  FreeEffortFunc free_effort = nullptr;
  UnlinkFunc unlink = nullptr;
  CopyFunc copy = nullptr;
  DefragFunc defrag = nullptr;
};

// The API functions, under their documented names less the "RedisModule_" prefix.
struct Api {
  void* (*Alloc)(size_t bytes);
  void (*Free)(void* ptr);
  int (*IsModuleNameBusy)(const char* name);
  void (*SetModuleAttribs)(RedisModuleCtx*, const char* name, int ver, int apiver);
  int (*CreateCommand)(RedisModuleCtx*, const char* name, CmdFunc fn, const char* flags,
                       int firstkey, int lastkey, int keystep);
  RedisModuleType* (*CreateDataType)(RedisModuleCtx*, const char* name, int encver,
                                     TypeMethods* methods);
  int (*GetContextFlags)(RedisModuleCtx*);
  void* (*OpenKey)(RedisModuleCtx*, RedisModuleString* name, int mode);  // a RedisModuleKey*
  void (*CloseKey)(RedisModuleKey*);
  int (*KeyType)(RedisModuleKey*);
  int (*DeleteKey)(RedisModuleKey*);
  int (*ModuleTypeSetValue)(RedisModuleKey*, RedisModuleType*, void* value);
  RedisModuleType* (*ModuleTypeGetType)(RedisModuleKey*);
  void* (*ModuleTypeGetValue)(RedisModuleKey*);
  const char* (*StringPtrLen)(const RedisModuleString*, size_t* len);
  RedisModuleString* (*CreateString)(RedisModuleCtx*, const char* ptr, size_t len);
  void (*FreeString)(RedisModuleCtx*, RedisModuleString*);
  int (*ReplyWithError)(RedisModuleCtx*, const char* err);  // "CODE text", no '-'
  int (*ReplyWithSimpleString)(RedisModuleCtx*, const char* s);
  int (*ReplyWithLongLong)(RedisModuleCtx*, long long v);
  int (*ReplyWithStringBuffer)(RedisModuleCtx*, const char* buf, size_t len);
  int (*ReplyWithNull)(RedisModuleCtx*);
  int (*ReplyWithArray)(RedisModuleCtx*, long len);
  int (*ReplyWithMap)(RedisModuleCtx*, long len);  // a flat array of 2*len under RESP2
  int (*ReplicateVerbatim)(RedisModuleCtx*);
  void (*SaveUnsigned)(RedisModuleIO*, uint64_t v);
  uint64_t (*LoadUnsigned)(RedisModuleIO*);
  void (*SaveStringBuffer)(RedisModuleIO*, const char* buf, size_t len);
  char* (*LoadStringBuffer)(RedisModuleIO*, size_t* len);  // free with Free
  int (*IsIOError)(RedisModuleIO*);
  void (*EmitAOF)(RedisModuleIO*, const char* cmd, const char* fmt, ...);
  void (*DigestAddStringBuffer)(RedisModuleDigest*, const char* buf, size_t len);
  void (*DigestAddLongLong)(RedisModuleDigest*, long long v);
  void (*DigestEndSequence)(RedisModuleDigest*);
  // Call(ctx, "CLUSTER", "c", "NODES"): runs a Redis command; "c" = a C string argument.
  RedisModuleCallReply* (*Call)(RedisModuleCtx*, const char* cmd, const char* fmt, ...);
  const char* (*CallReplyStringPtr)(RedisModuleCallReply*, size_t* len);
  void (*FreeCallReply)(RedisModuleCallReply*);
  // A command created with the "getkeys-api" flag is first called to name its keys
  // (in a cluster, for the slot check): then IsKeysPositionRequest is non-zero and
  // the command reports each key's argument index with KeyAtPos.
  int (*IsKeysPositionRequest)(RedisModuleCtx*);
  void (*KeyAtPos)(RedisModuleCtx*, int pos);
  void (*Log)(RedisModuleCtx*, const char* level, const char* fmt, ...);
  void (*LogIOError)(RedisModuleIO*, const char* level, const char* fmt, ...);
};

extern Api api;

// Fills `api` from the context Redis passed to OnLoad; false (after logging
// nothing: there is no Log yet) when a required entry is missing.
bool LoadApi(RedisModuleCtx* ctx);

}  // namespace pion::module::redis
