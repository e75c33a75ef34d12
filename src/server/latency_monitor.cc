#include "server/latency_monitor.h"

#include "base/clock.h"

namespace pion::server {

void LatencyMonitor::Add(const char* event, uint64_t ms) {
  int64_t now = static_cast<int64_t>(UnixMicros() / 1000000);
  base::MutexLock l(&mu_);
  Event& e = events_[event];
  if (ms > e.max_ms) e.max_ms = ms;
  if (!e.samples.empty()) {
    size_t last =
        e.samples.size() < kHistory ? e.samples.size() - 1 : (e.head + kHistory - 1) % kHistory;
    LatencySample& s = e.samples[last];
    if (s.unix_s == now) {
      if (ms > s.ms) s.ms = ms;
      return;
    }
  }
  if (e.samples.size() < kHistory) {
    e.samples.push_back({now, ms});
  } else {
    e.samples[e.head] = {now, ms};
    e.head = (e.head + 1) % kHistory;
  }
}

std::vector<LatencyEventInfo> LatencyMonitor::Latest() const {
  base::MutexLock l(&mu_);
  std::vector<LatencyEventInfo> out;
  for (const auto& [name, e] : events_) {
    if (e.samples.empty()) continue;
    size_t last =
        e.samples.size() < kHistory ? e.samples.size() - 1 : (e.head + kHistory - 1) % kHistory;
    out.push_back({name, e.samples[last], e.max_ms});
  }
  return out;
}

std::vector<LatencySample> LatencyMonitor::History(const std::string& event) const {
  base::MutexLock l(&mu_);
  std::vector<LatencySample> out;
  auto it = events_.find(event);
  if (it == events_.end()) return out;
  const Event& e = it->second;
  size_t n = e.samples.size();
  for (size_t i = 0; i < n; ++i)
    out.push_back(e.samples[n < kHistory ? i : (e.head + i) % kHistory]);
  return out;
}

size_t LatencyMonitor::Reset(const std::vector<std::string>& events) {
  base::MutexLock l(&mu_);
  if (events.empty()) {
    size_t n = events_.size();
    events_.clear();
    return n;
  }
  size_t n = 0;
  for (const std::string& ev : events) n += events_.erase(ev);
  return n;
}

}  // namespace pion::server
