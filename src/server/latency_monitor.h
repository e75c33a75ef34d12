// LatencyMonitor: Redis' latency monitor (LATENCY LATEST/HISTORY/RESET). For
// each event ("command", "fast-command") whose latency reached
// latency-monitor-threshold milliseconds it keeps the latest sample, the
// all-time maximum and a history of up to kHistory samples, one per second
// (several in the same second keep the largest). A mutex guards it; only
// events over the threshold take it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace pion::server {

struct LatencySample {
  int64_t unix_s = 0;
  uint64_t ms = 0;
};

struct LatencyEventInfo {
  std::string event;
  LatencySample latest;
  uint64_t max_ms = 0;
};

class LatencyMonitor {
 public:
  static constexpr size_t kHistory = 160;

  void Add(const char* event, uint64_t ms);
  std::vector<LatencyEventInfo> Latest() const;
  // Oldest first; empty for an unknown event.
  std::vector<LatencySample> History(const std::string& event) const;
  // Resets the named events (all when empty); returns how many existed.
  size_t Reset(const std::vector<std::string>& events);

 private:
  struct Event {
    std::vector<LatencySample> samples;  // ring, oldest at `head` once full
    size_t head = 0;
    uint64_t max_ms = 0;
  };
  mutable base::Mutex mu_;
  std::map<std::string, Event> events_ GUARDED_BY(mu_);
};

}  // namespace pion::server
