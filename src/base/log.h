// Logging: one line per event, "<UTC timestamp> <level> <message>", to stderr or
// the file set with SetLogFile. Thread-safe (one write(2) per line). Log once,
// where an error is handled, never where it is passed on.
#pragma once

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
