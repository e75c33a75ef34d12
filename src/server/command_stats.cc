#include "server/command_stats.h"

#include <bit>

namespace pion::server {

size_t LatencyBucket(uint64_t us) {
  if (us <= 1) return 0;
  size_t b = static_cast<size_t>(std::bit_width(us - 1));  // ceil(log2(us))
  return b < kLatencyBuckets - 1 ? b : kLatencyBuckets - 1;
}

size_t TrackBucket(uint64_t us) {
  if (us < kTrackExact) return static_cast<size_t>(us);
  // us - 1 in [2^k, 2^(k+1)): us in (2^k, 2^(k+1)], k >= 4.
  const uint64_t v = us - 1;
  const size_t k = static_cast<size_t>(std::bit_width(v)) - 1;
  if (k >= kTrackMaxLog2) return kTrackBuckets - 1;
  const size_t sub = static_cast<size_t>(v >> (k - 3)) & (kTrackSub - 1);
  return kTrackExact + (k - 4) * kTrackSub + sub;
}

uint64_t TrackBucketHighUs(size_t i) {
  if (i < kTrackExact) return i;
  const size_t k = 4 + (i - kTrackExact) / kTrackSub;
  const uint64_t sub = (i - kTrackExact) % kTrackSub;
  return (kTrackSub + sub + 1) << (k - 3);
}

uint64_t TrackPercentileUs(const TrackHist& h, double p) {
  uint64_t total = 0;
  for (uint64_t n : h) total += n;
  if (total == 0) return 0;
  double want = p / 100.0 * static_cast<double>(total);
  uint64_t rank = static_cast<uint64_t>(want);
  if (static_cast<double>(rank) < want) ++rank;  // ceil
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < kTrackBuckets; ++i) {
    seen += h[i];
    if (seen >= rank) return TrackBucketHighUs(i);
  }
  return TrackBucketHighUs(kTrackBuckets - 1);
}

void CommandCounters::Add(const CommandCounters& o) {
  calls += o.calls;
  usec += o.usec;
  rejected += o.rejected;
  failed += o.failed;
  for (size_t i = 0; i < kLatencyBuckets; ++i) hist[i] += o.hist[i];
}

CommandStats::CommandStats(size_t slots)
    : slots_storage_(new Slot[slots]), slots_(slots_storage_.get(), slots) {}

void CommandStats::CountError(std::string_view code) {
  if (code.empty()) return;
  base::MutexLock l(&errors_mu_);
  auto it = errors_.find(code);
  if (it != errors_.end()) {
    ++it->second;
  } else if (errors_.size() < kMaxErrorCodes) {
    errors_.emplace(std::string(code), 1);
  }
}

void CommandStats::AddTo(std::vector<CommandCounters>* out) const {
  constexpr auto kR = std::memory_order_relaxed;
  for (size_t i = 0; i < slots_.size() && i < out->size(); ++i) {
    const Slot& s = slots_[i];
    uint64_t calls = s.calls.load(kR), rejected = s.rejected.load(kR);
    if (calls == 0 && rejected == 0) continue;
    CommandCounters& c = (*out)[i];
    c.calls += calls;
    c.usec += s.usec.load(kR);
    c.rejected += rejected;
    c.failed += s.failed.load(kR);
    for (size_t b = 0; b < kLatencyBuckets; ++b) c.hist[b] += s.hist[b].load(kR);
  }
}

bool CommandStats::AddTrackedTo(std::vector<TrackHist>* out) const {
  constexpr auto kR = std::memory_order_relaxed;
  bool any = false;
  for (size_t i = 0; i < slots_.size() && i < out->size(); ++i) {
    const Slot& s = slots_[i];
    if (s.calls.load(kR) == 0) continue;  // a tracked call is always counted too
    TrackHist& h = (*out)[i];
    for (size_t b = 0; b < kTrackBuckets; ++b) {
      uint64_t n = s.track[b].load(kR);
      h[b] += n;
      any |= n != 0;
    }
  }
  return any;
}

void CommandStats::AddErrorsTo(std::map<std::string, uint64_t>* out) const {
  base::MutexLock l(&errors_mu_);
  for (const auto& [code, n] : errors_) (*out)[code] += n;
}

void CommandStats::Reset() {
  constexpr auto kR = std::memory_order_relaxed;
  for (Slot& s : slots_) {
    s.calls.store(0, kR);
    s.usec.store(0, kR);
    s.rejected.store(0, kR);
    s.failed.store(0, kR);
    for (auto& h : s.hist) h.store(0, kR);
    for (auto& h : s.track) h.store(0, kR);
  }
  base::MutexLock l(&errors_mu_);
  errors_.clear();
}

}  // namespace pion::server
