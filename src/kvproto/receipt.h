// The value receipt (PION.STATS, INFO "# Pion"): server-wide counters of what
// the prefix cache did. Every LOOKUP and FETCH bumps them, so they are kept per
// worker (one cache-line cell per thread slot, base/sharded_counter.h: no line
// written by every worker) and summed on Read (a read may miss a command in
// flight; Reset may race with one and keep it). Accounting
// rules (docs/protocol.md "The value receipt"): a hit with a measured prefill time credits exactly
// that time; otherwise tokens x 555 us, kept apart as an estimate. Not persisted.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/sharded_counter.h"

namespace pion::server {

inline constexpr uint64_t kEstimatedPrefillUsPerToken = 555;

struct ReceiptSnapshot {
  uint64_t hits = 0, misses = 0, hits_measured = 0, tokens_served = 0, bytes_served = 0;
  uint64_t prefill_us_saved = 0, prefill_us_measured = 0;
  uint64_t semantic_hits = 0, semantic_misses = 0, moe_hits = 0, moe_misses = 0;
  uint64_t vector_queries = 0;
};

// One field of PION.STATS: an integer, or (seconds_text) a bulk string of
// Receipt::SecondsText(value).
struct ReceiptField {
  std::string_view name;
  uint64_t value = 0;
  bool seconds_text = false;
};
inline constexpr size_t kReceiptFields = 16;
// PION.STATS' fields in their fixed order (pion-server and the module alike).
std::array<ReceiptField, kReceiptFields> ReceiptFields(const ReceiptSnapshot& s, uint64_t uptime_s);

class Receipt {
 public:
  // A KV.PREFIX.LOOKUP hit crediting `tokens` and `prefill_us` (0 = unknown).
  void RecordHit(uint64_t tokens, uint64_t prefill_us);
  void RecordMiss() { Bump(Mine().misses, 1); }
  void RecordBytesServed(uint64_t n) { Bump(Mine().bytes_served, n); }
  void Reset();
  ReceiptSnapshot Read() const;

  // "S.mmm": integer microseconds to seconds, truncated to milliseconds.
  static std::string SecondsText(uint64_t us);

 private:
  // One thread slot's counters: 56 bytes, one cache line.
  struct alignas(kCacheLine) Cell {
    std::atomic<uint64_t> hits{0}, misses{0}, hits_measured{0}, tokens_served{0}, bytes_served{0},
        prefill_us_saved{0}, prefill_us_measured{0};
  };
  static void Bump(std::atomic<uint64_t>& c, uint64_t n) {
    SlotAdd(c, n);  // owner: load + store; shared slot 0: fetch_add
  }
  Cell& Mine() { return cells_[ThreadSlot()]; }

  Cell cells_[kMaxThreadSlots];
};

}  // namespace pion::server
