#include "server/receipt.h"

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

std::string Receipt::SecondsText(uint64_t us) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%llu.%03llu", static_cast<unsigned long long>(us / 1000000),
                static_cast<unsigned long long>((us % 1000000) / 1000));
  return buf;
}

}  // namespace pion::server
