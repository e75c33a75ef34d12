// libFuzzer target for the glob matcher (src/base/strutil.h GlobMatch) that KEYS,
// SCAN MATCH, ACL key and channel patterns and CONFIG GET use. The input is split at
// its first NUL byte into a pattern and a string (a missing NUL: the first half is the
// pattern); the matcher must agree with the dynamic-programming reference
// (src/base/testing/glob_reference.h) in both case modes, and take at most
// (pattern + 1) x (string + 1) steps.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/check.h"
#include "base/strutil.h"
#include "base/testing/glob_reference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // the reference is quadratic in memory
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t cut = in.find('\0');
  std::string_view pattern, s;
  if (cut == std::string_view::npos) {
    pattern = in.substr(0, size / 2);
    s = in.substr(size / 2);
  } else {
    pattern = in.substr(0, cut);
    s = in.substr(cut + 1);
  }
  for (bool nocase : {false, true}) {
    uint64_t steps = 0;
    bool got = pion::GlobMatch(pattern, s, nocase, &steps);
    PION_CHECK(got == pion::testing::GlobReference(pattern, s, nocase));
    PION_CHECK(steps <= (pattern.size() + 1) * (s.size() + 1));
  }
  return 0;
}
