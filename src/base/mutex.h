// base::Mutex, base::MutexLock, base::SharedMutex (with ReaderLock and
// WriterLock) and base::CondVar: std::mutex, std::shared_mutex and
// std::condition_variable with the clang thread-safety annotations
// (base/thread_annotations.h) that libstdc++'s do not carry, as LevelDB's
// port::Mutex / MutexLock / CondVar. Same cost as the std types they wrap.
//
//   base::Mutex mu_;
//   int n_ GUARDED_BY(mu_);
//   void Bump() EXCLUDES(mu_) { base::MutexLock l(&mu_); ++n_; }
//   void WaitPositive() { base::MutexLock l(&mu_); while (n_ <= 0) cv_.Wait(mu_); }
//
// A condition wait is a loop over the predicate in the caller (a lambda
// predicate would be analysed as a function that holds no lock).
//
// Thread-safety: thread-safe (they are locks).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "base/thread_annotations.h"

namespace pion::base {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For the analysis only: the caller knows the lock is held.
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction; Unlock() and Lock() in between
// give it up for a while (the analysis follows both).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A reader-writer lock (std::shared_mutex, glibc's reader-preferring rwlock;
// WriterFirstMutex in base/rw_mutex.h is the writer-preferring kind).
class CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` shared from construction to destruction.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderLock() RELEASE() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds `mu` exclusively from construction to destruction.
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// A condition variable waited on with a base::Mutex held.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` while waiting; holds it again on return (also spuriously).
  void Wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu.mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // As Wait, returning at `deadline` at the latest; false on timeout.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu.mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(l, deadline) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace pion::base
