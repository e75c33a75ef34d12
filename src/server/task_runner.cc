// TaskRunner: see task_runner.h.
#include "server/task_runner.h"

#include <pthread.h>

#include <cstdio>
#include <utility>

namespace pion::server {

TaskRunner::TaskRunner(int threads, std::string name)
    : num_threads_(threads < 1 ? 1 : threads), name_(std::move(name)) {}

TaskRunner::~TaskRunner() { Stop(); }

void TaskRunner::Start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!threads_.empty() || stop_) return;
  for (int i = 0; i < num_threads_; ++i) {
    threads_.emplace_back([this, i] {
      char name[16];
      std::snprintf(name, sizeof(name), "%.12s%d", name_.c_str(), i);
      pthread_setname_np(pthread_self(), name);
      Loop();
    });
  }
}

bool TaskRunner::Post(Task t) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ || threads_.empty()) return false;
    tasks_.push_back(std::move(t));
  }
  cv_.notify_one();
  return true;
}

void TaskRunner::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

size_t TaskRunner::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return tasks_.size() + running_;
}

void TaskRunner::Loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    cv_.wait(lk, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping and drained
    Task t = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    lk.unlock();
    t();
    t = nullptr;  // release captures (a DeferredReply) outside the lock
    lk.lock();
    --running_;
  }
}

}  // namespace pion::server
