// Why a store call failed, for the failures a caller or a client must tell apart:
// carried by a Status (base/status.h) next to its code, with the fields each value
// names. The store words nothing for clients: the command layer's error table
// (src/kvproto/errors.cc) turns (code, reason, fields) into the reply; the
// Status message is for logs.
#pragma once

#include <cstdint>
#include <string_view>

namespace pion::store {

enum class Reason : uint16_t {
  kNone = 0,
  // Sessions and rows (V.*). kSessionNotFound: the session id is not <ns>_pk /
  // <ns>_pv of a registered namespace (or the namespace went while the call ran).
  kSessionNotFound,
  kSizeMismatch,   // the rows' bytes: fields got, count, kv_dim, element bytes
  kNothingStored,  // FetchBatch of every layer when none holds rows
  // Namespaces (KV.PREFIX.REGISTER).
  kRegisteredOther,  // registered with another shape: fields kv_dim, format
  kParentNotFound,   // PARENT is not registered (or was dropped meanwhile)
  kParentDim,        // PARENT has another kv_dim: fields the parent's kv_dim
  kParentMismatch,   // registered with another parent: name = it (empty: none)
  kChainTooLong,     // the chain would pass max-chain-length: fields that limit
  kDropRefused,      // a DROP's predicate refused a namespace it would remove
  // Strings and blocks.
  kKeyTooLong,       // a string key longer than the store allows
  kEditRange,        // an edit's end overflows
  kStringTooBig,     // an append past proto-max-bulk-len
  kNoMemory,         // the allocator refused a value (OutOfBudget)
  kNoSuchKey,        // RENAME of a key that does not exist
  kRenameNamespace,  // RENAME of a namespace key (NotSupported)
  kCopyNamespace,    // COPY of a namespace key (NotSupported)
  kBlockQuantized,   // an edit (APPEND, SETRANGE, ...) or COPY of a quantized block
  // The disk tier: stopped while a read was queued (IOError), or before a job was
  // posted (Busy).
  kTierStopped,
  // An edit's checked read of a value on the disk tier found another value
  // there each time it tried (Busy: try again).
  kTierChanged,
  // WAL replay: a store record names a namespace incarnation that is not there.
  kReplayNamespaceAbsent,
};

constexpr std::string_view ReasonDomain(Reason) { return "store"; }

}  // namespace pion::store
