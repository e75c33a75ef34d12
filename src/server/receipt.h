// The value receipt (PION.STATS, INFO "# Pion"): server-wide counters of what
// the prefix cache did, updated by every worker with relaxed atomics. Accounting
// rules (product.md §8): a hit with a measured prefill time credits exactly that
// time; otherwise tokens x 555 us, kept apart as an estimate. Not persisted.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

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
  void RecordMiss() { misses_.fetch_add(1, std::memory_order_relaxed); }
  void RecordBytesServed(uint64_t n) { bytes_served_.fetch_add(n, std::memory_order_relaxed); }
  void Reset();
  ReceiptSnapshot Read() const;

  // "S.mmm": integer microseconds to seconds, truncated to milliseconds.
  static std::string SecondsText(uint64_t us);

 private:
  std::atomic<uint64_t> hits_{0}, misses_{0}, hits_measured_{0}, tokens_served_{0},
      bytes_served_{0}, prefill_us_saved_{0}, prefill_us_measured_{0};
};

}  // namespace pion::server
