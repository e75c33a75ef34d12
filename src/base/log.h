// Logging: one line per event, "<UTC timestamp> <level> <message>", to stderr or
// the file set with SetLogFile. Thread-safe (one write(2) per line). Log once,
// where an error is handled, never where it is passed on.
#pragma once

#include <cstdint>
#include <string_view>

namespace pion {

enum class LogLevel : int { kDebug = 0, kVerbose = 1, kNotice = 2, kWarning = 3 };

// Parses "debug", "verbose", "notice", "warning" (Redis names); false if unknown.
bool ParseLogLevel(std::string_view s, LogLevel* out);
std::string_view LogLevelName(LogLevel l);
void SetLogLevel(LogLevel l);
LogLevel GetLogLevel();
// Opens (append) `path` for log output; empty = stderr. False if it cannot be opened.
bool SetLogFile(std::string_view path);

void LogLine(LogLevel l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// For a line that a fault can repeat in a tight loop (accept() failing with
// EMFILE): Allow(now) is true at most once per interval; the lines it refused
// since are counted, for the next line to report. Not thread-safe: one per
// thread or call site.
class LogRateLimit {
 public:
  explicit LogRateLimit(uint64_t interval_us) : interval_us_(interval_us) {}
  bool Allow(uint64_t now_us) {
    if (logged_ && now_us - last_us_ < interval_us_) {
      ++suppressed_;
      return false;
    }
    logged_ = true;
    last_us_ = now_us;
    return true;
  }
  // Lines refused since the last allowed one (and resets the count).
  uint64_t TakeSuppressed() {
    uint64_t n = suppressed_;
    suppressed_ = 0;
    return n;
  }

 private:
  uint64_t interval_us_;
  uint64_t last_us_ = 0;
  uint64_t suppressed_ = 0;
  bool logged_ = false;
};

}  // namespace pion

#define PION_LOG(level, ...)                                                \
  do {                                                                      \
    if (static_cast<int>(level) >= static_cast<int>(::pion::GetLogLevel())) \
      ::pion::LogLine(level, __VA_ARGS__);                                  \
  } while (0)
#define LOG_DEBUG(...) PION_LOG(::pion::LogLevel::kDebug, __VA_ARGS__)
#define LOG_VERBOSE(...) PION_LOG(::pion::LogLevel::kVerbose, __VA_ARGS__)
#define LOG_NOTICE(...) PION_LOG(::pion::LogLevel::kNotice, __VA_ARGS__)
#define LOG_WARNING(...) PION_LOG(::pion::LogLevel::kWarning, __VA_ARGS__)
