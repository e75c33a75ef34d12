// The expiry test of string keys (times are base/clock.h's UnixMillis), shared by the files that
// read and remove them (strings.cc, string_ops.cc, key_ops.cc, pins.cc).
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "store/strings.h"

namespace pion::store {

inline bool PastDue(const StrEntry& e, int64_t now) {
  return e.expire_at_ms != 0 && e.expire_at_ms <= now;
}

// A pinned key (KV.BLOCK.MATCH ... PIN) does not expire while pinned.
inline bool Expired(const StrEntry& e, int64_t now) { return PastDue(e, now) && e.pins == 0; }

}  // namespace pion::store
