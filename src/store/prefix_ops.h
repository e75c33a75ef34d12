// The prefix operations (docs/protocol.md "KV.PREFIX" and "V.*"): free
// functions over the keyspace (store/slice.h), called as
// OpRegister({*store, &lsn}, args). A namespace is the value these work on
// (store/namespace.h: its two sides, block table and lineage link, with the
// rules of its rows); what they add is the keyspace around it: the lookup by
// name, the LRU, the byte and session budget, the log and the disk tier.
//   prefix_register.cc  KV.PREFIX.REGISTER
//   prefix_ops.cc       LOOKUP, the chain, INFO ns, BLOCKS / MEMBERSHIP, DROP
//   prefix_rows.cc      V.STORE*, V.FETCH*, V.INFO
//
// Each mutation raises *op.lsn to the largest log sequence number it appended
// (it sets 0 first; 0: nothing logged); the caller waits for it before
// acknowledging. Reads leave op.lsn alone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/block_index.h"
#include "store/slice.h"
#include "store/store_types.h"

namespace pion::store {

// Creates a namespace or re-registers it. REQUIRES what the grammar checks
// (kvproto ParseRegister; asserted in debug builds): a name of 1..512 bytes,
// kv_dim 1..16384 that the format supports. Errors: WrongType when a string
// key holds the name (or one of its session ids); InvalidArgument with Reason
// kRegisteredOther (registered with another kv_dim or format); with a parent,
// kParentNotFound (not registered, or dropped meanwhile), kParentDim (another
// kv_dim), kParentMismatch (registered with another parent or none) or
// kChainTooLong (more than max_chain namespaces); OutOfBudget when the table
// or the session cap cannot be met.
Status OpRegister(const OpArgs& op, const RegisterArgs& a);

// Touches the LRU of a hit (and so its ancestors). Only the name's shard lock.
LookupResult OpLookup(const OpArgs& op, std::string_view ns);
// The chain root..ns (each segment's token count), or empty if ns is not
// registered. Touches the LRU of a hit.
std::vector<ChainSegment> OpLookupChain(const OpArgs& op, std::string_view ns);
// False if ns is not registered. No LRU touch.
bool OpDescribe(const OpArgs& op, std::string_view ns, NamespaceInfo* out);
// The block table, or nullptr if the namespace is unknown or has no table (or
// a table of zero hashes). Touches the LRU.
std::shared_ptr<const BlockTable> OpBlocks(const OpArgs& op, std::string_view ns);
// The same, but `fn` reads the table in place, under the namespace's shard
// lock (no reference taken: MEMBERSHIP); false (fn not called) when OpBlocks
// would return nullptr. `fn` must not call into the store.
bool OpWithBlocks(const OpArgs& op, std::string_view ns,
                  const std::function<void(const BlockTable&)>& fn);
// Drops each namespace present with its whole subtree (descendants first);
// returns how many namespaces were removed. `may_drop` (empty: any) is asked,
// under ks.mu and before anything is removed, for every namespace the call
// would remove, descendants included; one refusal refuses the whole call
// (Reason::kDropRefused, nothing removed or logged).
Result<uint64_t> OpDrop(const OpArgs& op, std::span<const std::string_view> names,
                        const std::function<bool(std::string_view ns)>& may_drop = {});

// Rows, addressed by session id "<ns>_pk" / "<ns>_pv". Unknown -> NotFound
// (kSessionNotFound). REQUIRES what the grammar checks (kvproto
// ParseStoreBatch, ParseFetch; asserted in debug builds): layer < 256,
// 1 <= count, start + count <= kMaxTokens, start < end.
// Errors: InvalidArgument for a blob of the wrong size or a non-finite row,
// OutOfBudget when the byte budget cannot be met (nothing changes then).
Status OpStoreRows(const OpArgs& op, std::string_view sid, uint32_t layer, uint64_t start,
                   uint64_t count, const RowInput& in);
// Rows [start, end) of a layer; rows never written are zeros. A namespace on
// the disk tier is read (checked) first.
Result<FetchPlan> OpFetchRange(const OpArgs& op, std::string_view sid, uint32_t layer,
                               uint64_t start, uint64_t end);
// Rows by id, in request order.
Result<FetchPlan> OpFetchIds(const OpArgs& op, std::string_view sid, uint32_t layer,
                             std::span<const uint64_t> ids);
// One plan per layer 0..n-1 where n = num_layers if nonzero (and <= the
// session's layer count) else the session's layer count.
Result<std::vector<FetchPlan>> OpFetchBatch(const OpArgs& op, std::string_view sid, uint64_t start,
                                            uint64_t end, uint32_t num_layers);
// V.INFO of one side. No LRU touch.
Result<SessionInfo> OpSessionInfo(const OpArgs& op, std::string_view sid);

}  // namespace pion::store
