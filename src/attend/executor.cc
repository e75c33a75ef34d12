#include "attend/executor.h"

#include "base/check.h"

namespace pion::attend {

ThreadPoolExecutor::ThreadPoolExecutor(uint32_t threads) : threads_(threads < 1 ? 1 : threads) {
  for (uint32_t i = 1; i < threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPoolExecutor::~ThreadPoolExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// Takes tasks until none is left. Called with mu_ unlocked.
void ThreadPoolExecutor::RunTasks() {
  std::unique_lock<std::mutex> lock(mu_);
  while (next_ < n_) {
    const uint32_t i = next_++;
    const std::function<void(uint32_t)>* fn = fn_;
    lock.unlock();
    (*fn)(i);
    lock.lock();
    if (++finished_ == n_) done_cv_.notify_all();
  }
}

void ThreadPoolExecutor::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunTasks();
  }
}

void ThreadPoolExecutor::ParallelFor(uint32_t n, const std::function<void(uint32_t)>& fn) {
  if (n == 0) return;
  if (threads_ == 1 || n == 1) {
    for (uint32_t i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    finished_ = 0;
    ++generation_;
  }
  start_cv_.notify_all();
  RunTasks();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return finished_ == n_; });
  fn_ = nullptr;
  n_ = 0;
  next_ = 0;
}

}  // namespace pion::attend
