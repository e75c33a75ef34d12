// ThreadPool: see thread_pool.h.
#include "base/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

namespace pion::base {

namespace {

// Applies `p` to the calling thread (Linux keeps the policy and the nice value
// per thread; a new thread starts with its creator's). Background threads go
// kBackgroundNice steps below their creator (at most 19), which needs no
// privilege.
void ApplyPriority(ThreadPriority p) {
  if (p != ThreadPriority::kBackground) return;
  sched_param sp{};
  sp.sched_priority = 0;
  (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
  const auto tid = static_cast<id_t>(gettid());
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, tid);
  if (nice == -1 && errno != 0) return;
  (void)setpriority(PRIO_PROCESS, tid, std::min(19, nice + kBackgroundNice));
}

}  // namespace

ThreadPool::ThreadPool(uint32_t threads, std::string name, ThreadPriority priority)
    : num_threads_(threads < 1 ? 1 : threads), name_(std::move(name)), priority_(priority) {}

ThreadPool::~ThreadPool() { Stop(); }

void ThreadPool::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (started_ || stop_) return;
  started_ = true;
  for (uint32_t i = 0; i < num_threads_; ++i) {
    threads_.emplace_back([this, i] {
      char name[16];
      std::snprintf(name, sizeof(name), "%.12s%u", name_.c_str(), i);
      pthread_setname_np(pthread_self(), name);
      ApplyPriority(priority_);
      Loop();
    });
  }
}

bool ThreadPool::Post(Task t) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stop_) return false;
    tasks_.push_back(std::move(t));
  }
  cv_.notify_one();
  return true;
}

bool ThreadPool::PostFront(Task t) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || joined_) return false;
    tasks_.push_front(std::move(t));
  }
  cv_.notify_one();
  return true;
}

void ThreadPool::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
  std::lock_guard<std::mutex> l(mu_);
  joined_ = true;
}

size_t ThreadPool::pending() const {
  std::lock_guard<std::mutex> l(mu_);
  return tasks_.size() + running_;
}

void ThreadPool::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping and drained
    Task t = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    l.unlock();
    t();
    t = nullptr;  // release the captures outside the lock
    l.lock();
    --running_;
  }
}

}  // namespace pion::base
