// The mutation seam between the store and persistence is persistence's own
// interface, persist::MutationSink (persist/records.h, which states the
// contract: every change described before it is applied, two-phase appends,
// incarnations). The store logs through it directly; the WAL writer implements
// it. These aliases let store code name the record vocabulary as its own.
#pragma once

#include <cstdint>
#include <string_view>

#include "persist/records.h"
#include "store/strings.h"

namespace pion::store {

using MutationSink = persist::MutationSink;
using Side = persist::Side;  // "<ns>_pk", "<ns>_pv"
using DropReason = persist::DropReason;
using PendingRecord = persist::PendingRecord;
using BlockRecord = persist::BlockRecord;  // BlockTable adds the membership index

// A quantized block's tag as persist logs it and back (the dtype numbers match).
inline persist::QuantRecord QuantRecordOf(const QuantTag& t) {
  return {t.format, static_cast<uint8_t>(t.dtype), t.row};
}
// A STRSET reserved and applied under the keyspace's lock, whose value is
// written to the log after the lock is released (Slice::LogSetLocked, then
// Slice::Finish, which rolls it back if the write fails).
struct StrPending {
  PendingRecord rec;
  // The caller's key: every caller passes Finish the pending changes before
  // its key arguments go out of scope (no copy per SET).
  std::string_view key;
  StrRef value;     // what was applied
  StrRef previous;  // restored if the write fails
  int64_t previous_expire = 0;
  bool had_previous = false;
};

inline QuantTag QuantTagOf(const persist::QuantRecord& q) {
  return {q.row, q.format, static_cast<BlockDtype>(q.dtype)};
}

}  // namespace pion::store
