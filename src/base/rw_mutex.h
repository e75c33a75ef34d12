// WriterFirstMutex: a reader-writer lock on which a writer that waits holds
// off readers that arrive after it. std::shared_mutex is glibc's default
// rwlock, which prefers readers: a reader is let in while any reader holds the
// lock, even with a writer queued, so readers that keep overlapping (workers
// that each hold the lock for a whole read batch under pipelined load) can
// keep a writer out indefinitely. This one is glibc's
// PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP kind: once a writer waits, new
// readers queue behind it, and it gets the lock when the readers inside leave.
//
// The price of that is the "non-recursive": a thread must not take the shared
// lock again while it holds it (with a writer waiting in between, the second
// lock_shared waits for the writer, which waits for the first: a deadlock).
// The server's exec lock is taken once per read batch and never nested
// (server/command_service.cc).
//
// Meets the standard SharedMutex requirements, so std::shared_lock and
// std::unique_lock work with it. It is a capability for the clang
// thread-safety analysis (base/thread_annotations.h); the std lock types are
// not annotated, so only direct lock()/lock_shared() calls are checked.
//
// Thread-safety: thread-safe (it is a lock).
#pragma once

#include <pthread.h>

#include "base/check.h"
#include "base/thread_annotations.h"

namespace pion {

class CAPABILITY("mutex") WriterFirstMutex {
 public:
  WriterFirstMutex() {
    pthread_rwlockattr_t attr;
    PION_CHECK(pthread_rwlockattr_init(&attr) == 0);
    PION_CHECK(pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP) ==
               0);
    PION_CHECK(pthread_rwlock_init(&rw_, &attr) == 0);
    pthread_rwlockattr_destroy(&attr);
  }
  ~WriterFirstMutex() { pthread_rwlock_destroy(&rw_); }
  WriterFirstMutex(const WriterFirstMutex&) = delete;
  WriterFirstMutex& operator=(const WriterFirstMutex&) = delete;

  void lock() ACQUIRE() { PION_CHECK(pthread_rwlock_wrlock(&rw_) == 0); }
  bool try_lock() TRY_ACQUIRE(true) { return pthread_rwlock_trywrlock(&rw_) == 0; }
  void unlock() RELEASE() { pthread_rwlock_unlock(&rw_); }
  void lock_shared() ACQUIRE_SHARED() { PION_CHECK(pthread_rwlock_rdlock(&rw_) == 0); }
  // False while a writer holds the lock or waits for it.
  bool try_lock_shared() TRY_ACQUIRE_SHARED(true) { return pthread_rwlock_tryrdlock(&rw_) == 0; }
  void unlock_shared() RELEASE_SHARED() { pthread_rwlock_unlock(&rw_); }

 private:
  pthread_rwlock_t rw_;
};

}  // namespace pion
