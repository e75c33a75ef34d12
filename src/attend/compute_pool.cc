#include "attend/compute_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <memory>

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

ComputePool::ComputePool(uint32_t threads, std::string name) : threads_(std::max(1u, threads)) {
  name.resize(std::min<size_t>(name.size(), 12));
  for (uint32_t i = 0; i < threads_; ++i) {
    workers_.emplace_back([this] { Loop(); });
    std::string tn = name + std::to_string(i);
    pthread_setname_np(workers_.back().native_handle(), tn.substr(0, 15).c_str());
  }
}

ComputePool::~ComputePool() { Stop(); }

bool ComputePool::Post(Task t) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return false;
    tasks_.push_back(std::move(t));
  }
  cv_.notify_one();
  return true;
}

bool ComputePool::PostFront(Task t) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ && workers_.empty()) return false;
    tasks_.push_front(std::move(t));
  }
  cv_.notify_one();
  return true;
}

void ComputePool::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ && workers_.empty()) return;
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  std::lock_guard<std::mutex> l(mu_);
  workers_.clear();
}

size_t ComputePool::pending() const {
  std::lock_guard<std::mutex> l(mu_);
  return tasks_.size() + running_;
}

void ComputePool::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping and drained
    Task t = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    l.unlock();
    t();
    t = nullptr;
    l.lock();
    --running_;
  }
}

void ComputePool::ParallelFor(uint32_t n, const std::function<void(uint32_t)>& fn) {
  if (n == 0) return;
  if (n == 1 || threads_ == 1) {
    for (uint32_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  const uint32_t helpers = std::min(n, threads_) - 1;
  for (uint32_t i = 0; i < helpers; ++i) {
    // Helpers go ahead of waiting tasks: they finish work already started. While
    // stopping, the threads still drain the queue, so helpers are accepted then too.
    if (!PostFront([job] { job->Run(); })) break;
  }
  job->Run();
  std::unique_lock<std::mutex> l(job->mu);
  job->cv.wait(l, [&] { return job->finished == n; });
}

}  // namespace pion::attend
