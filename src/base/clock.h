// Clocks: monotonic nanoseconds for durations, Unix seconds for reports.
#pragma once

#include <time.h>

#include <cstdint>

namespace pion {

inline uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t MonotonicUs() { return MonotonicNs() / 1000; }
inline int64_t UnixSeconds() { return static_cast<int64_t>(::time(nullptr)); }
inline uint64_t UnixMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000ull + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}
// Unix time in milliseconds (key expiry times).
inline int64_t UnixMillis() { return static_cast<int64_t>(UnixMicros() / 1000); }

}  // namespace pion
