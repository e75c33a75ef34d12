#include "base/log.h"

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <string>

namespace pion {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kNotice)};
std::atomic<int> g_fd{2};
}  // namespace

bool ParseLogLevel(std::string_view s, LogLevel* out) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (l == "debug")
    *out = LogLevel::kDebug;
  else if (l == "verbose")
    *out = LogLevel::kVerbose;
  else if (l == "notice")
    *out = LogLevel::kNotice;
  else if (l == "warning")
    *out = LogLevel::kWarning;
  else
    return false;
  return true;
}

std::string_view LogLevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kVerbose:
      return "verbose";
    case LogLevel::kNotice:
      return "notice";
    case LogLevel::kWarning:
      return "warning";
  }
  return "notice";
}

void SetLogLevel(LogLevel l) { g_level.store(static_cast<int>(l)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

bool SetLogFile(std::string_view path) {
  if (path.empty()) {
    g_fd.store(2);
    return true;
  }
  std::string p(path);
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  int old = g_fd.exchange(fd);
  if (old > 2) ::close(old);
  return true;
}

void LogLine(LogLevel l, const char* fmt, ...) {
  char buf[2048];
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm t;
  gmtime_r(&tv.tv_sec, &t);
  static const char kMark[] = {'.', '-', '*', '#'};
  int n = std::snprintf(buf, sizeof(buf), "%d:M %04d-%02d-%02dT%02d:%02d:%02d.%03dZ %c ",
                        static_cast<int>(getpid()), t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                        t.tm_hour, t.tm_min, t.tm_sec, static_cast<int>(tv.tv_usec / 1000),
                        kMark[static_cast<int>(l) & 3]);
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : std::min<size_t>(m, sizeof(buf) - n - 2));
  buf[len++] = '\n';
  ssize_t w = ::write(g_fd.load(std::memory_order_relaxed), buf, len);
  (void)w;
}

}  // namespace pion
