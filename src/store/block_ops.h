// The block operations (docs/protocol.md "Blocks"): KV.BLOCK.MATCH, UNPIN and
// CHAIN as free functions over the keyspace (store/slice.h), called as
// OpBlockMatch({*store}, keys, bitmap, pin_ms, user). A block is a string key
// that may carry a chain link, a hash and a token count (StrEntry::block);
// the keyspace keeps the links and the pins (store/block_links.cc,
// store/pins.cc), these are the commands' operations on them:
//   block_match.cc  MATCH (and its one-key-at-a-time reference), UNPIN
//   block_chain.cc  CHAIN, and what a block key carries
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"
#include "store/slice.h"
#include "store/store_types.h"
#include "store/strings.h"

namespace pion::store {

// KV.BLOCK.MATCH: probes `keys` in order. Without `bitmap` it counts the
// leading run of live string keys and stops at the first missing one; with
// it (ceil(n/8) zeroed bytes) it probes every key and sets bit i (LSB first)
// for each live one. Expired keys count as missing and are removed (logged,
// as GET); namespaces and their sids count as missing. The keys counted get
// one LRU stamp, and their chain ancestors with it. pin_ms > 0 pins every key
// counted until now + pin_ms or OpBlockUnpin (a lease of `user`; lease 0 when
// nothing was pinned); too_many_leases when max-block-leases are live
// (nothing pinned then, count still given).
BlockMatchResult OpBlockMatch(const OpArgs& op, std::span<const std::string_view> keys,
                              uint8_t* bitmap, int64_t pin_ms, std::string_view user);
// The reference OpBlockMatch is tested against: the same answers and effects,
// one key at a time, each lookup and lock finding the key's slot afresh.
BlockMatchResult OpBlockMatchSimple(const OpArgs& op, std::span<const std::string_view> keys,
                                    uint8_t* bitmap, int64_t pin_ms, std::string_view user);
// KV.BLOCK.UNPIN: how many of the leases (live, taken by `user`) ended.
uint64_t OpBlockUnpin(const OpArgs& op, std::span<const uint64_t> leases, std::string_view user);

// KV.BLOCK.CHAIN: `kv` alternates key, value (made as for OpMSet). Written
// atomically as one log record, linked as a chain: the first key's parent is
// `after` when it is a live string key, key i's parent key i-1. `hashes`
// (empty, or 8 bytes per pair, little-endian u64) and `tokens` are kept with
// the keys. expire_at_ms (0: none) applies to every key. Errors: WrongType
// for a key that names a namespace, kKeyTooLong, OutOfBudget.
Status OpBlockChain(const OpArgs& op, std::span<const std::string_view> kv, const ChainArgs& a,
                    std::span<const StrRef> made = {});
// What a block key carries (tests, KV events): false if `key` is no live
// string key; `parent` empty for a root.
bool OpDescribeBlock(const OpArgs& op, std::string_view key, BlockInfo* out);

}  // namespace pion::store
