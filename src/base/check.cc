#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace pion::internal {

void CheckFailed(const char* file, int line, const char* expr, const char* msg) {
  std::fprintf(stderr, "FATAL %s:%d: check failed: %s%s%s\n", file, line, expr, msg ? ": " : "",
               msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace pion::internal
