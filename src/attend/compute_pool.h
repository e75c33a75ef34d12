// ComputePool: the server's attention threads (--attend-threads, stage2.md §2), apart
// from the I/O workers and the background SAVE/COMMIT runner.
//
// Two kinds of work share its threads: whole tasks (a query or a KV.PREFIX.WARM whose
// reply is completed later, Post()) and the split-KV chunks of one attention call
// (ParallelFor(), the Executor interface). ParallelFor queues helpers ahead of waiting
// tasks and the calling thread claims chunks itself, so a task running on the pool
// may call ParallelFor without deadlock (it finishes its own chunks even when every
// other thread is busy), and any number of ParallelFor calls may run at once.
//
// Thread-safety: every method may be called from any thread. Stop() runs the tasks
// already queued, then joins; Post() afterwards returns false and drops the task.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "attend/executor.h"

namespace pion::attend {

class ComputePool final : public Executor {
 public:
  using Task = std::function<void()>;

  // `threads` >= 1; `name` prefixes the thread names (at most 12 bytes kept).
  ComputePool(uint32_t threads, std::string name);
  ~ComputePool() override;  // Stop()
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Queues `t` behind the tasks already waiting; false (dropped unrun) once stopped.
  bool Post(Task t);
  // Runs what is queued, then joins. Idempotent.
  void Stop();

  uint32_t concurrency() const override { return threads_; }
  void ParallelFor(uint32_t n, const std::function<void(uint32_t)>& fn) override;

  // Tasks queued or running (helpers of ParallelFor included).
  size_t pending() const;

 private:
  void Loop();
  bool PostFront(Task t);

  const uint32_t threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;  // guarded by mu_
  size_t running_ = 0;      // guarded by mu_
  bool stop_ = false;       // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace pion::attend
