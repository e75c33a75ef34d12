// Internal to src/store: the leases of KV.BLOCK.MATCH ... PIN and the pin
// accounting (docs/protocol.md "Blocks"). A lease holds the (entry, born)
// pairs of the keys one MATCH pinned until its deadline or KV.BLOCK.UNPIN.
// The pins themselves live on the entries (StrEntry::pins, written by the
// store under its lock and the entry's shard lock, store/pins.cc); this table
// keeps what is not an entry's: the live leases by id and by deadline, the
// pins still owed by entries that left the map while pinned (by `born`, so a
// lease never touches a freed entry), the epoch FLUSHALL ends every lease's
// pins with, and the pinned keys' count and bytes.
//
// Thread-safety: none of its own; the store holds it under the keyspace lock (Keyspace::mu).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/store_types.h"

namespace pion::store {

struct StrEntry;

struct PinLease {
  int64_t deadline_ms = 0;
  uint64_t epoch = 0;  // the table's epoch when filed (EndEpoch ends every pin at once)
  std::string user;
  std::vector<std::pair<StrEntry*, uint64_t>> keys;  // (entry, its born)
};

class LeaseTable {
 public:
  // max-block-leases: a MATCH that would file one more lease pins nothing.
  bool full() const { return leases_.size() >= max_leases_; }
  void set_max_leases(uint64_t n) { max_leases_ = n; }

  // A new entry's identity for the pins it may get (StrEntry::born).
  uint64_t NextBorn() { return next_born_++; }

  // Files `lease` (its keys already pinned) for `user` until `deadline_ms`;
  // returns its id (never 0).
  uint64_t Add(PinLease lease, int64_t deadline_ms, std::string_view user) {
    const uint64_t id = next_lease_++;
    lease.deadline_ms = deadline_ms;
    lease.epoch = epoch_;
    lease.user = std::string(user);
    by_deadline_.insert({deadline_ms, id});
    leases_.emplace(id, std::move(lease));
    return id;
  }
  // Whether lease `id` is live and was taken by `user`.
  bool OwnedBy(uint64_t id, std::string_view user) const {
    auto it = leases_.find(id);
    return it != leases_.end() && it->second.user == user;
  }
  // Lease `id` out of the table, or nullopt if none is live. Its keys still
  // hold their pins only when it is current (no EndEpoch since it was filed).
  std::optional<PinLease> Take(uint64_t id) {
    auto it = leases_.find(id);
    if (it == leases_.end()) return std::nullopt;
    PinLease lease = std::move(it->second);
    leases_.erase(it);
    by_deadline_.erase({lease.deadline_ms, id});
    return lease;
  }
  bool current(const PinLease& lease) const { return lease.epoch == epoch_; }
  // The live lease with the earliest deadline, if that is at or before `now_ms`; 0 if none.
  uint64_t FirstDue(int64_t now_ms) const {
    if (by_deadline_.empty() || by_deadline_.begin()->first > now_ms) return 0;
    return by_deadline_.begin()->second;
  }

  // A key's first pin, its last pin ended, and a pinned key's charge changed.
  void KeyPinned(uint64_t charge) {
    ++pinned_keys_;
    pinned_bytes_ += charge;
  }
  void KeyUnpinned(uint64_t charge) {
    --pinned_keys_;
    pinned_bytes_ -= std::min(pinned_bytes_, charge);
  }
  void ChargeChanged(uint64_t old_charge, uint64_t new_charge) {
    pinned_bytes_ = pinned_bytes_ - std::min(pinned_bytes_, old_charge) + new_charge;
  }
  // An entry born `born` left the map holding `pins` pins (KeyUnpinned is the caller's).
  void RecordDead(uint64_t born, uint32_t pins) { dead_pins_[born] += pins; }
  // One pin of an entry born `born`: true when that entry had left the map
  // (the pin is consumed here), false when it is still there.
  bool TakeDeadPin(uint64_t born) {
    auto d = dead_pins_.find(born);
    if (d == dead_pins_.end()) return false;
    if (--d->second == 0) dead_pins_.erase(d);
    return true;
  }
  // FLUSHALL: every pinned key is gone; the leases live on, pinning nothing.
  void EndEpoch() {
    ++epoch_;
    dead_pins_.clear();
    pinned_keys_ = pinned_bytes_ = 0;
  }

  PinStats Stats() const { return PinStats{pinned_keys_, pinned_bytes_, leases_.size()}; }

 private:
  std::unordered_map<uint64_t, PinLease> leases_;
  std::set<std::pair<int64_t, uint64_t>> by_deadline_;  // (deadline, id)
  // Pins still counted by leases on entries that were removed (born -> pins).
  std::unordered_map<uint64_t, uint32_t> dead_pins_;
  uint64_t next_lease_ = 1;
  uint64_t next_born_ = 1;
  uint64_t epoch_ = 0;
  uint64_t pinned_keys_ = 0;
  uint64_t pinned_bytes_ = 0;
  uint64_t max_leases_ = 1000000;
};

}  // namespace pion::store
