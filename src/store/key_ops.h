// The keyspace's operations over any key, string or namespace (EXISTS,
// DEL/UNLINK, TYPE, RENAME, COPY, TOUCH, the EXPIRE family, OBJECT, MEMORY
// USAGE, SCAN, KEYS, RANDOMKEY, WATCH versions): free functions over the
// keyspace (store/slice.h), called as OpDelete({*store, &lsn}, keys). key_ops.cc
// has the ones that look keys up, key_scan.cc the walks (SCAN, KEYS,
// RANDOMKEY). A namespace and its session ids are keys of type pion-kvprefix;
// they carry no TTL and cannot be renamed or copied.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/slice.h"
#include "store/strings.h"

namespace pion::store {

// EXISTS: keys counted with repetition.
uint64_t OpExists(const OpArgs& op, std::span<const std::string_view> keys);
// DEL / UNLINK: strings removed, namespaces (or their session ids) dropped
// with their subtrees. `may_drop` (empty: any) is asked, as by OpDrop,
// for every namespace the call would remove, descendants included, before
// anything is removed; one refusal refuses the whole call (kDropRefused,
// nothing removed).
Result<uint64_t> OpDelete(const OpArgs& op, std::span<const std::string_view> keys,
                          const std::function<bool(std::string_view ns)>& may_drop = {});
KeyType OpType(const OpArgs& op, std::string_view key);
// RENAME (nx = RENAMENX) of a string key: NotFound kNoSuchKey; a namespace
// source is NotSupported. *done false when nx and dst exists.
Status OpRename(const OpArgs& op, std::string_view src, std::string_view dst, bool nx, bool* done);
// COPY src dst [REPLACE]: false when src is missing or dst exists without
// replace. The copy shares the value (an edit of either copies it first) and
// takes src's TTL. A namespace source is NotSupported; a namespace
// destination WrongType.
Result<bool> OpCopy(const OpArgs& op, std::string_view src, std::string_view dst, bool replace);
// TOUCH: how many of the keys exist (with repetition); touches their LRU.
uint64_t OpTouch(const OpArgs& op, std::span<const std::string_view> keys);
// EXPIRE family with an absolute time; a time in the past deletes the key.
// False when the key is missing or the condition fails. Namespaces carry no
// TTL (false).
Result<bool> OpExpire(const OpArgs& op, std::string_view key, int64_t at_ms, ExpireCond c);
// PERSIST: false when the key is missing or has no TTL.
Result<bool> OpPersist(const OpArgs& op, std::string_view key);
// -2 missing, -1 no TTL, else the expiry in unix ms.
int64_t OpExpireTimeMs(const OpArgs& op, std::string_view key);
// RESTORE ... IDLETIME: the key reads as last accessed `idle_s` seconds ago.
void OpSetIdleTime(const OpArgs& op, std::string_view key, uint64_t idle_s);
// OBJECT: the key's type, value and idle time (no touch, no hit or miss).
KeyObject OpObject(const OpArgs& op, std::string_view key);
// MEMORY USAGE: bytes charged to the key (0 = missing).
uint64_t OpKeyMemory(const OpArgs& op, std::string_view key);
// WATCH: changes whenever the key is written or removed. A missing key's
// version is the count of string removals so far (so a key created and
// removed again in between still counts as touched; any removal of another
// key does too: a spurious EXEC abort, never a missed one).
uint64_t OpKeyVersion(const OpArgs& op, std::string_view key);

// SCAN: every key present from the first call to the last is returned at
// least once (keys are visited in the order of a fixed 64-bit hash; the
// cursor is the next hash to visit).
ScanResult OpScan(const OpArgs& op, uint64_t cursor, uint64_t count,
                  std::optional<std::string_view> match, KeyType type);
std::vector<std::string> OpKeys(const OpArgs& op, std::string_view pattern);
std::optional<std::string> OpRandomKey(const OpArgs& op);

}  // namespace pion::store
