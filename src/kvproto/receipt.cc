#include "kvproto/receipt.h"

#include <cstdio>

namespace pion::server {

void Receipt::RecordHit(uint64_t tokens, uint64_t prefill_us) {
  Cell& c = Mine();
  Bump(c.hits, 1);
  if (tokens > 0) Bump(c.tokens_served, tokens);
  if (prefill_us > 0) {
    Bump(c.hits_measured, 1);
    Bump(c.prefill_us_saved, prefill_us);
    Bump(c.prefill_us_measured, prefill_us);
  } else if (tokens > 0) {
    Bump(c.prefill_us_saved, tokens * kEstimatedPrefillUsPerToken);
  }
}

void Receipt::Reset() {
  for (Cell& c : cells_)
    for (auto* a : {&c.hits, &c.misses, &c.hits_measured, &c.tokens_served, &c.bytes_served,
                    &c.prefill_us_saved, &c.prefill_us_measured})
      a->store(0, std::memory_order_relaxed);
}

ReceiptSnapshot Receipt::Read() const {
  constexpr auto kR = std::memory_order_relaxed;
  ReceiptSnapshot s;
  for (const Cell& c : cells_) {
    s.hits += c.hits.load(kR);
    s.misses += c.misses.load(kR);
    s.hits_measured += c.hits_measured.load(kR);
    s.tokens_served += c.tokens_served.load(kR);
    s.bytes_served += c.bytes_served.load(kR);
    s.prefill_us_saved += c.prefill_us_saved.load(kR);
    s.prefill_us_measured += c.prefill_us_measured.load(kR);
  }
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
