#include "server/receipt.h"

#include <cstdio>

namespace pion::server {

void Receipt::RecordHit(uint64_t tokens, uint64_t prefill_us) {
  constexpr auto kR = std::memory_order_relaxed;
  hits_.fetch_add(1, kR);
  if (tokens > 0) tokens_served_.fetch_add(tokens, kR);
  if (prefill_us > 0) {
    hits_measured_.fetch_add(1, kR);
    prefill_us_saved_.fetch_add(prefill_us, kR);
    prefill_us_measured_.fetch_add(prefill_us, kR);
  } else if (tokens > 0) {
    prefill_us_saved_.fetch_add(tokens * kEstimatedPrefillUsPerToken, kR);
  }
}

void Receipt::Reset() {
  for (auto* c : {&hits_, &misses_, &hits_measured_, &tokens_served_, &bytes_served_,
                  &prefill_us_saved_, &prefill_us_measured_})
    c->store(0, std::memory_order_relaxed);
}

ReceiptSnapshot Receipt::Read() const {
  constexpr auto kR = std::memory_order_relaxed;
  ReceiptSnapshot s;
  s.hits = hits_.load(kR);
  s.misses = misses_.load(kR);
  s.hits_measured = hits_measured_.load(kR);
  s.tokens_served = tokens_served_.load(kR);
  s.bytes_served = bytes_served_.load(kR);
  s.prefill_us_saved = prefill_us_saved_.load(kR);
  s.prefill_us_measured = prefill_us_measured_.load(kR);
  return s;
}

std::array<ReceiptField, kReceiptFields> ReceiptFields(const ReceiptSnapshot& s,
                                                       uint64_t uptime_s) {
  return {{
      {"worker_id", 0},  // the receipt is server-wide (every worker)
      {"uptime_in_seconds", uptime_s},
      {"kvprefix_hits", s.hits},
      {"kvprefix_misses", s.misses},
      {"kvprefix_hits_measured", s.hits_measured},
      {"kvprefix_tokens_served", s.tokens_served},
      {"kvprefix_bytes_served", s.bytes_served},
      {"kvprefix_prefill_us_saved", s.prefill_us_saved},
      {"kvprefix_prefill_us_measured", s.prefill_us_measured},
      {"prefill_seconds_avoided", s.prefill_us_saved, true},
      {"prefill_seconds_avoided_measured", s.prefill_us_measured, true},
      {"semantic_hits", s.semantic_hits},
      {"semantic_misses", s.semantic_misses},
      {"moe_hits", s.moe_hits},
      {"moe_misses", s.moe_misses},
      {"vector_queries", s.vector_queries},
  }};
}

std::string Receipt::SecondsText(uint64_t us) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%llu.%03llu", static_cast<unsigned long long>(us / 1000000),
                static_cast<unsigned long long>((us % 1000000) / 1000));
  return buf;
}

}  // namespace pion::server
