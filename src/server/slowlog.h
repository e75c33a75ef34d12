// SlowLog: the last slowlog-max-len commands that took at least
// slowlog-log-slower-than microseconds to execute (SLOWLOG GET/LEN/RESET).
// Entries keep at most kMaxArgs arguments of at most kMaxArgBytes each, as
// Redis does. A mutex guards the list; it is taken only for a command that
// is slow enough to be logged, never on the fast path.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace pion::server {

struct SlowLogEntry {
  uint64_t id = 0;
  int64_t unix_s = 0;
  uint64_t usec = 0;
  std::vector<std::string> args;
  std::string addr;
  std::string name;
};

class SlowLog {
 public:
  static constexpr size_t kMaxArgs = 32;
  static constexpr size_t kMaxArgBytes = 128;

  void Add(std::span<const std::string_view> args, uint64_t usec, std::string addr,
           std::string name, size_t max_len);
  // The newest `count` entries, newest first.
  std::vector<SlowLogEntry> Get(size_t count) const;
  size_t Len() const;
  void Reset();
  // Trims to `max_len` entries (CONFIG SET slowlog-max-len).
  void Trim(size_t max_len);

 private:
  mutable base::Mutex mu_;
  std::deque<SlowLogEntry> entries_ GUARDED_BY(mu_);  // newest first
  uint64_t next_id_ GUARDED_BY(mu_) = 0;
};

}  // namespace pion::server
