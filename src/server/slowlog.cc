#include "server/slowlog.h"

#include "base/clock.h"

namespace pion::server {

void SlowLog::Add(std::span<const std::string_view> args, uint64_t usec, std::string addr,
                  std::string name, size_t max_len) {
  SlowLogEntry e;
  e.unix_s = static_cast<int64_t>(UnixMicros() / 1000000);
  e.usec = usec;
  size_t n = args.size() > kMaxArgs ? kMaxArgs : args.size();
  for (size_t i = 0; i < n; ++i) {
    if (i == kMaxArgs - 1 && args.size() > kMaxArgs) {
      e.args.push_back("... (" + std::to_string(args.size() - kMaxArgs + 1) + " more arguments)");
      break;
    }
    std::string_view a = args[i];
    if (a.size() > kMaxArgBytes) {
      std::string s(a.substr(0, kMaxArgBytes));
      s += "... (" + std::to_string(a.size() - kMaxArgBytes) + " more bytes)";
      e.args.push_back(std::move(s));
    } else {
      e.args.emplace_back(a);
    }
  }
  e.addr = std::move(addr);
  e.name = std::move(name);
  base::MutexLock l(&mu_);
  e.id = next_id_++;
  entries_.push_front(std::move(e));
  while (entries_.size() > max_len) entries_.pop_back();
}

std::vector<SlowLogEntry> SlowLog::Get(size_t count) const {
  base::MutexLock l(&mu_);
  size_t n = count < entries_.size() ? count : entries_.size();
  return std::vector<SlowLogEntry>(entries_.begin(), entries_.begin() + static_cast<long>(n));
}

size_t SlowLog::Len() const {
  base::MutexLock l(&mu_);
  return entries_.size();
}

void SlowLog::Reset() {
  base::MutexLock l(&mu_);
  entries_.clear();
}

void SlowLog::Trim(size_t max_len) {
  base::MutexLock l(&mu_);
  while (entries_.size() > max_len) entries_.pop_back();
}

}  // namespace pion::server
