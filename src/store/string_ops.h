// The string keys' operations (docs/protocol.md "Keys"): free functions over
// the keyspace (store/slice.h), called as OpSet({*store, &lsn}, key, ...).
// string_ops.cc has the whole-value reads and writes (SET, GET, MGET, MSET,
// GETDEL, GETEX), string_edit.cc the read-modify-writes (APPEND, SETRANGE,
// the INCR family and the bit commands through OpPatch).
//
// One key space with the namespaces: a namespace name and its session ids
// "<ns>_pk"/"<ns>_pv" are keys of type pion-kvprefix; a string command on one
// (or SET over one) fails with WrongType. Every mutation is logged before it
// is acknowledged (*op.lsn), as for namespaces. Keys are at most
// kMaxStrKeyBytes. Expired keys are removed lazily (on access, logged) and by
// Store::ExpireActive. Writes that need budget evict by the maxmemory policy
// (LRU shared with the namespaces), never the key being written; a value that
// cannot fit even then, or any write under noeviction when full, is
// OutOfBudget.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/slice.h"
#include "store/strings.h"

namespace pion::store {

// SET with its conditions (NX, XX, GET, KEEPTTL, an expiry).
Result<SetOutcome> OpSet(const OpArgs& op, std::string_view key, StrRef value, const SetOptions& o);
// nullptr on a miss. Counts a hit or a miss; touches the LRU.
Result<StrRef> OpGet(const OpArgs& op, std::string_view key);
// OpGet that hands the value (nullptr on a miss) to `fn`, called once; on the
// read path under the key's shard lock, so a small value can be copied out
// without taking a reference (GET). `fn` must not call into the store; it may
// copy the reference to keep the value. A value in the disk tier is read
// (checked) before `fn` sees it, unless `tiered_as_is` (GET, which reads it
// asynchronously itself: StrValue::on_disk()).
Status OpGetWith(const OpArgs& op, std::string_view key,
                 const std::function<void(const StrRef&)>& fn, bool tiered_as_is = false);
// GETDEL. A value in the disk tier is read (checked) before it is returned,
// unless `tiered_as_is` (the command reads it asynchronously itself).
Result<StrRef> OpGetDel(const OpArgs& op, std::string_view key, bool tiered_as_is = false);
// GETEX: persist removes the TTL, expire_at_ms > 0 sets it, else unchanged;
// the disk tier as for OpGetDel.
Result<StrRef> OpGetEx(const OpArgs& op, std::string_view key, bool persist, int64_t expire_at_ms,
                       bool tiered_as_is = false);
// MGET: nullptr for a missing key or one of another type. Values on disk are
// read (checked) first, unless `tiered_as_is` (MGET reading them
// asynchronously itself: StrValue::on_disk(), Store::ReadTiered).
std::vector<StrRef> OpMGet(const OpArgs& op, std::span<const std::string_view> keys,
                           bool tiered_as_is = false);
// MSET (nx = false) / MSETNX (nx: nothing is written when any key exists).
// `kv` alternates key, value. True when written. `made` (empty, or one per
// pair) holds values already made of the value arguments (adopted argument
// buffers); a null one is copied from `kv`.
Result<bool> OpMSet(const OpArgs& op, std::span<const std::string_view> kv, bool nx,
                    std::span<const StrRef> made = {});

// Read-modify-write of one string key, atomic under its locks
// (store/string_edit.cc): `plan` sees the current value (`exists` false and an
// empty view for a missing key) and fills the edit, or returns an error
// (nothing changes). The edit is logged (STRPATCH: only the bytes it writes)
// before it is applied, in place when the store holds the only reference to
// the value and it fits its capacity, else into a copy grown greedily (double
// up to 1 MiB, then +1 MiB), so repeated appends cost amortised O(appended
// bytes). The TTL is kept. Returns the new length. A value on the disk tier
// is read with the tier's check first (a damaged one is dropped, and the
// edit finds no key).
using StrPlanFn = std::function<Status(std::string_view cur, bool exists, StrEdit* edit)>;
Result<uint64_t> OpPatch(const OpArgs& op, std::string_view key, const StrPlanFn& plan);
// APPEND: the new length. `tail_value` (may be null) holds the bytes of `tail`
// already as a value (an adopted argument buffer): a key that does not exist
// yet takes it as is instead of a copy. An existing value grows in place
// (OpPatch); one that would pass `max_len` (> 0) bytes is refused
// (kStringTooBig, nothing changes).
Result<uint64_t> OpAppend(const OpArgs& op, std::string_view key, std::string_view tail,
                          StrRef tail_value = nullptr, uint64_t max_len = 0);

}  // namespace pion::store
