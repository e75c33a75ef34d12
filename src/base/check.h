// PION_CHECK / PION_DCHECK: broken invariants are bugs and abort with file and
// line (never an error value). PION_DCHECK compiles away in NDEBUG builds.
#pragma once

namespace pion::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const char* msg);
}  // namespace pion::internal

#define PION_CHECK(cond)                                                 \
  do {                                                                   \
    if (__builtin_expect(!(cond), 0))                                    \
      ::pion::internal::CheckFailed(__FILE__, __LINE__, #cond, nullptr); \
  } while (0)

#define PION_CHECK_MSG(cond, msg)                                      \
  do {                                                                 \
    if (__builtin_expect(!(cond), 0))                                  \
      ::pion::internal::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

#ifdef NDEBUG
#define PION_DCHECK(cond) \
  do {                    \
  } while (0)
#else
#define PION_DCHECK(cond) PION_CHECK(cond)
#endif
