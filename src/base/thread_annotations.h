// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html),
// as LevelDB's port/thread_annotations.h defines them. Under clang with
// -Wthread-safety (the `thread-safety` preset, `make test-tsa`) the compiler checks
// that every member marked GUARDED_BY(mu) is touched only with `mu` held and that
// every function marked REQUIRES(mu) is called with it held; under GCC they are
// empty. std::mutex is not annotated in libstdc++: annotated code locks a
// base::Mutex (base/mutex.h).
#pragma once

#if defined(__clang__) && !defined(SWIG)
#define PION_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define PION_THREAD_ANNOTATION_(x)
#endif

// A class that is a lock (base::Mutex, WriterFirstMutex).
#ifndef CAPABILITY
#define CAPABILITY(x) PION_THREAD_ANNOTATION_(capability(x))
#endif
// An RAII class that holds a lock for its lifetime (base::MutexLock).
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY PION_THREAD_ANNOTATION_(scoped_lockable)
#endif
// A data member read and written only with the lock held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) PION_THREAD_ANNOTATION_(guarded_by(x))
#endif
// A pointer member whose pointee is read and written only with the lock held.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) PION_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif
// Lock order: this lock is taken after (before) the ones named.
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) PION_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) PION_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif
// The caller must hold the lock (exclusively / at least shared).
#ifndef REQUIRES
#define REQUIRES(...) PION_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) PION_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#endif
// The function takes (releases) the lock and returns with it held (released).
#ifndef ACQUIRE
#define ACQUIRE(...) PION_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) PION_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) PION_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) PION_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) PION_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE_SHARED
#define TRY_ACQUIRE_SHARED(...) PION_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))
#endif
// The caller must not hold the lock (the function takes it).
#ifndef EXCLUDES
#define EXCLUDES(...) PION_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif
// Tells the analysis the lock is held here (checked at run time where it can be).
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) PION_THREAD_ANNOTATION_(assert_capability(x))
#endif
#ifndef ASSERT_SHARED_CAPABILITY
#define ASSERT_SHARED_CAPABILITY(x) PION_THREAD_ANNOTATION_(assert_shared_capability(x))
#endif
// The function returns a reference to the lock named.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) PION_THREAD_ANNOTATION_(lock_returned(x))
#endif
// Turns the analysis off for one function (say why where it is used).
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS PION_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif
