#include "attend/compute_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>

namespace pion::attend {

namespace {

// One ParallelFor call: chunks are claimed by index; `fn` is dereferenced only for a
// claimed index < n, which the caller is still waiting for, so a helper that starts
// after the call returned touches nothing but this (shared) state.
struct Job {
  const std::function<void(uint32_t)>* fn = nullptr;
  uint32_t n = 0;
  std::atomic<uint32_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  uint32_t finished = 0;  // guarded by mu

  void Run() {
    uint32_t done = 0;
    for (;;) {
      uint32_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) break;
      (*fn)(i);
      ++done;
    }
    if (done == 0) return;
    std::lock_guard<std::mutex> l(mu);
    finished += done;
    if (finished == n) cv.notify_all();
  }
};

}  // namespace

ComputePool::ComputePool(uint32_t threads, std::string name)
    : pool_(threads, std::move(name), base::ThreadPriority::kBackground) {
  pool_.Start();
}

void ComputePool::ParallelFor(uint32_t n, const std::function<void(uint32_t)>& fn) {
  if (n == 0) return;
  if (n == 1 || pool_.threads() == 1) {
    for (uint32_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  const uint32_t helpers = std::min(n, pool_.threads()) - 1;
  for (uint32_t i = 0; i < helpers; ++i) {
    // Helpers go ahead of waiting tasks: they finish work already started. While
    // stopping, the threads still drain the queue, so helpers are accepted then too.
    if (!pool_.PostFront([job] { job->Run(); })) break;
  }
  job->Run();
  std::unique_lock<std::mutex> l(job->mu);
  job->cv.wait(l, [&] { return job->finished == n; });
}

}  // namespace pion::attend
